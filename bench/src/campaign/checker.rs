//! The campaign's checker: every occurrence the job schedules planned in the window, held
//! against what the executors recorded (a line per handler start, written as it starts) and
//! what the database's run rows say became of it. Pure functions, so each verdict is tested
//! without processes.
//!
//! Each planned occurrence ends in exactly one class:
//! - **delivered**: at least one executor ran it; **duplicated** if more than one did (or the
//!   database holds two dispatched first-attempt rows of it), **late** if the first start came
//!   later than the misfire threshold after its scheduled time;
//! - **misfired**: not run, and a SKIPPED row (its own, or the scan's row that covers the
//!   job's later seconds) says the admin skipped it as a misfire;
//! - **failed**: not run, and a final row says why (no executor reachable, lost with its
//!   executor, timed out);
//! - **unaccounted**: not run, yet its row says it succeeded, is running or is still pending
//!   after the drain (the database and the executors disagree);
//! - **lost**: not run and no row at all: nobody knows it was due.
//!
//! Records of a second inside the window that the schedules never planned (off the schedule)
//! are counted apart; records of the warm-up and the drain are not looked at.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use xjob_admin::model::RunStatus;
use xjob_testkit::misfire::{MisfireSpans, ScheduledRow};

use crate::failover::LogRow;
use crate::metrics::Record;

/// One occurrence: `(job_id, scheduled_at_ms)`.
pub type Occurrence = (i64, i64);

/// How many of each class, and a few examples of the bad ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub planned: u64,
    pub delivered: u64,
    pub duplicated: u64,
    /// Runs beyond the first of the duplicated occurrences.
    pub extra_runs: u64,
    pub late: u64,
    pub misfired: u64,
    pub failed: u64,
    /// The failed ones by the status of their row (`FAILED`, `LOST`, …).
    pub failed_by_status: BTreeMap<String, u64>,
    pub unaccounted: u64,
    pub lost: u64,
    /// Records of seconds in the window that the schedules never planned.
    pub off_schedule: u64,
    /// The latest first start minus scheduled time among delivered occurrences.
    pub lateness_max_ms: i64,
    #[serde(skip)]
    pub lost_examples: Vec<Occurrence>,
    #[serde(skip)]
    pub duplicated_examples: Vec<Occurrence>,
    /// Per duplicated example: its handler starts and its rows' statuses.
    #[serde(skip)]
    pub duplicated_details: Vec<String>,
    /// Duplicated occurrences per scheduled second, to line up with the fault timeline.
    #[serde(skip)]
    pub duplicated_seconds: BTreeMap<i64, u64>,
    #[serde(skip)]
    pub unaccounted_examples: Vec<(Occurrence, RunStatus)>,
}

impl Verdict {
    /// Whether the campaign failed: an occurrence lost or run twice.
    pub fn failed_campaign(&self) -> bool {
        self.lost > 0 || self.duplicated > 0
    }
}

const EXAMPLES: usize = 10;

/// The checked window of scheduled time, `[start_ms, end_ms)`.
pub type Window = (i64, i64);

/// Checks every planned occurrence of `window` against the records and the rows.
pub fn check(
    window: Window,
    planned: impl IntoIterator<Item = Occurrence>,
    records: &[Record],
    rows: &[LogRow],
    misfire_threshold_ms: i64,
) -> Verdict {
    let planned: Vec<Occurrence> = planned.into_iter().collect();
    let mut starts: HashMap<Occurrence, Vec<i64>> = HashMap::new();
    let in_window = |at_ms: i64| at_ms >= window.0 && at_ms < window.1;
    for &(job_id, scheduled_at_ms, start_ms) in records.iter().filter(|r| in_window(r.1)) {
        starts
            .entry((job_id, scheduled_at_ms))
            .or_default()
            .push(start_ms);
    }
    let mut rows_of: HashMap<Occurrence, Vec<RunStatus>> = HashMap::new();
    for row in rows.iter().filter(|row| row.shard_index == 0) {
        rows_of
            .entry((row.job_id, row.scheduled_at_ms))
            .or_default()
            .push(row.status);
    }
    let spans = MisfireSpans::of(rows.iter().map(|row| ScheduledRow {
        job_id: row.job_id,
        scheduled_at_ms: row.scheduled_at_ms,
        covers_later: row.covers_later,
    }));
    let mut verdict = Verdict {
        planned: planned.len() as u64,
        ..Verdict::default()
    };
    for &occurrence in &planned {
        let statuses = rows_of.get(&occurrence).map(Vec::as_slice).unwrap_or(&[]);
        let dispatched_rows = statuses
            .iter()
            .filter(|&&status| status != RunStatus::Skipped)
            .count();
        match starts.get(&occurrence) {
            Some(runs) => {
                let copies = runs.len().max(dispatched_rows);
                if copies > 1 && verdict.duplicated_details.len() < EXAMPLES {
                    verdict.duplicated_details.push(format!(
                        "{} handler start(s) {runs:?}, rows {statuses:?}",
                        runs.len()
                    ));
                }
                delivered(&mut verdict, occurrence, runs, copies, misfire_threshold_ms);
            }
            None => {
                let covered = spans.covers(occurrence.0, occurrence.1);
                not_run(&mut verdict, occurrence, statuses, covered);
            }
        }
    }
    let planned: HashSet<Occurrence> = planned.into_iter().collect();
    verdict.off_schedule = starts
        .iter()
        .filter(|(occurrence, _)| !planned.contains(occurrence))
        .map(|(_, runs)| runs.len() as u64)
        .sum();
    verdict
}

