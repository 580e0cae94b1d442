//! Job definitions and their scheduling state.

use std::collections::HashMap;
use std::sync::Arc;

use super::raw_ids;
use super::rows::{JOB_COLUMNS, job_from_row, join_ids};
use crate::model::{Job, JobId, JobStatus};
use crate::store::dialect::Dialect;
use crate::store::sql::{Pools, Sql, commit};
use crate::store::{JobFilter, JobScheduleUpdate, StoreResult};

/// `trigger_status` as stored (an INTEGER column, decoded as `i32` everywhere): 1 running,
/// 0 stopped.
pub fn status_value(status: JobStatus) -> i32 {
    match status {
        JobStatus::Running => 1,
        JobStatus::Stopped => 0,
    }
}

/// The editable columns `insert_job` and `update_job` write, with their values.
fn editable_columns(job: &Job) -> [(&'static str, Value<'_>); 30] {
    use Value::{Flag, Int, Int32, Owned, Real, Text};
    [
        ("group_id", Int(job.group_id.0)),
        ("name", Text(&job.name)),
        ("author", Text(&job.author)),
        ("alarm_email", Text(&job.alarm_email)),
        ("alarm_on_every_failure", Flag(job.alarm_on_every_failure)),
        ("schedule_type", Text(job.schedule_type.as_str())),
        ("schedule_conf", Text(&job.schedule_conf)),
        ("time_zone", Text(&job.time_zone)),
        ("misfire_strategy", Text(job.misfire_strategy.as_str())),
        ("route_strategy", Text(job.route_strategy.as_str())),
        ("handler", Text(&job.handler)),
        ("params", Text(&job.params)),
        ("block_strategy", Text(job.block_strategy.as_str())),
        ("timeout_ms", Int(job.timeout_ms)),
        ("fail_retry_count", Int32(job.fail_retry_count)),
        (
            "retry_initial_delay_ms",
            Int(job.retry_backoff.initial_delay_ms),
        ),
        ("retry_factor", Real(job.retry_backoff.factor)),
        ("retry_max_delay_ms", Int(job.retry_backoff.max_delay_ms)),
        ("glue_source", Text(&job.glue_source)),
        ("glue_remark", Text(&job.glue_remark)),
        ("glue_updated_ms", Int(job.glue_updated_ms)),
        ("child_job_ids", Owned(join_ids(&job.child_job_ids))),
        ("jitter_max_ms", Int(job.policy.jitter_max_ms)),
        ("catch_up_window_ms", Int(job.policy.catch_up_window_ms)),
        ("catch_up_mode", Text(job.policy.catch_up_mode.as_str())),
        ("calendar", Text(&job.calendar)),
        ("calendar_mode", Text(job.calendar_mode.as_str())),
        ("dst_gap_policy", Text(job.policy.dst.gap.as_str())),
        ("dst_overlap_policy", Text(job.policy.dst.overlap.as_str())),
        ("overlap_policy", Text(job.policy.overlap_policy.as_str())),
    ]
}

/// A column value of a job row, so one list of columns serves insert and update.
enum Value<'a> {
    Int(i64),
    Int32(i32),
    Real(f64),
    Flag(bool),
    Text(&'a str),
    Owned(String),
}

fn bind_value<'q, DB: Dialect>(sql: &mut Sql<'q, DB>, value: Value<'q>) {
    match value {
        Value::Int(value) => sql.bind_mut(value),
        Value::Int32(value) => sql.bind_mut(value),
        Value::Real(value) => sql.bind_mut(value),
        Value::Flag(value) => sql.bind_mut(value),
        Value::Text(value) => sql.bind_mut(value),
        Value::Owned(value) => sql.bind_mut(value),
    }
}

pub async fn insert_job<DB: Dialect>(db: Pools<'_, DB>, job: &Job) -> StoreResult<Job> {
    insert_job_on::<DB>(&mut *db.write().await?, job).await
}

