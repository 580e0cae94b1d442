//! Domain types of the admin: jobs, groups, runs (log rows) and executors. No I/O here; the
//! store maps rows to these types and the API maps protobuf messages to them (`api/convert.rs`).

pub mod enums;
pub mod executor;
pub mod glue;
pub mod group;
pub mod job;
pub mod log;
pub mod validate;

pub use enums::{
    AddressType, BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, RunStatus, ScheduleType,
    TriggerType,
};
pub use executor::ExecutorInfo;
pub use glue::{GlueEdit, GlueVersion};
pub use group::Group;
pub use job::{Job, JobStatus, RetryBackoff};
pub use log::{LogFilter, NewRun, RunLog};

/// Current wall-clock time in epoch milliseconds (the admin clock every stored time uses).
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
