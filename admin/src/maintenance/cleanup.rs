//! Deleting run log rows: `ClearLogs` with XXL-JOB's nine modes, and the retention clean-up.
//!
//! Both delete in batches of [`DELETE_BATCH`] ids, one bounded statement each, so a clean-up of
//! millions of rows never holds the database's write lock for long. Runs still PENDING or
//! RUNNING are never deleted, whatever the mode: their executor may still report a result, and
//! the lost-run monitor owns stuck ones. A run is aged by its trigger time, or by its scheduled
//! time when it was never dispatched.
//!
//! Retention, every `retention_interval`, in the same small batches:
//! - by age: runs aged before the start of the day `log_retention_days` ago (admin's zone) are
//!   deleted, and a retention below [`MIN_RETENTION_DAYS`] disables it, as XXL-JOB does; or,
//!   when `log_retention` is set, runs older than that duration (hours, minutes), for
//!   installations that fire too often to keep whole days;
//! - by count: with `log_keep_per_job` N, every job keeps only its N newest finished runs
//!   (XXL-JOB's console "keep the latest N", applied continuously to every job).
//!
//! The audit trail (`xjob_audit`) is kept by the same age: entries older than the age cutoff
//! are deleted with the logs (the per-job count does not apply to it).

use std::sync::Arc;

use chrono::Days;
use chrono_tz::Tz;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::days::{date_of, day_start_ms, months_before};
use crate::config::Config;
use crate::model::{GroupId, JobId, SharedClock};
use crate::store::{JobFilter, LogCleanup, Store, StoreResult};

/// Rows one delete statement removes at most (XXL-JOB's page size).
pub const DELETE_BATCH: i64 = 1000;
/// Retention below this many days disables the clean-up.
pub const MIN_RETENTION_DAYS: u32 = 3;

/// What a `ClearLogs` call deletes (XXL-JOB's clean-up types 1-9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClearMode {
    /// Runs older than this many calendar months (1, 3, 6, 12).
    OlderThanMonths(u32),
    /// Everything but the latest this many runs of the filter (1 000 … 100 000).
    KeepLatest(i64),
    /// Every run of the filter.
    All,
}

/// A `ClearLogs` request: a mode within an optional group and job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClearRequest {
    pub group_id: Option<GroupId>,
    pub job_id: Option<JobId>,
    pub mode: ClearMode,
}

/// Deletes what `request` names; returns how many runs were deleted.
pub async fn clear_logs(
    store: &Store,
    zone: Tz,
    request: ClearRequest,
    now_ms: i64,
) -> StoreResult<u64> {
    let mut cleanup = LogCleanup {
        group_id: request.group_id,
        job_id: request.job_id,
        ..LogCleanup::default()
    };
    match request.mode {
        ClearMode::OlderThanMonths(months) => {
            cleanup.older_than_ms = Some(months_before(zone, now_ms, months));
        }
        ClearMode::KeepLatest(keep) => {
            // Fixed once: runs created meanwhile are newer and never shift what is deleted.
            let oldest_kept = store
                .nth_newest_log_id(request.group_id, request.job_id, keep)
                .await?;
            let Some(oldest_kept) = oldest_kept else {
                return Ok(0);
            };
            cleanup.below_id = Some(oldest_kept);
        }
        ClearMode::All => {}
    }
    let deleted = delete_in_batches(store, &cleanup, None).await?;
    // 0 = every group / job, as in the request.
    tracing::info!(deleted, mode = ?request.mode, group_id = request.group_id.map_or(0, |id| id.0),
        job_id = request.job_id.map_or(0, |id| id.0), "logs cleared");
    if deleted > 0 {
        reclaim_space(store, None).await;
    }
    Ok(deleted)
}

/// The instant before which runs expire under `retention_days`: the start of the day that many
/// days before today; `None` when retention is disabled.
pub fn retention_cutoff_ms(zone: Tz, now_ms: i64, retention_days: u32) -> Option<i64> {
    if retention_days < MIN_RETENTION_DAYS {
        return None;
    }
    let today = date_of(zone, now_ms);
    let first_kept_day = today.checked_sub_days(Days::new(u64::from(retention_days)))?;
    Some(day_start_ms(zone, first_kept_day))
}

