//! Runs sent ahead (`RunRequest.start_at_ms` > 0): accepted at once, held in one ordered map,
//! and started by one timer task when their start comes in this executor's clock.
//!
//! ```text
//! submit, start_at_ms in the future ─▶ Held{(start, log id) → run} ─▶ hold task wakes
//!   [`START_EARLY`] before the earliest start ─▶ a run whose job is idle is queued then, to
//!   wait in its job task for its start; a run whose job is busy stays held until its start and
//!   is queued then as if it had just arrived (block strategy applied then)
//! Kill(job) ─▶ the job's held runs never start (KILLED, "cancelled before start")
//! Kill(held_only, log id) ─▶ that run never starts; not here yet: its id is refused later
//! ```
//! Held runs are in the heartbeats' running log ids, so the admin counts them as alive. The
//! task re-reads the wall clock at least every [`MAX_NAP`]: a step of the clock moves the
//! starts with it within that bound, as the admin's offset estimate follows it.

use std::collections::BTreeMap;
use std::time::Duration;

/// Longest the hold task sleeps without looking at the wall clock again.
pub(super) const MAX_NAP: Duration = Duration::from_millis(250);

/// How long before its start a held run of an idle job is queued, to wait for its start in
/// its job task. At a second's burst, queueing the second's runs under the runner's lock and
/// taking each from its queue took the first milliseconds of the second, with the second
/// runtime thread waiting for that lock; queued beforehand, each run waits on a timer of its
/// own and starts without the lock.
pub(super) const START_EARLY: Duration = Duration::from_millis(30);

/// The held runs (`R`: what the runner queues), by start (executor clock, ms) then log id.
pub(super) struct Held<R> {
    runs: BTreeMap<(i64, i64), R>,
    /// Whether the hold task was started (it is started with the first held run).
    pub(super) task_started: bool,
}

impl<R> Default for Held<R> {
    fn default() -> Self {
        Self {
            runs: BTreeMap::new(),
            task_started: false,
        }
    }
}

impl<R> Held<R> {
    pub(super) fn insert(&mut self, start_at_ms: i64, log_id: i64, run: R) {
        self.runs.insert((start_at_ms, log_id), run);
    }

    /// The keys (start, log id) of the runs starting at or before `until_ms`, earliest first.
    pub(super) fn keys_until(&self, until_ms: i64) -> Vec<(i64, i64)> {
        self.runs
            .range(..=(until_ms, i64::MAX))
            .map(|(key, _)| *key)
            .collect()
    }

    pub(super) fn get(&self, key: &(i64, i64)) -> Option<&R> {
        self.runs.get(key)
    }

    pub(super) fn remove(&mut self, key: &(i64, i64)) -> Option<R> {
        self.runs.remove(key)
    }

    /// How long from `now_us` (epoch microseconds) until the hold task has work: [`START_EARLY`]
    /// before the earliest start, or for a run still held inside that window (its job was busy)
    /// its start; at most [`MAX_NAP`]. Counted in microseconds: from a whole millisecond, a nap
    /// woke the task up to a millisecond after the start, and every run of the second as late.
    pub(super) fn nap(&self, now_us: i64) -> Duration {
        let early_us = i64::try_from(START_EARLY.as_micros()).unwrap_or(i64::MAX);
        let mut wake_us = i64::MAX;
        // Earliest first: the runs inside the window come first, then the first one outside
        // it, which is the last to look at.
        for (start, _) in self.runs.keys() {
            let start_us = start.saturating_mul(1_000);
            if start_us.saturating_sub(early_us) > now_us {
                wake_us = wake_us.min(start_us - early_us);
                break;
            }
            wake_us = wake_us.min(start_us);
        }
        let until =
            Duration::from_micros(u64::try_from(wake_us.saturating_sub(now_us)).unwrap_or(0));
        until.min(MAX_NAP)
    }

    /// Takes the held run with this log id, if held.
    pub(super) fn take_log(&mut self, log_id: i64) -> Option<R> {
        let key = *self.runs.keys().find(|(_, held)| *held == log_id)?;
        self.runs.remove(&key)
    }

    /// Takes the held runs `matches` picks (a job's), earliest first.
    pub(super) fn take_where(&mut self, matches: impl Fn(&R) -> bool) -> Vec<R> {
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

    /// Takes every held run.
    pub(super) fn take_all(&mut self) -> Vec<R> {
        std::mem::take(&mut self.runs).into_values().collect()
    }

    pub(super) fn log_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.runs.keys().map(|(_, log_id)| *log_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A held run here is its (job id, log id).
    fn held_of(runs: &[(i64, i64, i64)]) -> Held<(i64, i64)> {
        let mut held = Held::default();
        for &(start, job_id, log_id) in runs {
            held.insert(start, log_id, (job_id, log_id));
        }
        held
    }

    fn take_due(held: &mut Held<(i64, i64)>, now_ms: i64) -> Vec<i64> {
        held.keys_until(now_ms)
            .iter()
            .filter_map(|key| held.remove(key))
            .map(|(_, log_id)| log_id)
            .collect()
    }

    #[test]
    fn runs_come_out_when_due_earliest_first() {
        let mut held = held_of(&[(2_000, 1, 3), (1_000, 1, 2), (1_000, 2, 1)]);
        assert!(take_due(&mut held, 999).is_empty());
        assert_eq!(take_due(&mut held, 1_000), vec![1, 2]);
        assert_eq!(take_due(&mut held, 5_000), vec![3]);
    }

    #[test]
    fn the_hold_task_wakes_early_for_held_runs_and_at_the_start_for_kept_ones() {
        let early_ms = i64::try_from(START_EARLY.as_millis()).expect("small");
        let mut held = held_of(&[(1_000, 1, 1), (1_000, 2, 2)]);
        let wake_ms = 1_000 - early_ms;
        assert_eq!(held.nap((wake_ms - 1) * 1_000), Duration::from_millis(1));
        assert_eq!(held.nap(wake_ms * 1_000 - 300), Duration::from_micros(300));
        // Inside the window with runs still held (their jobs were busy): their start.
        assert_eq!(
            held.nap(wake_ms * 1_000),
            Duration::from_millis(early_ms as u64)
        );
        assert_eq!(held.nap(999_700), Duration::from_micros(300));
        assert_eq!(held.nap(1_000_500), Duration::ZERO);
        assert_eq!(take_due(&mut held, 1_000), vec![1, 2]);
        assert_eq!(held.nap(1_000_000), MAX_NAP);
        // A run kept inside the window and a later one whose window opens before the kept
        // one's start: the later one's wake comes first.
        let held = held_of(&[(1_000, 1, 1), (1_010, 2, 2)]);
        let now_ms = 1_010 - early_ms - 5;
        assert_eq!(held.nap(now_ms * 1_000), Duration::from_millis(5));
    }

    #[test]
    fn a_job_or_one_log_id_is_taken_out_before_its_start() {
        let mut held = held_of(&[(1_000, 1, 1), (1_000, 2, 2), (2_000, 1, 3)]);
        let job_1: Vec<i64> = held
            .take_where(|(job_id, _)| *job_id == 1)
            .into_iter()
            .map(|(_, log_id)| log_id)
            .collect();
        assert_eq!(job_1, vec![1, 3]);
        assert!(held.take_log(1).is_none());
        assert_eq!(held.take_log(2), Some((2, 2)));
        assert!(take_due(&mut held, i64::MAX).is_empty());
    }
}
