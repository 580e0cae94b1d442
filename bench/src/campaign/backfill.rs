//! The campaign's backfill: one extra job on the executors' handler, never started (so it
//! never fires live), backfilled over the seconds before the window while the faults hit the
//! cluster; then a verdict per occurrence of the range, from the executors' own records.
//!
//! Each occurrence of the range ends in exactly one class:
//! - **delivered**: at least one executor ran it; **duplicated** if more than one did (or the
//!   database holds two dispatched rows of it);
//! - **failed**: not run, and a final row says why (lost with its executor, timed out…);
//! - **unfinished**: not run because the backfill had not got to it when the campaign
//!   ended: no row and after the backfill's cursor (it was never created), or a row still
//!   PENDING or RUNNING while the backfill is still RUNNING;
//! - **unaccounted**: not run, yet its row says it succeeded, or is still pending after the
//!   backfill ended (the database and the executors disagree);
//! - **lost**: not run and no row, although the backfill row says it was created (its
//!   scheduled time is at or before the cursor, which moves in the transaction that writes
//!   the runs).
//!
//! The campaign fails on a lost or duplicated occurrence, as for live fires; unfinished ones
//! are reported only, since how far a backfill gets depends on the machine and the faults.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;
use xjob_admin::model::{Backfill, BackfillState, RunStatus};

use super::overlap::Row;
use super::starts::Start;
use crate::failover::LogRow;
use crate::grpc;
use crate::metrics::Record;

/// Runs of the backfill unfinished at once.
pub const CONCURRENCY: i32 = 5;

/// How long the harness tries the admins in turn to start the backfill.
const START_WITHIN: Duration = Duration::from_secs(30);

/// The range, both ends included: the `seconds` whole seconds before `window_start_ms`.
pub fn range(window_start_ms: i64, seconds: u64) -> (i64, i64) {
    let first_second = window_start_ms.div_euclid(1000) - seconds as i64;
    (
        first_second * 1000,
        (first_second + seconds as i64 - 1) * 1000,
    )
}

/// Starts the backfill of `job_id` (a job every second, not started) over `range` through
/// the first admin that takes it; returns the backfill's id.
pub async fn start(urls: &[String], job_id: i64, range: (i64, i64)) -> anyhow::Result<i64> {
    let backfill = grpc::start_backfill(urls, job_id, range, CONCURRENCY, START_WITHIN).await?;
    eprintln!(
        "campaign: backfill {} of job {job_id}: {} occurrences, {} at a time",
        backfill.id, backfill.total, backfill.max_concurrent
    );
    Ok(backfill.id)
}

/// What the backfill's row said at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    pub state: BackfillState,
    /// Occurrences created (their runs exist).
    pub created: i64,
    /// The scheduled time of the last one created; 0 before the first.
    pub cursor_ms: i64,
}

impl From<&Backfill> for End {
    fn from(backfill: &Backfill) -> End {
        End {
            state: backfill.state,
            created: backfill.created,
            cursor_ms: backfill.cursor_ms,
        }
    }
}

/// How many of each class, and a few examples of the bad ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub planned: u64,
    /// What the backfill row said at the end: its state and occurrences created.
    pub state: String,
    pub created: u64,
    pub delivered: u64,
    pub duplicated: u64,
    pub failed: u64,
    pub unfinished: u64,
    pub unaccounted: u64,
    pub lost: u64,
    /// The latest handler start of an occurrence (0 when none ran): with the fault
    /// timeline, which faults the backfill went through.
    pub last_start_ms: i64,
    /// Lost and duplicated occurrences' scheduled times.
    #[serde(skip)]
    pub lost_examples: Vec<i64>,
    #[serde(skip)]
    pub duplicated_examples: Vec<i64>,
    /// For each duplicated example, its rows and its handler starts: how it came about.
    #[serde(skip)]
    pub duplicated_details: Vec<String>,
}

impl Verdict {
    /// Whether the backfill fails the campaign: an occurrence lost or run twice.
    pub fn failed_campaign(&self) -> bool {
        self.lost > 0 || self.duplicated > 0
    }
}

const EXAMPLES: usize = 10;

