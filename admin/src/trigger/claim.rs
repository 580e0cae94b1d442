//! Claiming: fires become this node's, fenced by owner and epoch, admitted to the bound on
//! unsent runs, with their groups (and jobs) read beside the claim. What `Trigger::dispatch`
//! does first with each kind of `Fires`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::admission::{self, Slot};
use super::{Claimed, Target, Trigger};
use crate::error::Error;
use crate::metrics::Dispatch;
use crate::model::{Fire, GroupId, JobId, LogId, RunStatus, UnwrittenFire};
use crate::store::DispatchRecord;
use crate::store::writer_gate::urgent_write;

impl Trigger {
    /// Claims fires whose rows are written; their groups are read beside the claim, so that
    /// read adds nothing to the fires' lateness.
    pub(super) async fn claim_written(
        &self,
        fires: Vec<Fire>,
        trigger_time_ms: i64,
    ) -> Result<(Vec<Claimed>, HashMap<GroupId, Target>), Error> {
        let started = Instant::now();
        let offered = fires.len();
        let (fires, slots) = self.admit(fires).await?;
        if fires.is_empty() {
            return Ok((Vec::new(), HashMap::new()));
        }
        let runs: Vec<(LogId, JobId)> = fires
            .iter()
            .map(|fire| (fire.log_id, fire.job_id()))
            .collect();
        let group_ids: Vec<GroupId> = fires.iter().map(Fire::group_id).collect();
        let claimed_at = self.lease_mark();
        let (claimed, groups) = tokio::join!(
            // Ahead of background writes: a late claim is a late fire (`store::writer_gate`).
            urgent_write(self.store.claim_run_ids(&runs, &self.node, trigger_time_ms)),
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
                claimed_at,
            })
            .collect();
        self.claim_pace.observe(offered, started.elapsed());
        let targets = match groups {
            Ok(groups) => self.targets(groups, &[]),
            Err(_) => self.load_targets_until_answered(&claimed, &[]).await?,
        };
        tracing::debug!(
            offered,
            ids = ?claimed.iter().map(|claimed| claimed.fire.log_id.0).collect::<Vec<_>>(),
            runs = claimed.len(),
            claim_ms = started.elapsed().as_millis() as u64,
            "dispatching written fires"
        );
        Ok((claimed, targets))
    }

    /// Admits the earliest fires while the bound on outstanding runs allows (`admission`); the
    /// rest are recorded SKIPPED with the reason at once. Returns the admitted fires, earliest
    /// first, each with its slot.
    pub(super) async fn admit(
        &self,
        mut fires: Vec<Fire>,
    ) -> Result<(Vec<Fire>, Vec<Slot>), Error> {
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
    pub(super) async fn claim_stored(
        &self,
        log_ids: &[LogId],
        trigger_time_ms: i64,
    ) -> Result<(Vec<Claimed>, Vec<DispatchRecord>), Error> {
        if log_ids.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let claimed_at = self.lease_mark();
        let runs = self
            .store
            .claim_runs(log_ids, &self.node, trigger_time_ms)
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
                    claimed_at,
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
    pub(super) async fn dispatch_requested(
        self: &Arc<Self>,
        fire: UnwrittenFire,
        addresses: Vec<String>,
    ) -> Result<Vec<LogId>, Error> {
        let row = fire.row(&self.node, RunStatus::Pending, "");
        let ids = self.store.insert_runs(std::slice::from_ref(&row)).await?;
        let claimed_at = self.lease_mark();
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
                claimed_at,
            })
            .collect();
        let groups = self.store.get_groups(&[fire.group_id()]).await?;
        let targets = self.targets(groups, &addresses);
        let mut records = Vec::with_capacity(claimed.len());
        for claimed in claimed {
            records.extend(self.fire(claimed, &targets).await);
        }
        self.store.record_dispatches(&self.node, &records).await?;
        if records.is_empty() {
            return Ok(ids);
        }
        Ok(records.iter().map(|record| record.log_id).collect())
    }
}
