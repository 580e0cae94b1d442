//! A job definition (XXL-JOB's `xxl_job_info`) plus its scheduling state.

use super::{
    BlockStrategy, CalendarMode, CatchUpMode, DstPolicy, GlueType, GroupId, JobId, MisfireStrategy,
    OverlapPolicy, RouteStrategy, ScheduleType,
};

/// Whether the schedule is active.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    Stopped,
    Running,
}

/// How long to wait before each retry of a failed run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RetryBackoff {
    pub initial_delay_ms: i64,
    /// 1.0 (or 0) = fixed delay; above 1.0 = exponential.
    pub factor: f64,
    /// 0 = unbounded.
    pub max_delay_ms: i64,
}

/// How a job's schedule treats its occurrences beyond their times (each field's rule lives in
/// its own module: `model::jitter`, ...). All default to XXL-JOB's behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedulePolicy {
    /// Most milliseconds a scheduled fire is held back (`model::jitter`); 0 = none.
    pub jitter_max_ms: i64,
    /// How old a missed occurrence may be and still run when the scan finds it
    /// (`model::catch_up`); 0 = off, the misfire strategy decides.
    pub catch_up_window_ms: i64,
    /// Which missed occurrences inside the window run: the latest, or all.
    pub catch_up_mode: CatchUpMode,
    /// What the cron does with local times its zone skips or repeats (`model::dst`).
    pub dst: DstPolicy,
    /// What a scheduled fire does while an earlier run of the job is still going
    /// (`model::overlap`); ALLOW_ALL sends it anyway, as before.
    pub overlap_policy: OverlapPolicy,
}

/// A job as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: JobId,
    pub group_id: GroupId,
    pub name: String,
    pub author: String,
    pub alarm_email: String,
    /// Alarm on every failed attempt instead of only the final one.
    pub alarm_on_every_failure: bool,
    pub schedule_type: ScheduleType,
    pub schedule_conf: String,
    /// IANA zone name; empty = the admin's default zone.
    pub time_zone: String,
    pub misfire_strategy: MisfireStrategy,
    pub route_strategy: RouteStrategy,
    pub handler: String,
    pub params: String,
    pub block_strategy: BlockStrategy,
    pub timeout_ms: i64,
    pub fail_retry_count: i32,
    pub retry_backoff: RetryBackoff,
    pub glue_type: GlueType,
    pub glue_source: String,
    pub glue_remark: String,
    pub glue_updated_ms: i64,
    pub child_job_ids: Vec<JobId>,
    pub policy: SchedulePolicy,
    /// The calendar (`model::calendar`) the job's occurrences are checked against; empty =
    /// none, every occurrence runs.
    pub calendar: String,
    /// Skip the occurrences inside the calendar, or run only those.
    pub calendar_mode: CalendarMode,
    pub status: JobStatus,
    /// Last scheduled fire time (ms), 0 if none.
    pub trigger_last_ms: i64,
    /// Next scheduled fire time (ms), 0 when stopped.
    pub trigger_next_ms: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl Job {
    /// A new, stopped job with the defaults the console offers: a BEAN handler run every minute
    /// by cron, XXL-JOB's strategies, no retries, no children. The id is 0 until the store
    /// assigns one. Callers (the demo, every test) spread it and set what they care about
    /// (`Job { handler, ..Job::new(group, "name") }`), so a new field is defaulted here once.
    pub fn new(group_id: GroupId, name: &str) -> Job {
        Job {
            id: JobId(0),
            group_id,
            name: name.to_string(),
            author: String::new(),
            alarm_email: String::new(),
            alarm_on_every_failure: false,
            schedule_type: ScheduleType::Cron,
            schedule_conf: "0 * * * * ?".to_string(),
            time_zone: String::new(),
            misfire_strategy: MisfireStrategy::DoNothing,
            route_strategy: RouteStrategy::First,
            handler: String::new(),
            params: String::new(),
            block_strategy: BlockStrategy::SerialExecution,
            timeout_ms: 0,
            fail_retry_count: 0,
            retry_backoff: RetryBackoff::default(),
            glue_type: GlueType::Bean,
            glue_source: String::new(),
            glue_remark: String::new(),
            glue_updated_ms: 0,
            child_job_ids: Vec::new(),
            policy: SchedulePolicy::default(),
            calendar: String::new(),
            calendar_mode: CalendarMode::Skip,
            status: JobStatus::Stopped,
            trigger_last_ms: 0,
            trigger_next_ms: 0,
            created_ms: 0,
            updated_ms: 0,
        }
    }

    /// Whether the schedule fields differ (a running job then gets a fresh next fire time).
    pub fn schedule_differs(&self, other: &Job) -> bool {
        self.schedule_type != other.schedule_type
            || self.schedule_conf != other.schedule_conf
            || self.time_zone != other.time_zone
            || self.policy.dst != other.policy.dst
    }

    /// Turns CRLF and lone CR into LF in the params and the script (see [`super::line_ends`]).
    /// Every way a job comes in calls this before validating it.
    pub fn normalize_line_ends(&mut self) {
        super::line_ends::make_lf(&mut self.params);
        super::line_ends::make_lf(&mut self.glue_source);
    }
}