/// `insert_job` on a given connection or transaction (the XXL-JOB import writes a job with its
/// glue versions and its import record in one transaction).
pub async fn insert_job_on<DB: Dialect>(conn: &mut DB::Connection, job: &Job) -> StoreResult<Job> {
    let mut columns: Vec<(&str, Value<'_>)> = editable_columns(job).into();
    // Only an insert sets the glue type and the scheduling state.
    columns.extend([
        ("glue_type", Value::Text(job.glue_type.as_str())),
        ("trigger_status", Value::Int32(status_value(job.status))),
        ("trigger_last_ms", Value::Int(job.trigger_last_ms)),
        ("trigger_next_ms", Value::Int(job.trigger_next_ms)),
        ("created_ms", Value::Int(job.created_ms)),
        ("updated_ms", Value::Int(job.updated_ms)),
    ]);
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    let mut insert = Sql::<DB>::new(format!(
        "INSERT INTO xjob_job ({}) VALUES (",
        names.join(", ")
    ));
    for (index, (_, value)) in columns.into_iter().enumerate() {
        if index > 0 {
            insert.push_mut(", ");
        }
        bind_value(&mut insert, value);
    }
    insert.push_mut(")");
    let id = JobId(super::insert_returning_id(conn, insert).await?);
    Ok(Job { id, ..job.clone() })
}

/// Replaces the editable fields, never the scheduling state (only `set_job_schedule` and the
/// schedule round write that) nor the glue type.
pub async fn update_job<DB: Dialect>(db: Pools<'_, DB>, job: &Job) -> StoreResult<bool> {
    let mut update = Sql::<DB>::new("UPDATE xjob_job SET ");
    for (name, value) in editable_columns(job) {
        update.push_mut(name);
        update.push_mut(" = ");
        bind_value(&mut update, value);
        update.push_mut(", ");
    }
    let updated = update
        .push("updated_ms = ")
        .bind(job.updated_ms)
        .push(" WHERE id = ")
        .bind(job.id.0)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(updated == 1)
}

/// Deletes the job row first, then its runs and glue: the order a follow-up takes its locks in
/// (the job row, then the run's row; see `monitor.rs`). With the opposite order a concurrent
/// follow-up of one of the job's runs could hold the job while this holds the run: a deadlock.
pub async fn delete_job<DB: Dialect>(db: Pools<'_, DB>, id: JobId) -> StoreResult<bool> {
    let mut tx = db.begin().await?;
    let deleted = Sql::<DB>::new("DELETE FROM xjob_job WHERE id = ")
        .bind(id.0)
        .affected(&mut tx)
        .await?;
    for table in ["xjob_log", "xjob_glue"] {
        Sql::<DB>::new(format!("DELETE FROM {table} WHERE job_id = "))
            .bind(id.0)
            .execute(&mut tx)
            .await?;
    }
    commit(tx).await?;
    Ok(deleted == 1)
}

pub async fn get_job<DB: Dialect>(db: Pools<'_, DB>, id: JobId) -> StoreResult<Option<Job>> {
    let row = Sql::<DB>::new(format!("SELECT {JOB_COLUMNS} FROM xjob_job WHERE id = "))
        .bind(id.0)
        .fetch_optional(&mut *db.read().await?)
        .await?;
    row.as_ref().map(job_from_row::<DB>).transpose()
}

/// The jobs of `ids` that exist, by id (repeated ids are read once; no ids, no statement).
pub async fn get_jobs<DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[JobId],
) -> StoreResult<HashMap<JobId, Arc<Job>>> {
    let ids = super::distinct_raw_ids(ids);
    let mut jobs = HashMap::with_capacity(ids.len());
    if ids.is_empty() {
        return Ok(jobs);
    }
    let mut conn = db.read().await?;
    for chunk in ids.chunks(DB::IDS_PER_STATEMENT) {
        let mut select = Sql::<DB>::new(format!("SELECT {JOB_COLUMNS} FROM xjob_job WHERE id"));
        DB::push_id_list(&mut select, chunk);
        for row in &select.fetch_all(&mut conn).await? {
            let job = job_from_row::<DB>(row)?;
            jobs.insert(job.id, Arc::new(job));
        }
    }
    Ok(jobs)
}

