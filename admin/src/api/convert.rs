//! Every conversion between the wire contract (`xjob_proto::pb`) and the domain (`crate::model`)
//! for the admin API. Protobuf types stop here: handlers convert a request into model types,
//! work on those, and convert the result back.
//!
//! ```text
//! pb::Job ──job_from_pb──▶ model::Job ──(validate, store, trigger)──▶ model::Job ──job_to_pb──▶ pb::Job
//! ```
//!
//! The contract's enums convert in `crate::wire` (re-exported here); paging tokens are
//! converted here as well.

use super::calendar_convert::{calendar_mode_from_pb, calendar_mode_to_pb, mode_field};
use xjob_proto::pb;

use crate::error::Error;
use crate::maintenance::cleanup::{ClearMode, ClearRequest};
use crate::maintenance::report::Dashboard;
use crate::model::validate::field_name;
use crate::model::{
    ExecutorInfo, Group, GroupId, JOB_SORT_KEYS, Job, JobId, JobStatus, LOG_SORT_KEYS, ListOrder,
    LogFilter, RetryBackoff, RunLog, User,
};
use crate::store::{DayCounts, JobFilter};
pub use crate::wire::*;

/// Page size used when a list request leaves it at 0.
pub const DEFAULT_PAGE_SIZE: i64 = 50;
/// Default of `max_page_size`: the largest page a list request gets, whatever it asks for.
pub const MAX_PAGE_SIZE: i64 = 1000;

/// Reads an optional filter enum: 0 (UNSPECIFIED) means "any", an unknown value is an error.
pub fn optional_filter<T>(
    value: i32,
    field: &str,
    checked: impl FnOnce(i32, &str) -> Result<T, Error>,
) -> Result<Option<T>, Error> {
    if value == 0 {
        Ok(None)
    } else {
        checked(value, field).map(Some)
    }
}

/// Unwraps a required message field; `InvalidArgument` "FIELD: required" when it is absent.
pub fn required<T>(message: Option<T>, field: &str) -> Result<T, Error> {
    message.ok_or_else(|| Error::invalid(field, "required"))
}

// ---- jobs

/// Converts a job off the wire. Output-only fields (status, fire times, timestamps) are left at
/// their zero values for the handler to fill; enum fields must be set.
pub fn job_from_pb(job: pb::Job, prefix: &str) -> Result<Job, Error> {
    let field = |name: &str| field_name(prefix, name);
    let policy = super::policy_convert::policy_from_pb(&job, prefix)?;
    let mut model = Job {
        id: JobId(job.id),
        policy,
        group_id: GroupId(job.group_id),
        schedule_type: pb_schedule_type(job.schedule_type, &field("schedule_type"))?,
        misfire_strategy: pb_misfire_strategy(job.misfire_strategy, &field("misfire_strategy"))?,
        route_strategy: pb_route_strategy(job.route_strategy, &field("route_strategy"))?,
        block_strategy: pb_block_strategy(job.block_strategy, &field("block_strategy"))?,
        glue_type: pb_glue_type(job.glue_type, &field("glue_type"))?,
        name: job.name,
        author: job.author,
        alarm_email: job.alarm_email,
        alarm_on_every_failure: job.alarm_on_every_failure,
        schedule_conf: job.schedule_conf.trim().to_string(),
        time_zone: job.time_zone.trim().to_string(),
        handler: job.handler.trim().to_string(),
        params: job.params,
        timeout_ms: job.timeout_ms,
        fail_retry_count: job.fail_retry_count,
        retry_backoff: job
            .retry_backoff
            .map(retry_backoff_from_pb)
            .unwrap_or_default(),
        glue_source: job.glue_source,
        glue_remark: job.glue_remark,
        glue_updated_ms: 0,
        child_job_ids: job.child_job_ids.into_iter().map(JobId).collect(),
        calendar: job.calendar.trim().to_string(),
        calendar_mode: calendar_mode_from_pb(job.calendar_mode, &mode_field(prefix))?,
        status: JobStatus::Stopped,
        trigger_last_ms: 0,
        trigger_next_ms: 0,
        created_ms: 0,
        updated_ms: 0,
    };
    model.normalize_line_ends();
    Ok(model)
}

