//! Runs sent ahead (`RunRequest.start_at_ms` > 0): accepted at once, held in one ordered map,
//! and started by one timer task when their start comes in this executor's clock.
//!
//! ```text
//! submit, start_at_ms in the future ─▶ Held{(start, log id) → run} ─▶ hold task wakes at the
//!   earliest start ─▶ the run is queued as if it had just arrived (block strategy applied then)
//! Kill(job) ─▶ the job's held runs never start (KILLED, "cancelled before start")
//! Kill(held_only, log id) ─▶ that run never starts; not here yet: its id is refused later
//! ```
//! Held runs are in the heartbeats' running log ids, so the admin counts them as alive. The
//! task re-reads the wall clock at least every [`MAX_NAP`]: a step of the clock moves the
//! starts with it within that bound, as the admin's offset estimate follows it.

use std::collections::BTreeMap;
use std::time::Duration;

use super::QueuedRun;

/// Longest the hold task sleeps without looking at the wall clock again.
pub(super) const MAX_NAP: Duration = Duration::from_millis(250);

/// The held runs, by start (executor clock, ms) then log id.
#[derive(Default)]
pub(super) struct Held {
    runs: BTreeMap<(i64, i64), QueuedRun>,
    /// Whether the hold task was started (it is started with the first held run).
    pub(super) task_started: bool,
}

impl Held {
    pub(super) fn insert(&mut self, start_at_ms: i64, run: QueuedRun) {
        self.runs.insert((start_at_ms, run.request.log_id), run);
    }

    /// Takes the earliest run if its start is at or before `now_ms`.
    pub(super) fn take_next_due(&mut self, now_ms: i64) -> Option<QueuedRun> {
        let entry = self.runs.first_entry()?;
        (entry.key().0 <= now_ms).then(|| entry.remove())
    }

    #[cfg(test)]
    fn take_due(&mut self, now_ms: i64) -> Vec<QueuedRun> {
        std::iter::from_fn(|| self.take_next_due(now_ms)).collect()
    }

    /// How long until the earliest start, at most [`MAX_NAP`].
    pub(super) fn nap(&self, now_ms: i64) -> Duration {
        let until_next = self.runs.keys().next().map_or(MAX_NAP, |(start, _)| {
            Duration::from_millis(u64::try_from(start - now_ms).unwrap_or(0))
        });
        until_next.min(MAX_NAP)
    }

    /// Takes the held runs of a job.
    pub(super) fn take_job(&mut self, job_id: i64) -> Vec<QueuedRun> {
        self.take_where(|run| run.request.job_id == job_id)
    }

    /// Takes the held run with this log id, if held.
    pub(super) fn take_log(&mut self, log_id: i64) -> Option<QueuedRun> {
        self.take_where(|run| run.request.log_id == log_id).pop()
    }

    /// Takes every held run.
    pub(super) fn take_all(&mut self) -> Vec<QueuedRun> {
        std::mem::take(&mut self.runs).into_values().collect()
    }

    fn take_where(&mut self, matches: impl Fn(&QueuedRun) -> bool) -> Vec<QueuedRun> {
        let keys: Vec<(i64, i64)> = self
            .runs
            .iter()
            .filter(|(_, run)| matches(run))
            .map(|(key, _)| *key)
            .collect();
        keys.iter()
            .filter_map(|key| self.runs.remove(key))
            .collect()
    }

    pub(super) fn log_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.runs.keys().map(|(_, log_id)| *log_id)
    }
}

#[cfg(test)]
mod tests {
    use xjob_proto::pb;

    use super::*;

    fn run(job_id: i64, log_id: i64) -> QueuedRun {
        QueuedRun {
            request: pb::RunRequest {
                job_id,
                log_id,
                ..Default::default()
            },
            handler: crate::handler::boxed_handler(|_ctx| async {
                Ok(crate::handler::JobOutput::message(""))
            }),
        }
    }

    fn log_ids(runs: &[QueuedRun]) -> Vec<i64> {
        runs.iter().map(|run| run.request.log_id).collect()
    }

    #[test]
    fn runs_come_out_when_due_earliest_first() {
        let mut held = Held::default();
        held.insert(2_000, run(1, 3));
        held.insert(1_000, run(1, 2));
        held.insert(1_000, run(2, 1));
        assert!(held.take_due(999).is_empty());
        assert_eq!(held.nap(999), Duration::from_millis(1));
        assert_eq!(log_ids(&held.take_due(1_000)), vec![1, 2]);
        assert_eq!(held.nap(1_000), MAX_NAP);
        assert_eq!(log_ids(&held.take_due(5_000)), vec![3]);
    }

    #[test]
    fn a_job_or_one_log_id_is_taken_out_before_its_start() {
        let mut held = Held::default();
        held.insert(1_000, run(1, 1));
        held.insert(1_000, run(2, 2));
        held.insert(2_000, run(1, 3));
        assert_eq!(log_ids(&held.take_job(1)), vec![1, 3]);
        assert!(held.take_log(1).is_none());
        assert_eq!(held.take_log(2).map(|run| run.request.log_id), Some(2));
        assert!(held.take_due(i64::MAX - 1).is_empty());
    }
}