/// Checks each of `planned` (the range's scheduled times) of job `job_id` against the
/// records and the rows, knowing how the backfill row ended.
pub fn check(
    job_id: i64,
    planned: &[i64],
    end: End,
    records: &[Record],
    rows: &[LogRow],
) -> Verdict {
    let mut runs: HashMap<i64, usize> = HashMap::new();
    let mut last_start_ms = 0;
    for &(_, scheduled_at_ms, start_ms) in records.iter().filter(|r| r.0 == job_id) {
        *runs.entry(scheduled_at_ms).or_default() += 1;
        last_start_ms = last_start_ms.max(start_ms);
    }
    let mut rows_of: HashMap<i64, Vec<RunStatus>> = HashMap::new();
    for row in rows
        .iter()
        .filter(|row| row.job_id == job_id && row.shard_index == 0)
    {
        rows_of
            .entry(row.scheduled_at_ms)
            .or_default()
            .push(row.status);
    }
    let mut verdict = Verdict {
        planned: planned.len() as u64,
        state: end.state.as_str().to_string(),
        created: end.created.max(0) as u64,
        last_start_ms,
        ..Verdict::default()
    };
    for &at in planned {
        let statuses = rows_of.get(&at).map(Vec::as_slice).unwrap_or(&[]);
        let dispatched = statuses
            .iter()
            .filter(|&&status| status != RunStatus::Skipped)
            .count();
        match runs.get(&at) {
            Some(&count) => {
                verdict.delivered += 1;
                if count.max(dispatched) > 1 {
                    verdict.duplicated += 1;
                    if verdict.duplicated_examples.len() < EXAMPLES {
                        verdict.duplicated_examples.push(at);
                    }
                }
            }
            None => not_run(&mut verdict, at, statuses, end),
        }
    }
    verdict
}

fn not_run(verdict: &mut Verdict, at: i64, statuses: &[RunStatus], end: End) {
    let still_running = end.state == BackfillState::Running;
    if statuses.is_empty() {
        // Created in order, the cursor moving with the runs' rows: an occurrence at or before
        // it had a row, and nothing deletes a run row during a campaign.
        if end.created > 0 && at <= end.cursor_ms {
            verdict.lost += 1;
            if verdict.lost_examples.len() < EXAMPLES {
                verdict.lost_examples.push(at);
            }
        } else {
            verdict.unfinished += 1;
        }
    } else if statuses.contains(&RunStatus::Success) {
        verdict.unaccounted += 1;
    } else if statuses.iter().any(|status| !status.is_final()) {
        if still_running {
            verdict.unfinished += 1;
        } else {
            verdict.unaccounted += 1;
        }
    } else {
        verdict.failed += 1;
    }
}

/// The table's lines for the backfill.
pub fn text(verdict: &Verdict, window_start_ms: i64) -> String {
    let mut text = format!(
        "backfill ({}, {} of {} created):\n",
        verdict.state, verdict.created, verdict.planned
    );
    let rows = [
        ("planned", verdict.planned),
        ("delivered", verdict.delivered),
        ("failed (final row, no run)", verdict.failed),
        ("unfinished (not reached)", verdict.unfinished),
        ("unaccounted (row claims a run)", verdict.unaccounted),
        ("LOST (created, no run, no row)", verdict.lost),
        ("DUPLICATED (run twice or more)", verdict.duplicated),
    ];
    for (name, count) in rows {
        text.push_str(&format!("  {name:<32} {count:>9}\n"));
    }
    let at = |ms: i64| (ms - window_start_ms) as f64 / 1000.0;
    if verdict.last_start_ms > 0 {
        text.push_str(&format!(
            "  last backfill run started {:.1} s into the window\n",
            at(verdict.last_start_ms)
        ));
    }
    for scheduled in &verdict.lost_examples {
        text.push_str(&format!(
            "  lost: backfill occurrence at {:.1} s\n",
            at(*scheduled)
        ));
    }
    for (index, scheduled) in verdict.duplicated_examples.iter().enumerate() {
        text.push_str(&format!(
            "  duplicated: backfill occurrence at {:.1} s\n",
            at(*scheduled)
        ));
        if let Some(details) = verdict.duplicated_details.get(index) {
            text.push_str(details);
        }
    }
    text
}