/// Converts a stored job to the wire.
pub fn job_to_pb(job: Job) -> pb::Job {
    let policy = job.policy;
    let mut wire = pb::Job {
        id: job.id.0,
        group_id: job.group_id.0,
        name: job.name,
        author: job.author,
        alarm_email: job.alarm_email,
        alarm_on_every_failure: job.alarm_on_every_failure,
        schedule_type: schedule_type_to_pb(job.schedule_type) as i32,
        schedule_conf: job.schedule_conf,
        time_zone: job.time_zone,
        misfire_strategy: misfire_strategy_to_pb(job.misfire_strategy) as i32,
        route_strategy: route_strategy_to_pb(job.route_strategy) as i32,
        handler: job.handler,
        params: job.params,
        block_strategy: block_strategy_to_pb(job.block_strategy) as i32,
        timeout_ms: job.timeout_ms,
        fail_retry_count: job.fail_retry_count,
        retry_backoff: Some(retry_backoff_to_pb(job.retry_backoff)),
        glue_type: glue_type_to_pb(job.glue_type) as i32,
        glue_source: job.glue_source,
        glue_remark: job.glue_remark,
        child_job_ids: job.child_job_ids.iter().map(|id| id.0).collect(),
        status: job_status_to_pb(job.status) as i32,
        last_fire_ms: job.trigger_last_ms,
        // A FIX_DELAY job waiting for its run to finish has no next time yet (internally a
        // far-future marker); show 0 like a job without a next fire.
        next_fire_ms: if job.trigger_next_ms == crate::model::next_fire::AWAITING_COMPLETION_MS {
            0
        } else {
            job.trigger_next_ms
        },
        glue_updated_ms: job.glue_updated_ms,
        created_ms: job.created_ms,
        updated_ms: job.updated_ms,
        calendar: job.calendar,
        calendar_mode: calendar_mode_to_pb(job.calendar_mode) as i32,
        ..pb::Job::default()
    };
    super::policy_convert::policy_to_pb(&policy, &mut wire);
    wire
}

fn retry_backoff_from_pb(backoff: pb::RetryBackoff) -> RetryBackoff {
    RetryBackoff {
        initial_delay_ms: backoff.initial_delay_ms,
        factor: backoff.factor,
        max_delay_ms: backoff.max_delay_ms,
    }
}

fn retry_backoff_to_pb(backoff: RetryBackoff) -> pb::RetryBackoff {
    pb::RetryBackoff {
        initial_delay_ms: backoff.initial_delay_ms,
        factor: backoff.factor,
        max_delay_ms: backoff.max_delay_ms,
    }
}

// ---- groups

/// Converts a group off the wire; addresses are trimmed, `online` (output only) is dropped.
pub fn group_from_pb(group: pb::Group, prefix: &str) -> Result<Group, Error> {
    Ok(Group {
        id: GroupId(group.id),
        address_type: pb_address_type(group.address_type, &field_name(prefix, "address_type"))?,
        app_name: group.app_name.trim().to_string(),
        title: group.title.trim().to_string(),
        addresses: group
            .addresses
            .iter()
            .map(|address| address.trim().to_string())
            .collect(),
        access_token: group.access_token,
        updated_ms: 0,
    })
}

/// Converts a stored group to the wire with the addresses of its live executors.
pub fn group_to_pb(group: Group, online: Vec<String>) -> pb::Group {
    pb::Group {
        id: group.id.0,
        app_name: group.app_name,
        title: group.title,
        address_type: address_type_to_pb(group.address_type) as i32,
        addresses: group.addresses,
        online,
        access_token: group.access_token,
    }
}

// ---- runs and executors

/// A result an executor reported, as the callback applies it.
pub fn reported_result(result: &pb::RunResult) -> crate::callback::ReportedResult {
    crate::callback::ReportedResult {
        log_id: crate::model::LogId(result.log_id),
        status: run_status_from_pb(result.status),
        code: result.code,
        message: result.message.clone(),
        finished_at_ms: result.finished_at_ms,
        traceparent: result.traceparent.clone(),
    }
}

