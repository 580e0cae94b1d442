//! The ledger: every (job, scheduled second) of a window, checked against two independent
//! records, what the handlers saw and the log rows of its attempts (a retry keeps the scheduled
//! time), and classified: fired once, misfired, duplicated, open, unaccounted.

use std::collections::{BTreeMap, HashMap};

use xjob_admin::model::{RunLog, RunStatus};
use xjob_testkit::misfire::{COVERS_LATER, MisfireSpans, ScheduledRow};

use super::cluster::Window;

/// How one (job, scheduled second) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Ran once, and its last attempt's row says SUCCESS.
    FiredOnce,
    /// Not run, recorded as a misfire: its own SKIPPED row, or inside the span of the scan's
    /// misfire row for the job.
    Misfired,
    /// Ran more than once, or has two rows for one attempt.
    Duplicated { runs: usize, rows: usize },
    /// Not settled yet: no row, or a row still PENDING/RUNNING.
    Open { status: Option<RunStatus> },
    /// Anything else (a failure after the last attempt, a SUCCESS row the handler never saw, a
    /// LOST row for a run the handler did execute).
    Unaccounted {
        runs: usize,
        status: RunStatus,
        message: String,
    },
}

pub struct Ledger {
    pub expected: usize,
    pub fired_once: usize,
    pub skipped: usize,
    pub fates: BTreeMap<(i64, i64), Fate>,
}

impl Ledger {
    /// `retries` is the jobs' `fail_retry_count`: a failed attempt below it is not final yet
    /// (its retry row is about to be written).
    pub fn new(
        window: &Window,
        job_ids: &[i64],
        records: &[(i64, i64)],
        rows: &[RunLog],
        retries: i32,
    ) -> Ledger {
        let mut runs: HashMap<(i64, i64), usize> = HashMap::new();
        for record in records {
            *runs.entry(*record).or_default() += 1;
        }
        let mut attempts: HashMap<(i64, i64), Vec<&RunLog>> = HashMap::new();
        for row in rows.iter().filter(|row| row.shard_index == 0) {
            attempts
                .entry((row.job_id.0, row.scheduled_at_ms))
                .or_default()
                .push(row);
        }
        let spans = misfire_spans(rows);
        let mut fates = BTreeMap::new();
        for &job_id in job_ids {
            let mut second = window.start_ms;
            while second < window.end_ms {
                let key = (job_id, second);
                let run_count = runs.get(&key).copied().unwrap_or(0);
                let row_list = attempts.get(&key).map(Vec::as_slice).unwrap_or(&[]);
                let covered = spans.covers(job_id, second);
                let fate = match fate(run_count, row_list, retries) {
                    Fate::Open { status: None } if covered => Fate::Misfired,
                    fate => fate,
                };
                fates.insert(key, fate);
                second += 1_000;
            }
        }
        let count = |wanted: &Fate| fates.values().filter(|fate| *fate == wanted).count();
        Ledger {
            expected: fates.len(),
            fired_once: count(&Fate::FiredOnce),
            skipped: count(&Fate::Misfired),
            fates,
        }
    }

    pub fn settled(&self) -> bool {
        !self
            .fates
            .values()
            .any(|fate| matches!(fate, Fate::Open { .. }))
    }

    pub fn problems(&self, accept: impl Fn(&Fate) -> bool) -> Vec<String> {
        self.fates
            .iter()
            .filter(|(_, fate)| !accept(fate))
            .map(|((job_id, second), fate)| format!("job {job_id} at {second}: {fate:?}"))
            .collect()
    }

    pub fn print(&self, scenario: &str) {
        let duplicated = self.problems(|fate| !matches!(fate, Fate::Duplicated { .. }));
        let other = self.problems(|fate| {
            matches!(
                fate,
                Fate::FiredOnce | Fate::Misfired | Fate::Duplicated { .. }
            )
        });
        eprintln!(
            "{scenario}: {} (job, second) pairs: {} fired once, {} recorded as misfires, {} \
             duplicated, {} missed or unaccounted",
            self.expected,
            self.fired_once,
            self.skipped,
            duplicated.len(),
            other.len()
        );
        for problem in duplicated.iter().chain(other.iter()).take(10) {
            eprintln!("  {problem}");
        }
        if !duplicated.is_empty() || !other.is_empty() || self.skipped > 0 {
            eprintln!(
                "  per second (fired once / misfired / other): {}",
                self.per_second()
            );
        }
    }

