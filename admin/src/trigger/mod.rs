//! WHERE and HOW a run fires: claim it, expand a broadcast into its shards, wait for a
//! trigger-pool slot, pick the executor by route strategy, send it (`executor::ExecutorClient`,
//! which batches runs to one executor), record the outcome on the log row.
//!
//! Every fire enters through [`Trigger::dispatch`] and leaves through one `RunRequest`
//! conversion (`request.rs`):
//!
//! ```text
//! scan / ring / recovery ─▶ Fires::Written(fires)   claim ids (owner/epoch fence)
//! follow-up (retries, child runs due) ─▶ Fires::Stored(ids)   claim rows, read their jobs
//! TriggerJob ─▶ Fires::Requested(fire)   insert the row, claim it, wait for the outcome
//!        └─▶ Claimed fires + their groups (`Store::get_groups`, one query each)
//!              └─▶ at each fire's instant: broadcast? ─▶ shard rows 1..n-1
//!                    └─▶ per shard: pool slot (fast/slow, bounded wait) ─▶ route ─▶ Run
//!                          ─▶ DispatchRecord ─▶ recorder (batched) / direct write
//! ```
//! Claiming is `claim.rs`, waiting for the instant, routing and sending `send.rs`.
//! Every fire ends in a record: a pool that stays full for `pool_wait` turns the fire into a
//! FAILED `overloaded:` run (retried and alarmed like any failure), never a silent drop.

pub mod admission;
mod claim;
pub mod claim_pace;
mod codes;
mod dispatch;
#[cfg(test)]
mod lease_tests;
mod overlap;
pub mod pool;
pub mod recorder;
mod request;
mod retry;
pub mod route;
mod send;
mod send_ahead;
#[cfg(test)]
mod send_ahead_tests;
#[cfg(test)]
mod send_tests;
mod sent_ahead;
mod trace;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::config::Config;
use crate::error::Error;
use crate::executor::ExecutorClient;
use crate::lifecycle::Tasks;
use crate::model::{Fire, Group, LogId, RunLog, SharedClock, UnwrittenFire};
// Named here too for the store's conformance suite, which reaches it through the trigger.
pub(crate) use crate::model::NodeIdentity;
use crate::registry::Registry;
use crate::store::{DispatchRecord, Store};
use admission::{Admission, Slot};
use pool::{PoolSettings, TriggerPools};
pub use recorder::Outcome;
use retry::until_answered;
pub use sent_ahead::RecordedHeld;

/// What enters the trigger: fires, in the shape their caller holds them.
#[derive(Debug)]
pub enum Fires {
    /// Fires whose PENDING rows this node owns and whose job is in hand (the scan's, and those
    /// adopted by recovery): the claim returns ids only, and each run is the fire it was written
    /// as. Each is sent at its scheduled instant, not before. `trigger_time_ms` is what the
    /// claim writes on the rows (`claim_time_ms`): a caller whose claim failed puts back to
    /// PENDING only rows carrying it (`Store::unclaim_unsent_runs`).
    Written {
        fires: Vec<Fire>,
        trigger_time_ms: i64,
    },
    /// PENDING rows of this node known by id only (retries and child runs whose time came):
    /// the claim reads them back and their jobs are read with one query. `trigger_time_ms` as
    /// for `Written`.
    Stored {
        log_ids: Vec<LogId>,
        trigger_time_ms: i64,
    },
    /// A run asked for now (TriggerJob): its row is written, claimed and sent, and `dispatch`
    /// returns once its outcome is recorded. `addresses`, when not empty, replace the group's.
    Requested {
        fire: UnwrittenFire,
        addresses: Vec<String>,
    },
    /// Runs this node already holds RUNNING and unsent: stranded runs of an admin that died
    /// between claiming and sending them, taken over once no executor had them
    /// (`Store::adopt_stranded`, which set their trigger time). Not claimed again; sent now.
    Adopted {
        fires: Vec<Fire>,
        trigger_time_ms: i64,
        /// Taken before the take-over's write (`Trigger::lease_mark`).
        claimed_at: LeaseMark,
    },
    /// Runs this node took from WAITING once their job had nothing running
    /// (`Store::release_waiting`: RUNNING, unsent): sent now, not judged by the overlap policy
    /// or as late again (waiting made them late on purpose).
    Released {
        fires: Vec<Fire>,
        trigger_time_ms: i64,
        /// Taken before the release's write (`Trigger::lease_mark`).
        claimed_at: LeaseMark,
    },
}

