//! The follow-up loop: every `followup_interval`, on every admin, finished runs are claimed and
//! followed up once (retry, alarm, child jobs, FIX_DELAY next fire), then the delayed runs that
//! became due (retries after their backoff, child runs) are dispatched.
//!
//! ```text
//! adopt unfinished claims ─┐
//! claim a batch (CAS) ─────┴─▶ policy::decide ─▶ alarm? reserve a queue slot
//!                               ─▶ store.write_followup (one txn) ─▶ alarm into the queue
//! due delayed runs of this node ─▶ Trigger::dispatch(Fires::Stored)
//! ```
//! The alarm itself is delivered by the alarm queue's own task (`alarm_queue`): however long an
//! SMTP server or webhook takes, this loop goes on.
//! A claim is `AlarmStatus::NotFollowedUp` → `Claimed` with this node/epoch as owner, so another admin never
//! follows up the same run; a claim left by a dead admin is adopted once its lease lapses.
//! The writes are fenced by the claim: an admin that stalled past its lease, whose claims were
//! adopted meanwhile, writes nothing for them when it resumes (logged, then skipped).
//! An alarm is queued only once its follow-up is written, and at most once per written follow-up.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::alarm_queue::{AlarmQueue, Reservation};
use super::policy::{self, Children, Decision};
use super::workflow_hook;
use crate::context::AdminContext;
use crate::health::Loop;
use crate::model::{AlarmStatus, Fire, Job, JobId, LogId, NewRun, RunLog};
use crate::store::{FollowupWrite, StoreError};
use crate::trigger::Fires;

/// Runs claimed per batch (a round claims batches until one comes back short).
const BATCH: i64 = 500;
/// Most batches per round, so a backlog cannot starve the dispatch of due retries.
const MAX_BATCHES_PER_ROUND: usize = 20;

