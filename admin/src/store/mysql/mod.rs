//! The MySQL 8 / MariaDB 10.6+ backend: a connection pool, embedded migrations, and the
//! schedule lock as `SELECT … FOR UPDATE` on the `schedule_lock` row.
//!
//! SQLite has a single writer, and some of its statements are correct only because of that;
//! MySQL also lacks `UPDATE … RETURNING` and `ON CONFLICT`. So here:
//! - every "update and return the rows" is a transaction that locks the candidate rows
//!   (`SELECT … FOR UPDATE`, or `SKIP LOCKED` for work queues), updates exactly those and reads
//!   them back (`shared/claims.rs`);
//! - inserts that may meet an existing `fire_key` leave out the keys present, and a key taken
//!   concurrently fails only its own one-row statement, which MySQL undoes without ending the
//!   transaction (see `shared/inserts.rs`); ids come from each statement's insert id or are read back
//!   by `fire_key`, never inferred from consecutive auto-increment values;
//! - a follow-up first locks its job's row (`shared/followups.rs`).
//!
//! Sessions run at READ COMMITTED: every statement sees the newest committed rows (a check made
//! after taking a lock sees what the previous holder wrote), and InnoDB takes no gap locks for
//! plain searches, which keeps concurrent admins from deadlocking on index ranges.

mod dialect;
mod jobs;
mod logs;
mod monitor;
mod rows;
#[cfg(test)]
mod tests;

use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Connection, Executor, MySqlConnection, MySqlPool};

use super::error::{StoreError, StoreResult};

/// Connections per admin: the schedule round, the dispatch recorder, callbacks and the monitors
/// each hold one briefly.
const MAX_CONNECTIONS: u32 = 16;
/// How long a caller waits for a connection (this bounds connecting to an unreachable server).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest number of bound parameters one statement uses (MySQL allows 65 535).
const MAX_BIND_PARAMS: usize = 10_000;
/// MariaDB only: a transaction left idle this long (its admin was stopped or lost the network
/// mid-transaction) is rolled back by the server, so a frozen admin cannot hold the schedule
/// lock forever. Nothing here keeps a transaction open across network I/O, so 10 s is ample.
const IDLE_TRANSACTION_TIMEOUT_SECONDS: u32 = 10;

/// A pool of connections to one MySQL/MariaDB database.
#[derive(Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
    /// For the liveness lock's own connection (`store::liveness`), which must not be pooled.
    pub(super) options: MySqlConnectOptions,
}

impl MySqlStore {
    /// Connects, migrates, and checks that the schedule lock row exists.
    pub async fn connect(url: &str) -> StoreResult<MySqlStore> {
        let options = MySqlConnectOptions::from_str(url)
            .map_err(|error| StoreError::InvalidUrl(format!("{}: {error}", redact(url))))?;
        let pool = MySqlPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .after_connect(|conn, _meta| Box::pin(prepare_session(conn)))
            .before_acquire(|conn, _meta| {
                Box::pin(std::future::ready(Ok(super::pooled::reusable(conn))))
            })
            .connect_with(options.clone())
            .await
            .map_err(StoreError::Unavailable)?;
        sqlx::migrate!("migrations/mysql")
            .run(&pool)
            .await
            .map_err(StoreError::Migrate)?;
        let store = MySqlStore { pool, options };
        store.check_lock_row().await?;
        Ok(store)
    }