/// The trigger time a claim of `fires` at `now_ms` writes: when the runs leave, not the
/// (earlier) claim.
pub fn claim_time_ms(fires: &[Fire], now_ms: i64) -> i64 {
    let earliest = fires.iter().map(|fire| fire.scheduled_at_ms).min();
    earliest.map_or(now_ms, |earliest| now_ms.max(earliest))
}

/// How many lapses of this node's lease had ended (`Trigger::lease_mark`) when a write made
/// runs this node's: a lapse that ended after it may have let another admin take them over
/// before they were sent (`Trigger::send_allowed`). A count, not a time, so that "after" never
/// depends on a clock's resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LeaseMark(u64);

/// A fire this node claimed: it is RUNNING and nobody else sends it.
#[derive(Debug, Clone)]
struct Claimed {
    fire: Fire,
    /// When it was claimed (its executor files the log under this day).
    trigger_time_ms: i64,
    /// Its place among the runs outstanding (`admission`), freed once its outcome is written.
    slot: Option<Arc<Slot>>,
    /// Released from WAITING (`Fires::Released`).
    released: bool,
    /// Taken before the write that made it this node's.
    claimed_at: LeaseMark,
}

/// The group a claimed fire goes to and the addresses it is routed over, taken once per batch
/// of fires so every shard of a fire sees the same list.
#[derive(Clone)]
struct Target {
    group: Arc<Group>,
    addresses: Arc<[String]>,
}

/// The trigger pipeline shared by the scheduler, the follow-up and the API.
pub struct Trigger {
    store: Store,
    registry: Arc<Registry>,
    executors: Arc<ExecutorClient>,
    routes: route::RouteState,
    node: NodeIdentity,
    pools: TriggerPools,
    clock: SharedClock,
    recorder_tx: mpsc::UnboundedSender<Outcome>,
    /// Accepted outcomes the recorder holds for the result write to fold in.
    held: recorder::HeldOutcomes,
    /// The dispatch stage: its tasks, and the token that ends their retries at shutdown.
    tasks: Tasks,
    admission: Admission,
    /// What claims cost per fire lately: the ring's lead for a large second (`claim_pace`).
    claim_pace: claim_pace::ClaimPace,
    /// A scheduled fire sent later than this after its time is a misfire (`misfire_threshold`).
    misfire_threshold_ms: i64,
    /// Until when this node's lease is known to hold (renewed by the recovery loop), in
    /// milliseconds after `lease_base`. Past it, another admin may have taken over this node's
    /// claimed runs, so none is sent before the lease is renewed and the run is found still
    /// this node's (`send_allowed`). Counted on the monotonic clock: the database writes and
    /// judges the lease by its own clock, and a step of this admin's wall clock must not make
    /// it believe a lapsed lease still holds.
    lease_until_ms: std::sync::atomic::AtomicI64,
    /// How many lapses of the lease have ended (renewals that found it lapsed). A run claimed
    /// before one ended may have been taken over during it, though the lease holds again
    /// when the run is sent.
    lapses_ended: std::sync::atomic::AtomicU64,
    lease_base: Instant,
    node_lease: Duration,
    /// How long before its instant a run may leave for an executor that can hold it
    /// (`send_ahead`); 0 sends every run at its instant.
    send_ahead_ms: i64,
    /// The runs sent ahead whose start is still to come, for `cancel_held`.
    sent_ahead: sent_ahead::SentAhead,
}

/// What the trigger is built from (besides the config).
pub struct TriggerParts {
    pub store: Store,
    pub registry: Arc<Registry>,
    pub executors: Arc<ExecutorClient>,
    pub node: NodeIdentity,
    pub clock: SharedClock,
    /// When this node's registration started (before the database's clock was read for its
    /// first lease): the lease counts down from here until the first renewal.
    pub lease_start: Instant,
    /// Where dispatch outcomes of fires not waited for go (`recorder`).
    pub recorder_tx: mpsc::UnboundedSender<Outcome>,
    /// The accepted outcomes that recorder holds (shared with it).
    pub held: recorder::HeldOutcomes,
    /// The dispatch stage: dispatch tasks are spawned there; shutdown drains them.
    pub tasks: Tasks,
}