/// Converts a run (log row) to the wire.
pub fn log_to_pb(run: RunLog) -> pb::Log {
    pb::Log {
        id: run.id.0,
        job_id: run.job_id.0,
        group_id: run.group_id.0,
        status: run_status_to_pb(run.status) as i32,
        trigger_type: trigger_type_to_pb(run.trigger_type) as i32,
        scheduled_at_ms: run.scheduled_at_ms,
        trigger_time_ms: run.trigger_time_ms,
        trigger_code: run.trigger_code,
        trigger_msg: run.trigger_msg,
        handle_time_ms: run.handle_time_ms,
        handle_code: run.handle_code,
        handle_msg: run.handle_msg,
        executor_address: run.executor_address,
        params: run.params,
        shard_index: run.shard_index,
        shard_total: run.shard_total,
        attempt: run.attempt,
        // A run not dispatched yet may hold the traceparent its trace will continue: the
        // trace id is its second part.
        trace_id: match crate::telemetry::parse_traceparent(&run.trace_id) {
            Some(context) => format!("{:032x}", context.trace_id()),
            None => run.trace_id,
        },
        alarm_delivery: run.alarm_delivery,
        handler: run.handler,
    }
}

/// Converts a live executor to the wire.
pub fn executor_to_pb(executor: ExecutorInfo) -> pb::Executor {
    pb::Executor {
        executor_id: executor.executor_id,
        app_name: executor.app_name,
        address: executor.address,
        handlers: executor.handlers,
        registered_ms: executor.registered_ms,
        last_heartbeat_ms: executor.last_heartbeat_ms,
        admin_node: executor.admin_node,
        running_log_ids: executor.running_log_ids,
        protocol: executor.protocol.as_str().to_string(),
    }
}

// ---- paging

/// A page of a list request: skip `offset` rows, return at most `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub offset: i64,
    pub limit: i64,
}

impl Page {
    /// Reads `page_size` (0 = default, capped at `max_page_size`, negative refused) and
    /// `page_token` (the decimal offset of the page; empty = the first page).
    pub fn from_request(
        page_size: i32,
        page_token: &str,
        max_page_size: usize,
    ) -> Result<Page, Error> {
        let max_page_size = i64::try_from(max_page_size).unwrap_or(MAX_PAGE_SIZE).max(1);
        let limit = match i64::from(page_size) {
            size if size < 0 => {
                return Err(Error::invalid(
                    "page_size",
                    format!("must be >= 0, got {size}"),
                ));
            }
            0 => DEFAULT_PAGE_SIZE.min(max_page_size),
            size => size.min(max_page_size),
        };
        let offset = if page_token.is_empty() {
            0
        } else {
            page_token
                .parse::<i64>()
                .ok()
                .filter(|offset| *offset >= 0)
                .ok_or_else(|| Error::invalid("page_token", "invalid"))?
        };
        Ok(Page { offset, limit })
    }

    /// Token of the page after one that returned `returned` items; empty when that was the last.
    pub fn next_token(&self, returned: usize) -> String {
        let returned = i64::try_from(returned).unwrap_or(i64::MAX);
        if returned >= self.limit {
            self.offset.saturating_add(returned).to_string()
        } else {
            String::new()
        }
    }
}

// ---- list filters and other request fields

/// Fire times `PreviewSchedule` returns when the request leaves `count` at 0.
pub const DEFAULT_PREVIEW_COUNT: usize = 5;
/// Most fire times one `PreviewSchedule` returns.
pub const MAX_PREVIEW_COUNT: usize = 100;

/// Reads `PreviewScheduleRequest.count`: 0 = the default, capped at the maximum.
pub fn preview_count(count: i32) -> Result<usize, Error> {
    match usize::try_from(count) {
        Err(_) => Err(Error::invalid(
            "count",
            format!("must be >= 0, got {count}"),
        )),
        Ok(0) => Ok(DEFAULT_PREVIEW_COUNT),
        Ok(count) => Ok(count.min(MAX_PREVIEW_COUNT)),
    }
}

