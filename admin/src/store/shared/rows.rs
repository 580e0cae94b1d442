//! Row → model mapping, the same for every backend (column names match the migrations; numbers
//! and booleans decode strictly as declared, text as `Dialect::text` reads it).

use crate::model::{
    AddressType, BlockStrategy, Calendar, CalendarMode, CatchUpMode, DstGapPolicy,
    DstOverlapPolicy, DstPolicy, ExecutorInfo, GlueType, Group, Job, JobId, JobStatus,
    MisfireStrategy, OverlapPolicy, RetryBackoff, RouteStrategy, RunLog, RunStatus, SchedulePolicy,
    ScheduleType, TriggerType,
};
use crate::store::dialect::Dialect;
use crate::store::error::{StoreError, StoreResult};
use crate::store::sql::Cols;

/// Columns of `xjob_job` in the order `job_from_row` reads them by name.
pub const JOB_COLUMNS: &str = "id, group_id, name, author, alarm_email, alarm_on_every_failure, \
    schedule_type, \
    schedule_conf, time_zone, misfire_strategy, route_strategy, handler, params, block_strategy, \
    timeout_ms, fail_retry_count, retry_initial_delay_ms, retry_factor, retry_max_delay_ms, \
    glue_type, glue_source, glue_remark, glue_updated_ms, child_job_ids, trigger_status, \
    trigger_last_ms, trigger_next_ms, created_ms, updated_ms, jitter_max_ms, catch_up_window_ms, \
    catch_up_mode, calendar, calendar_mode, dst_gap_policy, dst_overlap_policy, overlap_policy";

/// Columns of `xjob_log` read by `run_from_row`.
pub const LOG_COLUMNS: &str = "id, job_id, group_id, fire_key, status, trigger_type, \
    scheduled_at_ms, trigger_time_ms, trigger_code, trigger_msg, handle_time_ms, handle_code, \
    handle_msg, executor_address, handler, params, shard_index, shard_total, attempt, trace_id, \
    owner_node, epoch, dispatch_at_ms, alarm_delivery";

/// Splits a comma-separated id list ("3,5") as stored in `child_job_ids`.
pub fn parse_id_list(text: &str) -> StoreResult<Vec<JobId>> {
    text.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse::<i64>()
                .map(JobId)
                .map_err(|_| StoreError::Corrupt(format!("child_job_ids: '{part}' is not an id")))
        })
        .collect()
}

