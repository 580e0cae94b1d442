//! WHERE and HOW a run fires: pick the executor by route strategy, call `ExecutorService.Run`
//! through a cached channel, record the outcome on the log row.
//!
//! ```text
//! ring / recovery ─▶ dispatch_scheduled(log ids) ─▶ claim rows (owner/epoch fence)
//! TriggerJob ──────▶ trigger_job(job) ─▶ insert row ─▶ claim
//!                          └─▶ dispatch_one: addresses → route → Run RPC → DispatchRecord
//!                                                                  └─▶ recorder (batched writes)
//! ```
//! Dispatches run concurrently, bounded by a semaphore: when it is exhausted callers wait
//! (back-pressure) rather than dropping fires.

pub mod clients;
pub mod dispatch;
pub mod recorder;
pub mod route;

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc};
use tokio_util::task::TaskTracker;

use crate::error::Error;
use crate::model::{Group, Job, NewRun, RunLog, RunStatus, TriggerType, now_ms};
use crate::registry::Registry;
use crate::store::{DispatchRecord, Store};
pub use dispatch::RunLogChunk;

/// This admin's identity in the cluster: fires it writes and claims carry both values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub node_id: String,
    pub epoch: i64,
}

/// The trigger pipeline shared by the scheduler and the API.
pub struct Trigger {
    store: Store,
    registry: Arc<Registry>,
    clients: clients::ExecutorClients,
    routes: route::RouteState,
    node: NodeIdentity,
    permits: Arc<Semaphore>,
    recorder_tx: mpsc::UnboundedSender<DispatchRecord>,
    tracker: TaskTracker,
}

impl Trigger {
    /// Builds the pipeline; dispatch outcomes of scheduled fires go to `recorder_tx`.
    pub fn new(
        store: Store,
        registry: Arc<Registry>,
        node: NodeIdentity,
        executor_timeout: std::time::Duration,
        concurrency: usize,
        recorder_tx: mpsc::UnboundedSender<DispatchRecord>,
        tracker: TaskTracker,
    ) -> Trigger {
        Trigger {
            store,
            registry,
            clients: clients::ExecutorClients::new(executor_timeout),
            routes: route::RouteState::default(),
            node,
            permits: Arc::new(Semaphore::new(concurrency)),
            recorder_tx,
            tracker,
        }
    }

    /// Forgets the channel of an executor that left.
    pub fn evict_executor(&self, address: &str) {
        self.clients.evict(address);
    }

    /// Claims scheduled runs (only those still PENDING and owned by this node/epoch) and
    /// dispatches each concurrently; returns once all are handed to dispatch tasks.
    pub async fn dispatch_scheduled(self: &Arc<Self>, log_ids: Vec<i64>) -> Result<(), Error> {
        if log_ids.is_empty() {
            return Ok(());
        }
        let runs = self
            .store
            .claim_runs(&log_ids, &self.node.node_id, self.node.epoch, now_ms())
            .await?;
        let (jobs, groups) = self.load_jobs_and_groups(&runs).await?;
        for run in runs {
            // Waiting for a permit is the back-pressure: the ring keeps its order, nothing drops.
            let permit = Arc::clone(&self.permits).acquire_owned().await;
            let Ok(permit) = permit else { break };
            let job = jobs.get(&run.job_id).cloned();
            let group = job
                .as_ref()
                .and_then(|job| groups.get(&job.group_id).cloned());
            let this = Arc::clone(self);
            self.tracker.spawn(async move {
                let record = this
                    .dispatch_one(&run, job.as_ref(), group.as_ref(), &[])
                    .await;
                drop(permit);
                // The recorder outlives every dispatch task (app.rs stops it last).
                let _ = this.recorder_tx.send(record);
            });
        }
        Ok(())
    }

    /// Runs a job once now: inserts the run, claims it and dispatches it, waiting for the outcome.
    pub async fn trigger_job(
        &self,
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
            scheduled_at_ms: 0,
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
        for run in &runs {
            records.push(
                self.dispatch_one(run, Some(job), group.as_ref(), &addresses)
                    .await,
            );
        }
        self.store.record_dispatches(&records).await?;
        Ok(ids)
    }

    async fn load_jobs_and_groups(
        &self,
        runs: &[RunLog],
    ) -> Result<(HashMap<i64, Job>, HashMap<i64, Group>), Error> {
        let mut job_ids: Vec<i64> = runs.iter().map(|run| run.job_id).collect();
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