/// Reads the filters of `ListJobs`: 0, UNSPECIFIED and empty strings mean "any".
pub fn job_filter(request: pb::ListJobsRequest, page: Page) -> Result<JobFilter, Error> {
    Ok(JobFilter {
        group_id: non_zero(request.group_id).map(GroupId),
        group_ids: None,
        status: optional_filter(request.status, "status", pb_job_status)?,
        name: non_empty(request.name),
        handler: non_empty(request.handler),
        author: non_empty(request.author),
        order: ListOrder::parse(&request.order_by, JOB_SORT_KEYS)
            .map_err(|message| Error::invalid("order_by", message))?,
        offset: page.offset,
        limit: page.limit,
    })
}

/// Reads the filters of `ListLogs`: 0 and UNSPECIFIED mean "any".
pub fn log_filter(request: &pb::ListLogsRequest, page: Page) -> Result<LogFilter, Error> {
    Ok(LogFilter {
        group_id: non_zero(request.group_id).map(GroupId),
        group_ids: None,
        job_id: non_zero(request.job_id).map(JobId),
        status: optional_filter(request.status, "status", pb_run_status)?,
        from_ms: non_zero(request.from_ms),
        to_ms: non_zero(request.to_ms),
        order: ListOrder::parse(&request.order_by, LOG_SORT_KEYS)
            .map_err(|message| Error::invalid("order_by", message))?,
        offset: page.offset,
        limit: page.limit,
    })
}

// ---- operations data

/// Reads a `ClearLogs` request: the mode (XXL-JOB's types 1-9) must be set; group and job ids
/// of 0 mean "any".
pub fn clear_request(request: &pb::ClearLogsRequest) -> Result<ClearRequest, Error> {
    use pb::ClearLogsMode as Wire;
    let mode = match pb::ClearLogsMode::try_from(request.mode) {
        Ok(Wire::OlderThanOneMonth) => ClearMode::OlderThanMonths(1),
        Ok(Wire::OlderThanThreeMonths) => ClearMode::OlderThanMonths(3),
        Ok(Wire::OlderThanSixMonths) => ClearMode::OlderThanMonths(6),
        Ok(Wire::OlderThanOneYear) => ClearMode::OlderThanMonths(12),
        Ok(Wire::KeepLatest1000) => ClearMode::KeepLatest(1_000),
        Ok(Wire::KeepLatest10000) => ClearMode::KeepLatest(10_000),
        Ok(Wire::KeepLatest30000) => ClearMode::KeepLatest(30_000),
        Ok(Wire::KeepLatest100000) => ClearMode::KeepLatest(100_000),
        Ok(Wire::All) => ClearMode::All,
        Ok(Wire::Unspecified) | Err(_) => return Err(enum_error(request.mode, "mode")),
    };
    Ok(ClearRequest {
        group_id: non_negative_filter(request.group_id, "group_id")?.map(GroupId),
        job_id: non_negative_filter(request.job_id, "job_id")?.map(JobId),
        mode,
    })
}

/// Converts the dashboard to the wire.
pub fn dashboard_to_pb(dashboard: Dashboard) -> pb::GetDashboardResponse {
    pb::GetDashboardResponse {
        job_count: dashboard.job_count,
        online_executors: dashboard.online_executors,
        total_runs: dashboard.total_runs,
        success_runs: dashboard.success_runs,
        days: dashboard.days.into_iter().map(day_report_to_pb).collect(),
        loops: Vec::new(),
        serving: true,
        failing_jobs: dashboard
            .failing_jobs
            .into_iter()
            .map(|job| pb::JobFailures {
                job_id: job.job_id.0,
                group_id: job.group_id.0,
                failures: job.counts.failed,
                last_failure_ms: job.last_failed_ms,
            })
            .collect(),
    }
}

/// One background loop's state on the wire.
pub fn loop_health_to_pb(status: crate::health::LoopStatus) -> pb::LoopHealth {
    pb::LoopHealth {
        name: status.name.to_string(),
        last_success_ms: status.last_success_ms,
        last_error: status.last_error,
        healthy: status.healthy,
    }
}

