//! Sending: claimed fires wait for their instant, broadcasts expand into their shards, each
//! shard takes a trigger-pool slot, is routed to an executor and sent, and every fire ends in a
//! record.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use super::dispatch::Dispatched;
use super::recorder::Outcome;
use super::retry::until_answered;
use super::{Claimed, Target, Trigger, trace};
use crate::error::Error;
use crate::metrics::Dispatch;
use crate::model::{Fire, Group, GroupId, Job, JobId, JobStatus, RouteStrategy, RunStatus};
use crate::store::{DispatchOutcome, DispatchRecord};

impl Trigger {
    /// Spawns the fires already due now; the others wait, in a tracked task (shutdown waits for
    /// it), for their time to leave, earliest first: their scheduled instant, or with
    /// send-ahead that much before it (`send_ahead`).
    pub(super) fn send_when_due(
        self: &Arc<Self>,
        claimed: Vec<Claimed>,
        targets: HashMap<GroupId, Target>,
    ) {
        let now = self.now_ms();
        // A backfill's run is due at once: its instant is the occurrence it stands for.
        let (due, early): (Vec<Claimed>, Vec<Claimed>) = claimed.into_iter().partition(|claimed| {
            claimed.fire.is_backfill() || self.send_at_ms(claimed, &targets) <= now
        });
        let targets = Arc::new(targets);
        self.spawn_fires(due, &targets);
        if early.is_empty() {
            return;
        }
        let mut early: Vec<(i64, Claimed)> = early
            .into_iter()
            .map(|claimed| (self.send_at_ms(&claimed, &targets), claimed))
            .collect();
        early.sort_by_key(|(send_at, _)| *send_at);
        let this = Arc::clone(self);
        self.tasks.spawn(async move {
            let mut early = early.into_iter().peekable();
            while let Some((instant, _)) = early.peek() {
                let instant = *instant;
                let wait_ms = u64::try_from(instant - this.now_ms()).unwrap_or(0);
                // At shutdown the early fires stay claimed and unsent, like a lapsed one above:
                // whoever takes this node's runs over sends them.
                tokio::select! {
                    _ = this.tasks.stopping().cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(wait_ms)) => {}
                }
                let mut batch = Vec::new();
                while let Some((_, claimed)) = early.next_if(|(send_at, _)| *send_at == instant) {
                    batch.push(claimed);
                }
                this.spawn_fires(batch, &targets);
            }
        });
    }

    /// One dispatch task per claimed fire; outcomes go to the recorder.
    pub(super) fn spawn_fires(
        self: &Arc<Self>,
        claimed: Vec<Claimed>,
        targets: &Arc<HashMap<GroupId, Target>>,
    ) {
        for claimed in claimed {
            self.tasks
                .spawn(Arc::clone(self).dispatch_task(claimed, Arc::clone(targets)));
        }
    }

    /// The task that takes one claimed fire to its records. A second's burst spawns all of its
    /// tasks at once and most wait for a pool slot, so the task is kept small: the larger steps
    /// (`overlap`, `broadcast_shards`, `send_allowed`, `dispatch_one`) are boxed, allocated only
    /// once a task reaches them.
    pub(super) async fn dispatch_task(
        self: Arc<Self>,
        claimed: Claimed,
        targets: Arc<HashMap<GroupId, Target>>,
    ) {
        // The slot goes with the first record (a broadcast fire's shard 0) and is freed once
        // the recorder has written it.
        let mut slot = claimed.slot.clone();
        for record in self.fire(claimed, &targets).await {
            self.to_recorder(Outcome {
                record,
                slot: slot.take(),
            });
        }
    }

    /// One claimed fire through the pipeline; returns one record per dispatched run (the run
    /// itself, or every shard of a broadcast fire in shard order). Never fails.
    pub(super) async fn fire(
        self: &Arc<Self>,
        claimed: Claimed,
        targets: &HashMap<GroupId, Target>,
    ) -> Vec<DispatchRecord> {
        let target = match self.target_of(&claimed.fire, targets) {
            Ok(target) => target,
            Err(record) => return vec![traced_unsent(&claimed.fire, record)],
        };
        // Boxed, as the larger steps below are: a waiting task stays small (`dispatch_task`).
        if let Some(ended) = Box::pin(self.overlap(&claimed, &target)).await {
            let fire = &claimed.fire;
            return ended
                .into_iter()
                .map(|record| traced_unsent(fire, record))
                .collect();
        }
        // Kept only for its span if the shard rows cannot be written (no copy when not tracing).
        let traced_fire = crate::telemetry::tracer().map(|_| claimed.fire.clone());
        let shards = match Box::pin(self.broadcast_shards(claimed, &target)).await {
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
    pub(super) fn target_of(
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
    pub(super) async fn broadcast_shards(
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
                    // Written as this node's while the fire was: they share its history.
                    claimed_at: claimed.claimed_at,
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
    /// failure. The dispatch time feeds the fast/slow decision. `None` at shutdown, or when
    /// another admin took the run over: it stays claimed and unsent, for whoever takes it.
    pub(super) async fn dispatch_in_pool(
        &self,
        claimed: &Claimed,
        target: &Target,
    ) -> Option<DispatchRecord> {
        let fire = &claimed.fire;
        let mut owned_since = Box::pin(self.send_allowed(fire.log_id, claimed.claimed_at)).await?;
        // Before the pool slot: a run that can no longer go ahead waits without holding one.
        if !self.wait_unless_ahead(fire, target).await {
            return None;
        }
        // The fire span covers the pool wait too, so a full pool shows in the trace.
        let trace = trace::FireTrace::start(fire);
        let log_span = trace::log_span(trace.as_ref(), fire);
        let mut record = async {
            loop {
                let permit = match self.pools.acquire(fire.job_id(), self.now_ms()).await {
                    Ok(permit) => permit,
                    Err(overloaded) => {
                        if let Some(runs) = self.pools.overload_to_warn(Instant::now()) {
                            tracing::warn!(job_id = %fire.job_id(), log_id = %fire.log_id,
                                pool = %overloaded.pool, runs,
                                "trigger pool overloaded; runs recorded as failed (this one \
                                and those since the last such warning, at most one a second)");
                        }
                        return Some(self.failed_record_as(
                            Dispatch::Overloaded,
                            fire.log_id,
                            overloaded.to_string(),
                            "",
                        ));
                    }
                };
                // The pool wait may have outlasted the lease: judged again, without the slot.
                if !self.lease_held_since(owned_since) {
                    drop(permit);
                    owned_since = Box::pin(self.send_allowed(fire.log_id, owned_since)).await?;
                    continue;
                }
                // An overloaded admin degrades: its late fires become misfires, not late runs.
                if let Some(late_ms) = self.too_late_to_send(claimed) {
                    return Some(self.skipped_as_late(fire.log_id, late_ms));
                }
                let started = Instant::now();
                let instant_ms =
                    match Box::pin(self.dispatch_one(claimed, target, permit.pool, trace.as_ref()))
                        .await
                    {
                        Dispatched::Record(record) => {
                            tracing::debug!(log_id = %fire.log_id, job_id = %fire.job_id(),
                                address = %record.executor_address, outcome = ?record.outcome,
                                released = claimed.released, "run dispatched");
                            self.pools.record_dispatch_time(
                                fire.job_id(),
                                started.elapsed(),
                                self.now_ms(),
                            );
                            return Some(record);
                        }
                        Dispatched::AtInstant { instant_ms } => instant_ms,
                        // Another admin sends it: it stays claimed and unsent, for that admin.
                        Dispatched::TakenOver => return None,
                    };
                // Its executor can no longer hold it (a narrow race with the check above): the
                // slot goes back while the run waits for its instant, then the run takes a slot
                // and is routed again, to start at once.
                drop(permit);
                if !self.wait_for_instant(instant_ms).await {
                    return None;
                }
                owned_since = Box::pin(self.send_allowed(fire.log_id, owned_since)).await?;
            }
        }
        .instrument(log_span)
        .await?;
        if let Some(trace) = trace {
            trace.end(&mut record);
        }
        Some(record)
    }

    /// The target of each group: the addresses to route over (`address_override` when not
    /// empty, else the group's manual list or its live executors).
    pub(super) fn targets(
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
    pub(super) async fn load_targets_until_answered(
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
    pub(super) async fn load_jobs_until_answered(
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