pub async fn list_jobs<DB: Dialect>(
    db: Pools<'_, DB>,
    filter: &JobFilter,
) -> StoreResult<Vec<Job>> {
    if filter.group_ids.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let mut query = matching_jobs::<DB>(&format!("SELECT {JOB_COLUMNS}"), filter);
    super::push_order(&mut query, filter.order.map(job_order_column));
    let rows = query
        .push(" LIMIT ")
        .bind(filter.limit)
        .push(" OFFSET ")
        .bind(filter.offset)
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(job_from_row::<DB>).collect()
}

/// How many jobs match a filter (its page and order ignored).
pub async fn count_matching_jobs<DB: Dialect>(
    db: Pools<'_, DB>,
    filter: &JobFilter,
) -> StoreResult<i64> {
    if filter.group_ids.as_ref().is_some_and(Vec::is_empty) {
        return Ok(0);
    }
    matching_jobs::<DB>("SELECT COUNT(*)", filter)
        .fetch_scalar(&mut *db.read().await?)
        .await
}

/// `select` from the jobs that match the filter's conditions.
fn matching_jobs<'a, DB: Dialect>(select: &str, filter: &'a JobFilter) -> Sql<'a, DB> {
    let mut query = Sql::<DB>::new(format!("{select} FROM xjob_job WHERE 1 = 1"));
    if let Some(group_ids) = &filter.group_ids {
        query.push_mut(" AND group_id");
        DB::push_id_list(&mut query, &raw_ids(group_ids));
    }
    if let Some(group_id) = filter.group_id {
        query.push_mut(" AND group_id = ");
        query.bind_mut(group_id.0);
    }
    if let Some(status) = filter.status {
        query.push_mut(" AND trigger_status = ");
        query.bind_mut(status_value(status));
    }
    for (column, value) in [
        ("name", &filter.name),
        ("handler", &filter.handler),
        ("author", &filter.author),
    ] {
        if let Some(text) = value {
            query.push_mut(&format!(" AND {}({column}, ", DB::POSITION_FN));
            query.bind_mut(text.as_str());
            query.push_mut(") > 0");
        }
    }
    query
}

/// The column of a jobs-list sort key (`model::JOB_SORT_KEYS`); the key was checked against
/// that list, so anything else falls back to the id.
fn job_order_column(order: crate::model::ListOrder) -> (&'static str, bool) {
    let column = match order.key {
        "name" => "name",
        "group" => "group_id",
        "handler" => "handler",
        "author" => "author",
        "status" => "trigger_status",
        "next_fire" => "trigger_next_ms",
        _ => "id",
    };
    (column, order.descending)
}

/// Ids among `ids` with no job (reads ids only).
pub async fn missing_job_ids<DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[JobId],
) -> StoreResult<Vec<JobId>> {
    let raw = raw_ids(ids);
    let mut conn = db.read().await?;
    let mut found = Vec::with_capacity(ids.len());
    for chunk in raw.chunks(DB::IDS_PER_STATEMENT) {
        let mut select = Sql::<DB>::new("SELECT id FROM xjob_job WHERE id");
        DB::push_id_list(&mut select, chunk);
        found.extend(select.fetch_column::<JobId>(&mut conn).await?);
    }
    Ok(ids
        .iter()
        .copied()
        .filter(|id| !found.contains(id))
        .collect())
}

pub async fn set_job_schedule<DB: Dialect>(
    db: Pools<'_, DB>,
    update: JobScheduleUpdate,
) -> StoreResult<bool> {
    let updated = Sql::<DB>::new("UPDATE xjob_job SET trigger_status = ")
        .bind(status_value(update.status))
        .push(", trigger_last_ms = ")
        .bind(update.trigger_last_ms)
        .push(", trigger_next_ms = ")
        .bind(update.trigger_next_ms)
        .push(" WHERE id = ")
        .bind(update.job_id.0)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(updated == 1)
}

pub async fn count_jobs<DB: Dialect>(db: Pools<'_, DB>) -> StoreResult<i64> {
    Sql::<DB>::new("SELECT COUNT(*) FROM xjob_job")
        .fetch_scalar(&mut *db.read().await?)
        .await
}
