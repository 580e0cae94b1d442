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
//! Every fire ends in a record: a pool that stays full for `pool_wait` turns the fire into a
//! FAILED `overloaded:` run (retried and alarmed like any failure), never a silent drop.

pub mod admission;
pub mod claim_pace;
mod codes;
mod dispatch;
mod overlap;
pub mod pool;
pub mod recorder;
mod request;
mod retry;
pub mod route;
mod trace;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tracing::Instrument;

use crate::config::Config;
use crate::error::Error;
use crate::executor::ExecutorClient;
use crate::lifecycle::Tasks;
use crate::metrics::Dispatch;
use crate::model::{
    Fire, Group, GroupId, Job, JobId, JobStatus, LogId, RouteStrategy, RunStatus, SharedClock,
    UnwrittenFire,
};
// Named here too for the store's conformance suite, which reaches it through the trigger.
pub(crate) use crate::model::NodeIdentity;
use crate::registry::Registry;
use crate::store::writer_gate::urgent_write;
use crate::store::{DispatchOutcome, DispatchRecord, Store};
use admission::{Admission, Slot};
use pool::{PoolSettings, TriggerPools};
pub use recorder::Outcome;
use retry::until_answered;

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
        }
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// How long before its second a second of `fires` scheduled fires should be handed over,
    /// for its claim to be done as the second starts (`claim_pace`).
    pub fn claim_lead_ms(&self, fires: usize) -> i64 {
        self.claim_pace.lead_ms(fires)
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

    /// Claims fires whose rows are written; their groups are read beside the claim, so that
    /// read adds nothing to the fires' lateness.
    async fn claim_written(
        &self,
        fires: Vec<Fire>,
    ) -> Result<(Vec<Claimed>, HashMap<GroupId, Target>), Error> {
        let started = Instant::now();
        let offered = fires.len();
        let (fires, slots) = self.admit(fires).await?;
        let Some(earliest) = fires.iter().map(|fire| fire.scheduled_at_ms).min() else {
            return Ok((Vec::new(), HashMap::new()));
        };
        let log_ids: Vec<LogId> = fires.iter().map(|fire| fire.log_id).collect();
        let group_ids: Vec<GroupId> = fires.iter().map(Fire::group_id).collect();
        // The trigger time recorded is when the runs leave, not the (earlier) claim.
        let trigger_time_ms = self.now_ms().max(earliest);
        let (claimed, groups) = tokio::join!(
            // Ahead of background writes: a late claim is a late fire (`store::writer_gate`).
            urgent_write(
                self.store
                    .claim_run_ids(&log_ids, &self.node, trigger_time_ms)
            ),
            self.store.get_groups(&group_ids)
        );
        let claimed_ids: std::collections::HashSet<LogId> = claimed?.into_iter().collect();
        // A fire the fence left out frees its slot here.
        let claimed: Vec<Claimed> = fires
            .into_iter()
            .zip(slots)
            .filter(|(fire, _)| claimed_ids.contains(&fire.log_id))
            .map(|(fire, slot)| Claimed {
                fire,
                trigger_time_ms,
                slot: Some(Arc::new(slot)),
                released: false,
            })
            .collect();
        self.claim_pace.observe(offered, started.elapsed());
        let targets = match groups {
            Ok(groups) => self.targets(groups, &[]),
            Err(_) => self.load_targets_until_answered(&claimed, &[]).await?,
        };
        tracing::debug!(
            offered,
            runs = claimed.len(),
            claim_ms = started.elapsed().as_millis() as u64,
            "dispatching written fires"
        );
        Ok((claimed, targets))
    }

    /// Admits the earliest fires while the bound on outstanding runs allows (`admission`); the
    /// rest are recorded SKIPPED with the reason at once. Returns the admitted fires, earliest
    /// first, each with its slot.
    async fn admit(&self, mut fires: Vec<Fire>) -> Result<(Vec<Fire>, Vec<Slot>), Error> {
        let slots = self.admission.admit(fires.len());
        if slots.len() < fires.len() {
            fires.sort_by_key(|fire| (fire.scheduled_at_ms, fire.log_id.0));
            let refused = fires.split_off(slots.len());
            let ids: Vec<LogId> = refused.iter().map(|fire| fire.log_id).collect();
            tracing::warn!(
                skipped = ids.len(),
                outstanding = self.admission.outstanding(),
                max_unsent_runs = self.admission.max(),
                "overloaded: fires beyond the bound on unsent runs are skipped"
            );
            let reason = admission::overloaded_reason(self.admission.max());
            // Ahead of background writes too: the claim of the admitted fires waits for it.
            let skipped = urgent_write(self.store.skip_runs(&ids, &reason, self.now_ms()));
            if let Err(error) = skipped.await {
                // They stay PENDING and this node's: the caller retries them all, admitted or
                // not, once the database answers.
                return Err(error.into());
            }
            crate::metrics::dispatched(Dispatch::Overloaded, refused.len() as u64);
            for fire in &refused {
                crate::telemetry::record_unsent(fire.into(), "overloaded", &reason);
            }
        }
        Ok((fires, slots))
    }

    /// Claims stored rows and reads their jobs; a row whose job is gone ends in a record.
    async fn claim_stored(
        &self,
        log_ids: &[LogId],
    ) -> Result<(Vec<Claimed>, Vec<DispatchRecord>), Error> {
        if log_ids.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let runs = self
            .store
            .claim_runs(log_ids, &self.node, self.now_ms())
            .await?;
        let job_ids: Vec<JobId> = runs.iter().map(|run| run.job_id).collect();
        let jobs = self.load_jobs_until_answered(&job_ids).await?;
        let mut claimed = Vec::with_capacity(runs.len());
        let mut ended = Vec::new();
        for run in runs {
            match jobs.get(&run.job_id) {
                Some(job) => claimed.push(Claimed {
                    fire: Fire::from_run(&run, Arc::clone(job)),
                    trigger_time_ms: run.trigger_time_ms,
                    slot: self.admission.force(1).pop().map(Arc::new),
                    released: false,
                }),
                None => {
                    let reason = format!("job {} no longer exists", run.job_id);
                    crate::telemetry::record_unsent((&run).into(), "failed", &reason);
                    ended.push(self.failed_record(run.id, reason, ""));
                }
            }
        }
        Ok((claimed, ended))
    }

    /// A run asked for now: written, claimed, sent; returns once its outcome is written.
    async fn dispatch_requested(
        self: &Arc<Self>,
        fire: UnwrittenFire,
        addresses: Vec<String>,
    ) -> Result<Vec<LogId>, Error> {
        let row = fire.row(&self.node, RunStatus::Pending, "");
        let ids = self.store.insert_runs(std::slice::from_ref(&row)).await?;
        let runs = self
            .store
            .claim_runs(&ids, &self.node, self.now_ms())
            .await?;
        let claimed: Vec<Claimed> = runs
            .iter()
            .map(|run| Claimed {
                fire: Fire::from_run(run, Arc::clone(&fire.job)),
                trigger_time_ms: run.trigger_time_ms,
                slot: None,
                released: false,
            })
            .collect();
        let groups = self.store.get_groups(&[fire.group_id()]).await?;
        let targets = self.targets(groups, &addresses);
        let mut records = Vec::with_capacity(claimed.len());
        for claimed in claimed {
            records.extend(self.fire(claimed, &targets).await);
        }
        self.store.record_dispatches(&records).await?;
        if records.is_empty() {
            return Ok(ids);
        }
        Ok(records.iter().map(|record| record.log_id).collect())
    }

    /// Spawns the fires already due now; the others wait, in a tracked task (shutdown waits for
    /// it), for their scheduled instant, earliest first.
    fn send_when_due(self: &Arc<Self>, claimed: Vec<Claimed>, targets: HashMap<GroupId, Target>) {
        let now = self.now_ms();
        // A backfill's run is due at once: its instant is the occurrence it stands for.
        let (due, mut early): (Vec<Claimed>, Vec<Claimed>) = claimed
            .into_iter()
            .partition(|claimed| claimed.fire.scheduled_at_ms <= now || claimed.fire.is_backfill());
        let targets = Arc::new(targets);
        self.spawn_fires(due, &targets);
        if early.is_empty() {
            return;
        }
        early.sort_by_key(|claimed| claimed.fire.scheduled_at_ms);
        let this = Arc::clone(self);
        self.tasks.spawn(async move {
            let mut early = early.into_iter().peekable();
            while let Some(first) = early.peek() {
                let instant = first.fire.scheduled_at_ms;
                let wait_ms = u64::try_from(instant - this.now_ms()).unwrap_or(0);
                // At shutdown the early fires stay claimed and unsent, like a lapsed one above:
                // whoever takes this node's runs over sends them.
                tokio::select! {
                    _ = this.tasks.stopping().cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(wait_ms)) => {}
                }
                let mut batch = Vec::new();
                while let Some(claimed) =
                    early.next_if(|claimed| claimed.fire.scheduled_at_ms == instant)
                {
                    batch.push(claimed);
                }
                this.spawn_fires(batch, &targets);
            }
        });
    }

    /// One dispatch task per claimed fire; outcomes go to the recorder.
    fn spawn_fires(
        self: &Arc<Self>,
        claimed: Vec<Claimed>,
        targets: &Arc<HashMap<GroupId, Target>>,
    ) {
        for claimed in claimed {
            let this = Arc::clone(self);
            let targets = Arc::clone(targets);
            self.tasks.spawn(async move {
                // The slot goes with the first record (a broadcast fire's shard 0) and is freed
                // once the recorder has written it.
                let mut slot = claimed.slot.clone();
                for record in this.fire(claimed, &targets).await {
                    this.to_recorder(Outcome {
                        record,
                        slot: slot.take(),
                    });
                }
            });
        }
    }

    /// One claimed fire through the pipeline; returns one record per dispatched run (the run
    /// itself, or every shard of a broadcast fire in shard order). Never fails.
    async fn fire(
        self: &Arc<Self>,
        claimed: Claimed,
        targets: &HashMap<GroupId, Target>,
    ) -> Vec<DispatchRecord> {
        let target = match self.target_of(&claimed.fire, targets) {
            Ok(target) => target,
            Err(record) => return vec![traced_unsent(&claimed.fire, record)],
        };
        if let Some(ended) = self.overlap(&claimed, &target).await {
            let fire = &claimed.fire;
            return ended
                .into_iter()
                .map(|record| traced_unsent(fire, record))
                .collect();
        }
        // Kept only for its span if the shard rows cannot be written (no copy when not tracing).
        let traced_fire = crate::telemetry::tracer().map(|_| claimed.fire.clone());
        let shards = match self.broadcast_shards(claimed, &target).await {
            Ok(shards) => shards,
            Err(record) => {
                return vec![match &traced_fire {
                    Some(fire) => traced_unsent(fire, record),
                    None => record,
                }];
            }
        };
        if let [only] = shards.as_slice() {
            return self
                .dispatch_in_pool(only, &target)
                .await
                .into_iter()
                .collect();
        }
        // Each shard waits for its own pool slot; they dispatch concurrently.
        let handles: Vec<_> = shards
            .into_iter()
            .map(|shard| {
                let this = Arc::clone(self);
                let target = target.clone();
                let log_id = shard.fire.log_id;
                let handle = self
                    .tasks
                    .spawn(async move { this.dispatch_in_pool(&shard, &target).await });
                (log_id, handle)
            })
            .collect();
        let mut records = Vec::with_capacity(handles.len());
        for (log_id, handle) in handles {
            match handle.await {
                Ok(record) => records.extend(record),
                Err(error) => records.push(self.failed_record(
                    log_id,
                    format!("dispatch task failed: {error}"),
                    "",
                )),
            }
        }
        records
    }

    /// Where a claimed fire goes, or the record that ends it (its job was stopped after the
    /// fire was planned, its group is gone).
    fn target_of(
        &self,
        fire: &Fire,
        targets: &HashMap<GroupId, Target>,
    ) -> Result<Target, DispatchRecord> {
        if fire.job.status == JobStatus::Stopped && fire.is_of_schedule() {
            // Planned before the job was stopped: a stopped job fires no more.
            crate::metrics::dispatched(Dispatch::Skipped, 1);
            return Err(DispatchRecord {
                outcome: DispatchOutcome::Skipped,
                trigger_msg: format!(
                    "job {} was stopped after this fire was planned",
                    fire.job.id
                ),
                ..self.record(fire.log_id, String::new(), "")
            });
        }
        targets.get(&fire.group_id()).cloned().ok_or_else(|| {
            self.failed_record(
                fire.log_id,
                format!(
                    "group {} of job {} not found",
                    fire.job.group_id, fire.job.id
                ),
                "",
            )
        })
    }

    /// SHARDING_BROADCAST: a fresh fire over `n > 1` addresses becomes `n` runs, shard `i/n`
    /// each; any other fire is dispatched as it is (a shard retry keeps its index and total).
    /// Fails shard 0 when the shard rows cannot be written.
    async fn broadcast_shards(
        &self,
        claimed: Claimed,
        target: &Target,
    ) -> Result<Vec<Claimed>, DispatchRecord> {
        let fire = &claimed.fire;
        let shard_count = target.addresses.len();
        if fire.job.route_strategy != RouteStrategy::ShardingBroadcast
            || !fire.is_fresh()
            || shard_count < 2
        {
            return Ok(vec![claimed]);
        }
        let shard_total = i32::try_from(shard_count).unwrap_or(i32::MAX);
        let rows: Vec<_> = (1..shard_total)
            .map(|index| {
                fire.shard_of(index, shard_total)
                    .row(&self.node, RunStatus::Running, "")
            })
            .collect();
        match self
            .store
            .expand_broadcast(fire.log_id, shard_total, &rows, self.now_ms())
            .await
        {
            Ok(expanded) if !expanded.is_empty() => Ok(expanded
                .iter()
                .map(|run| Claimed {
                    fire: Fire::from_run(run, Arc::clone(&fire.job)),
                    trigger_time_ms: run.trigger_time_ms,
                    slot: None,
                    released: claimed.released,
                })
                .collect()),
            Ok(_) => {
                tracing::warn!(log_id = %fire.log_id, "broadcast fire was already expanded");
                Ok(vec![claimed])
            }
            Err(error) => {
                tracing::error!(%error, log_id = %fire.log_id, "writing broadcast shard rows failed");
                Err(self.failed_record(
                    fire.log_id,
                    format!("broadcast: writing the rows of {shard_total} shards failed"),
                    "",
                ))
            }
        }
    }

    /// Waits for a pool slot (bounded), then dispatches; a full pool makes an `overloaded:`
    /// failure. The dispatch time feeds the fast/slow decision.
    async fn dispatch_in_pool(&self, claimed: &Claimed, target: &Target) -> Option<DispatchRecord> {
        let fire = &claimed.fire;
        if !self.send_allowed(fire.log_id).await {
            return None;
        }
        // The fire span covers the pool wait too, so a full pool shows in the trace.
        let trace = trace::FireTrace::start(fire);
        let log_span = trace::log_span(trace.as_ref(), fire);
        let mut record = async {
            match self.pools.acquire(fire.job_id(), self.now_ms()).await {
                Ok(permit) => match self.too_late_to_send(claimed) {
                    // An overloaded admin degrades: its late fires become misfires, not late runs.
                    Some(late_ms) => self.skipped_as_late(fire.log_id, late_ms),
                    None => {
                        let started = Instant::now();
                        let record = self
                            .dispatch_one(claimed, target, permit.pool, trace.as_ref())
                            .await;
                        self.pools.record_dispatch_time(
                            fire.job_id(),
                            started.elapsed(),
                            self.now_ms(),
                        );
                        drop(permit);
                        record
                    }
                },
                Err(overloaded) => {
                    tracing::warn!(job_id = %fire.job_id(), log_id = %fire.log_id,
                        pool = %overloaded.pool, "trigger pool overloaded; run recorded as failed");
                    self.failed_record_as(
                        Dispatch::Overloaded,
                        fire.log_id,
                        overloaded.to_string(),
                        "",
                    )
                }
            }
        }
        .instrument(log_span)
        .await;
        if let Some(trace) = trace {
            trace.end(&mut record);
        }
        Some(record)
    }

    /// The target of each group: the addresses to route over (`address_override` when not
    /// empty, else the group's manual list or its live executors).
    fn targets(
        &self,
        groups: HashMap<GroupId, Arc<Group>>,
        address_override: &[String],
    ) -> HashMap<GroupId, Target> {
        groups
            .into_iter()
            .map(|(id, group)| {
                let addresses: Arc<[String]> = if !address_override.is_empty() {
                    address_override.into()
                } else {
                    match group.address_type {
                        crate::model::AddressType::Manual => group.addresses.clone().into(),
                        crate::model::AddressType::Auto => {
                            self.registry.online_addresses(&group.app_name).into()
                        }
                    }
                };
                (id, Target { group, addresses })
            })
            .collect()
    }

    /// Targets of fires this node has just claimed: retried until the database answers, since
    /// nobody else fires or fails runs that are RUNNING without an address while this node lives
    /// (the lost-run monitor only judges those of admins that are gone). Fails only at
    /// shutdown: the runs stay claimed and unsent, for whoever takes this node's runs over.
    async fn load_targets_until_answered(
        &self,
        claimed: &[Claimed],
        address_override: &[String],
    ) -> Result<HashMap<GroupId, Target>, Error> {
        let group_ids: Vec<GroupId> = claimed
            .iter()
            .map(|claimed| claimed.fire.group_id())
            .collect();
        let groups = until_answered(&self.tasks, claimed.len(), || {
            self.store.get_groups(&group_ids)
        })
        .await?;
        Ok(self.targets(groups, address_override))
    }

    /// Jobs of runs this node has just claimed (see `load_targets_until_answered`).
    async fn load_jobs_until_answered(
        &self,
        job_ids: &[JobId],
    ) -> Result<HashMap<JobId, Arc<Job>>, Error> {
        until_answered(&self.tasks, job_ids.len(), || self.store.get_jobs(job_ids)).await
    }
}

/// The record of a fire that ends before it is routed (skipped, its group gone), with the
/// fire's span opened and ended on it when tracing is on.
fn traced_unsent(fire: &Fire, mut record: DispatchRecord) -> DispatchRecord {
    if let Some(trace) = trace::FireTrace::start(fire) {
        trace.end(&mut record);
    }
    record
}
