//! WHEN jobs fire: XXL-JOB's scan → ring → trigger loop, with durable fires.
//!
//! ```text
//! scan (each second, under the schedule lock)
//!   read jobs due before now + read-ahead ─▶ plan::plan_job (through now + pre_read)
//!     ─▶ Fires + PENDING rows + next times
//!   commit ─▶ each Fire gets its row's id ─▶ due now: Trigger::dispatch   later: Ring::push
//! ring (200 ms before each second) ─▶ Ring::drain_due ─▶ Trigger::dispatch(Fires::Written)
//! recovery (each node-lease third) ─▶ renew lease; adopt PENDING rows of dead nodes / old epochs
//! liveness (every 150 ms) ─▶ a peer's liveness lock seen held is free: adopt its PENDING rows
//!   ─▶ Fire::from_run(row, job) ─▶ the ring, like the scan's own
//!   (delayed ones, retries and child runs, are then dispatched by the follow-up when due)
//! ```
//! Fires are written before they are dispatched, so a crash loses none: the restarted admin (or
//! another one, once the lease lapses) adopts them. Claims are fenced by owner node and epoch,
//! and `fire_key` is unique, so none runs twice.

mod calendar_cache;
#[cfg(test)]
mod held_copies;
mod in_hand;
pub mod liveness;
pub mod plan;
pub mod ring;
mod scan;
#[cfg(test)]
mod written_fires;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::health::{Health, Loop};
use crate::lifecycle::Tasks;
use crate::model::{Fire, Job, JobId, LogId, MisfireStrategy, NodeIdentity, RunLog, SharedClock};
use crate::store::Store;
use crate::store::writer_gate::urgent_write;
use crate::trigger::{Fires, Trigger, claim_time_ms};
pub use ring::{Ring, Timed};
pub use scan::run_scan;

/// The scheduler's shared state: the ring and what the loops need.
pub struct Scheduler {
    store: Store,
    trigger: Arc<Trigger>,
    ring: Mutex<Ring>,
    /// Fires in the ring or in a claim: one copy of a fire per admin (`in_hand`).
    in_hand: in_hand::InHand,
    config: Arc<Config>,
    node: NodeIdentity,
    wake: Arc<Notify>,
    clock: SharedClock,
    /// The dispatch stage: claim tasks are spawned there; shutdown drains them, and stops
    /// their retries.
    tasks: Tasks,
    health: Arc<Health>,
    /// The calendars the scan decides fires with, compiled.
    calendars: calendar_cache::CalendarCache,
}

/// What the scheduler is built from (besides the config).
pub struct SchedulerParts {
    pub store: Store,
    pub trigger: Arc<Trigger>,
    pub node: NodeIdentity,
    /// Wakes the scan early (a job was started or its schedule changed).
    pub wake: Arc<Notify>,
    pub clock: SharedClock,
    /// The dispatch stage (claims are dispatches under way).
    pub tasks: Tasks,
    /// Where the scan, the claims and the lease renewal report their rounds.
    pub health: Arc<Health>,
    /// Set by the API when a calendar changed: the scan reads the calendars again.
    pub calendars_changed: Arc<std::sync::atomic::AtomicBool>,
}

