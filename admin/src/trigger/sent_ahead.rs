//! The runs this admin sent ahead whose start has not come yet, by job: what a stop, edit or
//! delete of the job through this admin cancels on the executors at once, even a run whose
//! dispatch is not recorded yet (`send_ahead`). The rows record the rest, whoever sent them
//! ([`RecordedHeld`]).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::model::{JobId, LogId};

/// A run this admin sent ahead, remembered until its start so a change of its job can cancel
/// it on the executor.
#[derive(Clone, Debug)]
pub(super) struct HeldRun {
    pub(super) log_id: LogId,
    pub(super) address: String,
    pub(super) token: String,
    /// Its scheduled start, in the admin's clock.
    pub(super) start_ms: i64,
}

/// A job's runs the database records as sent ahead and maybe still held, read by
/// `Trigger::recorded_held` (before a delete takes the rows) and cancelled by
/// `Trigger::cancel_held_recorded`.
#[derive(Debug, Default)]
pub struct RecordedHeld {
    pub(super) runs: Vec<HeldRun>,
}

/// The runs this admin sent ahead whose start has not come yet, by job.
#[derive(Debug, Default)]
pub(super) struct SentAhead {
    by_job: Mutex<HashMap<JobId, Vec<HeldRun>>>,
}

impl SentAhead {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, Vec<HeldRun>>> {
        self.by_job
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Remembers a run about to be sent ahead (before it leaves, so a cancel racing the send
    /// still names it); forgets the job's runs whose start has passed.
    pub(super) fn remember(&self, job_id: JobId, run: HeldRun, now_ms: i64) {
        let mut by_job = self.lock();
        let runs = by_job.entry(job_id).or_default();
        runs.retain(|held| held.start_ms > now_ms);
        runs.push(run);
    }

    /// Forgets a run the executor did not take.
    pub(super) fn forget(&self, job_id: JobId, log_id: LogId) {
        let mut by_job = self.lock();
        if let Some(runs) = by_job.get_mut(&job_id) {
            runs.retain(|held| held.log_id != log_id);
            if runs.is_empty() {
                by_job.remove(&job_id);
            }
        }
    }

    /// Takes the job's runs whose start is still to come.
    pub(super) fn take(&self, job_id: JobId, now_ms: i64) -> Vec<HeldRun> {
        let runs = self.lock().remove(&job_id).unwrap_or_default();
        runs.into_iter()
            .filter(|held| held.start_ms > now_ms)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(log_id: i64, start_ms: i64) -> HeldRun {
        HeldRun {
            log_id: LogId(log_id),
            address: "http://executor:1".to_string(),
            token: String::new(),
            start_ms,
        }
    }

    fn log_ids(runs: &[HeldRun]) -> Vec<i64> {
        runs.iter().map(|run| run.log_id.0).collect()
    }

    #[test]
    fn only_runs_whose_start_is_to_come_are_cancelled() {
        let sent = SentAhead::default();
        let job = JobId(7);
        sent.remember(job, held(1, 1_000), 0);
        sent.remember(job, held(2, 2_000), 0);
        // Remembering at 1 500 forgets run 1: it has started.
        sent.remember(job, held(3, 3_000), 1_500);
        sent.forget(job, LogId(3));
        assert_eq!(log_ids(&sent.take(job, 1_500)), vec![2]);
        assert!(sent.take(job, 1_500).is_empty(), "taken once");
        sent.remember(job, held(4, 4_000), 0);
        assert!(sent.take(job, 4_000).is_empty(), "its start came");
        assert!(sent.take(JobId(8), 0).is_empty());
    }
}