/// When runs expire by age under `config`: the cutoff before which runs go, or `None` when age
/// retention is off.
pub fn age_cutoff_ms(config: &Config, zone: Tz, now_ms: i64) -> Option<i64> {
    if config.log_retention.is_zero() {
        retention_cutoff_ms(zone, now_ms, config.log_retention_days)
    } else {
        let keep_ms = i64::try_from(config.log_retention.as_millis()).unwrap_or(i64::MAX);
        Some(now_ms.saturating_sub(keep_ms))
    }
}

/// Deletes expired runs at start and then every `config.retention_interval` until cancelled.
pub async fn run_retention(
    store: Store,
    config: Arc<Config>,
    clock: SharedClock,
    cancel: CancellationToken,
) {
    let zone = config.default_time_zone();
    if age_cutoff_ms(&config, zone, clock.now_ms()).is_none() && config.log_keep_per_job == 0 {
        tracing::info!(
            retention_days = config.log_retention_days,
            "log retention disabled (below 3 days, no log_retention, no log_keep_per_job)"
        );
        return;
    }
    let mut ticks = tokio::time::interval(config.retention_interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = ticks.tick() => {}
        }
        retention_round(&store, &config, zone, clock.now_ms(), &cancel).await;
    }
}

/// One round of retention: by age, then by count per job, then the freed space back to the
/// file system.
async fn retention_round(
    store: &Store,
    config: &Config,
    zone: Tz,
    now_ms: i64,
    cancel: &CancellationToken,
) {
    let mut total = 0;
    if let Some(cutoff_ms) = age_cutoff_ms(config, zone, now_ms) {
        let cleanup = LogCleanup {
            older_than_ms: Some(cutoff_ms),
            ..LogCleanup::default()
        };
        match delete_in_batches(store, &cleanup, Some(cancel)).await {
            Ok(0) => {}
            Ok(deleted) => {
                total += deleted;
                tracing::info!(deleted, cutoff_ms, "expired logs deleted");
            }
            Err(error) => tracing::warn!(%error, "log retention failed"),
        }
        match prune_audit(store, cutoff_ms, cancel).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, cutoff_ms, "expired audit entries deleted"),
            Err(error) => tracing::warn!(%error, "audit retention failed"),
        }
    }
    if config.log_keep_per_job > 0 {
        match keep_newest_per_job(store, i64::from(config.log_keep_per_job), cancel).await {
            Ok(0) => {}
            Ok(deleted) => {
                total += deleted;
                tracing::info!(
                    deleted,
                    keep = config.log_keep_per_job,
                    "logs beyond the per-job count deleted"
                );
            }
            Err(error) => tracing::warn!(%error, "per-job log retention failed"),
        }
    }
    if total > 0 {
        reclaim_space(store, Some(cancel)).await;
    }
}

/// Pages handed back per step: 16 MB with SQLite's 4 KB pages, a short write each.
const RECLAIM_PAGES: i64 = 4096;
/// Steps per clean-up at most; what is left stays free inside the file (reused for new rows)
/// and goes at the next clean-up.
const RECLAIM_STEPS: usize = 64;

/// Returns the space of deleted rows to the file system (SQLite incremental vacuum), in steps
/// between which other writers get the database. Failures only delay it to the next clean-up.
async fn reclaim_space(store: &Store, cancel: Option<&CancellationToken>) {
    for _ in 0..RECLAIM_STEPS {
        match store.reclaim_space(RECLAIM_PAGES).await {
            // Fewer than asked: nothing more to free (or a file without incremental vacuum).
            Ok(freed) if freed < RECLAIM_PAGES => return,
            Ok(_) if cancel.is_some_and(CancellationToken::is_cancelled) => return,
            Ok(_) => tokio::task::yield_now().await,
            Err(error) => {
                tracing::warn!(%error, "returning free space to the file system failed");
                return;
            }
        }
    }
}

/// Jobs read per page while walking every job for the per-job count.
const JOB_PAGE: i64 = 1000;