impl Scheduler {
    pub fn new(parts: SchedulerParts, config: Arc<Config>) -> Scheduler {
        Scheduler {
            store: parts.store,
            trigger: parts.trigger,
            ring: Mutex::new(Ring::default()),
            in_hand: in_hand::InHand::default(),
            config,
            node: parts.node,
            wake: parts.wake,
            clock: parts.clock,
            tasks: parts.tasks,
            health: parts.health,
            calendars: calendar_cache::CalendarCache::new(parts.calendars_changed),
        }
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        // Ring operations are single Vec moves; a poisoned lock holds consistent data.
        self.ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Puts fires in the ring; those whose second already passed are dispatched now. A fire this
    /// admin already holds (it came back from a peer that took it over) is left to its copy.
    fn schedule_fires(self: &Arc<Self>, fires: Vec<Fire>) {
        let fires = self.in_hand.take(fires);
        let due_now = place_in_ring(&mut self.ring(), fires, self.clock.now_ms());
        self.dispatch(due_now);
    }

    /// Hands fires to the trigger in a tracked task, without blocking the caller's loop. A
    /// claim that fails (the database is unreachable) is retried until it answers.
    fn dispatch(self: &Arc<Self>, fires: Vec<Fire>) {
        if fires.is_empty() {
            return;
        }
        let this = Arc::clone(self);
        self.tasks.spawn(async move {
            let count = fires.len();
            let ids: Vec<i64> = fires.iter().map(|fire| fire.log_id.0).collect();
            // Kept for a retry should the claim fail (a clone of each fire costs about what
            // rebuilding its run from the plan did before).
            let trigger_time_ms = claim_time_ms(&fires, this.clock.now_ms());
            let written = Fires::Written {
                fires: fires.clone(),
                trigger_time_ms,
            };
            match this.trigger.dispatch(written).await {
                Ok(_) => this.health.succeeded(Loop::Claim),
                Err(error) => {
                    this.health.failed(Loop::Claim, &crate::health::with_causes(&error));
                    tracing::warn!(%error, fires = count, "claiming scheduled fires failed; retrying");
                    this.retry_unclaimed(fires, vec![trigger_time_ms]).await;
                }
            }
            // Claimed (or no longer this node's PENDING fires): a copy adopted back later can
            // only be of a fire PENDING again, which nothing of this admin holds any more.
            this.in_hand.release(&ids);
        });
    }

    /// Fires whose claim failed (the database was unreachable) stay PENDING and owned by this
    /// live node, so no other admin adopts them: retry until the database answers. Those too
    /// late by then follow their job's misfire strategy, like recovered fires (DO_NOTHING skips
    /// them); the claim's fence leaves out any that is no longer this node's PENDING fire.
    /// Only this loop may send these fires: while this node lives, no other admin and no
    /// monitor of its own takes a run it claimed (`monitor::lost`). At shutdown it stops: the
    /// fires stay this node's, PENDING or claimed and unsent, and whoever takes this node's
    /// runs over once it has stopped fires them (`monitor::stranded`, the recovery scan).
    /// `claim_times_ms`: the trigger times the failed claims wrote, or would have.
    async fn retry_unclaimed(self: &Arc<Self>, mut fires: Vec<Fire>, mut claim_times_ms: Vec<i64>) {
        let threshold = self.config.misfire_threshold.as_millis() as i64;
        let mut delay = Duration::from_millis(200);
        while !fires.is_empty() {
            tokio::select! {
                _ = self.tasks.stopping().cancelled() => {
                    tracing::warn!(fires = fires.len(),
                        "shutting down with fires whose claim failed; they are taken over");
                    return;
                }
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(2));
            // The failed claim may have committed all the same (the connection dropped as it
            // answered), or some of its chunks may have: such rows are RUNNING and ours but
            // were never sent, and nothing else would ever send them. Nothing else in this process
            // holds these fires (`in_hand`: one copy of a fire per admin), so they go back to
            // PENDING and are claimed (or skipped) below. Their rows alone, by the trigger time
            // the failed claims wrote: meanwhile another admin may have taken such a fire over
            // and parked it WAITING, and this admin released it and sent it (its address not
            // recorded yet); put back to PENDING, it would be claimed and sent a second time.
            let ids: Vec<LogId> = fires.iter().map(|fire| fire.log_id).collect();
            let unclaimed = self
                .store
                .unclaim_unsent_runs(&ids, &self.node, &claim_times_ms)
                .await;
            if let Err(error) = unclaimed {
                self.health
                    .failed(Loop::Claim, &crate::health::with_causes(&error));
                tracing::debug!(%error, "database still unavailable for unclaimed fires");
                continue;
            }
            let now = self.clock.now_ms();
            let (late, due): (Vec<Fire>, Vec<Fire>) = fires
                .into_iter()
                .partition(|fire| skipped_after_failed_claim(fire, now, threshold));
            let late_ids: Vec<LogId> = late.iter().map(|fire| fire.log_id).collect();
            let reason =
                "misfire: the database was unreachable until too late; DO_NOTHING skips it";
            if !late_ids.is_empty() {
                if let Err(error) = self.store.skip_runs(&late_ids, reason, now).await {
                    self.health
                        .failed(Loop::Claim, &crate::health::with_causes(&error));
                    tracing::debug!(%error, "database still unavailable for unclaimed fires");
                    fires = late.into_iter().chain(due).collect();
                    continue;
                }
                crate::metrics::dispatched(
                    crate::metrics::Dispatch::Skipped,
                    late_ids.len() as u64,
                );
                for fire in &late {
                    crate::telemetry::record_unsent(fire.into(), "skipped", reason);
                }
            }
            let trigger_time_ms = claim_time_ms(&due, self.clock.now_ms());
            claim_times_ms.push(trigger_time_ms);
            let written = Fires::Written {
                fires: due.clone(),
                trigger_time_ms,
            };
            match self.trigger.dispatch(written).await {
                Ok(_) => {
                    self.health.succeeded(Loop::Claim);
                    return;
                }
                Err(error) => {
                    self.health
                        .failed(Loop::Claim, &crate::health::with_causes(&error));
                    tracing::debug!(%error, "database still unavailable for unclaimed fires");
                    fires = due;
                }
            }
        }
    }

    /// Number of fires waiting in the ring.
    pub fn ring_len(&self) -> usize {
        self.ring().len()
    }
}

/// Puts each fire due after `now_ms` in the ring; returns those to dispatch now (their instant
/// passed, or the ring already handed their second over).
fn place_in_ring<T: Timed>(ring: &mut Ring<T>, fires: Vec<T>, now_ms: i64) -> Vec<T> {
    let mut due_now = Vec::new();
    for fire in fires {
        if fire.due_at_ms() <= now_ms {
            due_now.push(fire);
        } else if let Some(returned) = ring.push(fire) {
            due_now.push(returned);
        }
    }
    due_now
}

/// How long before each second the ring hands that second's fires to the trigger pipeline, at
/// least: the claim (a database write for the whole second's fires) is done by the time the
/// second starts, and the runs wait for their instant instead of the claim
/// (`Trigger::dispatch`). A second holding many fires is handed over earlier, by what its claim
/// is expected to take (`trigger::claim_pace`).
const DISPATCH_LEAD_MS: i64 = crate::trigger::claim_pace::BASE_LEAD_MS;
/// How often the ring re-reads the count of the coming second while it waits for it: the scan
/// may still add fires to it, which can call for a longer lead.
const RING_RECHECK_MS: i64 = 100;

/// The next second whose fires the ring hands over, and when: `DISPATCH_LEAD_MS` before it.
fn next_ring_tick(now_ms: i64) -> (i64, i64) {
    let second_ms = ((now_ms + DISPATCH_LEAD_MS).div_euclid(1000) + 1) * 1000;
    (second_ms, second_ms - DISPATCH_LEAD_MS)
}

/// The start of the second after the one `ms` falls in.
fn second_after(ms: i64) -> i64 {
    (ms.div_euclid(1000) + 1) * 1000
}

/// Ring loop: shortly before every second boundary, dispatches what is due by then.
pub async fn run_ring(scheduler: Arc<Scheduler>, cancel: CancellationToken) {
    let clock = Arc::clone(&scheduler.clock);
    let (mut second_ms, _) = next_ring_tick(clock.now_ms());
    while wait_for_hand_over(&scheduler, second_ms, &cancel).await {
        // A late wake (a stalled runtime) hands over every second up to now as well.
        let until_ms = second_ms.max(clock.now_ms());
        let due = scheduler.ring().drain_due(until_ms);
        crate::metrics::set_planned_fires(scheduler.ring_len());
        scheduler.dispatch(due);
        second_ms = second_after(until_ms);
    }
    let left = scheduler.ring_len();
    if left > 0 {
        // They are durable PENDING rows: the next start of this node adopts them.
        tracing::info!(
            left,
            "ring stopped; pending fires are handed back to the database"
        );
    }
}

/// Waits until the fires of the second starting at `second_ms` are to be handed over: the
/// trigger's lead for that many fires before it. False when cancelled.
async fn wait_for_hand_over(
    scheduler: &Scheduler,
    second_ms: i64,
    cancel: &CancellationToken,
) -> bool {
    loop {
        let fires = scheduler.ring().count_in_second(second_ms);
        let wake_ms = second_ms - scheduler.trigger.claim_lead_ms(fires);
        let now_ms = scheduler.clock.now_ms();
        if now_ms >= wake_ms {
            return true;
        }
        let pause = (wake_ms - now_ms).min(RING_RECHECK_MS);
        tokio::select! {
            _ = cancel.cancelled() => return false,
            _ = tokio::time::sleep(Duration::from_millis(pause as u64)) => {}
        }
    }
}

/// Recovery: renews this node's lease and adopts PENDING fires nobody else will dispatch, in
/// two loops of the same period. They are apart so the renewal never waits for an adoption: on
/// an overloaded SQLite writer the adoption's write waits in the background queue, and a
/// renewal behind it let the lease lapse, which stops every send (`Trigger::send_allowed`).
pub async fn run_recovery(scheduler: Arc<Scheduler>, cancel: CancellationToken) {
    let period = (scheduler.config.node_lease / 3).max(Duration::from_millis(200));
    tokio::join!(
        renew_lease(&scheduler, period, &cancel),
        adopt_orphans(&scheduler, period, &cancel)
    );
}

/// The lease is written by the database's clock (read first, so the lease written is never
/// longer than one whole lease from the renewal's start), and this admin counts it down on its
/// monotonic clock from before that read: a step of its wall clock moves neither.
async fn renew_lease(scheduler: &Arc<Scheduler>, period: Duration, cancel: &CancellationToken) {
    let lease_ms = scheduler.config.node_lease.as_millis() as i64;
    let store = &scheduler.store;
    loop {
        let started = std::time::Instant::now();
        // Ahead of background writes (`store::writer_gate`).
        let renewed = urgent_write(async {
            let now = store.database_now_ms().await?;
            store.renew_node(&scheduler.node, now + lease_ms).await
        })
        .await;
        match renewed {
            Ok(true) => {
                scheduler.trigger.lease_renewed(started);
                scheduler.health.succeeded(Loop::LeaseRenewal);
            }
            Ok(false) => tracing::error!(node = %scheduler.node.node_id,
                "node epoch was taken by another start with the same node id"),
            Err(error) => {
                tracing::warn!(%error, "renewing node lease failed");
                scheduler.health.failed(Loop::LeaseRenewal, &error);
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(period) => {}
        }
    }
}

async fn adopt_orphans(scheduler: &Arc<Scheduler>, period: Duration, cancel: &CancellationToken) {
    let store = &scheduler.store;
    loop {
        // Leases are judged by the database's clock (`Store::database_now_ms`).
        let adopted = match store.database_now_ms().await {
            Ok(now) => store.adopt_orphan_runs(&scheduler.node, now).await,
            Err(error) => Err(error),
        };
        match adopted {
            Ok(runs) => {
                scheduler.health.succeeded(Loop::Adoption);
                if !runs.is_empty() {
                    recover_runs(scheduler, runs).await;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "adopting orphan fires failed");
                scheduler.health.failed(Loop::Adoption, &error);
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(period) => {}
        }
    }
}

/// What recovery does with one adopted PENDING run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recovery {
    /// Dispatch it now (or at its second, through the ring).
    Dispatch,
    /// A delayed run (retry after backoff, child run): the follow-up loop dispatches it when
    /// its `dispatch_at_ms` comes, now that this node owns it.
    LeaveToFollowup,
    /// Too late for a DO_NOTHING job: record it skipped.
    Skip,
}

/// Misfire rules apply to the scheduled time of a schedule's first attempt only; a retry keeps
/// its own backoff time whatever its scheduled time was. A job with a catch-up window
/// (`catch_up_window_ms` > 0) has its adopted fires judged by the window instead.
fn recovery_of(
    run: &RunLog,
    strategy: MisfireStrategy,
    now_ms: i64,
    threshold_ms: i64,
    catch_up_window_ms: i64,
) -> Recovery {
    if run.dispatch_at_ms > 0 {
        return Recovery::LeaveToFollowup;
    }
    let late = crate::model::LateRun {
        catch_up_window_ms,
        ..run.into()
    };
    match crate::model::skipped_as_misfire(late, strategy, now_ms, threshold_ms) {
        Some(_) => Recovery::Skip,
        None => Recovery::Dispatch,
    }
}

/// Whether a fire whose claim failed is too late by now for its job's misfire strategy.
fn skipped_after_failed_claim(fire: &Fire, now_ms: i64, threshold_ms: i64) -> bool {
    crate::model::skipped_as_misfire(fire.into(), fire.job.misfire_strategy, now_ms, threshold_ms)
        .is_some()
}

/// Dispatches adopted fires (through the ring, like the scan's own), or applies the misfire
/// strategy to those too late.
async fn recover_runs(scheduler: &Arc<Scheduler>, runs: Vec<RunLog>) {
    let now = scheduler.clock.now_ms();
    let threshold = scheduler.config.misfire_threshold.as_millis() as i64;
    let job_ids: Vec<JobId> = runs.iter().map(|run| run.job_id).collect();
    let jobs: HashMap<JobId, Arc<Job>> =
        scheduler.store.get_jobs(&job_ids).await.unwrap_or_default();
    let mut fires = Vec::new();
    let mut jobless = Vec::new();
    let mut skipped = Vec::new();
    for run in &runs {
        let job = jobs.get(&run.job_id);
        let strategy = job.map_or(MisfireStrategy::DoNothing, |job| job.misfire_strategy);
        let window = job.map_or(0, |job| job.policy.catch_up_window_ms);
        match (recovery_of(run, strategy, now, threshold, window), job) {
            (Recovery::Skip, _) => skipped.push(run),
            (Recovery::LeaveToFollowup, _) => {}
            (Recovery::Dispatch, Some(job)) => fires.push(Fire::from_run(run, Arc::clone(job))),
            // The trigger records why it cannot run.
            (Recovery::Dispatch, None) => jobless.push(run.id),
        }
    }
    tracing::debug!(ids = ?runs.iter().map(|run| run.id.0).collect::<Vec<_>>(),
        "adopted pending fires");
    tracing::info!(
        adopted = runs.len(),
        skipped = skipped.len(),
        delayed = runs.len() - skipped.len() - fires.len() - jobless.len(),
        "recovered pending fires"
    );
    if !skipped.is_empty() {
        let reason = "misfire: adopted from a stopped admin too late; DO_NOTHING skips it";
        let ids: Vec<LogId> = skipped.iter().map(|run| run.id).collect();
        match scheduler.store.skip_runs(&ids, reason, now).await {
            Ok(()) => {
                crate::metrics::dispatched(crate::metrics::Dispatch::Skipped, skipped.len() as u64);
                for run in skipped {
                    crate::telemetry::record_unsent(run.into(), "skipped", reason);
                }
            }
            Err(error) => tracing::warn!(%error, "recording skipped fires failed"),
        }
    }
    if !jobless.is_empty()
        && let Err(error) = (scheduler.trigger)
            .dispatch(Fires::Stored {
                log_ids: jobless,
                trigger_time_ms: now,
            })
            .await
    {
        tracing::warn!(%error, "claiming adopted fires of deleted jobs failed");
    }
    scheduler.schedule_fires(fires);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GroupId;
    use crate::model::{RunStatus, TriggerType};

    const NOW: i64 = 1_800_000_000_000;

    fn pending(scheduled_at_ms: i64, attempt: i32, dispatch_at_ms: i64) -> RunLog {
        RunLog {
            id: LogId(1),
            job_id: JobId(1),
            group_id: GroupId(1),
            fire_key: Some(format!("1:{scheduled_at_ms}:0:{attempt}")),
            status: RunStatus::Pending,
            trigger_type: TriggerType::Cron,
            scheduled_at_ms,
            trigger_time_ms: 0,
            trigger_code: 0,
            trigger_msg: String::new(),
            handle_time_ms: 0,
            handle_code: 0,
            handle_msg: String::new(),
            executor_address: String::new(),
            handler: "h".into(),
            params: String::new(),
            shard_index: 0,
            shard_total: 1,
            attempt,
            trace_id: String::new(),
            owner_node: "old".into(),
            epoch: 1,
            dispatch_at_ms,
            alarm_delivery: String::new(),
        }
    }

    /// A fire as the ring sees it.
    #[derive(Debug, Clone, PartialEq)]
    struct Due(i64, i64);

    impl Timed for Due {
        fn due_at_ms(&self) -> i64 {
            self.1
        }

        fn id(&self) -> i64 {
            self.0
        }
    }

    #[test]
    fn fires_wait_in_the_ring_until_the_clock_reaches_their_second() {
        use crate::model::{Clock, ManualClock};
        let clock = ManualClock::at(NOW + 300);
        let mut ring = Ring::<Due>::default();
        let fires = vec![Due(1, NOW), Due(2, NOW + 1_000), Due(3, NOW + 2_000)];
        // The first fire's instant passed: it goes at once; the others wait.
        let now = place_in_ring(&mut ring, fires, clock.now_ms());
        assert_eq!(now, vec![Due(1, NOW)]);
        assert_eq!(ring.len(), 2);
        // The ring's tick for the next second comes DISPATCH_LEAD_MS before it.
        clock.set(NOW + 1_000 - DISPATCH_LEAD_MS);
        let (second, wake) = next_ring_tick(clock.now_ms() - 1);
        assert_eq!(wake, clock.now_ms());
        assert_eq!(ring.drain_due(second), vec![Due(2, NOW + 1_000)]);
        // A fire planned for a second the ring already handed over is dispatched at once.
        let late = place_in_ring(&mut ring, vec![Due(4, NOW + 1_000)], clock.now_ms());
        assert_eq!(late, vec![Due(4, NOW + 1_000)]);
        clock.advance(1_000);
        let (second, _) = next_ring_tick(clock.now_ms() - 1);
        assert_eq!(ring.drain_due(second), vec![Due(3, NOW + 2_000)]);
        assert!(ring.is_empty());
    }

    #[test]
    fn the_ring_hands_over_each_second_shortly_before_it_starts() {
        let second = NOW - NOW.rem_euclid(1000);
        assert_eq!(
            next_ring_tick(second + 100),
            (second + 1000, second + 1000 - DISPATCH_LEAD_MS)
        );
        // Inside the lead of the coming second, that second has been handed over already.
        assert_eq!(
            next_ring_tick(second + 1000 - DISPATCH_LEAD_MS),
            (second + 2000, second + 2000 - DISPATCH_LEAD_MS)
        );
        assert_eq!(
            next_ring_tick(second + 1000 - DISPATCH_LEAD_MS - 1),
            (second + 1000, second + 1000 - DISPATCH_LEAD_MS)
        );
        // After a hand-over (early, on time or late) comes the following second.
        assert_eq!(second_after(second), second + 1000);
        assert_eq!(second_after(second + 999), second + 1000);
        assert_eq!(second_after(second - 1), second);
    }

    #[test]
    fn an_adopted_fire_of_a_job_with_a_catch_up_window_is_judged_by_the_window() {
        let do_nothing = MisfireStrategy::DoNothing;
        let inside = pending(NOW - 60_000, 0, 0);
        assert_eq!(
            recovery_of(&inside, do_nothing, NOW, 5_000, 120_000),
            Recovery::Dispatch
        );
        let outside = pending(NOW - 200_000, 0, 0);
        assert_eq!(
            recovery_of(&outside, MisfireStrategy::FireOnceNow, NOW, 5_000, 120_000),
            Recovery::Skip
        );
    }

    #[test]
    fn misfire_rules_apply_to_first_attempts_and_retries_keep_their_backoff() {
        let late = NOW - 60_000;
        let do_nothing = MisfireStrategy::DoNothing;
        assert_eq!(
            recovery_of(&pending(late, 0, 0), do_nothing, NOW, 5_000, 0),
            Recovery::Skip
        );
        assert_eq!(
            recovery_of(
                &pending(late, 0, 0),
                MisfireStrategy::FireOnceNow,
                NOW,
                5_000,
                0
            ),
            Recovery::Dispatch
        );
        assert_eq!(
            recovery_of(&pending(NOW - 1_000, 0, 0), do_nothing, NOW, 5_000, 0),
            Recovery::Dispatch
        );
        // A retry of a fire scheduled long ago is not a misfire; it waits for its backoff.
        assert_eq!(
            recovery_of(&pending(late, 2, NOW + 30_000), do_nothing, NOW, 5_000, 0),
            Recovery::LeaveToFollowup
        );
        assert_eq!(
            recovery_of(&pending(late, 1, NOW - 10), do_nothing, NOW, 5_000, 0),
            Recovery::LeaveToFollowup
        );
        // A manual run (scheduled at 0) is never a misfire.
        assert_eq!(
            recovery_of(&pending(0, 0, 0), do_nothing, NOW, 5_000, 0),
            Recovery::Dispatch
        );
    }
}
