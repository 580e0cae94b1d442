//! A fire: one run of a job to be sent to an executor, from the moment it is planned (or
//! requested) to the `RunRequest` that carries it.
//!
//! ```text
//! Fire<()>  (planned by the scan, or asked for: manual, API, parent, retry)
//!    │ .row(node, …) ─▶ NewRun ─▶ store ─▶ log id
//!    ▼ .written(log id)
//! Fire      ─▶ ring (scheduled ones) ─▶ Trigger::dispatch ─▶ claim ─▶ route ─▶ RunRequest
//! ```
//! A fire read back from its row (adopted, retried, a broadcast's shard) is `Fire::from_run`;
//! it is the same value as the one planned, so the trigger has one path for all of them.

use std::sync::Arc;

use super::{GroupId, Job, JobId, LogId, NewRun, NodeIdentity, RunLog, RunStatus, TriggerType};

/// Which shard of a broadcast fire a run is (`0 of 1` for every other run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: i32,
    pub total: i32,
}

impl Shard {
    /// The one shard of a fire that is not broadcast (or not yet expanded).
    pub const ONLY: Shard = Shard { index: 0, total: 1 };
}

/// One fire of a job. `Id` is `()` until its row is written, then the row's [`LogId`].
#[derive(Debug, Clone, PartialEq)]
pub struct Fire<Id = LogId> {
    pub log_id: Id,
    /// The job as read when the fire was planned or claimed: its route, block strategy, timeout
    /// and glue go out with the run.
    pub job: Arc<Job>,
    /// The instant the fire is for; manual and parent runs are "scheduled" for the instant they
    /// were asked for, so handlers get a real time and a broadcast's shards share it.
    pub scheduled_at_ms: i64,
    pub trigger_type: TriggerType,
    pub shard: Shard,
    /// 0 for the first attempt, then one more per retry.
    pub attempt: i32,
    /// The handler and params the run was written with (a manual run may override the params).
    pub handler: String,
    pub params: String,
    /// Whether the row carries a fire key: fires of the schedule (and their shards and retries)
    /// are unique per job, instant, shard and attempt; manual and parent runs are not.
    pub keyed: bool,
    /// What the fire's trace continues from: a caller's W3C `traceparent` (a `TriggerJob`
    /// carrying one: the run joins that trace), or the trace id of the run it follows (a retry's
    /// failed attempt, a child job's parent run: the run's trace links to it). Kept in the
    /// row's `trace_id` until the run is dispatched, which writes its own trace id there.
    /// Empty when there is none or tracing is off.
    pub trace_from: String,
}

/// A fire whose row is not written yet.
pub type UnwrittenFire = Fire<()>;

impl Fire<()> {
    /// A fire of the job's schedule at `scheduled_at_ms` (first attempt, not broadcast yet).
    pub fn scheduled(job: Arc<Job>, scheduled_at_ms: i64, trigger_type: TriggerType) -> Fire<()> {
        Fire {
            log_id: (),
            handler: job.handler.clone(),
            params: job.params.clone(),
            job,
            scheduled_at_ms,
            trigger_type,
            shard: Shard::ONLY,
            attempt: 0,
            keyed: true,
            trace_from: String::new(),
        }
    }

    /// A run asked for at `now_ms` (manual, API, a parent's success), with the job's params
    /// unless `params` overrides them.
    pub fn requested(
        job: Arc<Job>,
        trigger_type: TriggerType,
        params: Option<String>,
        now_ms: i64,
    ) -> Fire<()> {
        Fire {
            log_id: (),
            handler: job.handler.clone(),
            params: params.unwrap_or_else(|| job.params.clone()),
            job,
            scheduled_at_ms: now_ms,
            trigger_type,
            shard: Shard::ONLY,
            attempt: 0,
            keyed: false,
            trace_from: String::new(),
        }
    }

    /// The fire once its row is written as `log_id`.
    pub fn written(self, log_id: LogId) -> Fire {
        Fire {
            log_id,
            job: self.job,
            scheduled_at_ms: self.scheduled_at_ms,
            trigger_type: self.trigger_type,
            shard: self.shard,
            attempt: self.attempt,
            handler: self.handler,
            params: self.params,
            keyed: self.keyed,
            trace_from: self.trace_from,
        }
    }
}

