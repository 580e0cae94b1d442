//! The metric definitions of `shared/BENCH.md`, as pure functions over the executors' records.
//! The window is defined on *scheduled* time: a fire counts if
//! `window_start <= scheduled_at < window_end`, whenever it actually started.

use std::collections::HashMap;

/// One handler start: `(job_id, scheduled_at_ms, start_ms)`.
pub type Record = (i64, i64, i64);

/// Which (job, second) pairs a workload schedules.
pub trait Grid {
    /// Whether `job_id` is scheduled at `scheduled_at_ms`.
    fn on_grid(&self, job_id: i64, scheduled_at_ms: i64) -> bool;
    /// Number of grid points in `[window_start, window_end)` over every job.
    fn expected(&self, window_start_ms: i64, window_end_ms: i64) -> u64;
}

/// Correctness and lateness figures of one run (written into the result line in this order).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Figures {
    pub expected: u64,
    pub delivered: u64,
    pub missed: u64,
    pub duplicates: u64,
    pub off_grid: u64,
    pub throughput_fps: f64,
    pub lateness_p50_ms: i64,
    pub lateness_p99_ms: i64,
    pub lateness_max_ms: i64,
}

/// Computes the figures of BENCH.md from every record of every executor.
pub fn compute(
    records: &[Record],
    grid: &dyn Grid,
    window_start_ms: i64,
    window_end_ms: i64,
) -> Figures {
    let in_window = |scheduled: i64| scheduled >= window_start_ms && scheduled < window_end_ms;
    let mut runs_per_pair: HashMap<(i64, i64), u64> = HashMap::new();
    let mut lateness: Vec<i64> = Vec::new();
    let mut started_in_window = 0u64;
    for &(job_id, scheduled_at_ms, start_ms) in records {
        if start_ms >= window_start_ms && start_ms < window_end_ms {
            started_in_window += 1;
        }
        if in_window(scheduled_at_ms) {
            *runs_per_pair.entry((job_id, scheduled_at_ms)).or_default() += 1;
            lateness.push(start_ms - scheduled_at_ms);
        }
    }
    let mut delivered = 0u64;
    let mut off_grid = 0u64;
    let mut duplicates = 0u64;
    for (&(job_id, scheduled_at_ms), &runs) in &runs_per_pair {
        duplicates += runs - 1;
        if grid.on_grid(job_id, scheduled_at_ms) {
            delivered += 1;
        } else {
            off_grid += 1;
        }
    }
    let expected = grid.expected(window_start_ms, window_end_ms);
    lateness.sort_unstable();
    let window_seconds = ((window_end_ms - window_start_ms) as f64 / 1000.0).max(f64::EPSILON);
    Figures {
        expected,
        delivered,
        missed: expected.saturating_sub(delivered),
        duplicates,
        off_grid,
        throughput_fps: started_in_window as f64 / window_seconds,
        lateness_p50_ms: percentile(&lateness, 0.50),
        lateness_p99_ms: percentile(&lateness, 0.99),
        lateness_max_ms: lateness.last().copied().unwrap_or(0),
    }
}

