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
mod sent_ahead;
mod trace;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::config::Config;
use crate::error::Error;
use crate::executor::ExecutorClient;
use crate::lifecycle::Tasks;
use crate::model::{Fire, Group, LogId, SharedClock, UnwrittenFire};
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
    /// as. Each is sent at its scheduled instant, not before.
    Written(Vec<Fire>),
    /// PENDING rows of this node known by id only (retries and child runs whose time came):
    /// the claim reads them back and their jobs are read with one query.
    Stored(Vec<LogId>),
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
    },
    /// Runs this node took from WAITING once their job had nothing running
    /// (`Store::release_waiting`: RUNNING, unsent): sent now, not judged by the overlap policy
    /// or as late again (waiting made them late on purpose).
    Released {
        fires: Vec<Fire>,
        trigger_time_ms: i64,
    },
}

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

    /// The recovery loop renewed this node's lease, in a renewal that started at `started`:
    /// the lease holds one whole lease from then.
    pub fn lease_renewed(&self, started: Instant) {
        let since_base = started.saturating_duration_since(self.lease_base);
        let until_ms = (since_base + self.node_lease).as_millis() as i64;
        let before = self
            .lease_until_ms
            .fetch_max(until_ms, std::sync::atomic::Ordering::AcqRel);
        crate::metrics::node_lease(before.max(until_ms) - self.lease_clock_ms());
    }

    /// Whether a claimed run may be sent. While this node's lease holds, yes. Past it (the
    /// admin stalled, or the database was away), another admin may have taken the run over
    /// as stranded: wait for the lease to be renewed, then send only if the row is still this
    /// node's, unsent (a taken-over run is the adopter's to send and record).
    async fn send_allowed(&self, log_id: LogId) -> bool {
        let lapsed = || {
            self.lease_clock_ms()
                >= self
                    .lease_until_ms
                    .load(std::sync::atomic::Ordering::Acquire)
        };
        if !lapsed() {
            return true;
        }
        while lapsed() {
            // At shutdown the run stays claimed and unsent: whoever takes this node's runs
            // over after it stops sends it.
            tokio::select! {
                _ = self.tasks.stopping().cancelled() => return false,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        let owned = until_answered(&self.tasks, 1, || {
            self.store
                .owned_unsent_runs(std::slice::from_ref(&log_id), &self.node)
        })
        .await
        .unwrap_or_default();
        if owned.is_empty() {
            tracing::warn!(%log_id, "this admin's lease lapsed and another admin took over the \
                claimed run; not sending it");
        }
        !owned.is_empty()
    }

    /// THE way into the trigger. Claims the fires (only rows still PENDING and owned by this
    /// node and epoch), then sends each at its instant.
    ///
    /// `Written` and `Stored` return once the fires are handed to dispatch tasks (outcomes go
    /// to the recorder), with the ids claimed. `Requested` returns once the run was sent and
    /// its outcome written, with every log id of the fire (one per shard of a broadcast).
    pub async fn dispatch(self: &Arc<Self>, fires: Fires) -> Result<Vec<LogId>, Error> {
        match fires {
            Fires::Written(fires) => {
                let (claimed, targets) = self.claim_written(fires).await?;
                let ids = claimed.iter().map(|claimed| claimed.fire.log_id).collect();
                self.send_when_due(claimed, targets);
                Ok(ids)
            }
            Fires::Stored(log_ids) => {
                let (claimed, ended) = self.claim_stored(&log_ids).await?;
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
            } => self.send_held(fires, trigger_time_ms, false).await,
            Fires::Released {
                fires,
                trigger_time_ms,
            } => self.send_held(fires, trigger_time_ms, true).await,
        }
    }

    /// Sends runs this node already holds claimed (adopted stranded runs, released ones).
    async fn send_held(
        self: &Arc<Self>,
        fires: Vec<Fire>,
        trigger_time_ms: i64,
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
            })
            .collect();
        let targets = self.load_targets_until_answered(&claimed, &[]).await?;
        let ids = claimed.iter().map(|claimed| claimed.fire.log_id).collect();
        self.send_when_due(claimed, targets);
        Ok(ids)
    }
}