    /// `second: fired/misfired/other` for each second of the window, in order.
    pub fn per_second(&self) -> String {
        let mut seconds: BTreeMap<i64, [usize; 3]> = BTreeMap::new();
        for ((_, second), fate) in &self.fates {
            let column = match fate {
                Fate::FiredOnce => 0,
                Fate::Misfired => 1,
                _ => 2,
            };
            seconds.entry(*second).or_default()[column] += 1;
        }
        seconds
            .iter()
            .map(|(second, [fired, misfired, other])| {
                format!("{}: {fired}/{misfired}/{other}", second / 1_000 % 100)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn assert_no_duplicate(&self) -> anyhow::Result<()> {
        let duplicated = self.problems(|fate| !matches!(fate, Fate::Duplicated { .. }));
        anyhow::ensure!(
            duplicated.is_empty(),
            "{} duplicated fires, first: {:?}",
            duplicated.len(),
            duplicated.first()
        );
        Ok(())
    }

    pub fn assert_exactly_once(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.expected > 0, "empty window");
        let wrong = self.problems(|fate| *fate == Fate::FiredOnce);
        anyhow::ensure!(
            wrong.is_empty(),
            "{} of {} fires not run exactly once, first: {:?}",
            wrong.len(),
            self.expected,
            wrong.first()
        );
        Ok(())
    }

    /// Every fire ran once, was recorded as a misfire, or ended in a failure recorded on its row
    /// (a dispatch that failed, a run lost) without having run: nothing open, nothing run twice,
    /// no row contradicting what the handlers saw.
    pub fn assert_accounted(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.expected > 0, "empty window");
        let wrong = self.problems(|fate| {
            matches!(
                fate,
                Fate::FiredOnce | Fate::Misfired | Fate::Unaccounted { runs: 0, .. }
            )
        });
        anyhow::ensure!(
            wrong.is_empty(),
            "{} of {} fires not accounted for, first: {:?}",
            wrong.len(),
            self.expected,
            wrong.first()
        );
        Ok(())
    }

    pub fn assert_fired_or_misfired(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.expected > 0, "empty window");
        let wrong = self.problems(|fate| matches!(fate, Fate::FiredOnce | Fate::Misfired));
        anyhow::ensure!(
            wrong.is_empty(),
            "{} of {} fires neither run once nor recorded as misfires, first: {:?}",
            wrong.len(),
            self.expected,
            wrong.first()
        );
        Ok(())
    }
}

/// The spans the scan's misfire rows stand for (shared with the benchmark's failover figures).
pub fn misfire_spans(rows: &[RunLog]) -> MisfireSpans {
    MisfireSpans::of(rows.iter().map(|row| ScheduledRow {
        job_id: row.job_id.0,
        scheduled_at_ms: row.scheduled_at_ms,
        covers_later: row.status == RunStatus::Skipped && row.trigger_msg.contains(COVERS_LATER),
    }))
}

/// The fate of one (job, second) from its handler runs and the rows of all its attempts.
pub fn fate(runs: usize, rows: &[&RunLog], retries: i32) -> Fate {
    let mut per_attempt: HashMap<i32, usize> = HashMap::new();
    for row in rows {
        *per_attempt.entry(row.attempt).or_default() += 1;
    }
    let most_rows_of_one_attempt = per_attempt.values().copied().max().unwrap_or(0);
    if runs > 1 || most_rows_of_one_attempt > 1 {
        return Fate::Duplicated {
            runs,
            rows: rows.len(),
        };
    }
    if let Some(open) = rows
        .iter()
        .find(|row| matches!(row.status, RunStatus::Pending | RunStatus::Running))
    {
        return Fate::Open {
            status: Some(open.status),
        };
    }
    let Some(last) = rows.iter().max_by_key(|row| row.attempt) else {
        return Fate::Open { status: None };
    };
    let failed = !matches!(last.status, RunStatus::Success | RunStatus::Skipped);
    if failed && last.attempt < retries {
        // The follow-up writes the retry within its interval.
        return Fate::Open {
            status: Some(last.status),
        };
    }
    match (last.status, runs) {
        (RunStatus::Success, 1) => Fate::FiredOnce,
        (RunStatus::Skipped, 0) if rows.len() == 1 => Fate::Misfired,
        (status, runs) => Fate::Unaccounted {
            runs,
            status,
            message: format!(
                "{} attempt(s), last: {} {}",
                rows.len(),
                last.trigger_msg,
                last.handle_msg
            ),
        },
    }
}
