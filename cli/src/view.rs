//! The JSON shape of each object (`--output json`), kept stable for scripts: the proto
//! message's fields under their proto names, enums as their value names without the type
//! prefix (`CRON`, `RUNNING`, `SHARDING_BROADCAST`), instants as epoch milliseconds (0 = none).
//! The same short names (any case, `-` or `_`) are what flags accept.

use serde::Serialize;
use xjob_proto::pb;

use super::client::short;

/// `name(value)` prints an enum value's short name; `parse(text)` reads one from a flag.
macro_rules! enum_names {
    ($name:ident, $ty:ty, $prefix:literal) => {
        pub fn $name(value: i32) -> String {
            match <$ty>::try_from(value) {
                Ok(known) => known.as_str_name().trim_start_matches($prefix).to_string(),
                Err(_) => value.to_string(),
            }
        }
    };
    ($name:ident, $parse:ident, $ty:ty, $prefix:literal) => {
        enum_names!($name, $ty, $prefix);

        pub fn $parse(text: &str) -> Result<i32, String> {
            let wanted = format!(
                "{}{}",
                $prefix,
                text.trim().to_uppercase().replace('-', "_")
            );
            match <$ty>::from_str_name(&wanted) {
                Some(known) if known as i32 != 0 => Ok(known as i32),
                _ => {
                    let choices: Vec<String> = (1..64)
                        .filter_map(|value| <$ty>::try_from(value).ok())
                        .map(|known| {
                            known
                                .as_str_name()
                                .trim_start_matches($prefix)
                                .to_lowercase()
                                .replace('_', "-")
                        })
                        .collect();
                    Err(format!(
                        "'{}' is not one of: {}",
                        short(text),
                        choices.join(", ")
                    ))
                }
            }
        }
    };
}

enum_names!(
    schedule_type,
    parse_schedule_type,
    pb::ScheduleType,
    "SCHEDULE_TYPE_"
);
enum_names!(
    misfire_strategy,
    parse_misfire_strategy,
    pb::MisfireStrategy,
    "MISFIRE_STRATEGY_"
);
enum_names!(
    calendar_mode,
    parse_calendar_mode,
    pb::CalendarMode,
    "CALENDAR_MODE_"
);
enum_names!(
    catch_up_mode,
    parse_catch_up_mode,
    pb::CatchUpMode,
    "CATCH_UP_MODE_"
);
enum_names!(
    dst_gap_policy,
    parse_dst_gap_policy,
    pb::DstGapPolicy,
    "DST_GAP_POLICY_"
);
enum_names!(
    dst_overlap_policy,
    parse_dst_overlap_policy,
    pb::DstOverlapPolicy,
    "DST_OVERLAP_POLICY_"
);
enum_names!(
    overlap_policy,
    parse_overlap_policy,
    pb::OverlapPolicy,
    "OVERLAP_POLICY_"
);
enum_names!(
    route_strategy,
    parse_route_strategy,
    pb::RouteStrategy,
    "ROUTE_STRATEGY_"
);
enum_names!(
    block_strategy,
    parse_block_strategy,
    pb::BlockStrategy,
    "BLOCK_STRATEGY_"
);
enum_names!(glue_type, parse_glue_type, pb::GlueType, "GLUE_TYPE_");
enum_names!(job_status, parse_job_status, pb::JobStatus, "JOB_STATUS_");
enum_names!(run_status, parse_run_status, pb::RunStatus, "RUN_STATUS_");
enum_names!(trigger_type, pb::TriggerType, "TRIGGER_TYPE_");
enum_names!(
    address_type,
    parse_address_type,
    pb::AddressType,
    "ADDRESS_TYPE_"
);

#[derive(Serialize)]
pub struct RetryBackoffView {
    pub initial_delay_ms: i64,
    pub factor: f64,
    pub max_delay_ms: i64,
}

