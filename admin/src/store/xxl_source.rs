//! Reads an XXL-JOB installation's definitions (`xxl_job_group`, `xxl_job_info`,
//! `xxl_job_logglue`) from its MySQL database for `xjob import-xxl-job`. Read only: nothing is
//! ever written there.
//!
//! The column names moved between releases: 3.5 renamed `xxl_job_group.title` and
//! `xxl_job_info.job_desc` to `name` and added `xxl_job_group.access_token`; 2.3 to 3.4 share
//! one layout. So the columns present are looked up first and the query names the ones found.
//! Before 2.3 there was no `schedule_type` (only `job_cron`); such a database is refused with
//! that reason. Values come back as text and integers exactly as stored (NULL as empty / 0):
//! deciding what they mean is the importer's job (`import_xxl::mapping`).

use std::collections::HashSet;
use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Connection, MySqlConnection, MySqlPool, Row};

use super::{StoreError, StoreResult};

/// One `xxl_job_group` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XxlGroupRow {
    pub id: i64,
    pub app_name: String,
    /// `title` (before 3.5) or `name`.
    pub title: String,
    /// 0 auto registration, 1 manual list.
    pub address_type: i64,
    pub address_list: String,
    /// Empty before 3.5 (one global token then, in the admin's configuration).
    pub access_token: String,
}

/// One `xxl_job_info` row (the columns the import maps).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct XxlJobRow {
    pub id: i64,
    pub job_group: i64,
    /// `job_desc` (before 3.5) or `name`.
    pub job_desc: String,
    pub author: String,
    pub alarm_email: String,
    pub schedule_type: String,
    pub schedule_conf: String,
    pub misfire_strategy: String,
    pub executor_route_strategy: String,
    pub executor_handler: String,
    pub executor_param: String,
    pub executor_block_strategy: String,
    /// Seconds, 0 = none.
    pub executor_timeout: i64,
    pub executor_fail_retry_count: i64,
    pub glue_type: String,
    pub glue_source: String,
    pub glue_remark: String,
    /// `glue_updatetime` as epoch ms (read in the database session's time zone), 0 if NULL.
    pub glue_updated_ms: i64,
    /// Comma-separated XXL-JOB job ids, as stored.
    pub child_jobid: String,
    /// 0 stopped, 1 running.
    pub trigger_status: i64,
}

/// One `xxl_job_logglue` row: a saved version of a job's glue source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XxlGlueRow {
    pub id: i64,
    pub job_id: i64,
    pub glue_type: String,
    pub glue_source: String,
    pub glue_remark: String,
    /// `update_time` (else `add_time`) as epoch ms, 0 if both are NULL.
    pub saved_ms: i64,
}

/// Everything the import reads, ordered by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XxlSnapshot {
    /// Which layout was found, for the plan's header (e.g. "2.3-3.4 (job_desc, title)").
    pub layout: String,
    pub groups: Vec<XxlGroupRow>,
    pub jobs: Vec<XxlJobRow>,
    pub glue_versions: Vec<XxlGlueRow>,
    /// The highest `xxl_job_log.id` (0 without runs): xjob's run ids must start above it.
    pub max_log_id: i64,
}

/// How long the first connection to the XXL-JOB database may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to an XXL-JOB database (`mysql://user:password@host:port/xxl_job`). A URL of
/// another database is refused (XXL-JOB keeps its data in MySQL), and a server that cannot be
/// reached is said at once, with the reason, rather than as a pool timing out.
pub async fn connect(url: &str) -> StoreResult<MySqlPool> {
    let scheme = url
        .split_once("://")
        .map(|(scheme, _)| scheme)
        .unwrap_or_default();
    if !matches!(scheme.to_ascii_lowercase().as_str(), "mysql" | "mariadb") {
        return Err(StoreError::InvalidUrl(format!(
            "'{}' is not a MySQL URL: XXL-JOB keeps its data in MySQL, so --from must be \
             mysql://user:password@host:port/xxl_job (a PostgreSQL or SQLite database cannot be \
             an XXL-JOB source)",
            redacted(url)
        )));
    }
    let options = MySqlConnectOptions::from_str(&url.replacen("mariadb://", "mysql://", 1))
        .map_err(|error| StoreError::InvalidUrl(format!("{}: {error}", redacted(url))))?;
    // One direct connection first: its error names the cause (refused, unknown host, wrong
    // password); the pool would retry until its timeout and say only "pool timed out".
    let unreachable = |reason: String| {
        let label = source_label(url).unwrap_or_else(|_| redacted(url));
        StoreError::Unreachable(format!(
            "cannot connect to the XXL-JOB database at {label}: {reason}"
        ))
    };
    let probe = tokio::time::timeout(CONNECT_TIMEOUT, MySqlConnection::connect_with(&options))
        .await
        .map_err(|_| unreachable(format!("no answer within {CONNECT_TIMEOUT:?}")))?
        .map_err(|error| unreachable(error.to_string()))?;
    let _ = probe.close().await;
    MySqlPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(CONNECT_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(StoreError::Unavailable)
}

/// `host:port/database` of a MySQL URL, without user or password: names the source in the
/// import record and in messages.
pub fn source_label(url: &str) -> StoreResult<String> {
    let rest = url
        .split_once("://")
        .map(|(_, rest)| rest)
        .ok_or_else(|| StoreError::InvalidUrl(format!("'{}' has no scheme", redacted(url))))?;
    let rest = rest.split('?').next().unwrap_or_default();
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let (host, database) = rest.split_once('/').unwrap_or((rest, ""));
    if host.is_empty() || database.is_empty() {
        return Err(StoreError::InvalidUrl(format!(
            "'{}' must name a host and a database (mysql://user:password@host:port/xxl_job)",
            redacted(url)
        )));
    }
    let host = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:3306")
    };
    Ok(format!("{host}/{database}"))
}

