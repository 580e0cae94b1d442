//! The catch-up window: which occurrences of a job's schedule missed while the schedule could
//! not run (the admin down, a lost database) still run when the scan finds them. Occurrences no
//! older than the window run (the latest, or all in order); older ones get SKIPPED rows. With a
//! window of 0 the job's misfire strategy decides instead, as before.

use std::collections::VecDeque;

/// Largest catch-up window: a day. It bounds how many occurrences one scan walks through to
/// find the ones to run (a 1 s schedule has 86 400 in a day).
pub const MAX_CATCH_UP_WINDOW_MS: i64 = 86_400_000;

/// Most runs one catch-up creates at once in mode `ALL`; the older missed occurrences of the
/// window beyond it are skipped, so an admin back after an outage never floods the executors.
pub const MAX_CATCH_UP_RUNS: usize = 100;

/// Most SKIPPED rows one catch-up writes for each part (before the window, inside it).
pub const MAX_CATCH_UP_SKIPPED_ROWS: usize = 128;

/// Which missed occurrences inside the window run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CatchUpMode {
    /// Only the latest one: the job's work is "bring the state up to date".
    #[default]
    Latest,
    /// Every one, oldest first (at most [`MAX_CATCH_UP_RUNS`]): each occurrence stands for its
    /// own period (a report per hour).
    All,
}

impl CatchUpMode {
    pub const ALL: &'static [CatchUpMode] = &[CatchUpMode::Latest, CatchUpMode::All];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUpMode::Latest => "LATEST",
            CatchUpMode::All => "ALL",
        }
    }

    /// Parses a stored name; `None` for anything else.
    pub fn parse(text: &str) -> Option<CatchUpMode> {
        match text {
            "LATEST" => Some(CatchUpMode::Latest),
            "ALL" => Some(CatchUpMode::All),
            _ => None,
        }
    }
}

impl std::fmt::Display for CatchUpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What becomes of one missed occurrence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missed {
    /// It runs now.
    Run,
    /// It gets a SKIPPED row with this reason.
    Skipped(String),
}

