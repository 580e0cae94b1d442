//! Which scheduled seconds a misfire row of the scan stands for. The scan records a misfire
//! once per job: one SKIPPED row for the first late fire, whose message says it also skips
//! "any later fire before now" (admin `schedule/plan.rs`). The job's seconds after it get a
//! SKIPPED row of their own too, but at most 128 of them: the seconds beyond, up to its next
//! planned fire, have no row. The cluster tests' ledger and the
//! benchmark's failover figures both count those seconds as misfired, through this module.

use std::collections::HashMap;

/// The wording of the scan's misfire row that stands for later fires too.
pub const COVERS_LATER: &str = "any later fire before now";

/// What the spans need of one log row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduledRow {
    pub job_id: i64,
    pub scheduled_at_ms: i64,
    /// A SKIPPED row whose message contains [`COVERS_LATER`].
    pub covers_later: bool,
}

/// Per job, the `(misfire row's scheduled time, next planned time - 1)` spans.
#[derive(Debug, Clone, Default)]
pub struct MisfireSpans {
    by_job: HashMap<i64, Vec<(i64, i64)>>,
}

impl MisfireSpans {
    /// The spans of every covering row among `rows` (all of a window's rows, so each covering
    /// row finds the job's next planned one).
    pub fn of(rows: impl IntoIterator<Item = ScheduledRow>) -> MisfireSpans {
        let rows: Vec<ScheduledRow> = rows.into_iter().collect();
        let mut scheduled_by_job: HashMap<i64, Vec<i64>> = HashMap::new();
        for row in &rows {
            scheduled_by_job
                .entry(row.job_id)
                .or_default()
                .push(row.scheduled_at_ms);
        }
        let mut by_job: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for row in rows.iter().filter(|row| row.covers_later) {
            let next_planned = scheduled_by_job
                .get(&row.job_id)
                .and_then(|scheduled| {
                    scheduled
                        .iter()
                        .copied()
                        .filter(|&at| at > row.scheduled_at_ms)
                        .min()
                })
                .unwrap_or(i64::MAX);
            by_job
                .entry(row.job_id)
                .or_default()
                .push((row.scheduled_at_ms, next_planned - 1));
        }
        MisfireSpans { by_job }
    }

    /// Whether a covering row of `job_id` stands for its fire at `at_ms` (a later second than
    /// the row's own, before the job's next planned fire).
    pub fn covers(&self, job_id: i64, at_ms: i64) -> bool {
        self.by_job
            .get(&job_id)
            .is_some_and(|spans| spans.iter().any(|&(from, to)| at_ms > from && at_ms <= to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;

    fn row(job_id: i64, scheduled_at_ms: i64, covers_later: bool) -> ScheduledRow {
        ScheduledRow {
            job_id,
            scheduled_at_ms,
            covers_later,
        }
    }

    #[test]
    fn a_covering_row_stands_for_the_seconds_before_the_next_planned_fire() {
        let spans = MisfireSpans::of([
            row(1, T0 + 1000, true),
            row(1, T0 + 4000, false),
            row(2, T0 + 1000, false),
        ]);
        assert!(
            !spans.covers(1, T0 + 1000),
            "its own second has its own row"
        );
        assert!(spans.covers(1, T0 + 2000));
        assert!(spans.covers(1, T0 + 3999));
        assert!(!spans.covers(1, T0 + 4000));
        assert!(
            !spans.covers(2, T0 + 2000),
            "a plain skipped row covers nothing"
        );
    }

    #[test]
    fn the_last_covering_row_of_a_job_stands_for_every_later_second() {
        let spans = MisfireSpans::of([row(1, T0, true)]);
        assert!(spans.covers(1, T0 + 60_000));
    }
}