/// Runs follow-up rounds until cancelled.
pub async fn run_followup(ctx: Arc<AdminContext>, alarms: AlarmQueue, cancel: CancellationToken) {
    let followup = Followup {
        ctx,
        alarms,
        uncertain_claims: std::sync::Mutex::new(Vec::new()),
        oldest_handled_ms: std::sync::atomic::AtomicI64::new(i64::MAX),
        last_readvance_ms: std::sync::atomic::AtomicI64::new(0),
    };
    let interval = followup.ctx.config.followup_interval;
    loop {
        match followup.round().await {
            Ok(_) => followup.ctx.health.succeeded(Loop::Followup),
            Err(error) => {
                followup
                    .ctx
                    .health
                    .failed(Loop::Followup, &crate::health::with_causes(&error));
                tracing::warn!(%error, "follow-up round failed; retrying next round");
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
            // A workflow run was started: advance the runs in the next round, not 5 s later.
            _ = followup.ctx.workflow_wake.notified() => {
                followup.last_readvance_ms.store(0, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

struct Followup {
    ctx: Arc<AdminContext>,
    alarms: AlarmQueue,
    /// Due runs whose claim failed: it may have gone through all the same (the answer was
    /// lost), leaving them RUNNING and unsent, where `due_delayed_runs` no longer finds them.
    /// The next round puts those back to PENDING first.
    /// With the trigger time each claim wrote (`Store::unclaim_unsent_runs`).
    uncertain_claims: std::sync::Mutex<Vec<(i64, Vec<LogId>)>>,
    /// When the earliest-finished run this round handled had finished (`i64::MAX`: none), for
    /// the lag metric.
    oldest_handled_ms: std::sync::atomic::AtomicI64,
    /// When this admin last advanced every RUNNING workflow run (`readvance_workflows`).
    last_readvance_ms: std::sync::atomic::AtomicI64,
}

impl Followup {
    async fn round(&self) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering;
        self.oldest_handled_ms.store(i64::MAX, Ordering::Relaxed);
        let handled = self.handle_finished().await;
        let oldest = self.oldest_handled_ms.load(Ordering::Relaxed);
        let lag_ms = if oldest == i64::MAX {
            0
        } else {
            self.ctx.clock.now_ms() - oldest
        };
        crate::metrics::set_followup_lag(lag_ms);
        handled?;
        self.readvance_workflows().await?;
        self.dispatch_due().await
    }

    /// Follows up the runs finished since the last round (and those left by dead admins).
    async fn handle_finished(&self) -> Result<(), StoreError> {
        let node = &self.ctx.node;
        // Leases are judged by the database's clock (`Store::database_now_ms`).
        let lease_now = self.ctx.store.database_now_ms().await?;
        let adopted = self
            .ctx
            .store
            .adopt_stale_followups(node, lease_now)
            .await?;
        self.follow_up_all(adopted).await?;
        for _ in 0..MAX_BATCHES_PER_ROUND {
            let claimed = self.ctx.store.claim_followups(node, BATCH).await?;
            let full_batch = claimed.len() as i64 == BATCH;
            self.follow_up_all(claimed).await?;
            if !full_batch {
                break;
            }
        }
        Ok(())
    }

    async fn follow_up_all(&self, runs: Vec<RunLog>) -> Result<(), StoreError> {
        if runs.is_empty() {
            return Ok(());
        }
        // A run's end: its result, or its dispatch for one that never reached an executor.
        let oldest = runs
            .iter()
            .map(|run| run.handle_time_ms.max(run.trigger_time_ms))
            .filter(|finished_ms| *finished_ms > 0)
            .min();
        if let Some(oldest) = oldest {
            self.oldest_handled_ms
                .fetch_min(oldest, std::sync::atomic::Ordering::Relaxed);
        }
        let job_ids: Vec<JobId> = runs.iter().map(|run| run.job_id).collect();
        let jobs: HashMap<JobId, Arc<Job>> = self.ctx.store.get_jobs(&job_ids).await?;
        // Before the claims close: a crash in between leaves the claim to be adopted and this
        // redone, which writes nothing twice.
        workflow_hook::end_nodes(&self.ctx, &runs, &jobs).await?;
        // Most runs (a success without children) need nothing but their claim closed: one
        // statement for all of them instead of a transaction each.
        let mut nothing_to_do = Vec::new();
        for run in &runs {
            let job = jobs.get(&run.job_id).map(Arc::as_ref);
            let decision = policy::decide(run, job, self.ctx.clock.now_ms(), &self.ctx.node);
            if decision == Decision::nothing() {
                nothing_to_do.push(run.id);
                continue;
            }
            // A failed write leaves the claim in place; the next round adopts and redoes it.
            // Its log lines carry the run's trace id.
            let span = crate::telemetry::run_span(run.id.0, run.job_id.0, &run.trace_id);
            self.follow_up(run, job, decision).instrument(span).await?;
        }
        if nothing_to_do.is_empty() {
            return Ok(());
        }
        let node = &self.ctx.node;
        let finished = self
            .ctx
            .store
            .finish_followups(node, &nothing_to_do, AlarmStatus::NothingToAlarm)
            .await?;
        let lost = (nothing_to_do.len() as u64).saturating_sub(finished);
        if lost > 0 {
            tracing::warn!(
                lost,
                of = nothing_to_do.len(),
                "follow-up claims lost to another admin (this one stalled past its lease?); \
                 they are left to it"
            );
        }
        Ok(())
    }

    async fn follow_up(
        &self,
        run: &RunLog,
        job: Option<&Job>,
        decision: Decision,
    ) -> Result<(), StoreError> {
        let now = self.ctx.clock.now_ms();
        let alarm = self.reserve_alarm(&decision, run, job);
        let (alarm_status, alarm_delivery) = alarm
            .as_ref()
            .map(Reservation::recorded)
            .unwrap_or((AlarmStatus::NothingToAlarm, String::new()));
        let (children, children_need_all_shards) = self.child_runs(run, &decision, now).await?;
        let write = FollowupWrite {
            log_id: run.id,
            claim_node: self.ctx.node.node_id.clone(),
            claim_epoch: self.ctx.node.epoch,
            alarm_status,
            alarm_delivery,
            retry: decision.retry,
            children,
            children_need_all_shards,
            fix_delay_release: decision.fix_delay_release,
        };
        let written = self.ctx.store.write_followup(&write).await?;
        if written.fenced_off {
            // Adopted by another admin while this one stalled; its follow-up stands.
            tracing::warn!(
                log_id = run.id.0,
                job_id = run.job_id.0,
                "follow-up claim lost to another admin (this one stalled past its lease?); \
                 nothing written"
            );
            return Ok(());
        }
        if let (Some(alarm), Some(job)) = (alarm, job) {
            alarm.send(job.clone(), run.clone());
        }
        if let (Some(retry_id), Some(retry)) = (written.retry_id, &write.retry) {
            crate::metrics::retries().inc();
            tracing::info!(log_id = run.id.0, job_id = run.job_id.0, status = %run.status,
                retry_log_id = retry_id.0, attempt = retry.attempt,
                delay_ms = retry.dispatch_at_ms - now, "failed run will be retried");
        }
        if !written.child_ids.is_empty() {
            tracing::info!(log_id = run.id.0, job_id = run.job_id.0, child_log_ids = ?written.child_ids,
                "child jobs started");
        }
        if written.released
            && let Some(release) = &write.fix_delay_release
        {
            tracing::debug!(
                job_id = run.job_id.0,
                next_fire_ms = release.next_fire_ms,
                "fix delay job scheduled after its run finished"
            );
            // The scan may be idle for a whole pre-read period; the next fire may be sooner.
            self.ctx.schedule_wake.notify_one();
        }
        Ok(())
    }

    /// A place in the alarm queue when an alarm is due (or why the alarm is dropped).
    fn reserve_alarm(
        &self,
        decision: &Decision,
        run: &RunLog,
        job: Option<&Job>,
    ) -> Option<Reservation<'_>> {
        (decision.alarm && job.is_some()).then(|| self.alarms.reserve(run))
    }

    /// Builds the runs of the child jobs to start; a child deleted meanwhile is skipped.
    async fn child_runs(
        &self,
        parent: &RunLog,
        decision: &Decision,
        now: i64,
    ) -> Result<(Vec<NewRun>, bool), StoreError> {
        let (child_ids, need_all_shards) = match &decision.children {
            Children::None => return Ok((Vec::new(), false)),
            Children::Now(ids) => (ids, false),
            Children::WhenAllShardsSucceeded(ids) => (ids, true),
        };
        let children = self.ctx.store.get_jobs(child_ids).await?;
        for missing in child_ids.iter().filter(|id| !children.contains_key(id)) {
            tracing::warn!(child_job_id = %missing, "child job not found; not started");
        }
        // Each child once, by id (the map has no order of its own).
        let mut children: Vec<&Arc<Job>> = children.values().collect();
        children.sort_by_key(|child| child.id);
        let runs = children
            .into_iter()
            .map(|child| NewRun {
                // The child's trace links to its parent run's.
                trace_id: parent.trace_id.clone(),
                ..policy::child_run(child, now, &self.ctx.node)
            })
            .collect();
        Ok((runs, need_all_shards))
    }

    /// Every `workflow_hook::READVANCE_EVERY_MS`, advances the RUNNING workflow runs, for
    /// what a crash between a run's start and its first advance left undone.
    async fn readvance_workflows(&self) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering;
        let now = self.ctx.clock.now_ms();
        let last = self.last_readvance_ms.load(Ordering::Relaxed);
        if now - last < workflow_hook::READVANCE_EVERY_MS {
            return Ok(());
        }
        self.last_readvance_ms.store(now, Ordering::Relaxed);
        workflow_hook::readvance(&self.ctx, now).await
    }

    /// Dispatches this node's delayed runs whose time has come (retries, child runs).
    async fn dispatch_due(&self) -> Result<(), StoreError> {
        let node = &self.ctx.node;
        self.release_uncertain_claims().await?;
        self.release_waiting().await?;
        let due = self
            .ctx
            .store
            .due_delayed_runs(node, self.ctx.clock.now_ms(), BATCH)
            .await?;
        if due.is_empty() {
            return Ok(());
        }
        let trigger_time_ms = self.ctx.clock.now_ms();
        let stored = Fires::Stored {
            log_ids: due.clone(),
            trigger_time_ms,
        };
        if let Err(error) = self.ctx.trigger.dispatch(stored).await {
            // The rows come back in the next round (put back to PENDING first if need be).
            tracing::warn!(%error, "dispatching due retries and child runs failed");
            self.uncertain().push((trigger_time_ms, due));
        }
        Ok(())
    }

    /// Sends the oldest WAITING run of each job whose earlier runs all ended (overlap policies
    /// BUFFER_ONE and BUFFER_ALL, `model::overlap`). Any admin releases them, so one that died
    /// leaves none behind; a released run this admin fails to send is a stranded run, taken
    /// over like any other.
    async fn release_waiting(&self) -> Result<(), StoreError> {
        let now = self.ctx.clock.now_ms();
        let claimed_at = self.ctx.trigger.lease_mark();
        let runs = self
            .ctx
            .store
            .release_waiting(&self.ctx.node, now, BATCH)
            .await?;
        if runs.is_empty() {
            return Ok(());
        }
        tracing::debug!(ids = ?runs.iter().map(|run| run.id.0).collect::<Vec<_>>(),
            "released waiting runs");
        let job_ids: Vec<JobId> = runs.iter().map(|run| run.job_id).collect();
        let jobs = self.ctx.store.get_jobs(&job_ids).await?;
        // A job deleted meanwhile took its runs with it.
        let fires: Vec<Fire> = runs
            .iter()
            .filter_map(|run| Some(Fire::from_run(run, Arc::clone(jobs.get(&run.job_id)?))))
            .collect();
        let released = Fires::Released {
            fires,
            trigger_time_ms: now,
            claimed_at,
        };
        if let Err(error) = self.ctx.trigger.dispatch(released).await {
            // Only at shutdown: the runs stay claimed and unsent, for whoever takes them over.
            tracing::warn!(%error, "sending released waiting runs failed");
        }
        Ok(())
    }

    /// Puts the unsent runs of failed claims back to PENDING (see `uncertain_claims`); they
    /// stay listed until that write succeeds.
    async fn release_uncertain_claims(&self) -> Result<(), StoreError> {
        let claims = std::mem::take(&mut *self.uncertain());
        let node = &self.ctx.node;
        for (index, (claim_time_ms, ids)) in claims.iter().enumerate() {
            let released = (self.ctx.store)
                .unclaim_unsent_runs(ids, node, &[*claim_time_ms])
                .await;
            if let Err(error) = released {
                self.uncertain().extend(claims[index..].iter().cloned());
                return Err(error);
            }
        }
        Ok(())
    }

    fn uncertain(&self) -> std::sync::MutexGuard<'_, Vec<(i64, Vec<LogId>)>> {
        // A Vec of ids stays consistent whatever panicked while it was locked.
        self.uncertain_claims
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