impl Fire {
    /// The run as its row reads once `node` claimed it at `trigger_time_ms`: RUNNING, not yet
    /// sent anywhere. A fire the scan wrote is claimed by id only, so this must stay exactly
    /// the row (the store's conformance suite checks it on every backend).
    pub fn claimed_run(&self, node: &NodeIdentity, trigger_time_ms: i64) -> RunLog {
        RunLog {
            id: self.log_id,
            job_id: self.job.id,
            group_id: self.job.group_id,
            fire_key: self.fire_key(),
            status: RunStatus::Running,
            trigger_type: self.trigger_type,
            scheduled_at_ms: self.scheduled_at_ms,
            trigger_time_ms,
            trigger_code: 0,
            trigger_msg: String::new(),
            handle_time_ms: 0,
            handle_code: 0,
            handle_msg: String::new(),
            executor_address: String::new(),
            handler: self.handler.clone(),
            params: self.params.clone(),
            shard_index: self.shard.index,
            shard_total: self.shard.total,
            attempt: self.attempt,
            trace_id: self.trace_from.clone(),
            owner_node: node.node_id.clone(),
            epoch: node.epoch,
            dispatch_at_ms: 0,
            alarm_delivery: String::new(),
        }
    }

    /// The fire a stored run stands for, with its job.
    pub fn from_run(run: &RunLog, job: Arc<Job>) -> Fire {
        Fire {
            log_id: run.id,
            job,
            scheduled_at_ms: run.scheduled_at_ms,
            trigger_type: run.trigger_type,
            shard: Shard {
                index: run.shard_index,
                total: run.shard_total,
            },
            attempt: run.attempt,
            handler: run.handler.clone(),
            params: run.params.clone(),
            keyed: run.fire_key.is_some(),
            trace_from: run.trace_id.clone(),
        }
    }
}

impl<Id> Fire<Id> {
    pub fn job_id(&self) -> JobId {
        self.job.id
    }

    pub fn group_id(&self) -> GroupId {
        self.job.group_id
    }

    /// The row's unique key (`{job}:{scheduled}:{shard}:{attempt}`), when it has one.
    pub fn fire_key(&self) -> Option<String> {
        self.keyed.then(|| {
            NewRun::fire_key(
                self.job.id,
                self.scheduled_at_ms,
                self.shard.index,
                self.attempt,
            )
        })
    }

    /// Whether this is a fresh fire of a whole job: the first attempt, not split into shards.
    pub fn is_fresh(&self) -> bool {
        self.shard == Shard::ONLY && self.attempt == 0
    }

    /// Whether the schedule made this fire (only those misfire, and a stopped job drops them).
    pub fn is_of_schedule(&self) -> bool {
        matches!(self.trigger_type, TriggerType::Cron | TriggerType::Misfire)
    }

    /// Whether this is a backfill's run (or a retry of one): it stands for a past or future
    /// occurrence but is sent as soon as it is claimed.
    pub fn is_backfill(&self) -> bool {
        self.trigger_type == TriggerType::Backfill
    }

    /// Shard `index` of `total` of this fire, as a fire of its own.
    pub fn shard_of(&self, index: i32, total: i32) -> Fire<()> {
        Fire {
            log_id: (),
            job: Arc::clone(&self.job),
            scheduled_at_ms: self.scheduled_at_ms,
            trigger_type: self.trigger_type,
            shard: Shard { index, total },
            attempt: self.attempt,
            handler: self.handler.clone(),
            params: self.params.clone(),
            keyed: self.keyed,
            trace_from: self.trace_from.clone(),
        }
    }

    /// The next attempt of this fire (a retry): same instant, shard, handler and params. A
    /// backfill's run stays BACKFILL (its `attempt` tells the retry), so the retry is sent
    /// after its backoff, not at the future time its occurrence may stand for. A workflow
    /// node's run stays WORKFLOW: its success, too, must be followed up to end the node.
    pub fn next_attempt(&self) -> Fire<()> {
        Fire {
            trigger_type: match self.trigger_type {
                TriggerType::Backfill | TriggerType::Workflow => self.trigger_type,
                _ => TriggerType::Retry,
            },
            attempt: self.attempt + 1,
            ..self.shard_of(self.shard.index, self.shard.total)
        }
    }

    /// The row that records this fire, owned by `node`.
    pub fn row(&self, node: &NodeIdentity, status: RunStatus, trigger_msg: &str) -> NewRun {
        NewRun {
            job_id: self.job.id,
            group_id: self.job.group_id,
            fire_key: self.fire_key(),
            status,
            trigger_type: self.trigger_type,
            scheduled_at_ms: self.scheduled_at_ms,
            handler: self.handler.clone(),
            params: self.params.clone(),
            shard_index: self.shard.index,
            shard_total: self.shard.total,
            attempt: self.attempt,
            trigger_msg: trigger_msg.to_string(),
            owner_node: node.node_id.clone(),
            epoch: node.epoch,
            dispatch_at_ms: 0,
            trace_id: self.trace_from.clone(),
        }
    }
}