/// Nearest-rank percentile of sorted values (0 when empty).
fn percentile(sorted: &[i64], quantile: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((quantile * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Every job fires every `period_s` seconds, at seconds congruent to its phase.
pub struct PeriodicGrid {
    pub period_s: i64,
    /// Phase in seconds of each job id.
    pub phases_s: HashMap<i64, i64>,
}

impl PeriodicGrid {
    pub fn new(job_ids: &[i64], period_s: i64, phase_of: impl Fn(usize) -> i64) -> PeriodicGrid {
        let phases_s = job_ids
            .iter()
            .enumerate()
            .map(|(index, id)| (*id, phase_of(index)))
            .collect();
        PeriodicGrid { period_s, phases_s }
    }

    /// Every (job, scheduled ms) grid point in `[window_start, window_end)`.
    pub fn points(
        &self,
        window_start_ms: i64,
        window_end_ms: i64,
    ) -> impl Iterator<Item = (i64, i64)> + '_ {
        let first_second = (window_start_ms + 999).div_euclid(1000);
        let end_second = (window_end_ms + 999).div_euclid(1000);
        self.phases_s.iter().flat_map(move |(&job_id, &phase)| {
            (first_second..end_second)
                .filter(move |second| (second - phase).rem_euclid(self.period_s) == 0)
                .map(move |second| (job_id, second * 1000))
        })
    }
}

impl Grid for PeriodicGrid {
    fn on_grid(&self, job_id: i64, scheduled_at_ms: i64) -> bool {
        let Some(phase) = self.phases_s.get(&job_id) else {
            return false;
        };
        scheduled_at_ms % 1000 == 0
            && (scheduled_at_ms / 1000 - phase).rem_euclid(self.period_s) == 0
    }

    fn expected(&self, window_start_ms: i64, window_end_ms: i64) -> u64 {
        let first_second = (window_start_ms + 999).div_euclid(1000);
        let end_second = (window_end_ms + 999).div_euclid(1000);
        let mut count = 0u64;
        for phase in self.phases_s.values() {
            for second in first_second..end_second {
                if (second - phase).rem_euclid(self.period_s) == 0 {
                    count += 1;
                }
            }
        }
        count
    }
}

/// Runs scheduled in `[start_ms, end_ms)` that started at most `on_time_ms` after their second.
pub(crate) fn on_time(records: &[Record], start_ms: i64, end_ms: i64, on_time_ms: i64) -> u64 {
    records
        .iter()
        .filter(|&&(_, scheduled, start)| {
            scheduled >= start_ms && scheduled < end_ms && start - scheduled <= on_time_ms
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;

    fn every_second(jobs: i64) -> PeriodicGrid {
        let ids: Vec<i64> = (1..=jobs).collect();
        PeriodicGrid::new(&ids, 1, |_| 0)
    }

    #[test]
    fn a_perfect_run_delivers_every_grid_point() {
        let records: Vec<Record> = (0..10)
            .flat_map(|s| (1..=2).map(move |job| (job, T0 + s * 1000, T0 + s * 1000 + 3)))
            .collect();
        let figures = compute(&records, &every_second(2), T0, T0 + 10_000);
        assert_eq!(
            (figures.expected, figures.delivered, figures.missed),
            (20, 20, 0)
        );
        assert_eq!((figures.duplicates, figures.off_grid), (0, 0));
        assert_eq!(figures.lateness_p99_ms, 3);
        assert!((figures.throughput_fps - 2.0).abs() < 1e-9);
    }

    #[test]
    fn missed_duplicate_and_off_grid_fires_are_counted() {
        let records = vec![
            (1, T0, T0 + 5),
            (1, T0, T0 + 7),
            (1, T0 + 1500, T0 + 1501),
            (1, T0 + 2000, T0 + 2100),
        ];
        let figures = compute(&records, &every_second(1), T0, T0 + 3000);
        assert_eq!(figures.expected, 3);
        assert_eq!(figures.delivered, 2);
        assert_eq!(figures.missed, 1);
        assert_eq!(figures.duplicates, 1);
        assert_eq!(figures.off_grid, 1);
        assert_eq!(figures.lateness_max_ms, 100);
    }

    #[test]
    fn phased_grid_counts_one_fire_per_period() {
        let grid = PeriodicGrid::new(&[1, 2], 10, |index| index as i64 * 5);
        assert_eq!(grid.expected(T0, T0 + 20_000), 4);
        assert!(grid.on_grid(2, T0 + 5000));
        assert!(!grid.on_grid(2, T0 + 6000));
    }

    #[test]
    fn grid_points_agree_with_the_expected_count() {
        let grid = PeriodicGrid::new(&[1, 2, 3], 2, |index| index as i64 % 2);
        let mut points: Vec<(i64, i64)> = grid.points(T0, T0 + 4000).collect();
        points.sort_unstable();
        assert_eq!(points.len() as u64, grid.expected(T0, T0 + 4000));
        assert_eq!(&points[..2], &[(1, T0), (1, T0 + 2000)]);
        assert!(points.iter().all(|&(job, at)| grid.on_grid(job, at)));
    }
}
