//! Domain types of the admin: jobs, groups, runs (log rows), fires and executors, and the pure
//! rules about them (validation, cron, time zones). No I/O here; the store maps rows to these
//! types and the API maps protobuf messages to them (`api/convert.rs`).

pub mod alarm_status;
pub mod backfill;
pub mod calendar;
pub mod calendar_mode;
pub mod catch_up;
pub mod clock;
pub mod cron;
pub mod dst;
pub mod enums;
pub mod executor;
pub mod fire;
pub mod glue;
pub mod group;
pub mod ids;
pub mod jitter;
pub mod job;
pub mod line_ends;
pub mod log;
pub mod misfire;
pub mod next_fire;
pub mod node;
pub mod order;
pub mod overlap;
pub mod partition;
pub mod user;
pub mod validate;
pub mod workflow;
pub mod workflow_reopen;
pub mod workflow_run;
pub mod workflow_schedule;
pub mod zone;

pub use alarm_status::AlarmStatus;
pub use backfill::{Backfill, BackfillProgress};
pub use calendar::{Calendar, CalendarBook};
pub use calendar_mode::CalendarMode;
pub use catch_up::CatchUpMode;
pub use clock::{Clock, ManualClock, SharedClock, SystemClock, system_clock};
pub use dst::{DstGapPolicy, DstOverlapPolicy, DstPolicy};
pub use enums::{
    AddressType, BackfillState, BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, RunStatus,
    ScheduleType, TriggerType,
};
pub use executor::{ExecutorInfo, ExecutorProtocol, sorted_log_ids};
pub use fire::{Fire, Shard, UnwrittenFire};
pub use glue::{GlueEdit, GlueVersion};
pub use group::Group;
pub use ids::{GroupId, JobId, LogId};
pub use job::{Job, JobStatus, RetryBackoff, SchedulePolicy};
pub use log::{LogFilter, NewRun, RunLog, SENT_AHEAD_NOTE};
pub use misfire::{LateRun, skipped_as_misfire};
pub use node::NodeIdentity;
pub use order::{JOB_SORT_KEYS, LOG_SORT_KEYS, ListOrder};
pub use overlap::OverlapPolicy;
pub use user::{ApiToken, AuditEntry, ConsoleSession, Role, User};
pub use workflow::{
    EdgeCondition, FanIn, Workflow, WorkflowEdge, WorkflowId, WorkflowNode, validate_workflow,
};
pub use zone::{job_time_zone, parse_time_zone};

/// Current wall-clock time in epoch milliseconds (the admin clock every stored time uses).
/// Loops that decide by time take a [`Clock`] instead.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
