//! WHERE and HOW a run fires: expand a broadcast into its shards, wait for a trigger-pool slot,
//! pick the executor by route strategy, call `ExecutorService.Run` through a cached channel
//! (runs to one executor at the same moment share one `RunBatch` call, see `batcher`),
//! record the outcome on the log row.
//!
//! ```text
//! ring (scan's fires) ───────▶ dispatch_planned ─▶ claim ids (owner/epoch fence), rebuild runs
//!                                 from the plan, wait for each run's instant (send_when_due)
//! recovery / retries ────────▶ dispatch_fires / dispatch_scheduled ─▶ claim rows (same fence)
//! TriggerJob / child jobs ───▶ trigger_job(job) ─▶ insert row ─▶ claim
//!        └─▶ fire(run): broadcast? ─▶ shard rows 1..n-1 (store::expand_broadcast)
//!              └─▶ per shard: pool slot (fast/slow, bounded wait) ─▶ dispatch_one
//!                    route ─▶ Run RPC ─▶ DispatchRecord ─▶ recorder (batched) / direct write
//! ```
//! Every fire ends in a record: a pool that stays full for `pool_wait` turns the fire into a
//! FAILED `overloaded:` run (retried and alarmed like any failure), never a silent drop.

pub mod batcher;
pub mod clients;
pub mod dispatch;
pub mod pool;
pub mod recorder;
pub mod route;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::error::Error;
use crate::model::{
    Group, Job, JobStatus, NewRun, RouteStrategy, RunLog, RunStatus, TriggerType, now_ms,
};
use crate::registry::Registry;
use crate::store::{DispatchRecord, Store};
pub use dispatch::RunLogChunk;
use pool::{PoolSettings, TriggerPools};

/// Longest a FAILOVER `Beat` or BUSYOVER `IdleBeat` probe waits for its answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// This admin's identity in the cluster: fires it writes and claims carry both values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub node_id: String,
    pub epoch: i64,
}

/// The trigger pipeline shared by the scheduler, the follow-up and the API.
pub struct Trigger {
    store: Store,
    registry: Arc<Registry>,
    clients: clients::ExecutorClients,
    batcher: batcher::RunBatcher,
    routes: route::RouteState,
    node: NodeIdentity,
    pools: TriggerPools,
    probe_timeout: Duration,
    recorder_tx: mpsc::UnboundedSender<DispatchRecord>,
    tracker: TaskTracker,
}

/// A fire the scan planned and wrote as a PENDING row (shard 0 of 1, first attempt).
#[derive(Debug, Clone)]
pub struct PlannedFire {
    pub log_id: i64,
    pub scheduled_at_ms: i64,
    pub trigger_type: TriggerType,
    /// The job as the scan read it; the row's handler and params came from it.
    pub job: Arc<Job>,
}

impl PlannedFire {
    /// The run as its row reads once this node claimed it at `now_ms`.
    pub(crate) fn into_claimed_run(self, node: &NodeIdentity, now_ms: i64) -> RunLog {
        RunLog {
            id: self.log_id,
            job_id: self.job.id,
            group_id: self.job.group_id,
            fire_key: Some(NewRun::fire_key(self.job.id, self.scheduled_at_ms, 0, 0)),
            status: RunStatus::Running,
            trigger_type: self.trigger_type,
            scheduled_at_ms: self.scheduled_at_ms,
            trigger_time_ms: now_ms,
            trigger_code: 0,
            trigger_msg: String::new(),
            handle_time_ms: 0,
            handle_code: 0,
            handle_msg: String::new(),
            executor_address: String::new(),
            handler: self.job.handler.clone(),
            params: self.job.params.clone(),
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            trace_id: String::new(),
            owner_node: node.node_id.clone(),
            epoch: node.epoch,
            dispatch_at_ms: 0,
        }
    }
}

/// The job and group a claimed run fires for, shared by its shards' tasks.
struct FireTarget {
    job: Arc<Job>,
    group: Arc<Group>,
    /// The address list routed over, taken once per batch of fires so every shard sees the
    /// same list (and a burst of fires does not rebuild it per fire).
    addresses: Arc<[String]>,
}