/// Adds to `verdict` how each duplicated example came about: the occurrence's rows (as
/// `rows` describes them) and the handler starts of it, times relative to the window.
pub fn explain_duplicates(
    verdict: &mut Verdict,
    job_id: i64,
    rows: &[Row],
    starts: &[Start],
    window_start_ms: i64,
) {
    let at = |ms: i64| (ms - window_start_ms) as f64 / 1000.0;
    verdict.duplicated_details = (verdict.duplicated_examples.iter())
        .map(|&scheduled| {
            let mut text = String::new();
            for row in rows
                .iter()
                .filter(|row| row.job_id == job_id && row.scheduled_at_ms == scheduled)
            {
                text.push_str(&format!(
                    "    row {} {:?} {}\n",
                    row.id, row.status, row.how
                ));
            }
            for start in starts
                .iter()
                .filter(|start| start.job_id == job_id && start.scheduled_at_ms == scheduled)
            {
                text.push_str(&format!(
                    "    started by executor-{} at {:.3} s, log id {}\n",
                    start.executor,
                    at(start.start_ms),
                    start.log_id
                ));
            }
            text
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;
    const JOB: i64 = 9;

    fn row(scheduled_at_ms: i64, status: RunStatus) -> LogRow {
        LogRow {
            id: scheduled_at_ms % 1_000_000,
            job_id: JOB,
            scheduled_at_ms,
            trigger_time_ms: 0,
            status,
            owner_node: "a".into(),
            shard_index: 0,
            covers_later: false,
        }
    }

    fn seconds(count: i64) -> Vec<i64> {
        (0..count).map(|second| T0 + second * 1000).collect()
    }

    #[test]
    fn the_range_is_the_whole_seconds_before_the_window() {
        assert_eq!(range(T0 + 400, 3), (T0 - 3000, T0 - 1000));
    }

    #[test]
    fn a_created_occurrence_without_a_run_or_a_row_is_lost_one_not_reached_is_unfinished() {
        let planned = seconds(8);
        let end = End {
            state: BackfillState::Running,
            created: 5,
            cursor_ms: T0 + 4000,
        };
        let records = vec![
            (JOB, T0, T0 + 10),
            (JOB, T0 + 1000, T0 + 20),
            (JOB, T0 + 1000, T0 + 30),
            // Another job's run of the same second is not this backfill's.
            (JOB + 1, T0 + 2000, T0 + 40),
        ];
        let rows = vec![
            row(T0, RunStatus::Success),
            row(T0 + 1000, RunStatus::Success),
            // Second 3 was lost with its executor: its row says so.
            row(T0 + 3000, RunStatus::Lost),
            // Second 4 is created and not finished: the backfill was still going.
            row(T0 + 4000, RunStatus::Pending),
        ];
        let verdict = check(JOB, &planned, end, &records, &rows);
        assert_eq!(verdict.planned, 8);
        assert_eq!(verdict.last_start_ms, T0 + 30);
        assert_eq!((verdict.state.as_str(), verdict.created), ("RUNNING", 5));
        assert_eq!((verdict.delivered, verdict.duplicated), (2, 1));
        assert_eq!(verdict.duplicated_examples, vec![T0 + 1000]);
        assert_eq!(verdict.failed, 1);
        // Second 2: created (before the cursor), yet no run and no row.
        assert_eq!(
            (verdict.lost, verdict.lost_examples.clone()),
            (1, vec![T0 + 2000])
        );
        // Second 4 (pending) and seconds 5-7 (after the cursor).
        assert_eq!(verdict.unfinished, 4);
        assert!(verdict.failed_campaign());
    }

    #[test]
    fn a_backfill_cut_short_by_the_end_fails_nothing() {
        let planned = seconds(6);
        let end = End {
            state: BackfillState::Running,
            created: 3,
            cursor_ms: T0 + 2000,
        };
        let records: Vec<Record> = (0..3).map(|s| (JOB, T0 + s * 1000, T0)).collect();
        let rows: Vec<LogRow> = (0..3)
            .map(|s| row(T0 + s * 1000, RunStatus::Success))
            .collect();
        let verdict = check(JOB, &planned, end, &records, &rows);
        assert_eq!((verdict.delivered, verdict.unfinished), (3, 3));
        assert!(!verdict.failed_campaign());
        let none = End {
            state: BackfillState::Running,
            created: 0,
            cursor_ms: 0,
        };
        let verdict = check(JOB, &planned, none, &[], &[]);
        assert_eq!(verdict.unfinished, 6);
        assert!(!verdict.failed_campaign());
    }

    #[test]
    fn after_the_backfill_ended_a_pending_row_without_a_run_is_unaccounted() {
        let planned = seconds(2);
        let end = End {
            state: BackfillState::Done,
            created: 2,
            cursor_ms: T0 + 1000,
        };
        let rows = vec![
            row(T0, RunStatus::Pending),
            row(T0 + 1000, RunStatus::Success),
        ];
        let verdict = check(JOB, &planned, end, &[], &rows);
        assert_eq!((verdict.unaccounted, verdict.unfinished), (2, 0));
        assert!(!verdict.failed_campaign());
        let text = text(&verdict, T0);
        assert!(text.contains("backfill (DONE, 2 of 2 created)"), "{text}");
    }

    #[test]
    fn a_duplicated_occurrence_is_shown_with_its_rows_and_its_starts() {
        let mut verdict = Verdict {
            duplicated_examples: vec![T0],
            ..Verdict::default()
        };
        let rows = vec![super::Row {
            id: 77,
            job_id: JOB,
            scheduled_at_ms: T0,
            status: RunStatus::Success,
            reason: String::new(),
            how: "claimed by b/3".into(),
        }];
        let start = |executor, log_id| Start {
            executor,
            job_id: JOB,
            scheduled_at_ms: T0,
            start_ms: T0 + 1500,
            log_id,
        };
        let starts = vec![start(0, 77), start(1, 78)];
        explain_duplicates(&mut verdict, JOB, &rows, &starts, T0);
        let details = &verdict.duplicated_details[0];
        assert!(
            details.contains("row 77 Success claimed by b/3"),
            "{details}"
        );
        assert!(
            details.contains("executor-0 at 1.500 s, log id 77"),
            "{details}"
        );
        assert!(
            details.contains("executor-1 at 1.500 s, log id 78"),
            "{details}"
        );
    }
}
