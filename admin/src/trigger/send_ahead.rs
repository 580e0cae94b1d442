//! Send ahead (`send_ahead_ms` > 0): a scheduled run leaves up to the lead before its time,
//! carrying its start in the executor's clock; the executor holds it and starts it on its own
//! timer, so a second's burst crosses claim, dispatch and the executor's queue before the
//! second instead of during it.
//!
//! ```text
//! ring hands a second over (claim lead + send_ahead_ms) early ─▶ claim
//!   ─▶ every address of the target can hold runs, offset known and stable? (`registry::clock_offset`)
//!        yes ─▶ send at scheduled − send_ahead_ms with start_at_ms = scheduled + offset
//!        no  ─▶ send at the scheduled instant, start_at_ms = 0 (as with the lead off)
//! stop / edit / delete of the job, through any admin ─▶ cancel_held: the runs this admin sent
//!   ahead (in memory) and those any admin recorded sent ahead (the rows) ─▶ KillRequest{held_only}
//!   to each executor holding one ─▶ the run never starts, its row says KILLED "cancelled before
//!   start"
//! ```
//! A held run is in the executor's heartbeats like a queued one, so the lost-run monitor
//! treats it as alive; if the executor dies the heartbeats stop and the monitor judges it as it
//! judges any run of a dead executor (never sent twice).

use std::collections::HashMap;

use super::sent_ahead::{HeldRun, RecordedHeld};
use super::{Claimed, Target, Trigger};
use crate::model::{Fire, GroupId, JobId, OverlapPolicy, RouteStrategy, RunLog};

/// How long after its instant (on this admin's clock) a run recorded sent ahead is still
/// cancelled: the admin that sent it judged the instant by its own clock, which may run a
/// little behind this one. A cancel of a run that has started changes nothing: the executor
/// drops only runs it still holds.
const CLOCK_SLACK_MS: i64 = 1_000;

/// When a routed run is to start on its executor.
pub(super) enum StartAt {
    /// At once, as with the lead off (`start_at_ms` 0).
    Now,
    /// Held on the executor until this instant of its clock.
    Held { start_at_ms: i64 },
    /// The executor's offset became unknown between `wait_unless_ahead` and routing (a narrow
    /// race): nothing is sent; the run gives its pool slot back, waits for its instant (ending
    /// at shutdown, the run staying claimed and unsent), and is routed again then, to start at
    /// once (`dispatch_in_pool`).
    WaitHere { instant_ms: i64 },
}

impl Trigger {
    /// When a claimed fire leaves this admin: `send_ahead_ms` before its instant if its target
    /// can hold it, else at its instant.
    pub(super) fn send_at_ms(&self, claimed: &Claimed, targets: &HashMap<GroupId, Target>) -> i64 {
        let fire = &claimed.fire;
        let ahead = self.send_ahead_ms > 0
            && targets
                .get(&fire.group_id())
                .is_some_and(|target| self.can_send_ahead(fire, target));
        if ahead {
            fire.scheduled_at_ms - self.send_ahead_ms
        } else {
            fire.scheduled_at_ms
        }
    }

    /// Whether wherever the route picks, the run can be held there: every address is a
    /// session of this admin that declared it can hold runs and whose clock offset is known
    /// and stable. BUSYOVER asks whether the job is idle now, which says nothing of its start;
    /// an overlap policy other than ALLOW_ALL judges the job's earlier runs when the fire
    /// leaves, and a lead early it would skip or park a fire for a run that ends before the
    /// fire's instant.
    pub(super) fn can_send_ahead(&self, fire: &Fire, target: &Target) -> bool {
        fire.job.route_strategy != RouteStrategy::Busyover
            && fire.job.policy.overlap_policy == OverlapPolicy::AllowAll
            && !target.addresses.is_empty()
            && target
                .addresses
                .iter()
                .all(|address| self.registry.clocks.offset_ms(address).is_some())
    }

    /// A run planned to go ahead whose target can no longer hold it (an executor left, or its
    /// clock offset became unknown, since the claim) waits here for its instant, to be sent
    /// then as with the lead off. Returns at once in every other case. False at shutdown: the
    /// run stays claimed and unsent, for whoever takes this node's runs over.
    pub(super) async fn wait_unless_ahead(&self, fire: &Fire, target: &Target) -> bool {
        let wait_ms = fire.scheduled_at_ms - self.now_ms();
        if self.send_ahead_ms == 0
            || wait_ms <= 0
            || fire.is_backfill()
            || self.can_send_ahead(fire, target)
        {
            return true;
        }
        self.wait_for_instant(fire.scheduled_at_ms).await
    }