    /// Where the shared statements write and read.
    pub(super) fn pools(&self) -> super::sql::Pools<'_, sqlx::MySql> {
        super::sql::Pools {
            writer: &self.pool,
            reader: &self.pool,
            gate: None,
            first_reader: None,
        }
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Nothing to do (0 freed): the server reuses the space of deleted rows (PostgreSQL's
    /// autovacuum, InnoDB's free pages); shrinking files is an operator's decision.
    pub async fn reclaim_space(&self, _max_pages: i64) -> StoreResult<i64> {
        Ok(0)
    }

    /// Moves the run id counter so the next run's id is above `past` (never lowers it).
    pub async fn raise_log_ids_past(&self, past: i64) -> StoreResult<()> {
        let (next,): (Option<i64>,) = sqlx::query_as(
            "SELECT CAST(AUTO_INCREMENT AS SIGNED) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'xjob_log'",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(map_error)?;
        if next.unwrap_or(1) > past {
            return Ok(());
        }
        // ALTER TABLE takes no parameters; the value is a number computed here.
        sqlx::query(&format!(
            "ALTER TABLE xjob_log AUTO_INCREMENT = {}",
            past + 1
        ))
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(())
    }

    /// Rows of the log and the table's size with indexes (see [`super::log_storage::LogStorage`]).
    pub async fn log_storage(&self) -> StoreResult<super::log_storage::LogStorage> {
        // The statistics InnoDB reports are only as fresh as its last analysis.
        sqlx::query("ANALYZE TABLE xjob_log")
            .execute(&self.pool)
            .await
            .map_err(map_error)?;
        let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM xjob_log")
            .fetch_one(&self.pool)
            .await
            .map_err(map_error)?;
        let (bytes,): (i64,) = sqlx::query_as(
            "SELECT CAST(data_length + index_length AS SIGNED) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name = 'xjob_log'",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(super::log_storage::LogStorage { rows, bytes })
    }

    /// Refuses to run without the schedule lock row: without it admins would not exclude
    /// each other (XXL-JOB silently loses mutual exclusion in that case).
    async fn check_lock_row(&self) -> StoreResult<()> {
        let found: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM xjob_lock WHERE lock_name = 'schedule_lock'")
                .fetch_one(&self.pool)
                .await
                .map_err(map_error)?;
        match found {
            1 => Ok(()),
            _ => Err(StoreError::Schema(
                "row 'schedule_lock' missing from xjob_lock; re-run migrations or insert it \
                 (INSERT INTO xjob_lock (lock_name) VALUES ('schedule_lock'))"
                    .to_string(),
            )),
        }
    }
}

/// Session settings of every pooled connection: READ COMMITTED (see the module doc), strict
/// writes, and on MariaDB the idle-transaction timeout.
async fn prepare_session(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await?;
    conn.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',STRICT_TRANS_TABLES')")
        .await?;
    let version: Vec<u8> = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut *conn)
        .await?;
    if String::from_utf8_lossy(&version).contains("MariaDB") {
        conn.execute(
            format!("SET SESSION idle_transaction_timeout = {IDLE_TRANSACTION_TIMEOUT_SECONDS}")
                .as_str(),
        )
        .await?;
    }
    Ok(())
}

/// Maps a driver error to the store's error: unique violations become `Conflict`.
fn map_error(error: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db_error) = &error
        && db_error.is_unique_violation()
    {
        return StoreError::Conflict(db_error.message().to_string());
    }
    StoreError::Unavailable(error)
}

/// `?, ?, ?` with `count` placeholders.
fn placeholders(count: usize) -> String {
    let mut text = String::with_capacity(count * 3);
    for index in 0..count {
        if index > 0 {
            text.push_str(", ");
        }
        text.push('?');
    }
    text
}

/// Creates a uniquely named database on the server of `base_url`; returns its URL.
pub async fn create_scratch_database(base_url: &str) -> StoreResult<String> {
    let name = format!(
        "xjob_test_{}_{:016x}",
        std::process::id(),
        fastrand::u64(..)
    );
    let mut conn = MySqlConnection::connect(base_url)
        .await
        .map_err(StoreError::Unavailable)?;
    conn.execute(format!("CREATE DATABASE {name} CHARACTER SET utf8mb4").as_str())
        .await
        .map_err(map_error)?;
    conn.close().await.map_err(map_error)?;
    with_database(base_url, &name)
}

/// `base_url` with its database path replaced by `database`.
fn with_database(base_url: &str, database: &str) -> StoreResult<String> {
    let invalid = || StoreError::InvalidUrl(format!("'{}' has no host part", redact(base_url)));
    let authority_start = base_url.find("://").ok_or_else(invalid)? + 3;
    let rest = &base_url[authority_start..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let query = rest[authority_end..]
        .find('?')
        .map(|at| &rest[authority_end + at..])
        .unwrap_or("");
    Ok(format!(
        "{}{}/{database}{query}",
        &base_url[..authority_start],
        &rest[..authority_end]
    ))
}

/// The URL without its password, for error messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            match credentials.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme_end + 3],
                    &credentials[..colon],
                    &url[at..]
                ),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}
