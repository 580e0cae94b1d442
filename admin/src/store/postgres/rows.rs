//! Row → model mapping for PostgreSQL rows (column names and types match
//! `migrations/postgres`: BIGINT ↔ i64, INTEGER ↔ i32, BOOLEAN ↔ bool; sqlx decodes strictly).

use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::model::{
    AddressType, BlockStrategy, ExecutorInfo, GlueType, Group, Job, JobStatus, MisfireStrategy,
    RetryBackoff, RouteStrategy, RunLog, RunStatus, ScheduleType, TriggerType,
};
use crate::store::{StoreError, StoreResult};

/// Columns of `xjob_job` in the order `job_from_row` reads them by name.
pub const JOB_COLUMNS: &str = "id, group_id, name, author, alarm_email, alarm_on_every_failure, \
    schedule_type, \
    schedule_conf, time_zone, misfire_strategy, route_strategy, handler, params, block_strategy, \
    timeout_ms, fail_retry_count, retry_initial_delay_ms, retry_factor, retry_max_delay_ms, \
    glue_type, glue_source, glue_remark, glue_updated_ms, child_job_ids, trigger_status, \
    trigger_last_ms, trigger_next_ms, created_ms, updated_ms";

/// Columns of `xjob_log` read by `run_from_row`.
pub const LOG_COLUMNS: &str = "id, job_id, group_id, fire_key, status, trigger_type, \
    scheduled_at_ms, trigger_time_ms, trigger_code, trigger_msg, handle_time_ms, handle_code, \
    handle_msg, executor_address, handler, params, shard_index, shard_total, attempt, trace_id, \
    owner_node, epoch, dispatch_at_ms";

fn get<'r, T>(row: &'r PgRow, column: &str) -> StoreResult<T>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(column)
        .map_err(|error| StoreError::Corrupt(format!("column {column}: {error}")))
}

fn parse_enum<T>(row: &PgRow, column: &str, parse: fn(&str) -> Option<T>) -> StoreResult<T> {
    let text: String = get(row, column)?;
    parse(&text)
        .ok_or_else(|| StoreError::Corrupt(format!("column {column}: unknown value '{text}'")))
}

/// Splits a comma-separated id list ("3,5") as stored in `child_job_ids`.
pub fn parse_id_list(text: &str) -> StoreResult<Vec<i64>> {
    text.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse::<i64>()
                .map_err(|_| StoreError::Corrupt(format!("child_job_ids: '{part}' is not an id")))
        })
        .collect()
}

/// Joins ids as stored in `child_job_ids`.
pub fn join_ids(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// Splits a comma-separated string list, dropping empty items.
pub fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(str::to_string)
        .collect()
}

pub fn job_from_row(row: &PgRow) -> StoreResult<Job> {
    let trigger_status: i32 = get(row, "trigger_status")?;
    let child_text: String = get(row, "child_job_ids")?;
    Ok(Job {
        id: get(row, "id")?,
        group_id: get(row, "group_id")?,
        name: get(row, "name")?,
        author: get(row, "author")?,
        alarm_email: get(row, "alarm_email")?,
        alarm_on_every_failure: get(row, "alarm_on_every_failure")?,
        schedule_type: parse_enum(row, "schedule_type", ScheduleType::parse)?,
        schedule_conf: get(row, "schedule_conf")?,
        time_zone: get(row, "time_zone")?,
        misfire_strategy: parse_enum(row, "misfire_strategy", MisfireStrategy::parse)?,
        route_strategy: parse_enum(row, "route_strategy", RouteStrategy::parse)?,
        handler: get(row, "handler")?,
        params: get(row, "params")?,
        block_strategy: parse_enum(row, "block_strategy", BlockStrategy::parse)?,
        timeout_ms: get(row, "timeout_ms")?,
        fail_retry_count: get(row, "fail_retry_count")?,
        retry_backoff: RetryBackoff {
            initial_delay_ms: get(row, "retry_initial_delay_ms")?,
            factor: get(row, "retry_factor")?,
            max_delay_ms: get(row, "retry_max_delay_ms")?,
        },
        glue_type: parse_enum(row, "glue_type", GlueType::parse)?,
        glue_source: get(row, "glue_source")?,
        glue_remark: get(row, "glue_remark")?,
        glue_updated_ms: get(row, "glue_updated_ms")?,
        child_job_ids: parse_id_list(&child_text)?,
        status: if trigger_status == 1 {
            JobStatus::Running
        } else {
            JobStatus::Stopped
        },
        trigger_last_ms: get(row, "trigger_last_ms")?,
        trigger_next_ms: get(row, "trigger_next_ms")?,
        created_ms: get(row, "created_ms")?,
        updated_ms: get(row, "updated_ms")?,
    })
}

pub fn group_from_row(row: &PgRow) -> StoreResult<Group> {
    let addresses: String = get(row, "addresses")?;
    Ok(Group {
        id: get(row, "id")?,
        app_name: get(row, "app_name")?,
        title: get(row, "title")?,
        address_type: parse_enum(row, "address_type", AddressType::parse)?,
        addresses: split_list(&addresses),
        access_token: get(row, "access_token")?,
        updated_ms: get(row, "updated_ms")?,
    })
}

pub fn run_from_row(row: &PgRow) -> StoreResult<RunLog> {
    Ok(RunLog {
        id: get(row, "id")?,
        job_id: get(row, "job_id")?,
        group_id: get(row, "group_id")?,
        fire_key: get(row, "fire_key")?,
        status: parse_enum(row, "status", RunStatus::parse)?,
        trigger_type: parse_enum(row, "trigger_type", TriggerType::parse)?,
        scheduled_at_ms: get(row, "scheduled_at_ms")?,
        trigger_time_ms: get(row, "trigger_time_ms")?,
        trigger_code: get(row, "trigger_code")?,
        trigger_msg: get(row, "trigger_msg")?,
        handle_time_ms: get(row, "handle_time_ms")?,
        handle_code: get(row, "handle_code")?,
        handle_msg: get(row, "handle_msg")?,
        executor_address: get(row, "executor_address")?,
        handler: get(row, "handler")?,
        params: get(row, "params")?,
        shard_index: get(row, "shard_index")?,
        shard_total: get(row, "shard_total")?,
        attempt: get(row, "attempt")?,
        trace_id: get(row, "trace_id")?,
        owner_node: get(row, "owner_node")?,
        epoch: get(row, "epoch")?,
        dispatch_at_ms: get(row, "dispatch_at_ms")?,
    })
}

pub fn executor_from_row(row: &PgRow) -> StoreResult<ExecutorInfo> {
    let handlers: String = get(row, "handlers")?;
    Ok(ExecutorInfo {
        executor_id: get(row, "executor_id")?,
        app_name: get(row, "app_name")?,
        address: get(row, "address")?,
        handlers: split_list(&handlers),
        registered_ms: get(row, "registered_ms")?,
        last_heartbeat_ms: get(row, "heartbeat_ms")?,
        admin_node: get(row, "owner_node")?,
        running_log_ids: Vec::new(),
    })
}