/// The URL with its password hidden, for error messages.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..])
        }
        _ => url.chars().take(64).collect(),
    }
}

/// Reads groups, jobs and glue versions.
pub async fn read_snapshot(pool: &MySqlPool) -> StoreResult<XxlSnapshot> {
    let group_columns = columns_of(pool, "xxl_job_group").await?;
    let job_columns = columns_of(pool, "xxl_job_info").await?;
    let glue_columns = columns_of(pool, "xxl_job_logglue").await?;
    if !job_columns.contains("schedule_type") {
        return Err(StoreError::Schema(
            "xxl_job_info has no schedule_type column: XXL-JOB before 2.3 is not supported \
             (upgrade it to 2.3 or later first)"
                .to_string(),
        ));
    }
    let title = pick(&group_columns, &["title", "name"], "xxl_job_group")?;
    let job_desc = pick(&job_columns, &["job_desc", "name"], "xxl_job_info")?;
    let token = if group_columns.contains("access_token") {
        "access_token"
    } else {
        "''"
    };
    let layout = match (title, token) {
        ("title", "''") => "2.3-3.4 (job_desc, title, one global access token)".to_string(),
        _ => format!("3.5+ ({job_desc}, {title}, {token} per group)"),
    };
    Ok(XxlSnapshot {
        layout,
        groups: read_groups(pool, title, token).await?,
        jobs: read_jobs(pool, job_desc).await?,
        glue_versions: read_glue(pool, &glue_columns).await?,
        max_log_id: read_max_log_id(pool).await?,
    })
}

/// The highest run log id XXL-JOB gave out (0 when its log table is empty or missing).
async fn read_max_log_id(pool: &MySqlPool) -> StoreResult<i64> {
    if columns_of(pool, "xxl_job_log").await.is_err() {
        return Ok(0);
    }
    let (max,): (Option<i64>,) = sqlx::query_as("SELECT MAX(id) FROM xxl_job_log")
        .fetch_one(pool)
        .await
        .map_err(StoreError::Unavailable)?;
    Ok(max.unwrap_or(0))
}