/// Deletes, job by job, the finished runs older than each job's `keep` newest runs; returns how
/// many it deleted. Stops between jobs when `cancel` fires.
async fn keep_newest_per_job(
    store: &Store,
    keep: i64,
    cancel: &CancellationToken,
) -> StoreResult<u64> {
    let mut deleted = 0;
    let mut offset = 0;
    loop {
        let filter = JobFilter {
            offset,
            limit: JOB_PAGE,
            ..JobFilter::default()
        };
        let jobs = store.list_jobs(&filter).await?;
        for job in &jobs {
            if cancel.is_cancelled() {
                return Ok(deleted);
            }
            // The oldest run kept; everything below it (and finished) goes.
            let Some(oldest_kept) = store.nth_newest_log_id(None, Some(job.id), keep).await? else {
                continue;
            };
            let cleanup = LogCleanup {
                job_id: Some(job.id),
                below_id: Some(oldest_kept),
                ..LogCleanup::default()
            };
            deleted += delete_in_batches(store, &cleanup, Some(cancel)).await?;
        }
        if (jobs.len() as i64) < JOB_PAGE {
            return Ok(deleted);
        }
        offset += JOB_PAGE;
    }
}

/// Deletes audit entries older than `cutoff_ms`, batch after batch.
pub async fn prune_audit(
    store: &Store,
    cutoff_ms: i64,
    cancel: &CancellationToken,
) -> StoreResult<u64> {
    let mut deleted = 0;
    loop {
        let batch = store.prune_audit(cutoff_ms, DELETE_BATCH).await?;
        deleted += batch;
        if batch < DELETE_BATCH as u64 || cancel.is_cancelled() {
            return Ok(deleted);
        }
    }
}

/// Deletes batch after batch until one comes back short (or `cancel` fires between batches).
async fn delete_in_batches(
    store: &Store,
    cleanup: &LogCleanup,
    cancel: Option<&CancellationToken>,
) -> StoreResult<u64> {
    let mut deleted = 0;
    loop {
        let batch = store.delete_logs_batch(cleanup, DELETE_BATCH).await?;
        deleted += batch;
        let cancelled = cancel.is_some_and(CancellationToken::is_cancelled);
        if batch < DELETE_BATCH as u64 || cancelled {
            return Ok(deleted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2024-05-20 13:00 UTC.
    const NOW: i64 = 1_716_210_000_000;
    /// 2024-05-20 00:00 UTC.
    const TODAY: i64 = 1_716_163_200_000;
    const DAY: i64 = super::super::days::DAY_MS;

    #[test]
    fn retention_keeps_whole_days_and_is_disabled_below_three() {
        let zone = chrono_tz::UTC;
        assert_eq!(retention_cutoff_ms(zone, NOW, 30), Some(TODAY - 30 * DAY));
        assert_eq!(retention_cutoff_ms(zone, NOW, 3), Some(TODAY - 3 * DAY));
        assert_eq!(retention_cutoff_ms(zone, NOW, 2), None);
        assert_eq!(retention_cutoff_ms(zone, NOW, 0), None);
    }

    #[test]
    fn a_retention_duration_replaces_whole_days() {
        let zone = chrono_tz::UTC;
        let days = Config::default();
        assert_eq!(age_cutoff_ms(&days, zone, NOW), Some(TODAY - 30 * DAY));
        let hours = Config {
            log_retention: std::time::Duration::from_secs(6 * 3600),
            ..Config::default()
        };
        assert_eq!(age_cutoff_ms(&hours, zone, NOW), Some(NOW - 6 * 3_600_000));
        let off = Config {
            log_retention_days: 0,
            ..Config::default()
        };
        assert_eq!(age_cutoff_ms(&off, zone, NOW), None);
    }

    #[test]
    fn retention_days_follow_the_admin_zone() {
        // 2024-05-20 13:00 UTC is 21:00 in Shanghai; its day starts at 2024-05-19 16:00 UTC.
        let shanghai = chrono_tz::Asia::Shanghai;
        let shanghai_today = TODAY - 8 * 3_600_000;
        assert_eq!(
            retention_cutoff_ms(shanghai, NOW, 3),
            Some(shanghai_today - 3 * DAY)
        );
    }
}