impl Trigger {
    /// Builds the pipeline from the admin's config (executor timeout, pool sizes and wait);
    /// dispatch outcomes of scheduled fires go to `recorder_tx`, dispatch tasks to `tracker`.
    pub fn new(
        store: Store,
        registry: Arc<Registry>,
        node: NodeIdentity,
        config: &Config,
        recorder_tx: mpsc::UnboundedSender<DispatchRecord>,
        tracker: TaskTracker,
    ) -> Trigger {
        Trigger {
            store,
            registry,
            clients: clients::ExecutorClients::new(config.executor_timeout),
            batcher: batcher::RunBatcher::default(),
            routes: route::RouteState::default(),
            node,
            pools: TriggerPools::new(PoolSettings {
                fast_size: config.fast_pool_size,
                slow_size: config.slow_pool_size,
                wait: config.pool_wait,
            }),
            probe_timeout: config.executor_timeout.min(PROBE_TIMEOUT),
            recorder_tx,
            tracker,
        }
    }

    /// Forgets the channel of an executor that left.
    pub fn evict_executor(&self, address: &str) {
        self.clients.evict(address);
        self.batcher.evict(address);
    }

    /// Claims scheduled runs (only those still PENDING and owned by this node/epoch) and fires
    /// each in its own task; returns once all are handed over. Outcomes go to the recorder.
    pub async fn dispatch_scheduled(self: &Arc<Self>, log_ids: Vec<i64>) -> Result<(), Error> {
        if log_ids.is_empty() {
            return Ok(());
        }
        let runs = self
            .store
            .claim_runs(&log_ids, &self.node.node_id, self.node.epoch, now_ms())
            .await?;
        let (jobs, groups) = self.load_jobs_and_groups_claimed(&runs).await;
        self.spawn_fires(runs, &jobs, &groups);
        Ok(())
    }

    /// `dispatch_scheduled` for fires whose jobs are known (`(log id, job id)`): the jobs are
    /// read beside the claim instead of after it, which takes that read off every fire's
    /// lateness.
    pub async fn dispatch_fires(self: &Arc<Self>, fires: &[(i64, i64)]) -> Result<(), Error> {
        if fires.is_empty() {
            return Ok(());
        }
        let log_ids: Vec<i64> = fires.iter().map(|&(log_id, _)| log_id).collect();
        let job_ids: Vec<i64> = fires.iter().map(|&(_, job_id)| job_id).collect();
        let (claimed, loaded) = tokio::join!(
            self.store
                .claim_runs(&log_ids, &self.node.node_id, self.node.epoch, now_ms()),
            self.load_jobs_and_groups(job_ids, HashMap::new())
        );
        let runs = claimed?;
        let (jobs, groups) = match loaded {
            Ok(loaded) => loaded,
            Err(_) => self.load_jobs_and_groups_claimed(&runs).await,
        };
        self.spawn_fires(runs, &jobs, &groups);
        Ok(())
    }

    /// Fires this admin's scan planned: their rows hold nothing the plan does not know, so the
    /// claim returns only ids and each run is rebuilt from its plan, and the jobs are the ones
    /// the scan read (at most a pre-read earlier; stopping or rescheduling a job skips its
    /// planned fires).
    ///
    /// The ring hands over each second's fires a little before the second starts, so the claim
    /// is done by then; a run is never sent before its scheduled time (`send_when_due`).
    pub async fn dispatch_planned(self: &Arc<Self>, fires: Vec<PlannedFire>) -> Result<(), Error> {
        let Some(earliest) = fires.iter().map(|fire| fire.scheduled_at_ms).min() else {
            return Ok(());
        };
        let log_ids: Vec<i64> = fires.iter().map(|fire| fire.log_id).collect();
        let planned_jobs: HashMap<i64, Arc<Job>> = fires
            .iter()
            .map(|fire| (fire.job.id, Arc::clone(&fire.job)))
            .collect();
        // The trigger time recorded is when the runs leave, not the (earlier) claim.
        let trigger_time = now_ms().max(earliest);
        let started = Instant::now();
        let (claimed, loaded) = tokio::join!(
            self.store
                .claim_run_ids(&log_ids, &self.node.node_id, self.node.epoch, trigger_time),
            self.load_jobs_and_groups(Vec::new(), planned_jobs.clone())
        );
        let claimed: HashSet<i64> = claimed?.into_iter().collect();
        let runs: Vec<RunLog> = fires
            .into_iter()
            .filter(|fire| claimed.contains(&fire.log_id))
            .map(|fire| fire.into_claimed_run(&self.node, trigger_time))
            .collect();
        let (jobs, groups) = match loaded {
            Ok(loaded) => loaded,
            Err(_) => self.load_groups_claimed(planned_jobs, runs.len()).await,
        };
        tracing::debug!(
            runs = runs.len(),
            claim_ms = started.elapsed().as_millis() as u64,
            "dispatching planned fires"
        );
        self.send_when_due(runs, jobs, groups);
        Ok(())
    }