impl Trigger {
    /// Builds the pipeline; pool sizes and wait come from the config.
    pub fn new(parts: TriggerParts, config: &Config) -> Trigger {
        Trigger {
            store: parts.store,
            registry: parts.registry,
            executors: parts.executors,
            routes: route::RouteState::default(),
            node: parts.node,
            pools: TriggerPools::new(PoolSettings {
                fast_size: config.fast_pool_size,
                slow_size: config.slow_pool_size,
                wait: config.pool_wait,
            }),
            clock: parts.clock,
            recorder_tx: parts.recorder_tx,
            held: parts.held,
            tasks: parts.tasks,
            admission: Admission::new(config.max_unsent_runs),
            claim_pace: claim_pace::ClaimPace::default(),
            misfire_threshold_ms: config.misfire_threshold.as_millis() as i64,
            lease_until_ms: std::sync::atomic::AtomicI64::new(config.node_lease.as_millis() as i64),
            lapses_ended: std::sync::atomic::AtomicU64::new(0),
            lease_base: parts.lease_start,
            node_lease: config.node_lease,
            send_ahead_ms: i64::try_from(config.send_ahead_ms).unwrap_or(0),
            sent_ahead: Default::default(),
        }
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// How long before its second a second of `fires` scheduled fires should be handed over,
    /// for its claim to be done as the second starts (`claim_pace`), or, sending ahead, as
    /// its runs may start to leave.
    pub fn claim_lead_ms(&self, fires: usize) -> i64 {
        self.claim_pace.lead_ms(fires) + self.send_ahead_ms
    }

    /// Takes the held accepted outcomes of these runs, for the result write to fold in
    /// (`recorder`); whatever that write does not finish goes back through `unfolded`.
    pub fn take_held_outcomes(
        &self,
        log_ids: impl IntoIterator<Item = LogId>,
    ) -> Vec<DispatchRecord> {
        self.held.take(log_ids)
    }

    /// `run` as its row will read once the outcome the recorder holds for it is written (a
    /// run this admin has just sent, whose result has not come yet: `recorder::HOLD`).
    pub fn with_held_outcome(&self, run: RunLog) -> RunLog {
        self.held.overlay(run)
    }

    /// Hands taken outcomes the result write did not write back to the recorder.
    pub fn unfolded(&self, records: Vec<DispatchRecord>) {
        for record in records {
            self.to_recorder(Outcome { record, slot: None });
        }
    }

    /// Hands an outcome to the recorder, counted in its backlog until written.
    fn to_recorder(&self, outcome: Outcome) {
        crate::metrics::recorder_backlog().inc();
        // The recorder outlives every dispatch task (app.rs stops it last).
        if self.recorder_tx.send(outcome).is_err() {
            crate::metrics::recorder_backlog().dec();
        }
    }

    /// Milliseconds since `lease_base` (monotonic).
    fn lease_clock_ms(&self) -> i64 {
        self.lease_base.elapsed().as_millis() as i64
    }

    /// Taken before a write that makes runs this node's (a claim, a take-over, a release),
    /// and carried with those runs to their send.
    pub fn lease_mark(&self) -> LeaseMark {
        LeaseMark(self.lapses_ended.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// The recovery loop renewed this node's lease, in a renewal that started at `started`:
    /// the lease holds one whole lease from then. A renewal that lands after the lease lapsed
    /// ends a lapse: that is noted before the lease is extended, so whoever sees the lease
    /// holding again also sees that it lapsed (`send_allowed`).
    pub fn lease_renewed(&self, started: Instant) {
        use std::sync::atomic::Ordering::SeqCst;
        let since_base = started.saturating_duration_since(self.lease_base);
        let until_ms = (since_base + self.node_lease).as_millis() as i64;
        let now_ms = self.lease_clock_ms();
        if now_ms >= self.lease_until_ms.load(SeqCst) {
            self.lapses_ended.fetch_add(1, SeqCst);
        }
        let before = self.lease_until_ms.fetch_max(until_ms, SeqCst);
        crate::metrics::node_lease(before.max(until_ms) - now_ms);
    }

    /// Whether the lease is lapsed, or so near its end that a run sent now might still be on
    /// its way when another admin, finding the lease lapsed, takes the run over: a quarter of
    /// a lease (the renewal comes every third of one, so a healthy lease never gets there).
    fn lease_short(&self) -> bool {
        let margin_ms = (self.node_lease / 4).as_millis() as i64;
        self.lease_clock_ms() + margin_ms
            >= self
                .lease_until_ms
                .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the lease holds now, with a margin, and has held since `since`.
    fn lease_held_since(&self, since: LeaseMark) -> bool {
        // The lease first, the lapse after: `lease_renewed` notes a lapse before it extends
        // the lease, so a lease seen holding comes with every lapse it ended.
        let short = self.lease_short();
        // A lapse counted before the mark was over before the write that followed it: the
        // renewal that ended it had committed, and another admin judges the lease under that
        // write's row lock.
        !short && self.lease_mark() == since
    }

    /// Whether a run this node made its own after `since` may be sent: `Some` with the mark
    /// it is known this node's since, `None` when not. While the lease holds, and has held
    /// since then, yes. Otherwise (the admin stalled, or the database was away) another admin
    /// may have taken the run over as stranded, during the lapse or while it lasts: wait for
    /// the lease to be renewed, then send only if the row is still this node's and unsent (a
    /// taken-over run is the adopter's to send and record). A lease that holds again is not
    /// enough: a run claimed before a lapse may have been taken over during it.
    async fn send_allowed(&self, log_id: LogId, since: LeaseMark) -> Option<LeaseMark> {
        if self.lease_held_since(since) {
            return Some(since);
        }
        while self.lease_short() {
            // At shutdown the run stays claimed and unsent: whoever takes this node's runs
            // over after it stops sends it.
            tokio::select! {
                _ = self.tasks.stopping().cancelled() => return None,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        // Taken before the read: what the read finds holds from here on.
        let mark = self.lease_mark();
        let owned = until_answered(&self.tasks, 1, || {
            self.store
                .owned_unsent_runs(std::slice::from_ref(&log_id), &self.node)
        })
        .await
        .unwrap_or_default();
        if owned.is_empty() {
            tracing::warn!(%log_id, "this admin's lease lapsed and another admin took over the \
                claimed run; not sending it");
            return None;
        }
        Some(mark)
    }

    /// THE way into the trigger. Claims the fires (only rows still PENDING and owned by this
    /// node and epoch), then sends each at its instant.
    ///
    /// `Written` and `Stored` return once the fires are handed to dispatch tasks (outcomes go
    /// to the recorder), with the ids claimed. `Requested` returns once the run was sent and
    /// its outcome written, with every log id of the fire (one per shard of a broadcast).
    pub async fn dispatch(self: &Arc<Self>, fires: Fires) -> Result<Vec<LogId>, Error> {
        match fires {
            Fires::Written {
                fires,
                trigger_time_ms,
            } => {
                let (claimed, targets) = self.claim_written(fires, trigger_time_ms).await?;
                let ids = claimed.iter().map(|claimed| claimed.fire.log_id).collect();
                self.send_when_due(claimed, targets);
                Ok(ids)
            }
            Fires::Stored {
                log_ids,
                trigger_time_ms,
            } => {
                let (claimed, ended) = self.claim_stored(&log_ids, trigger_time_ms).await?;
                for record in ended {
                    self.to_recorder(Outcome { record, slot: None });
                }
                let targets = self.load_targets_until_answered(&claimed, &[]).await?;
                let ids = claimed.iter().map(|claimed| claimed.fire.log_id).collect();
                self.send_when_due(claimed, targets);
                Ok(ids)
            }
            Fires::Requested { fire, addresses } => self.dispatch_requested(fire, addresses).await,
            Fires::Adopted {
                fires,
                trigger_time_ms,
                claimed_at,
            } => {
                self.send_held(fires, trigger_time_ms, claimed_at, false)
                    .await
            }
            Fires::Released {
                fires,
                trigger_time_ms,
                claimed_at,
            } => {
                self.send_held(fires, trigger_time_ms, claimed_at, true)
                    .await
            }
        }
    }

    /// Sends runs this node already holds claimed (adopted stranded runs, released ones).
    async fn send_held(
        self: &Arc<Self>,
        fires: Vec<Fire>,
        trigger_time_ms: i64,
        claimed_at: LeaseMark,
        released: bool,
    ) -> Result<Vec<LogId>, Error> {
        let slots = self.admission.force(fires.len());
        let claimed: Vec<Claimed> = fires
            .into_iter()
            .zip(slots)
            .map(|(fire, slot)| Claimed {
                fire,
                trigger_time_ms,
                slot: Some(Arc::new(slot)),
                released,
                claimed_at,
            })
            .collect();
        let targets = self.load_targets_until_answered(&claimed, &[]).await?;
        let ids = claimed.iter().map(|claimed| claimed.fire.log_id).collect();
        self.send_when_due(claimed, targets);
        Ok(ids)
    }
}
