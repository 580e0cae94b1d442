//! The daily run report and the dashboard built on it.
//!
//! Every `report_interval` the runs triggered today and on the 2 previous days (admin's zone)
//! are recounted into `xjob_log_report`, one row per day; older rows are never touched again,
//! so the dashboard reads a few rows instead of counting the log table. A run is counted on the
//! day of its trigger time, once dispatched:
//!
//! - running: PENDING or RUNNING;
//! - success: SUCCESS;
//! - failed: FAILED, TIMEOUT, KILLED, LOST (lost: LOST alone, as well);
//! - late fires: first attempts of CRON/MISFIRE fires sent more than 1 s after their time, and
//!   the latest of those sends (the console's lateness chart);
//! - skipped: SKIPPED, in none of the other counts: they were deliberately not run (a misfire with
//!   DO_NOTHING, a fire planned before its job was stopped). XXL-JOB has no such status and
//!   writes no log row for those fires, so leaving them out keeps the totals comparable.

use std::sync::Arc;

use chrono::Days;
use chrono_tz::Tz;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::days::{date_of, day_start_ms, day_starts_between, day_window, recent_day_windows};
use crate::config::Config;
use crate::error::Error;
use crate::model::GroupId;
use crate::model::SharedClock;
use crate::store::{DayCounts, JobDayCounts, Store, StoreResult};

/// Days before today whose report rows are still recounted (XXL-JOB: 2).
pub const REFRESHED_PREVIOUS_DAYS: u64 = 2;
/// Days a dashboard shows when the request gives no start (today included).
pub const DEFAULT_DASHBOARD_DAYS: u64 = 7;
/// Most days one dashboard request may span.
pub const MAX_DASHBOARD_DAYS: usize = 366;

/// What `GetDashboard` returns, before conversion to the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dashboard {
    pub job_count: i64,
    pub online_executors: i64,
    /// Runs counted over the range's days (running + success + failed).
    pub total_runs: i64,
    pub success_runs: i64,
    /// One entry per day of the range, oldest first; days without a report row are zeros.
    pub days: Vec<DayCounts>,
    /// Today's jobs with failed runs, most failures first (empty when today is not in range).
    pub failing_jobs: Vec<JobDayCounts>,
}

/// Recounts today and the previous days into the report table.
pub async fn refresh_recent_days(store: &Store, zone: Tz, now_ms: i64) -> StoreResult<()> {
    for (day_start, day_end) in recent_day_windows(zone, now_ms, REFRESHED_PREVIOUS_DAYS) {
        store.refresh_log_report(day_start, day_end, now_ms).await?;
    }
    Ok(())
}

/// Refreshes the report at start and then every `config.report_interval` until cancelled.
pub async fn run_report_refresh(
    store: Store,
    config: Arc<Config>,
    clock: SharedClock,
    cancel: CancellationToken,
) {
    let zone = config.default_time_zone();
    let mut ticks = tokio::time::interval(config.report_interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = ticks.tick() => {}
        }
        if let Err(error) = refresh_recent_days(&store, zone, clock.now_ms()).await {
            tracing::warn!(%error, "log report refresh failed");
        }
    }
}

/// The start of each day a dashboard request covers. `to_ms` 0 means now; `from_ms` 0 means
/// the [`DEFAULT_DASHBOARD_DAYS`] days ending with the day of `to_ms`.
pub fn dashboard_days(zone: Tz, from_ms: i64, to_ms: i64, now_ms: i64) -> Result<Vec<i64>, Error> {
    if from_ms < 0 {
        return Err(Error::invalid(
            "from_ms",
            format!("must be >= 0, got {from_ms}"),
        ));
    }
    if to_ms < 0 {
        return Err(Error::invalid(
            "to_ms",
            format!("must be >= 0, got {to_ms}"),
        ));
    }
    let to_ms = if to_ms == 0 { now_ms } else { to_ms };
    let from_ms = if from_ms == 0 {
        let last_day = date_of(zone, to_ms);
        let first_day = last_day
            .checked_sub_days(Days::new(DEFAULT_DASHBOARD_DAYS - 1))
            .unwrap_or(last_day);
        day_start_ms(zone, first_day)
    } else {
        from_ms
    };
    if from_ms > to_ms {
        let message = format!("{from_ms} is after to_ms {to_ms}");
        return Err(Error::invalid("from_ms", message));
    }
    day_starts_between(zone, from_ms, to_ms, MAX_DASHBOARD_DAYS).ok_or_else(|| {
        let message = format!("the range spans more than {MAX_DASHBOARD_DAYS} days");
        Error::invalid("to_ms", message)
    })
}

/// Builds the dashboard over `day_starts` from the report rows, except today (the day of
/// `now_ms` in `zone`), which is counted from the log rows at the time of asking: a report row
/// is up to `report_interval` old, and a "today" that lags the runs list would contradict it.
/// Today is counted per job in one statement, over the `visible` groups (`None` = all): the
/// day's counts and the failing jobs are sums of the same rows, so they always agree.
pub async fn dashboard(
    store: &Store,
    zone: Tz,
    day_starts: &[i64],
    online_executors: i64,
    now_ms: i64,
    visible: Option<&[GroupId]>,
) -> Result<Dashboard, Error> {
    let job_count = store.count_jobs().await?;
    let (Some(first), Some(last)) = (day_starts.first(), day_starts.last()) else {
        return Ok(Dashboard {
            job_count,
            online_executors,
            total_runs: 0,
            success_runs: 0,
            days: Vec::new(),
            failing_jobs: Vec::new(),
        });
    };
    let mut rows = store.list_log_report(*first, *last).await?;
    let (today_start, today_end) = day_window(zone, date_of(zone, now_ms));
    let mut failing_jobs = Vec::new();
    if day_starts.contains(&today_start) {
        let per_job = store.count_log_day_by_job(today_start, today_end).await?;
        let (today, failing) = today_of(today_start, per_job, visible);
        rows.retain(|row| row.day_ms != today_start);
        rows.push(today);
        failing_jobs = failing;
    }
    let days = fill_days(day_starts, &rows);
    Ok(Dashboard {
        job_count,
        online_executors,
        total_runs: days
            .iter()
            .map(|day| day.running + day.success + day.failed)
            .sum(),
        success_runs: days.iter().map(|day| day.success).sum(),
        days,
        failing_jobs,
    })
}