fn day_report_to_pb(day: DayCounts) -> pb::DayReport {
    pb::DayReport {
        day_ms: day.day_ms,
        running: day.running,
        success: day.success,
        failed: day.failed,
        lost: day.lost,
        skipped: day.skipped,
        late_fires: day.late_fires,
        max_lateness_ms: day.max_lateness_ms,
    }
}

/// An id filter: 0 = any, negative refused.
fn non_negative_filter(value: i64, field: &str) -> Result<Option<i64>, Error> {
    if value < 0 {
        return Err(Error::invalid(field, format!("must be >= 0, got {value}")));
    }
    Ok(non_zero(value))
}

fn non_zero(value: i64) -> Option<i64> {
    (value != 0).then_some(value)
}

fn non_empty(value: String) -> Option<String> {
    (!value.is_empty()).then_some(value)
}

/// A user as the API shows it: never its password hash.
pub fn user_to_pb(user: User) -> pb::User {
    pb::User {
        id: user.id,
        name: user.name,
        role: user.role.as_str().to_string(),
        group_ids: user.group_ids.iter().map(|id| id.0).collect(),
        created_ms: user.created_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GlueType, RouteStrategy, RunStatus, ScheduleType, TriggerType};

    fn wire_job() -> pb::Job {
        pb::Job {
            id: 7,
            group_id: 1,
            name: "nightly".into(),
            schedule_type: pb::ScheduleType::Cron as i32,
            schedule_conf: " 0 0 1 * * ? ".into(),
            misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
            route_strategy: pb::RouteStrategy::First as i32,
            block_strategy: pb::BlockStrategy::SerialExecution as i32,
            glue_type: pb::GlueType::Bean as i32,
            handler: "demoHandler".into(),
            retry_backoff: Some(pb::RetryBackoff {
                initial_delay_ms: 1000,
                factor: 2.0,
                max_delay_ms: 60_000,
            }),
            child_job_ids: vec![3, 4],
            status: pb::JobStatus::Running as i32,
            next_fire_ms: 123,
            ..pb::Job::default()
        }
    }

    fn message(error: Error) -> String {
        error.to_string()
    }

    #[test]
    fn every_enum_round_trips_through_the_wire() {
        for value in RouteStrategy::ALL {
            let wire = route_strategy_to_pb(*value) as i32;
            assert_eq!(route_strategy_from_pb(wire), Some(*value));
        }
        for value in RunStatus::ALL {
            let wire = run_status_to_pb(*value) as i32;
            assert_eq!(run_status_from_pb(wire), Some(*value));
            assert_eq!(pb_run_status(wire, "status").ok(), Some(*value));
        }
        for value in GlueType::ALL {
            assert_eq!(
                glue_type_from_pb(glue_type_to_pb(*value) as i32),
                Some(*value)
            );
        }
        for value in ScheduleType::ALL {
            assert_eq!(
                schedule_type_from_pb(schedule_type_to_pb(*value) as i32),
                Some(*value)
            );
        }
        for value in TriggerType::ALL {
            assert_eq!(
                trigger_type_from_pb(trigger_type_to_pb(*value) as i32),
                Some(*value)
            );
        }
        for value in [JobStatus::Stopped, JobStatus::Running] {
            assert_eq!(
                job_status_from_pb(job_status_to_pb(value) as i32),
                Some(value)
            );
        }
    }

    #[test]
    fn unspecified_and_unknown_enums_name_the_field() {
        assert_eq!(run_status_from_pb(0), None);
        assert_eq!(run_status_from_pb(42), None);
        let unset = pb_route_strategy(0, "job.route_strategy").expect_err("unset");
        assert_eq!(message(unset), "job.route_strategy: must be set");
        let unknown = pb_route_strategy(42, "job.route_strategy").expect_err("unknown");
        assert_eq!(message(unknown), "job.route_strategy: unknown value 42");
    }

    #[test]
    fn job_from_wire_requires_every_enum_and_ignores_output_fields() {
        let job = job_from_pb(wire_job(), "job").expect("valid job");
        assert_eq!(job.schedule_type, ScheduleType::Cron);
        assert_eq!(job.schedule_conf, "0 0 1 * * ?");
        assert_eq!(job.status, JobStatus::Stopped);
        assert_eq!(job.trigger_next_ms, 0);
        assert_eq!(job.retry_backoff.factor, 2.0);

        let missing_block = pb::Job {
            block_strategy: 0,
            ..wire_job()
        };
        let error = job_from_pb(missing_block, "job").expect_err("unset block strategy");
        assert!(matches!(error, Error::InvalidArgument(_)));
        assert_eq!(message(error), "job.block_strategy: must be set");
    }

    #[test]
    fn job_round_trips_editable_fields() {
        let job = job_from_pb(wire_job(), "job").expect("valid job");
        let back = job_to_pb(job.clone());
        assert_eq!(job_from_pb(back, "job").expect("valid again"), job);
    }

    #[test]
    fn group_requires_an_address_type_and_trims_addresses() {
        let wire = pb::Group {
            app_name: " demo-app ".into(),
            title: "Demo".into(),
            address_type: pb::AddressType::Manual as i32,
            addresses: vec![" http://a:9999 ".into()],
            online: vec!["ignored".into()],
            ..pb::Group::default()
        };
        let group = group_from_pb(wire.clone(), "group").expect("valid group");
        assert_eq!(group.app_name, "demo-app");
        assert_eq!(group.addresses, vec!["http://a:9999".to_string()]);
        let back = group_to_pb(group, vec!["http://b:1".into()]);
        assert_eq!(back.online, vec!["http://b:1".to_string()]);

        let unset = pb::Group {
            address_type: 0,
            ..wire
        };
        let error = group_from_pb(unset, "group").expect_err("unset address type");
        assert_eq!(message(error), "group.address_type: must be set");
    }

    #[test]
    fn required_and_filters() {
        let error = required::<pb::Job>(None, "job").expect_err("missing");
        assert_eq!(message(error), "job: required");
        assert_eq!(optional_filter(0, "status", pb_run_status).ok(), Some(None));
        assert_eq!(
            optional_filter(pb::RunStatus::Killed as i32, "status", pb_run_status).ok(),
            Some(Some(RunStatus::Killed))
        );
        let error = optional_filter(99, "status", pb_run_status).expect_err("unknown");
        assert_eq!(message(error), "status: unknown value 99");
    }

    #[test]
    fn page_tokens_parse_and_advance() {
        const MAX: usize = MAX_PAGE_SIZE as usize;
        // A configured max_page_size below the default caps both the asked and default sizes.
        assert_eq!(
            Page::from_request(500, "", 20).map(|page| page.limit).ok(),
            Some(20)
        );
        assert_eq!(
            Page::from_request(0, "", 20).map(|page| page.limit).ok(),
            Some(20)
        );
        assert_eq!(
            Page::from_request(0, "", MAX).ok(),
            Some(Page {
                offset: 0,
                limit: 50
            })
        );
        assert_eq!(
            Page::from_request(5000, "120", MAX).ok(),
            Some(Page {
                offset: 120,
                limit: 1000
            })
        );
        assert_eq!(
            message(Page::from_request(-1, "", MAX).expect_err("negative")),
            "page_size: must be >= 0, got -1"
        );
        for garbage in ["abc", "-5", "1.5", " 3"] {
            let error = Page::from_request(10, garbage, MAX).expect_err("garbage token");
            assert_eq!(message(error), "page_token: invalid");
        }
        let page = Page {
            offset: 20,
            limit: 10,
        };
        assert_eq!(page.next_token(10), "30");
        assert_eq!(page.next_token(9), "");
    }

    #[test]
    fn preview_count_defaults_caps_and_refuses_negative() {
        assert_eq!(preview_count(0).ok(), Some(DEFAULT_PREVIEW_COUNT));
        assert_eq!(preview_count(7).ok(), Some(7));
        assert_eq!(preview_count(10_000).ok(), Some(MAX_PREVIEW_COUNT));
        let error = preview_count(-1).expect_err("negative");
        assert_eq!(error.to_string(), "count: must be >= 0, got -1");
    }

    #[test]
    fn list_filters_treat_zero_and_empty_as_any() {
        let page = Page {
            offset: 0,
            limit: 50,
        };
        let filter = job_filter(pb::ListJobsRequest::default(), page).expect("empty filter");
        assert_eq!(
            filter,
            JobFilter {
                offset: 0,
                limit: 50,
                ..JobFilter::default()
            }
        );
        let request = pb::ListJobsRequest {
            group_id: 3,
            status: pb::JobStatus::Running as i32,
            name: "night".into(),
            ..pb::ListJobsRequest::default()
        };
        let filter = job_filter(request, page).expect("filter");
        assert_eq!(filter.group_id, Some(GroupId(3)));
        assert_eq!(filter.status, Some(JobStatus::Running));
        assert_eq!(filter.name.as_deref(), Some("night"));

        let request = pb::ListLogsRequest {
            status: run_status_to_pb(RunStatus::Failed) as i32,
            job_id: 9,
            ..pb::ListLogsRequest::default()
        };
        let filter = log_filter(&request, page).expect("log filter");
        assert_eq!(filter.status, Some(RunStatus::Failed));
        assert_eq!(filter.job_id, Some(JobId(9)));
        assert_eq!(filter.group_id, None);
        let bad = pb::ListLogsRequest {
            status: 77,
            ..pb::ListLogsRequest::default()
        };
        assert_eq!(
            log_filter(&bad, page).map_err(|error| error.to_string()),
            Err("status: unknown value 77".to_string())
        );
    }

    #[test]
    fn clear_modes_map_to_xxl_jobs_nine_types() {
        let mode = |mode: pb::ClearLogsMode| {
            let request = pb::ClearLogsRequest {
                mode: mode as i32,
                ..Default::default()
            };
            clear_request(&request).map(|request| request.mode).ok()
        };
        assert_eq!(
            mode(pb::ClearLogsMode::OlderThanOneMonth),
            Some(ClearMode::OlderThanMonths(1))
        );
        assert_eq!(
            mode(pb::ClearLogsMode::OlderThanThreeMonths),
            Some(ClearMode::OlderThanMonths(3))
        );
        assert_eq!(
            mode(pb::ClearLogsMode::OlderThanSixMonths),
            Some(ClearMode::OlderThanMonths(6))
        );
        assert_eq!(
            mode(pb::ClearLogsMode::OlderThanOneYear),
            Some(ClearMode::OlderThanMonths(12))
        );
        assert_eq!(
            mode(pb::ClearLogsMode::KeepLatest1000),
            Some(ClearMode::KeepLatest(1_000))
        );
        assert_eq!(
            mode(pb::ClearLogsMode::KeepLatest10000),
            Some(ClearMode::KeepLatest(10_000))
        );
        assert_eq!(
            mode(pb::ClearLogsMode::KeepLatest30000),
            Some(ClearMode::KeepLatest(30_000))
        );
        assert_eq!(
            mode(pb::ClearLogsMode::KeepLatest100000),
            Some(ClearMode::KeepLatest(100_000))
        );
        assert_eq!(mode(pb::ClearLogsMode::All), Some(ClearMode::All));

        let unset = pb::ClearLogsRequest::default();
        assert_eq!(
            clear_request(&unset).map_err(message).err().as_deref(),
            Some("mode: must be set")
        );
        let negative = pb::ClearLogsRequest {
            job_id: -4,
            mode: pb::ClearLogsMode::All as i32,
            ..Default::default()
        };
        assert_eq!(
            clear_request(&negative).map_err(message).err().as_deref(),
            Some("job_id: must be >= 0, got -4")
        );
        let filtered = pb::ClearLogsRequest {
            group_id: 2,
            job_id: 0,
            mode: pb::ClearLogsMode::All as i32,
        };
        let filtered = clear_request(&filtered).ok();
        assert_eq!(
            filtered.map(|r| (r.group_id, r.job_id)),
            Some((Some(GroupId(2)), None))
        );
    }
}