/// A delivered occurrence: `runs` are its handler starts, `copies` the larger of their count
/// and its dispatched rows' count.
fn delivered(
    verdict: &mut Verdict,
    occurrence: Occurrence,
    runs: &[i64],
    copies: usize,
    threshold_ms: i64,
) {
    verdict.delivered += 1;
    if copies > 1 {
        verdict.duplicated += 1;
        verdict.extra_runs += copies as u64 - 1;
        *verdict.duplicated_seconds.entry(occurrence.1).or_default() += 1;
        if verdict.duplicated_examples.len() < EXAMPLES {
            verdict.duplicated_examples.push(occurrence);
        }
    }
    let first_start = runs.iter().copied().min().unwrap_or(occurrence.1);
    let lateness = first_start - occurrence.1;
    verdict.lateness_max_ms = verdict.lateness_max_ms.max(lateness);
    if lateness > threshold_ms {
        verdict.late += 1;
    }
}

fn not_run(verdict: &mut Verdict, occurrence: Occurrence, statuses: &[RunStatus], covered: bool) {
    if covered || statuses.contains(&RunStatus::Skipped) {
        verdict.misfired += 1;
    } else if let Some(&claim) = statuses.iter().find(|status| {
        matches!(
            status,
            RunStatus::Success | RunStatus::Running | RunStatus::Pending
        )
    }) {
        verdict.unaccounted += 1;
        if verdict.unaccounted_examples.len() < EXAMPLES {
            verdict.unaccounted_examples.push((occurrence, claim));
        }
    } else if let Some(status) = statuses.first() {
        verdict.failed += 1;
        *verdict
            .failed_by_status
            .entry(status.as_str().to_string())
            .or_default() += 1;
    } else {
        verdict.lost += 1;
        if verdict.lost_examples.len() < EXAMPLES {
            verdict.lost_examples.push(occurrence);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;
    const WINDOW: Window = (T0, T0 + 10_000);

    fn row(job_id: i64, scheduled_at_ms: i64, status: RunStatus) -> LogRow {
        LogRow {
            id: job_id * 1_000_000 + scheduled_at_ms % 1_000_000,
            job_id,
            scheduled_at_ms,
            trigger_time_ms: 0,
            status,
            owner_node: "a".into(),
            shard_index: 0,
            covers_later: false,
        }
    }

    fn seconds(job_id: i64, count: i64) -> Vec<Occurrence> {
        (0..count)
            .map(|second| (job_id, T0 + second * 1000))
            .collect()
    }

    #[test]
    fn every_planned_occurrence_lands_in_one_class() {
        let planned = seconds(1, 6);
        let records = vec![
            (1, T0, T0 + 10),
            (1, T0 + 1000, T0 + 1010),
            (1, T0 + 1000, T0 + 1020),
            (1, T0 + 2000, T0 + 9000),
            // Never planned: half a second in.
            (1, T0 + 500, T0 + 500),
            // Outside the window: not looked at.
            (1, T0 + 60_000, T0 + 60_000),
        ];
        let rows = vec![
            row(1, T0 + 3000, RunStatus::Skipped),
            row(1, T0 + 4000, RunStatus::Failed),
            // Second 0 ran once, but was dispatched twice.
            row(1, T0, RunStatus::Success),
            row(1, T0, RunStatus::Lost),
        ];
        let verdict = check(WINDOW, planned, &records, &rows, 5000);
        assert_eq!(verdict.planned, 6);
        assert_eq!(verdict.delivered, 3);
        assert_eq!((verdict.duplicated, verdict.extra_runs), (2, 2));
        assert_eq!(verdict.duplicated_examples, vec![(1, T0), (1, T0 + 1000)]);
        assert_eq!(verdict.late, 1);
        assert_eq!(verdict.lateness_max_ms, 7000);
        assert_eq!((verdict.misfired, verdict.failed), (1, 1));
        assert_eq!(verdict.failed_by_status.get("FAILED"), Some(&1));
        assert_eq!(verdict.lost, 1);
        assert_eq!(verdict.lost_examples, vec![(1, T0 + 5000)]);
        assert_eq!(verdict.off_schedule, 1);
        assert!(verdict.failed_campaign());
    }

    #[test]
    fn a_covering_misfire_row_accounts_for_the_seconds_after_it() {
        let planned = seconds(1, 4);
        let mut covering = row(1, T0, RunStatus::Skipped);
        covering.covers_later = true;
        let rows = vec![covering, row(1, T0 + 3000, RunStatus::Success)];
        let records = vec![(1, T0 + 3000, T0 + 3005)];
        let verdict = check(WINDOW, planned, &records, &rows, 5000);
        assert_eq!(verdict.misfired, 3);
        assert_eq!((verdict.delivered, verdict.lost), (1, 0));
        assert!(!verdict.failed_campaign());
    }

    #[test]
    fn a_row_that_claims_a_run_nobody_recorded_is_unaccounted() {
        let planned = seconds(2, 2);
        let rows = vec![
            row(2, T0, RunStatus::Success),
            row(2, T0 + 1000, RunStatus::Pending),
        ];
        let verdict = check(WINDOW, planned, &[], &rows, 5000);
        assert_eq!(verdict.unaccounted, 2);
        assert_eq!(
            verdict.unaccounted_examples[0],
            ((2, T0), RunStatus::Success)
        );
        assert_eq!(verdict.lost, 0);
        assert!(!verdict.failed_campaign());
    }
}