    /// Waits, holding no pool slot, until `instant_ms` (this admin's clock). False when the
    /// admin began to stop first: the caller leaves its run claimed and unsent, as every
    /// dispatch waiting at shutdown does, for whoever takes this node's runs over.
    pub(super) async fn wait_for_instant(&self, instant_ms: i64) -> bool {
        loop {
            let wait_ms = instant_ms - self.now_ms();
            if wait_ms <= 0 {
                return true;
            }
            let wait = std::time::Duration::from_millis(u64::try_from(wait_ms).unwrap_or(0));
            tokio::select! {
                _ = self.tasks.stopping().cancelled() => return false,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// When the run routed to `address` starts. Only a run sent before its instant carries a
    /// start; with the lead off every run starts at once, as before.
    pub(super) fn start_at(&self, fire: &Fire, address: &str) -> StartAt {
        let instant_ms = fire.scheduled_at_ms;
        if self.send_ahead_ms == 0 || fire.is_backfill() || instant_ms <= self.now_ms() {
            return StartAt::Now;
        }
        match self.registry.clocks.offset_ms(address) {
            Some(offset_ms) => StartAt::Held {
                start_at_ms: instant_ms + offset_ms,
            },
            None => StartAt::WaitHere { instant_ms },
        }
    }

    /// Remembers a run about to be sent ahead to `address`.
    pub(super) fn remember_held(&self, fire: &Fire, address: &str, token: &str) {
        let run = HeldRun {
            log_id: fire.log_id,
            address: address.to_string(),
            token: token.to_string(),
            start_ms: fire.scheduled_at_ms,
        };
        self.sent_ahead.remember(fire.job_id(), run, self.now_ms());
    }

    /// Forgets a run sent ahead that its executor did not take.
    pub(super) fn forget_held(&self, fire: &Fire) {
        self.sent_ahead.forget(fire.job_id(), fire.log_id);
    }

    /// The job's runs the database records as sent ahead (by any admin) and maybe still held
    /// on their executors: RUNNING, accepted by an executor, instant still to come. Read
    /// before a delete, which takes the rows with the job. A database error is logged and
    /// reads as none: the runs this admin sent are still cancelled from its own list.
    pub async fn recorded_held(&self, job_id: JobId) -> RecordedHeld {
        let after_ms = self.now_ms() - CLOCK_SLACK_MS;
        let runs = match self.store.held_runs(job_id, after_ms).await {
            Ok(runs) => runs,
            Err(error) => {
                tracing::warn!(%error, %job_id, "reading the runs sent ahead of a changed job \
                    failed; only those this admin sent are cancelled");
                return RecordedHeld::default();
            }
        };
        if runs.is_empty() {
            return RecordedHeld::default();
        }
        let group_ids: Vec<GroupId> = runs.iter().map(|run| run.group_id).collect();
        let groups = match self.store.get_groups(&group_ids).await {
            Ok(groups) => groups,
            Err(error) => {
                tracing::warn!(%error, %job_id, "reading the groups of runs sent ahead failed; \
                    cancelling them with the cluster's executor token");
                HashMap::new()
            }
        };
        let held = |run: RunLog| HeldRun {
            log_id: run.id,
            token: groups
                .get(&run.group_id)
                .map(|group| group.access_token.clone())
                .unwrap_or_default(),
            address: run.executor_address,
            start_ms: run.scheduled_at_ms,
        };
        RecordedHeld {
            runs: runs.into_iter().map(held).collect(),
        }
    }

    /// The job was stopped, edited or deleted: its runs sent ahead that have not started are
    /// cancelled on their executors (each reports KILLED, "cancelled before start"), whichever
    /// admin sent them (see [`Trigger::cancel_held_recorded`]).
    pub async fn cancel_held(&self, job_id: JobId) -> usize {
        let recorded = self.recorded_held(job_id).await;
        self.cancel_held_recorded(job_id, recorded).await
    }

    /// Cancels the job's runs sent ahead: those this admin remembers sending (its own list,
    /// which also names a run whose dispatch is not recorded yet) and `recorded`, the rows of
    /// runs any admin sent (`recorded_held`), each once. The cancel reaches an executor the
    /// way `KillRun` does, by the address on the row, so it works whichever admin sent the run
    /// and whether that admin still lives. Returns how many executors confirmed a cancel. An
    /// executor that cannot be reached is logged: its run then starts as sent (the lead is
    /// short, and the change was made after the run left).
    pub async fn cancel_held_recorded(&self, job_id: JobId, recorded: RecordedHeld) -> usize {
        let mut runs = self.sent_ahead.take(job_id, self.now_ms());
        for run in recorded.runs {
            if !runs.iter().any(|held| held.log_id == run.log_id) {
                runs.push(run);
            }
        }
        let mut cancelled = 0;
        for held in runs {
            let answer = self
                .executors
                .cancel_held(&held.address, &held.token, job_id, held.log_id)
                .await;
            match answer {
                Ok(true) => cancelled += 1,
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, %job_id, log_id = %held.log_id,
                    address = %held.address, "cancelling a run held on its executor failed"),
            }
        }
        cancelled
    }
}