/// Decides the missed occurrences of a job found at `now_ms`: `before_window` are the ones
/// older than `now_ms - window_ms`, `in_window` the ones from there up to now, each ascending.
/// Returns each decided occurrence in time order; at most [`MAX_CATCH_UP_SKIPPED_ROWS`]
/// skipped rows per part (the earliest) and [`MAX_CATCH_UP_RUNS`] runs (the latest).
pub fn decide(
    before_window: impl IntoIterator<Item = i64>,
    in_window: impl IntoIterator<Item = i64>,
    mode: CatchUpMode,
    window_ms: i64,
    now_ms: i64,
) -> Vec<(i64, Missed)> {
    let mut decided: Vec<(i64, Missed)> = before_window
        .into_iter()
        .take(MAX_CATCH_UP_SKIPPED_ROWS)
        .map(|at| {
            let reason = format!(
                "catch-up: fire at {at} missed by {} ms, more than the job's catch-up window \
                 of {window_ms} ms",
                now_ms - at
            );
            (at, Missed::Skipped(reason))
        })
        .collect();
    let keep = match mode {
        CatchUpMode::Latest => 1,
        CatchUpMode::All => MAX_CATCH_UP_RUNS,
    };
    // Only the latest `keep` run: walk the window once, keeping them in a ring.
    let mut runs = VecDeque::with_capacity(keep + 1);
    let mut displaced = Vec::new();
    for at in in_window {
        runs.push_back(at);
        if runs.len() > keep
            && let Some(older) = runs.pop_front()
            && displaced.len() < MAX_CATCH_UP_SKIPPED_ROWS
        {
            displaced.push(older);
        }
    }
    let first_run = runs.front().copied().unwrap_or(now_ms);
    decided.extend(displaced.into_iter().map(|at| {
        let reason = match mode {
            CatchUpMode::Latest => format!(
                "catch-up LATEST: missed fire at {at} is covered by the latest missed fire \
                 at {first_run}, which runs"
            ),
            CatchUpMode::All => format!(
                "catch-up ALL: more than {MAX_CATCH_UP_RUNS} fires missed inside the window; \
                 only the latest {MAX_CATCH_UP_RUNS} run (from {first_run})"
            ),
        };
        (at, Missed::Skipped(reason))
    }));
    decided.extend(runs.into_iter().map(|at| (at, Missed::Run)));
    decided
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::validate::validate_catch_up_window;

    const NOW: i64 = 1_800_000_000_000;
    const MIN: i64 = 60_000;

    fn runs(decided: &[(i64, Missed)]) -> Vec<i64> {
        decided
            .iter()
            .filter(|(_, missed)| *missed == Missed::Run)
            .map(|(at, _)| NOW - at)
            .collect()
    }

    fn skipped(decided: &[(i64, Missed)]) -> Vec<i64> {
        decided
            .iter()
            .filter(|(_, missed)| *missed != Missed::Run)
            .map(|(at, _)| NOW - at)
            .collect()
    }

    #[test]
    fn latest_runs_the_newest_missed_fire_and_skips_the_rest_with_reasons() {
        // Down 5 minutes, a minute job, a 3-minute window.
        let decided = decide(
            [NOW - 5 * MIN, NOW - 4 * MIN],
            [NOW - 3 * MIN, NOW - 2 * MIN, NOW - MIN],
            CatchUpMode::Latest,
            3 * MIN,
            NOW,
        );
        assert_eq!(runs(&decided), vec![MIN]);
        assert_eq!(skipped(&decided), vec![5 * MIN, 4 * MIN, 3 * MIN, 2 * MIN]);
        let times: Vec<i64> = decided.iter().map(|(at, _)| *at).collect();
        assert!(times.is_sorted(), "rows in time order");
        let Missed::Skipped(old) = &decided[0].1 else {
            panic!("first is skipped")
        };
        assert!(old.contains("missed by 300000 ms") && old.contains("window of 180000 ms"));
        let Missed::Skipped(covered) = &decided[2].1 else {
            panic!("in-window older one is skipped")
        };
        assert!(covered.starts_with("catch-up LATEST"), "{covered}");
        assert!(covered.contains(&format!("at {}", NOW - MIN)), "{covered}");
    }

    #[test]
    fn all_runs_every_fire_of_the_window_in_order() {
        let decided = decide(
            [NOW - 5 * MIN],
            [NOW - 3 * MIN, NOW - 2 * MIN, NOW - MIN],
            CatchUpMode::All,
            3 * MIN,
            NOW,
        );
        assert_eq!(runs(&decided), vec![3 * MIN, 2 * MIN, MIN]);
        assert_eq!(skipped(&decided), vec![5 * MIN]);
    }

    #[test]
    fn all_creates_at_most_the_bound_and_keeps_the_latest() {
        let in_window: Vec<i64> = (1..=250).rev().map(|k| NOW - k * 1_000).collect();
        let decided = decide([], in_window, CatchUpMode::All, 300_000, NOW);
        let ran = runs(&decided);
        assert_eq!(ran.len(), MAX_CATCH_UP_RUNS);
        assert_eq!(ran.first(), Some(&100_000));
        assert_eq!(ran.last(), Some(&1_000));
        // 150 displaced, rows for the first 128.
        assert_eq!(skipped(&decided).len(), MAX_CATCH_UP_SKIPPED_ROWS);
        let Missed::Skipped(reason) = &decided[0].1 else {
            panic!("skipped")
        };
        assert!(
            reason.starts_with("catch-up ALL: more than 100"),
            "{reason}"
        );
    }

    #[test]
    fn nothing_inside_the_window_runs_nothing() {
        let decided = decide([NOW - 10 * MIN], [], CatchUpMode::Latest, MIN, NOW);
        assert_eq!(runs(&decided), Vec::<i64>::new());
        assert_eq!(skipped(&decided), vec![10 * MIN]);
    }

    #[test]
    fn the_window_is_bounded() {
        assert!(validate_catch_up_window(0, "w").is_ok());
        assert!(validate_catch_up_window(MAX_CATCH_UP_WINDOW_MS, "w").is_ok());
        assert!(validate_catch_up_window(-1, "w").is_err());
        assert!(validate_catch_up_window(MAX_CATCH_UP_WINDOW_MS + 1, "w").is_err());
        assert_eq!(CatchUpMode::parse("ALL"), Some(CatchUpMode::All));
        assert_eq!(CatchUpMode::parse("all"), None);
        for mode in CatchUpMode::ALL {
            assert_eq!(CatchUpMode::parse(mode.as_str()), Some(*mode));
        }
    }
}
