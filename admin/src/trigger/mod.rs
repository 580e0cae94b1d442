//! WHERE and HOW a run fires: expand a broadcast into its shards, wait for a trigger-pool slot,
//! pick the executor by route strategy, call `ExecutorService.Run` through a cached channel
//! (runs to one executor at the same moment share one `RunBatch` call, see `batcher`),
//! record the outcome on the log row.
//!
//! ```text
//! ring / recovery / retries ─▶ dispatch_scheduled(log ids) ─▶ claim rows (owner/epoch fence)
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

use std::collections::HashMap;
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

/// The job and group a claimed run fires for, shared by its shards' tasks.
struct FireTarget {
    job: Job,
    group: Group,
    /// The address list routed over, taken once per fire so every shard sees the same list.
    addresses: Vec<String>,
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
        self.spawn_fires(runs, jobs, groups);
        Ok(())
    }

    /// `dispatch_scheduled` for fires whose jobs are known (the ring's): the jobs are read beside
    /// the claim instead of after it, which takes that read off every fire's lateness.
    pub async fn dispatch_fires(self: &Arc<Self>, fires: &[(i64, i64)]) -> Result<(), Error> {
        if fires.is_empty() {
            return Ok(());
        }
        let log_ids: Vec<i64> = fires.iter().map(|&(log_id, _)| log_id).collect();
        let job_ids: Vec<i64> = fires.iter().map(|&(_, job_id)| job_id).collect();
        let started = Instant::now();
        let (claimed, loaded) = tokio::join!(
            self.store
                .claim_runs(&log_ids, &self.node.node_id, self.node.epoch, now_ms()),
            self.load_jobs_and_groups(job_ids)
        );
        let runs = claimed?;
        let (jobs, groups) = match loaded {
            Ok(loaded) => loaded,
            Err(_) => self.load_jobs_and_groups_claimed(&runs).await,
        };
        tracing::debug!(
            runs = runs.len(),
            claim_and_load_ms = started.elapsed().as_millis() as u64,
            "dispatching scheduled fires"
        );
        self.spawn_fires(runs, jobs, groups);
        Ok(())
    }

    /// One dispatch task per claimed run.
    fn spawn_fires(
        self: &Arc<Self>,
        runs: Vec<RunLog>,
        jobs: HashMap<i64, Job>,
        groups: HashMap<i64, Group>,
    ) {
        for run in runs {
            let job = jobs.get(&run.job_id).cloned();
            let group = job
                .as_ref()
                .and_then(|job| groups.get(&job.group_id).cloned());
            let this = Arc::clone(self);
            self.tracker.spawn(async move {
                for record in this.fire(run, job, group, &[]).await {
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
        let group = self.store.get_group(job.group_id).await?;
        let mut records = Vec::with_capacity(runs.len());
        for run in runs {
            records.extend(
                self.fire(run, Some(job.clone()), group.clone(), &addresses)
                    .await,
            );
        }
        self.store.record_dispatches(&records).await?;
        if records.is_empty() {
            return Ok(ids);
        }
        Ok(records.iter().map(|record| record.log_id).collect())
    }

    /// One claimed run through the pipeline; returns one record per dispatched run (the run
    /// itself, or every shard of a broadcast fire in shard order). Never fails.
    async fn fire(
        self: &Arc<Self>,
        run: RunLog,
        job: Option<Job>,
        group: Option<Group>,
        address_override: &[String],
    ) -> Vec<DispatchRecord> {
        let target = match self.fire_target(&run, job, group, address_override) {
            Ok(target) => Arc::new(target),
            Err(record) => return vec![record],
        };
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

    /// The job and group of a claimed run, or the record that ends it (job gone, stopped after
    /// the fire was planned, group gone).
    fn fire_target(
        &self,
        run: &RunLog,
        job: Option<Job>,
        group: Option<Group>,
        address_override: &[String],
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
        let Some(group) = group else {
            return Err(failed_record(
                run.id,
                format!("group {} of job {} not found", job.group_id, job.id),
                "",
            ));
        };
        let addresses = self.candidate_addresses(&group, address_override);
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
    ) -> (HashMap<i64, Job>, HashMap<i64, Group>) {
        let mut delay = Duration::from_millis(100);
        let job_ids: Vec<i64> = runs.iter().map(|run| run.job_id).collect();
        loop {
            match self.load_jobs_and_groups(job_ids.clone()).await {
                Ok(loaded) => return loaded,
                Err(error) => {
                    tracing::warn!(%error, runs = runs.len(),
                        "loading jobs of claimed fires failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    async fn load_jobs_and_groups(
        &self,
        mut job_ids: Vec<i64>,
    ) -> Result<(HashMap<i64, Job>, HashMap<i64, Group>), Error> {
        job_ids.sort_unstable();
        job_ids.dedup();
        let jobs: HashMap<i64, Job> = self
            .store
            .get_jobs(&job_ids)
            .await?
            .into_iter()
            .map(|job| (job.id, job))
            .collect();
        let mut groups = HashMap::new();
        for job in jobs.values() {
            if !groups.contains_key(&job.group_id)
                && let Some(group) = self.store.get_group(job.group_id).await?
            {
                groups.insert(group.id, group);
            }
        }
        Ok((jobs, groups))
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
