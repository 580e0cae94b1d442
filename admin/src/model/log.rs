//! One run attempt (a log row): what was scheduled, where it went, how it ended.

use super::{GroupId, JobId, LogId, RunStatus, TriggerType};

/// What the trigger message of a run sent ahead says (send-ahead: it left before its instant,
/// its executor holds it until then). The row is how any admin, not only the one that sent it,
/// finds the runs an executor may still hold, to cancel them when their job changes.
pub const SENT_AHEAD_NOTE: &str = "sent ahead: held there until its instant";

/// A run as stored in `xjob_log`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLog {
    pub id: LogId,
    pub job_id: JobId,
    pub group_id: GroupId,
    /// `{job_id}:{scheduled_at_ms}:{shard}:{attempt}` for scheduled fires; None for manual ones.
    pub fire_key: Option<String>,
    pub status: RunStatus,
    pub trigger_type: TriggerType,
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
    pub owner_node: String,
    pub epoch: i64,
    /// When a PENDING run may be dispatched (a retry's backoff); 0 = at once.
    pub dispatch_at_ms: i64,
    /// Where its alarm went, one `channel: outcome` per line; empty when none was due.
    pub alarm_delivery: String,
}

/// A run to insert: the scheduler's durable fire, a manual trigger, a skipped occurrence.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    pub job_id: JobId,
    pub group_id: GroupId,
    pub fire_key: Option<String>,
    pub status: RunStatus,
    pub trigger_type: TriggerType,
    pub scheduled_at_ms: i64,
    pub handler: String,
    pub params: String,
    pub shard_index: i32,
    pub shard_total: i32,
    pub attempt: i32,
    /// Set for rows that are final at insert time (SKIPPED): the reason.
    pub trigger_msg: String,
    pub owner_node: String,
    pub epoch: i64,
    /// When the run may be dispatched (a retry's backoff); 0 = at once.
    pub dispatch_at_ms: i64,
    /// What its trace continues from until it is dispatched (`Fire::trace_from`); usually empty.
    pub trace_id: String,
}

impl NewRun {
    /// The scheduler's key for a fire: unique per job, scheduled instant, shard and attempt.
    pub fn fire_key(job_id: JobId, scheduled_at_ms: i64, shard_index: i32, attempt: i32) -> String {
        format!("{job_id}:{scheduled_at_ms}:{shard_index}:{attempt}")
    }
}

/// Filters of `ListLogs`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogFilter {
    pub group_id: Option<GroupId>,
    /// Only runs of these groups (a caller's grants); `None` = every group.
    pub group_ids: Option<Vec<GroupId>>,
    pub job_id: Option<JobId>,
    pub status: Option<RunStatus>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    /// `None` = newest first.
    pub order: Option<super::ListOrder>,
    pub offset: i64,
    pub limit: i64,
}