/// Today's counts (the sum over the visible jobs) and its failing jobs, most failures first
/// (then the latest failure first, then by id).
fn today_of(
    day_ms: i64,
    per_job: Vec<JobDayCounts>,
    visible: Option<&[GroupId]>,
) -> (DayCounts, Vec<JobDayCounts>) {
    let mut today = DayCounts {
        day_ms,
        ..DayCounts::default()
    };
    let mut failing = Vec::new();
    for job in per_job {
        if visible.is_some_and(|groups| !groups.contains(&job.group_id)) {
            continue;
        }
        today.add(&job.counts);
        if job.counts.failed > 0 {
            failing.push(job);
        }
    }
    failing.sort_by_key(|job| {
        (
            std::cmp::Reverse(job.counts.failed),
            std::cmp::Reverse(job.last_failed_ms),
            job.job_id,
        )
    });
    (today, failing)
}

/// One entry per day start: its report row, or zeros when the day has none.
fn fill_days(day_starts: &[i64], rows: &[DayCounts]) -> Vec<DayCounts> {
    day_starts
        .iter()
        .map(|day_ms| {
            let found = rows.iter().find(|row| row.day_ms == *day_ms);
            found.copied().unwrap_or(DayCounts {
                day_ms: *day_ms,
                ..DayCounts::default()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = super::super::days::DAY_MS;
    /// 2024-05-20 13:00 UTC.
    const NOW: i64 = 1_716_210_000_000;
    /// 2024-05-20 00:00 UTC.
    const TODAY: i64 = 1_716_163_200_000;

    #[test]
    fn the_default_range_is_the_last_seven_days() {
        let days = dashboard_days(chrono_tz::UTC, 0, 0, NOW).expect("valid range");
        assert_eq!(days.len(), 7);
        assert_eq!(days.last(), Some(&TODAY));
        assert_eq!(days.first(), Some(&(TODAY - 6 * DAY)));
    }

    #[test]
    fn explicit_ranges_include_both_ends() {
        let days = dashboard_days(chrono_tz::UTC, TODAY - 2 * DAY + 5, TODAY + 5, NOW);
        assert_eq!(days.ok(), Some(vec![TODAY - 2 * DAY, TODAY - DAY, TODAY]));
    }

    #[test]
    fn bad_ranges_name_the_field() {
        let message = |result: Result<Vec<i64>, Error>| result.map_err(|e| e.to_string()).err();
        let zone = chrono_tz::UTC;
        assert!(
            message(dashboard_days(zone, -1, 0, NOW)).is_some_and(|m| m.starts_with("from_ms: "))
        );
        assert!(
            message(dashboard_days(zone, 0, -1, NOW)).is_some_and(|m| m.starts_with("to_ms: "))
        );
        assert!(
            message(dashboard_days(zone, NOW, NOW - DAY, NOW))
                .is_some_and(|m| m.starts_with("from_ms: "))
        );
        assert!(
            message(dashboard_days(zone, NOW - 400 * DAY, NOW, NOW))
                .is_some_and(|m| m.contains("more than 366 days"))
        );
    }

    #[test]
    fn today_sums_the_visible_jobs_and_ranks_their_failures() {
        use crate::model::JobId;
        let job = |group: i64, id: i64, failed: i64, last: i64| JobDayCounts {
            group_id: GroupId(group),
            job_id: JobId(id),
            counts: DayCounts {
                day_ms: TODAY,
                success: 1,
                failed,
                ..DayCounts::default()
            },
            last_failed_ms: last,
        };
        let rows = vec![
            job(1, 10, 2, 50),
            job(1, 11, 0, 0),
            job(2, 12, 5, 40),
            job(1, 13, 2, 70),
        ];
        let (today, failing) = today_of(TODAY, rows.clone(), None);
        assert_eq!((today.success, today.failed), (4, 9));
        let order: Vec<i64> = failing.iter().map(|row| row.job_id.0).collect();
        assert_eq!(order, [12, 13, 10], "most failures, then the latest first");
        let (today, failing) = today_of(TODAY, rows, Some(&[GroupId(1)]));
        assert_eq!((today.day_ms, today.success, today.failed), (TODAY, 3, 4));
        let failures: i64 = failing.iter().map(|row| row.counts.failed).sum();
        assert_eq!(failures, today.failed, "the card adds up to the tile");
    }

    #[test]
    fn missing_days_are_zeros() {
        let row = DayCounts {
            day_ms: TODAY,
            running: 1,
            success: 2,
            failed: 3,
            ..DayCounts::default()
        };
        let days = fill_days(&[TODAY - DAY, TODAY], &[row]);
        assert_eq!(days[0].day_ms, TODAY - DAY);
        assert_eq!(
            (days[0].running, days[0].success, days[0].failed),
            (0, 0, 0)
        );
        assert_eq!(days[1], row);
    }
}