/// `Job`.
#[derive(Serialize)]
pub struct JobView {
    pub id: i64,
    pub group_id: i64,
    pub name: String,
    pub author: String,
    pub alarm_email: String,
    pub alarm_on_every_failure: bool,
    pub schedule_type: String,
    pub schedule_conf: String,
    pub time_zone: String,
    pub misfire_strategy: String,
    pub jitter_max_ms: i64,
    pub catch_up_window_ms: i64,
    pub catch_up_mode: String,
    pub calendar: String,
    pub calendar_mode: String,
    pub dst_gap_policy: String,
    pub dst_overlap_policy: String,
    pub overlap_policy: String,
    pub route_strategy: String,
    pub handler: String,
    pub params: String,
    pub block_strategy: String,
    pub timeout_ms: i64,
    pub fail_retry_count: i32,
    pub retry_backoff: RetryBackoffView,
    pub glue_type: String,
    pub glue_source: String,
    pub glue_remark: String,
    pub child_job_ids: Vec<i64>,
    pub status: String,
    pub last_fire_ms: i64,
    pub next_fire_ms: i64,
    pub glue_updated_ms: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl From<&pb::Job> for JobView {
    fn from(job: &pb::Job) -> JobView {
        let backoff = job.retry_backoff.unwrap_or_default();
        JobView {
            id: job.id,
            group_id: job.group_id,
            name: job.name.clone(),
            author: job.author.clone(),
            alarm_email: job.alarm_email.clone(),
            alarm_on_every_failure: job.alarm_on_every_failure,
            schedule_type: schedule_type(job.schedule_type),
            schedule_conf: job.schedule_conf.clone(),
            time_zone: job.time_zone.clone(),
            misfire_strategy: misfire_strategy(job.misfire_strategy),
            jitter_max_ms: job.jitter_max_ms,
            catch_up_window_ms: job.catch_up_window_ms,
            catch_up_mode: catch_up_mode(job.catch_up_mode),
            calendar: job.calendar.clone(),
            calendar_mode: calendar_mode(job.calendar_mode),
            dst_gap_policy: dst_gap_policy(job.dst_gap_policy),
            dst_overlap_policy: dst_overlap_policy(job.dst_overlap_policy),
            overlap_policy: overlap_policy(job.overlap_policy),
            route_strategy: route_strategy(job.route_strategy),
            handler: job.handler.clone(),
            params: job.params.clone(),
            block_strategy: block_strategy(job.block_strategy),
            timeout_ms: job.timeout_ms,
            fail_retry_count: job.fail_retry_count,
            retry_backoff: RetryBackoffView {
                initial_delay_ms: backoff.initial_delay_ms,
                factor: backoff.factor,
                max_delay_ms: backoff.max_delay_ms,
            },
            glue_type: glue_type(job.glue_type),
            glue_source: job.glue_source.clone(),
            glue_remark: job.glue_remark.clone(),
            child_job_ids: job.child_job_ids.clone(),
            status: job_status(job.status),
            last_fire_ms: job.last_fire_ms,
            next_fire_ms: job.next_fire_ms,
            glue_updated_ms: job.glue_updated_ms,
            created_ms: job.created_ms,
            updated_ms: job.updated_ms,
        }
    }
}

/// `Log`: one run attempt.
#[derive(Serialize)]
pub struct RunView {
    pub id: i64,
    pub job_id: i64,
    pub group_id: i64,
    pub status: String,
    pub trigger_type: String,
    pub scheduled_at_ms: i64,
    pub trigger_time_ms: i64,
    pub trigger_code: i32,
    pub trigger_msg: String,
    pub handle_time_ms: i64,
    pub handle_code: i32,
    pub handle_msg: String,
    pub executor_address: String,
    pub handler: String,
    pub params: String,
    pub shard_index: i32,
    pub shard_total: i32,
    pub attempt: i32,
    pub trace_id: String,
    pub alarm_delivery: String,
}

impl From<&pb::Log> for RunView {
    fn from(log: &pb::Log) -> RunView {
        RunView {
            id: log.id,
            job_id: log.job_id,
            group_id: log.group_id,
            status: run_status(log.status),
            trigger_type: trigger_type(log.trigger_type),
            scheduled_at_ms: log.scheduled_at_ms,
            trigger_time_ms: log.trigger_time_ms,
            trigger_code: log.trigger_code,
            trigger_msg: log.trigger_msg.clone(),
            handle_time_ms: log.handle_time_ms,
            handle_code: log.handle_code,
            handle_msg: log.handle_msg.clone(),
            executor_address: log.executor_address.clone(),
            handler: log.handler.clone(),
            params: log.params.clone(),
            shard_index: log.shard_index,
            shard_total: log.shard_total,
            attempt: log.attempt,
            trace_id: log.trace_id.clone(),
            alarm_delivery: log.alarm_delivery.clone(),
        }
    }
}

/// `Group`.
#[derive(Serialize)]
pub struct GroupView {
    pub id: i64,
    pub app_name: String,
    pub title: String,
    pub address_type: String,
    pub addresses: Vec<String>,
    pub online: Vec<String>,
    /// `********` when set (the admin shows it only to the call that sets it).
    pub access_token: String,
}

impl From<&pb::Group> for GroupView {
    fn from(group: &pb::Group) -> GroupView {
        GroupView {
            id: group.id,
            app_name: group.app_name.clone(),
            title: group.title.clone(),
            address_type: address_type(group.address_type),
            addresses: group.addresses.clone(),
            online: group.online.clone(),
            access_token: group.access_token.clone(),
        }
    }
}

/// `Executor`.
#[derive(Serialize)]
pub struct ExecutorView {
    pub executor_id: String,
    pub app_name: String,
    pub address: String,
    pub handlers: Vec<String>,
    pub registered_ms: i64,
    pub last_heartbeat_ms: i64,
    pub admin_node: String,
    pub running_log_ids: Vec<i64>,
}

impl From<&pb::Executor> for ExecutorView {
    fn from(executor: &pb::Executor) -> ExecutorView {
        ExecutorView {
            executor_id: executor.executor_id.clone(),
            app_name: executor.app_name.clone(),
            address: executor.address.clone(),
            handlers: executor.handlers.clone(),
            registered_ms: executor.registered_ms,
            last_heartbeat_ms: executor.last_heartbeat_ms,
            admin_node: executor.admin_node.clone(),
            running_log_ids: executor.running_log_ids.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_names_round_trip_in_any_case() {
        let cron = pb::ScheduleType::Cron as i32;
        assert_eq!(schedule_type(cron), "CRON");
        assert_eq!(parse_schedule_type("cron"), Ok(cron));
        assert_eq!(
            parse_route_strategy("sharding-broadcast"),
            Ok(pb::RouteStrategy::ShardingBroadcast as i32)
        );
        assert_eq!(
            parse_block_strategy("DISCARD_LATER"),
            Ok(pb::BlockStrategy::DiscardLater as i32)
        );
    }

    #[test]
    fn unknown_and_unspecified_names_list_the_choices() {
        let refused = parse_schedule_type("hourly").unwrap_err();
        assert!(
            refused.contains("none, cron, fix-rate, fix-delay"),
            "{refused}"
        );
        assert!(parse_schedule_type("unspecified").is_err());
    }
}
