//! What a schedule round writes: below the store's entry points and the backends that write it.

use crate::model::{JobId, JobStatus, NewRun};

/// New scheduling state of one job, written by the schedule round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobScheduleUpdate {
    pub job_id: JobId,
    pub trigger_last_ms: i64,
    pub trigger_next_ms: i64,
    pub status: JobStatus,
}

/// What a schedule round decided: fires to record and next fire times to write.
#[derive(Debug, Clone, Default)]
pub struct RoundPlan {
    pub new_runs: Vec<NewRun>,
    pub job_updates: Vec<JobScheduleUpdate>,
}