/// The column names of `table` in the connected database; an error when it does not exist.
async fn columns_of(pool: &MySqlPool, table: &str) -> StoreResult<HashSet<String>> {
    let rows = sqlx::query(
        "SELECT CAST(COLUMN_NAME AS CHAR) AS name FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .map_err(StoreError::Unavailable)?;
    let names: HashSet<String> = rows
        .iter()
        .map(|row| row.try_get::<String, _>("name"))
        .collect::<Result<_, _>>()
        .map_err(StoreError::Unavailable)?;
    if names.is_empty() {
        return Err(StoreError::Schema(format!(
            "no table {table} in this database: is it an XXL-JOB database?"
        )));
    }
    Ok(names.into_iter().map(|name| name.to_lowercase()).collect())
}

fn pick(
    columns: &HashSet<String>,
    candidates: &[&'static str],
    table: &str,
) -> StoreResult<&'static str> {
    candidates
        .iter()
        .find(|name| columns.contains(**name))
        .copied()
        .ok_or_else(|| {
            StoreError::Schema(format!(
                "{table} has none of the columns {}",
                candidates.join(", ")
            ))
        })
}

/// Text as stored, NULL as empty.
fn text(column: &str) -> String {
    format!("COALESCE(CAST({column} AS CHAR), '') AS {column}")
}

/// An integer as stored, NULL as 0.
fn int(column: &str) -> String {
    format!("COALESCE(CAST({column} AS SIGNED), 0) AS {column}")
}

/// A DATETIME as epoch ms, NULL as 0.
fn millis(expression: &str, alias: &str) -> String {
    format!("COALESCE(CAST(UNIX_TIMESTAMP({expression}) AS SIGNED), 0) * 1000 AS {alias}")
}

async fn read_groups(pool: &MySqlPool, title: &str, token: &str) -> StoreResult<Vec<XxlGroupRow>> {
    let query = format!(
        "SELECT {}, {}, COALESCE(CAST({title} AS CHAR), '') AS title, {}, {}, \
         COALESCE(CAST({token} AS CHAR), '') AS access_token FROM xxl_job_group ORDER BY id",
        int("id"),
        text("app_name"),
        int("address_type"),
        text("address_list"),
    );
    let rows = sqlx::query(&query)
        .fetch_all(pool)
        .await
        .map_err(StoreError::Unavailable)?;
    rows.iter()
        .map(|row| {
            Ok(XxlGroupRow {
                id: get(row, "id")?,
                app_name: get(row, "app_name")?,
                title: get(row, "title")?,
                address_type: get(row, "address_type")?,
                address_list: get(row, "address_list")?,
                access_token: get(row, "access_token")?,
            })
        })
        .collect()
}

async fn read_jobs(pool: &MySqlPool, job_desc: &str) -> StoreResult<Vec<XxlJobRow>> {
    let texts = [
        "author",
        "alarm_email",
        "schedule_type",
        "schedule_conf",
        "misfire_strategy",
        "executor_route_strategy",
        "executor_handler",
        "executor_param",
        "executor_block_strategy",
        "glue_type",
        "glue_source",
        "glue_remark",
        "child_jobid",
    ];
    let ints = [
        "id",
        "job_group",
        "executor_timeout",
        "executor_fail_retry_count",
        "trigger_status",
    ];
    let mut columns: Vec<String> = texts.iter().map(|column| text(column)).collect();
    columns.extend(ints.iter().map(|column| int(column)));
    columns.push(format!(
        "COALESCE(CAST({job_desc} AS CHAR), '') AS job_desc"
    ));
    columns.push(millis("glue_updatetime", "glue_updated_ms"));
    let query = format!(
        "SELECT {} FROM xxl_job_info ORDER BY id",
        columns.join(", ")
    );
    let rows = sqlx::query(&query)
        .fetch_all(pool)
        .await
        .map_err(StoreError::Unavailable)?;
    rows.iter()
        .map(|row| {
            Ok(XxlJobRow {
                id: get(row, "id")?,
                job_group: get(row, "job_group")?,
                job_desc: get(row, "job_desc")?,
                author: get(row, "author")?,
                alarm_email: get(row, "alarm_email")?,
                schedule_type: get(row, "schedule_type")?,
                schedule_conf: get(row, "schedule_conf")?,
                misfire_strategy: get(row, "misfire_strategy")?,
                executor_route_strategy: get(row, "executor_route_strategy")?,
                executor_handler: get(row, "executor_handler")?,
                executor_param: get(row, "executor_param")?,
                executor_block_strategy: get(row, "executor_block_strategy")?,
                executor_timeout: get(row, "executor_timeout")?,
                executor_fail_retry_count: get(row, "executor_fail_retry_count")?,
                glue_type: get(row, "glue_type")?,
                glue_source: get(row, "glue_source")?,
                glue_remark: get(row, "glue_remark")?,
                glue_updated_ms: get(row, "glue_updated_ms")?,
                child_jobid: get(row, "child_jobid")?,
                trigger_status: get(row, "trigger_status")?,
            })
        })
        .collect()
}

async fn read_glue(pool: &MySqlPool, columns: &HashSet<String>) -> StoreResult<Vec<XxlGlueRow>> {
    let saved = match (
        columns.contains("update_time"),
        columns.contains("add_time"),
    ) {
        (true, true) => "COALESCE(update_time, add_time)",
        (true, false) => "update_time",
        (false, true) => "add_time",
        (false, false) => "NULL",
    };
    let query = format!(
        "SELECT {}, {}, {}, {}, {}, {} FROM xxl_job_logglue ORDER BY id",
        int("id"),
        int("job_id"),
        text("glue_type"),
        text("glue_source"),
        text("glue_remark"),
        millis(saved, "saved_ms"),
    );
    let rows = sqlx::query(&query)
        .fetch_all(pool)
        .await
        .map_err(StoreError::Unavailable)?;
    rows.iter()
        .map(|row| {
            Ok(XxlGlueRow {
                id: get(row, "id")?,
                job_id: get(row, "job_id")?,
                glue_type: get(row, "glue_type")?,
                glue_source: get(row, "glue_source")?,
                glue_remark: get(row, "glue_remark")?,
                saved_ms: get(row, "saved_ms")?,
            })
        })
        .collect()
}

fn get<'r, T>(row: &'r sqlx::mysql::MySqlRow, column: &str) -> StoreResult<T>
where
    T: sqlx::Decode<'r, sqlx::MySql> + sqlx::Type<sqlx::MySql>,
{
    row.try_get(column)
        .map_err(|error| StoreError::Corrupt(format!("XXL-JOB column {column}: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_label_drops_credentials_and_defaults_the_port() {
        let label = source_label("mysql://root:secret@db.example:3307/xxl_job?ssl-mode=disabled");
        assert_eq!(label.ok().as_deref(), Some("db.example:3307/xxl_job"));
        let label = source_label("mysql://root@10.0.0.5/xxl_job");
        assert_eq!(label.ok().as_deref(), Some("10.0.0.5:3306/xxl_job"));
        assert!(source_label("mysql://root:pw@host:3306").is_err());
        assert!(source_label("host/db").is_err());
    }

    #[test]
    fn redacted_hides_the_password() {
        assert_eq!(
            redacted("mysql://root:secret@host:3306/x"),
            "mysql://root:***@host:3306/x"
        );
    }
}