    /// Spawns the runs already due now; the others wait, in a tracked task (shutdown waits for
    /// it), for their scheduled instant, earliest first.
    fn send_when_due(
        self: &Arc<Self>,
        runs: Vec<RunLog>,
        jobs: HashMap<i64, Arc<Job>>,
        groups: HashMap<i64, Arc<Group>>,
    ) {
        let now = now_ms();
        let (due, mut early): (Vec<RunLog>, Vec<RunLog>) =
            runs.into_iter().partition(|run| run.scheduled_at_ms <= now);
        self.spawn_fires(due, &jobs, &groups);
        if early.is_empty() {
            return;
        }
        early.sort_by_key(|run| run.scheduled_at_ms);
        let this = Arc::clone(self);
        self.tracker.spawn(async move {
            let mut early = early.into_iter().peekable();
            while let Some(first) = early.peek() {
                let instant = first.scheduled_at_ms;
                let wait_ms = u64::try_from(instant - now_ms()).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(wait_ms)).await;
                let mut group = Vec::new();
                while let Some(run) = early.next_if(|run| run.scheduled_at_ms == instant) {
                    group.push(run);
                }
                this.spawn_fires(group, &jobs, &groups);
            }
        });
    }

    /// One dispatch task per claimed run.
    fn spawn_fires(
        self: &Arc<Self>,
        runs: Vec<RunLog>,
        jobs: &HashMap<i64, Arc<Job>>,
        groups: &HashMap<i64, Arc<Group>>,
    ) {
        let mut addresses_by_group: HashMap<i64, Arc<[String]>> = HashMap::new();
        for run in runs {
            let job = jobs.get(&run.job_id).cloned();
            let group = job
                .as_ref()
                .and_then(|job| groups.get(&job.group_id).cloned());
            let addresses = group.as_ref().map(|group| {
                Arc::clone(
                    addresses_by_group
                        .entry(group.id)
                        .or_insert_with(|| self.candidate_addresses(group, &[]).into()),
                )
            });
            let this = Arc::clone(self);
            self.tracker.spawn(async move {
                let target = match this.fire_target(&run, job, group, addresses) {
                    Ok(target) => target,
                    Err(record) => {
                        let _ = this.recorder_tx.send(record);
                        return;
                    }
                };
                for record in this.fire(run, target).await {
                    // The recorder outlives every dispatch task (app.rs stops it last).
                    let _ = this.recorder_tx.send(record);
                }
            });
        }
    }

    /// Runs a job once now: inserts the run, claims it and fires it, waiting for the outcome.
    /// Returns every log id of the fire: one, or one per shard for SHARDING_BROADCAST.
    pub async fn trigger_job(
        self: &Arc<Self>,
        job: &Job,
        trigger_type: TriggerType,
        params: Option<String>,
        addresses: Vec<String>,
    ) -> Result<Vec<i64>, Error> {
        let new_run = NewRun {
            job_id: job.id,
            group_id: job.group_id,
            fire_key: None,
            status: RunStatus::Pending,
            trigger_type,
            // A manual or parent run is "scheduled" for the instant it was requested: handlers
            // get a real time with their log id, and a broadcast's shards share it.
            scheduled_at_ms: now_ms(),
            handler: job.handler.clone(),
            params: params.unwrap_or_else(|| job.params.clone()),
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            trigger_msg: String::new(),
            owner_node: self.node.node_id.clone(),
            epoch: self.node.epoch,
            dispatch_at_ms: 0,
        };
        let ids = self
            .store
            .insert_runs(std::slice::from_ref(&new_run))
            .await?;
        let runs = self
            .store
            .claim_runs(&ids, &self.node.node_id, self.node.epoch, now_ms())
            .await?;
        let group = self.store.get_group(job.group_id).await?.map(Arc::new);
        let job = Arc::new(job.clone());
        let addresses: Option<Arc<[String]>> = group
            .as_ref()
            .map(|group| self.candidate_addresses(group, &addresses).into());
        let mut records = Vec::with_capacity(runs.len());
        for run in runs {
            let target = self.fire_target(
                &run,
                Some(Arc::clone(&job)),
                group.clone(),
                addresses.clone(),
            );
            match target {
                Ok(target) => records.extend(self.fire(run, target).await),
                Err(record) => records.push(record),
            }
        }
        self.store.record_dispatches(&records).await?;
        if records.is_empty() {
            return Ok(ids);
        }
        Ok(records.iter().map(|record| record.log_id).collect())
    }

    /// One claimed run through the pipeline; returns one record per dispatched run (the run
    /// itself, or every shard of a broadcast fire in shard order). Never fails.
    async fn fire(self: &Arc<Self>, run: RunLog, target: FireTarget) -> Vec<DispatchRecord> {
        let target = Arc::new(target);
        let shards = match self.broadcast_shards(run, &target).await {
            Ok(shards) => shards,
            Err(record) => return vec![record],
        };
        if let [only] = shards.as_slice() {
            return vec![self.dispatch_in_pool(only, &target).await];
        }
        // Each shard waits for its own pool slot; they dispatch concurrently.
        let handles: Vec<_> = shards
            .into_iter()
            .map(|shard| {
                let this = Arc::clone(self);
                let target = Arc::clone(&target);
                let log_id = shard.id;
                let handle = self
                    .tracker
                    .spawn(async move { this.dispatch_in_pool(&shard, &target).await });
                (log_id, handle)
            })
            .collect();
        let mut records = Vec::with_capacity(handles.len());
        for (log_id, handle) in handles {
            records.push(handle.await.unwrap_or_else(|error| {
                failed_record(log_id, format!("dispatch task failed: {error}"), "")
            }));
        }
        records
    }

    /// The job, group and addresses (`None` only when the group is) of a claimed run, or the
    /// record that ends it (job gone, stopped after the fire was planned, group gone).
    fn fire_target(
        &self,
        run: &RunLog,
        job: Option<Arc<Job>>,
        group: Option<Arc<Group>>,
        addresses: Option<Arc<[String]>>,
    ) -> Result<FireTarget, DispatchRecord> {
        let Some(job) = job else {
            return Err(failed_record(
                run.id,
                format!("job {} no longer exists", run.job_id),
                "",
            ));
        };
        if job.status == JobStatus::Stopped
            && matches!(run.trigger_type, TriggerType::Cron | TriggerType::Misfire)
        {
            // Planned before the job was stopped: a stopped job fires no more.
            return Err(DispatchRecord {
                outcome: crate::store::DispatchOutcome::Skipped,
                trigger_msg: format!("job {} was stopped after this fire was planned", job.id),
                ..failed_record(run.id, String::new(), "")
            });
        }
        let (Some(group), Some(addresses)) = (group, addresses) else {
            return Err(failed_record(
                run.id,
                format!("group {} of job {} not found", job.group_id, job.id),
                "",
            ));
        };
        Ok(FireTarget {
            job,
            group,
            addresses,
        })
    }

    /// SHARDING_BROADCAST: a fresh fire (shard 0 of 1, attempt 0) over `n > 1` addresses becomes
    /// `n` runs, shard `i/n` each; any other run is dispatched as it is (a shard retry keeps its
    /// index and total). Fails shard 0 when the shard rows cannot be written.
    async fn broadcast_shards(
        &self,
        run: RunLog,
        target: &FireTarget,
    ) -> Result<Vec<RunLog>, DispatchRecord> {
        let shard_count = target.addresses.len();
        let fresh_fire = run.shard_total == 1 && run.shard_index == 0 && run.attempt == 0;
        if target.job.route_strategy != RouteStrategy::ShardingBroadcast
            || !fresh_fire
            || shard_count < 2
        {
            return Ok(vec![run]);
        }
        let shard_total = i32::try_from(shard_count).unwrap_or(i32::MAX);
        let shards: Vec<NewRun> = (1..shard_total)
            .map(|shard_index| self.shard_row(&run, shard_index, shard_total))
            .collect();
        match self
            .store
            .expand_broadcast(run.id, shard_total, &shards, now_ms())
            .await
        {
            Ok(expanded) if !expanded.is_empty() => Ok(expanded),
            Ok(_) => {
                tracing::warn!(log_id = run.id, "broadcast fire was already expanded");
                Ok(vec![run])
            }
            Err(error) => {
                tracing::error!(%error, log_id = run.id, "writing broadcast shard rows failed");
                Err(failed_record(
                    run.id,
                    format!("broadcast: writing the rows of {shard_total} shards failed"),
                    "",
                ))
            }
        }
    }

    /// The row of shard `shard_index` of a broadcast fire, claimed by this node.
    fn shard_row(&self, run: &RunLog, shard_index: i32, shard_total: i32) -> NewRun {
        NewRun {
            job_id: run.job_id,
            group_id: run.group_id,
            // Scheduled fires keep the UNIQUE key per shard; manual ones have none.
            fire_key: run.fire_key.as_ref().map(|_| {
                NewRun::fire_key(run.job_id, run.scheduled_at_ms, shard_index, run.attempt)
            }),
            status: RunStatus::Running,
            trigger_type: run.trigger_type,
            scheduled_at_ms: run.scheduled_at_ms,
            handler: run.handler.clone(),
            params: run.params.clone(),
            shard_index,
            shard_total,
            attempt: run.attempt,
            trigger_msg: String::new(),
            owner_node: self.node.node_id.clone(),
            epoch: self.node.epoch,
            dispatch_at_ms: 0,
        }
    }

    /// Waits for a pool slot (bounded), then dispatches; a full pool makes an `overloaded:`
    /// failure. The dispatch time feeds the fast/slow decision.
    async fn dispatch_in_pool(&self, run: &RunLog, target: &FireTarget) -> DispatchRecord {
        let permit = match self.pools.acquire(run.job_id, now_ms()).await {
            Ok(permit) => permit,
            Err(overloaded) => {
                tracing::warn!(job_id = run.job_id, log_id = run.id, pool = %overloaded.pool,
                    "trigger pool overloaded; run recorded as failed");
                return failed_record(run.id, overloaded.to_string(), "");
            }
        };
        let started = Instant::now();
        let record = self.dispatch_one(run, target, permit.pool).await;
        self.pools
            .record_dispatch_time(run.job_id, started.elapsed(), now_ms());
        drop(permit);
        record
    }

    fn candidate_addresses(&self, group: &Group, address_override: &[String]) -> Vec<String> {
        if !address_override.is_empty() {
            return address_override.to_vec();
        }
        match group.address_type {
            crate::model::AddressType::Manual => group.addresses.clone(),
            crate::model::AddressType::Auto => self.registry.online_addresses(&group.app_name),
        }
    }

    /// Jobs and groups of runs this node has just claimed: retried until the database answers,
    /// since nobody else fires or fails runs that are RUNNING without an address while this node
    /// lives (the lost-run monitor only judges those of admins that are gone).
    async fn load_jobs_and_groups_claimed(
        &self,
        runs: &[RunLog],
    ) -> (HashMap<i64, Arc<Job>>, HashMap<i64, Arc<Group>>) {
        let job_ids: Vec<i64> = runs.iter().map(|run| run.job_id).collect();
        self.load_until_answered(job_ids, HashMap::new(), runs.len())
            .await
    }

    /// The groups of planned fires this node has just claimed (see
    /// `load_jobs_and_groups_claimed`).
    async fn load_groups_claimed(
        &self,
        jobs: HashMap<i64, Arc<Job>>,
        runs: usize,
    ) -> (HashMap<i64, Arc<Job>>, HashMap<i64, Arc<Group>>) {
        self.load_until_answered(Vec::new(), jobs, runs).await
    }

    async fn load_until_answered(
        &self,
        job_ids: Vec<i64>,
        known: HashMap<i64, Arc<Job>>,
        runs: usize,
    ) -> (HashMap<i64, Arc<Job>>, HashMap<i64, Arc<Group>>) {
        let mut delay = Duration::from_millis(100);
        loop {
            match self
                .load_jobs_and_groups(job_ids.clone(), known.clone())
                .await
            {
                Ok(loaded) => return loaded,
                Err(error) => {
                    tracing::warn!(%error, runs, "loading jobs of claimed fires failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// `known` jobs plus those of `job_ids` read from the store, and the groups of all of them.
    async fn load_jobs_and_groups(
        &self,
        mut job_ids: Vec<i64>,
        mut known: HashMap<i64, Arc<Job>>,
    ) -> Result<(HashMap<i64, Arc<Job>>, HashMap<i64, Arc<Group>>), Error> {
        job_ids.sort_unstable();
        job_ids.dedup();
        if !job_ids.is_empty() {
            for job in self.store.get_jobs(&job_ids).await? {
                known.insert(job.id, Arc::new(job));
            }
        }
        let mut groups = HashMap::new();
        for job in known.values() {
            if !groups.contains_key(&job.group_id)
                && let Some(group) = self.store.get_group(job.group_id).await?
            {
                groups.insert(group.id, Arc::new(group));
            }
        }
        Ok((known, groups))
    }
}

/// A FAILED outcome (trigger code 500) for a run that was not delivered.
fn failed_record(log_id: i64, message: String, address: &str) -> DispatchRecord {
    DispatchRecord {
        log_id,
        outcome: crate::store::DispatchOutcome::Failed,
        trigger_code: dispatch::TRIGGER_FAILED,
        trigger_msg: message,
        executor_address: address.to_string(),
        finished_ms: now_ms(),
    }
}