/// Joins ids as stored in `child_job_ids`.
pub fn join_ids(ids: &[JobId]) -> String {
    ids.iter()
        .map(JobId::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Splits a comma-separated string list, dropping empty items.
pub fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(str::to_string)
        .collect()
}

pub fn job_from_row<DB: Dialect>(row: &DB::Row) -> StoreResult<Job> {
    let row = Cols::<DB>(row);
    let trigger_status: i32 = row.get("trigger_status")?;
    let child_text: String = row.get("child_job_ids")?;
    Ok(Job {
        id: row.get("id")?,
        group_id: row.get("group_id")?,
        name: row.get("name")?,
        author: row.get("author")?,
        alarm_email: row.get("alarm_email")?,
        alarm_on_every_failure: row.get("alarm_on_every_failure")?,
        schedule_type: row.parse("schedule_type", ScheduleType::parse)?,
        schedule_conf: row.get("schedule_conf")?,
        time_zone: row.get("time_zone")?,
        misfire_strategy: row.parse("misfire_strategy", MisfireStrategy::parse)?,
        route_strategy: row.parse("route_strategy", RouteStrategy::parse)?,
        handler: row.get("handler")?,
        params: row.get("params")?,
        block_strategy: row.parse("block_strategy", BlockStrategy::parse)?,
        timeout_ms: row.get("timeout_ms")?,
        fail_retry_count: row.get("fail_retry_count")?,
        retry_backoff: RetryBackoff {
            initial_delay_ms: row.get("retry_initial_delay_ms")?,
            factor: row.get("retry_factor")?,
            max_delay_ms: row.get("retry_max_delay_ms")?,
        },
        glue_type: row.parse("glue_type", GlueType::parse)?,
        glue_source: row.get("glue_source")?,
        glue_remark: row.get("glue_remark")?,
        glue_updated_ms: row.get("glue_updated_ms")?,
        child_job_ids: parse_id_list(&child_text)?,
        policy: SchedulePolicy {
            jitter_max_ms: row.get("jitter_max_ms")?,
            catch_up_window_ms: row.get("catch_up_window_ms")?,
            catch_up_mode: row.parse("catch_up_mode", CatchUpMode::parse)?,
            dst: DstPolicy {
                gap: row.parse("dst_gap_policy", DstGapPolicy::parse)?,
                overlap: row.parse("dst_overlap_policy", DstOverlapPolicy::parse)?,
            },
            overlap_policy: row.parse("overlap_policy", OverlapPolicy::parse)?,
        },
        calendar: row.get("calendar")?,
        calendar_mode: row.parse("calendar_mode", CalendarMode::parse)?,
        status: if trigger_status == 1 {
            JobStatus::Running
        } else {
            JobStatus::Stopped
        },
        trigger_last_ms: row.get("trigger_last_ms")?,
        trigger_next_ms: row.get("trigger_next_ms")?,
        created_ms: row.get("created_ms")?,
        updated_ms: row.get("updated_ms")?,
    })
}

pub fn group_from_row<DB: Dialect>(row: &DB::Row) -> StoreResult<Group> {
    let row = Cols::<DB>(row);
    let addresses: String = row.get("addresses")?;
    Ok(Group {
        id: row.get("id")?,
        app_name: row.get("app_name")?,
        title: row.get("title")?,
        address_type: row.parse("address_type", AddressType::parse)?,
        addresses: split_list(&addresses),
        access_token: row.get("access_token")?,
        updated_ms: row.get("updated_ms")?,
    })
}

pub fn run_from_row<DB: Dialect>(row: &DB::Row) -> StoreResult<RunLog> {
    let row = Cols::<DB>(row);
    Ok(RunLog {
        id: row.get("id")?,
        job_id: row.get("job_id")?,
        group_id: row.get("group_id")?,
        fire_key: row.get("fire_key")?,
        status: row.parse("status", RunStatus::parse)?,
        trigger_type: row.parse("trigger_type", TriggerType::parse)?,
        scheduled_at_ms: row.get("scheduled_at_ms")?,
        trigger_time_ms: row.get("trigger_time_ms")?,
        trigger_code: row.get("trigger_code")?,
        trigger_msg: row.get("trigger_msg")?,
        handle_time_ms: row.get("handle_time_ms")?,
        handle_code: row.get("handle_code")?,
        handle_msg: row.get("handle_msg")?,
        executor_address: row.get("executor_address")?,
        handler: row.get("handler")?,
        params: row.get("params")?,
        shard_index: row.get("shard_index")?,
        shard_total: row.get("shard_total")?,
        attempt: row.get("attempt")?,
        trace_id: row.get("trace_id")?,
        owner_node: row.get("owner_node")?,
        epoch: row.get("epoch")?,
        dispatch_at_ms: row.get("dispatch_at_ms")?,
        alarm_delivery: row.get("alarm_delivery")?,
    })
}

pub fn executor_from_row<DB: Dialect>(row: &DB::Row) -> StoreResult<ExecutorInfo> {
    let row = Cols::<DB>(row);
    let handlers: String = row.get("handlers")?;
    Ok(ExecutorInfo {
        executor_id: row.get("executor_id")?,
        app_name: row.get("app_name")?,
        address: row.get("address")?,
        handlers: split_list(&handlers),
        registered_ms: row.get("registered_ms")?,
        last_heartbeat_ms: row.get("heartbeat_ms")?,
        admin_node: row.get("owner_node")?,
        running_log_ids: Vec::new(),
        protocol: row.parse("protocol", crate::model::ExecutorProtocol::parse)?,
    })
}

pub fn calendar_from_row<DB: Dialect>(row: &DB::Row) -> StoreResult<Calendar> {
    let row = Cols::<DB>(row);
    let rules: String = row.get("rules")?;
    Ok(Calendar {
        name: row.get("name")?,
        time_zone: row.get("time_zone")?,
        rules: rules
            .lines()
            .filter(|line| !line.is_empty())
            .map(str::to_string)
            .collect(),
        description: row.get("description")?,
        created_ms: row.get("created_ms")?,
        updated_ms: row.get("updated_ms")?,
    })
}
