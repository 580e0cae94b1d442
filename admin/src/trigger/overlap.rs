//! The job's overlap policy, applied to a scheduled fire at its instant, before it takes a pool
//! slot (`model::overlap` decides on what the store says of the job's earlier runs):
//!
//! ```text
//! fresh fire of the schedule, policy not ALLOW_ALL ─▶ store.overlap_state(job, before this run)
//!   ─▶ Send │ Skip ─▶ SKIPPED record naming the run still going
//!           │ Wait ─▶ store.park_run (WAITING; BUFFER_ONE: unless one waits already)
//!           │ CancelThenSend ─▶ Kill each earlier run on its executor, then send
//! ```
//! A WAITING run is released by the follow-up loop once its job has nothing RUNNING
//! (`Store::release_waiting`) and comes back through `Fires::Released`, not judged again.

use super::retry::until_answered;
use super::{Claimed, Target, Trigger};
use crate::metrics::Dispatch;
use crate::model::OverlapPolicy;
use crate::model::overlap::{self, Verdict};
use crate::store::{DispatchOutcome, DispatchRecord, Parked};

/// What the policy made of a fire.
enum Overlapped {
    /// Send it.
    Send,
    /// It ends here with this record (SKIPPED).
    Ended(DispatchRecord),
    /// It is not sent now and has no record to write: it waits (WAITING), or it is no longer
    /// this node's, or the admin is stopping (it stays claimed, for whoever takes it over).
    Held,
}

impl Trigger {
    /// Applies the fire's overlap policy (only to fresh fires of the schedule, not released
    /// ones; manual and API runs, retries and child runs are always sent). `None`: send it;
    /// else the records it ends with (none while it waits or is not this node's any more).
    pub(super) async fn overlap(
        &self,
        claimed: &Claimed,
        target: &Target,
    ) -> Option<Vec<DispatchRecord>> {
        match self.overlap_verdict(claimed, target).await {
            Overlapped::Send => None,
            Overlapped::Ended(record) => Some(vec![record]),
            Overlapped::Held => Some(Vec::new()),
        }
    }

    async fn overlap_verdict(&self, claimed: &Claimed, target: &Target) -> Overlapped {
        let fire = &claimed.fire;
        let policy = fire.job.policy.overlap_policy;
        if claimed.released
            || policy == OverlapPolicy::AllowAll
            || !fire.is_of_schedule()
            || !fire.is_fresh()
        {
            return Overlapped::Send;
        }
        let state = until_answered(&self.tasks, 1, || {
            self.store.overlap_state(fire.job.id, fire.log_id)
        })
        .await;
        let Ok(state) = state else {
            return Overlapped::Held;
        };
        match overlap::decide(policy, &state) {
            Verdict::Send => Overlapped::Send,
            Verdict::Skip(reason) => {
                Overlapped::Ended(self.skipped_by_overlap(fire.log_id, reason))
            }
            Verdict::Wait(message) => self.park(claimed, policy, &message).await,
            Verdict::CancelThenSend(runs) => {
                for (log_id, address) in runs {
                    self.cancel(fire.job.id, log_id, &address, target).await;
                }
                Overlapped::Send
            }
        }
    }

    /// Holds the fire WAITING (BUFFER_ONE: unless a run of the job waits already).
    async fn park(&self, claimed: &Claimed, policy: OverlapPolicy, message: &str) -> Overlapped {
        let fire = &claimed.fire;
        let max_waiting = if policy == OverlapPolicy::BufferOne {
            1
        } else {
            0
        };
        let parked = until_answered(&self.tasks, 1, || {
            self.store.park_run(
                fire.log_id,
                fire.job.id,
                &self.node,
                claimed.trigger_time_ms,
                max_waiting,
                message,
            )
        })
        .await;
        match parked {
            Ok(Parked::Waiting) => {
                tracing::debug!(log_id = %fire.log_id, job_id = %fire.job.id, "{message}");
                Overlapped::Held
            }
            Ok(Parked::Full(waiting)) => Overlapped::Ended(self.skipped_by_overlap(
                fire.log_id,
                format!("overlap policy {policy}: run {waiting} of this job already waits"),
            )),
            Ok(Parked::Gone) | Err(_) => Overlapped::Held,
        }
    }

    /// Kills an earlier run (CANCEL_OTHER) on its executor; one not sent yet has nothing to
    /// kill. A kill that fails is logged: the new fire goes all the same.
    async fn cancel(
        &self,
        job_id: crate::model::JobId,
        log_id: crate::model::LogId,
        address: &str,
        target: &Target,
    ) {
        if address.is_empty() {
            return;
        }
        let token = &target.group.access_token;
        match self.executors.kill(address, token, job_id, log_id).await {
            Ok((killed, message)) => {
                tracing::info!(%job_id, %log_id, killed, %message, "overlap policy CANCEL_OTHER: killed the earlier run");
            }
            Err(error) => {
                tracing::warn!(%job_id, %log_id, %error, "overlap policy CANCEL_OTHER: killing the earlier run failed");
            }
        }
    }

    fn skipped_by_overlap(&self, log_id: crate::model::LogId, reason: String) -> DispatchRecord {
        crate::metrics::dispatched(Dispatch::Skipped, 1);
        DispatchRecord {
            outcome: DispatchOutcome::Skipped,
            trigger_msg: reason,
            ..self.record(log_id, String::new(), "")
        }
    }
}
