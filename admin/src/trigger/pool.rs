//! The fast and slow trigger pools: bounded dispatch concurrency with back-pressure.
//!
//! ```text
//! fire ─▶ TriggerPools::acquire(job) ─▶ slow pool if the job had > 10 dispatches slower than
//!            │                           500 ms in the current minute, else fast pool
//!            ├─ slot within pool_wait ─▶ dispatch ─▶ record_dispatch_time(job, elapsed)
//!            └─ no slot ─▶ Overloaded ─▶ the run is recorded FAILED "overloaded: …"
//! ```
//! XXL-JOB's rule decides the pool; unlike XXL-JOB, a full pool never drops a fire silently:
//! the caller records it as a failure, which the follow-up then retries or alarms.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::model::JobId;

/// A dispatch slower than this counts towards moving its job to the slow pool.
const SLOW_DISPATCH: Duration = Duration::from_millis(500);
/// More slow dispatches than this within the current minute move the job to the slow pool.
const SLOW_DISPATCHES_ALLOWED: u32 = 10;
const MINUTE_MS: i64 = 60_000;
/// At most one warning about full pools per this period: an overloaded admin fails runs by the
/// thousand a second, and a line for each would cost it CPU it lacks and bury its log. Every
/// run still has its row and is counted in the metrics.
const OVERLOAD_WARNING_PERIOD: Duration = Duration::from_secs(1);

/// Which pool a dispatch ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    Fast,
    Slow,
}

impl std::fmt::Display for PoolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PoolKind::Fast => "fast",
            PoolKind::Slow => "slow",
        })
    }
}

/// No slot freed up in time: the fire must be recorded as failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("overloaded: {pool} trigger pool ({size} slots) had no free slot within {waited:?}")]
pub struct Overloaded {
    pub pool: PoolKind,
    pub size: usize,
    pub waited: Duration,
}

/// A held pool slot; dropping it frees the slot.
pub struct PoolPermit {
    pub pool: PoolKind,
    _permit: OwnedSemaphorePermit,
    _in_flight: GaugeHold,
}

/// Holds one unit of a gauge (`trigger_pool_in_flight`, `trigger_pool_waiting`) until dropped,
/// so every way out of a wait or a dispatch gives it back.
struct GaugeHold(prometheus_client::metrics::gauge::Gauge);

impl GaugeHold {
    fn new(gauge: prometheus_client::metrics::gauge::Gauge) -> GaugeHold {
        gauge.inc();
        GaugeHold(gauge)
    }
}

impl Drop for GaugeHold {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl PoolKind {
    /// The metrics label.
    fn label(self) -> &'static str {
        match self {
            PoolKind::Fast => "fast",
            PoolKind::Slow => "slow",
        }
    }
}

/// Sizes and wait bound of the pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSettings {
    pub fast_size: usize,
    pub slow_size: usize,
    /// How long a fire waits for a slot before it is overloaded.
    pub wait: Duration,
}

/// The two pools and the per-job slow-dispatch counters.
pub struct TriggerPools {
    settings: PoolSettings,
    fast: Arc<Semaphore>,
    slow: Arc<Semaphore>,
    slow_counts: Mutex<SlowCounts>,
    overload_warnings: Mutex<OverloadWarnings>,
}

impl TriggerPools {
    pub fn new(settings: PoolSettings) -> TriggerPools {
        TriggerPools {
            fast: Arc::new(Semaphore::new(settings.fast_size.max(1))),
            slow: Arc::new(Semaphore::new(settings.slow_size.max(1))),
            slow_counts: Mutex::new(SlowCounts::default()),
            overload_warnings: Mutex::new(OverloadWarnings::default()),
            settings,
        }
    }

    /// The pool a dispatch of `job_id` uses now.
    pub fn pool_for(&self, job: JobId, now_ms: i64) -> PoolKind {
        if self.counts().is_slow(job.0, now_ms) {
            PoolKind::Slow
        } else {
            PoolKind::Fast
        }
    }

    /// Counts a run failed for a full pool; `Some(runs)` when a warning is due, for the runs
    /// failed so since the last one (this one included): the first at once, then at most one
    /// per `OVERLOAD_WARNING_PERIOD`.
    pub fn overload_to_warn(&self, now: std::time::Instant) -> Option<u64> {
        // A panic while holding the lock leaves a count that is still usable.
        let mut warnings = self
            .overload_warnings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        warnings.note(now)
    }

    /// Waits up to the configured bound for a slot in the job's pool.
    pub async fn acquire(&self, job: JobId, now_ms: i64) -> Result<PoolPermit, Overloaded> {
        let pool = self.pool_for(job, now_ms);
        let (semaphore, size) = match pool {
            PoolKind::Fast => (&self.fast, self.settings.fast_size.max(1)),
            PoolKind::Slow => (&self.slow, self.settings.slow_size.max(1)),
        };
        let overloaded = Overloaded {
            pool,
            size,
            waited: self.settings.wait,
        };
        let waiting = GaugeHold::new(crate::metrics::pool_waiting(pool.label()));
        // The semaphore is fair: waiting fires get slots in arrival order.
        let acquired =
            tokio::time::timeout(self.settings.wait, Arc::clone(semaphore).acquire_owned()).await;
        drop(waiting);
        match acquired {
            Ok(Ok(permit)) => Ok(PoolPermit {
                pool,
                _permit: permit,
                _in_flight: GaugeHold::new(crate::metrics::pool_in_flight(pool.label())),
            }),
            // Closed never happens (the pools are never closed); treat it as no slot.
            Ok(Err(_)) | Err(_) => Err(overloaded),
        }
    }

    /// Counts a finished dispatch of `job_id` that took `elapsed` (admin side: route + RPC).
    pub fn record_dispatch_time(&self, job: JobId, elapsed: Duration, now_ms: i64) {
        self.counts().record(job.0, elapsed, now_ms);
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, SlowCounts> {
        self.slow_counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Slow dispatches per job within the current minute (XXL-JOB's `jobTimeoutCountMap`).
#[derive(Debug, Default)]
struct SlowCounts {
    /// The epoch minute the counts belong to.
    minute: i64,
    counts: HashMap<i64, u32>,
}

impl SlowCounts {
    /// Forgets every count when the minute changed.
    fn roll(&mut self, now_ms: i64) {
        let minute = now_ms.div_euclid(MINUTE_MS);
        if minute != self.minute {
            self.minute = minute;
            self.counts.clear();
        }
    }

    fn is_slow(&mut self, job_id: i64, now_ms: i64) -> bool {
        self.roll(now_ms);
        self.counts.get(&job_id).copied().unwrap_or(0) > SLOW_DISPATCHES_ALLOWED
    }

    fn record(&mut self, job_id: i64, elapsed: Duration, now_ms: i64) {
        self.roll(now_ms);
        if elapsed > SLOW_DISPATCH {
            *self.counts.entry(job_id).or_default() += 1;
        }
    }
}

/// Runs failed for a full pool since the last warning, and when that was.
#[derive(Debug, Default)]
struct OverloadWarnings {
    last: Option<std::time::Instant>,
    unwarned: u64,
}

impl OverloadWarnings {
    fn note(&mut self, now: std::time::Instant) -> Option<u64> {
        self.unwarned += 1;
        let due = self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= OVERLOAD_WARNING_PERIOD);
        if !due {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unwarned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE_START: i64 = 1_700_000_040_000;

    fn pools(fast_size: usize, slow_size: usize, wait: Duration) -> TriggerPools {
        TriggerPools::new(PoolSettings {
            fast_size,
            slow_size,
            wait,
        })
    }

    #[test]
    fn a_job_moves_to_slow_after_more_than_ten_slow_dispatches_in_the_minute() {
        let pools = pools(4, 2, Duration::from_millis(10));
        let slow = Duration::from_millis(501);
        for _ in 0..10 {
            pools.record_dispatch_time(JobId(7), slow, MINUTE_START + 1000);
        }
        assert_eq!(
            pools.pool_for(JobId(7), MINUTE_START + 2000),
            PoolKind::Fast,
            "ten is not more than ten"
        );
        pools.record_dispatch_time(JobId(7), slow, MINUTE_START + 3000);
        assert_eq!(
            pools.pool_for(JobId(7), MINUTE_START + 4000),
            PoolKind::Slow
        );
        assert_eq!(
            pools.pool_for(JobId(8), MINUTE_START + 4000),
            PoolKind::Fast,
            "other jobs stay fast"
        );
        assert_eq!(
            pools.pool_for(JobId(7), MINUTE_START + MINUTE_MS),
            PoolKind::Fast,
            "a new minute forgets the counts"
        );
    }

    #[test]
    fn dispatches_of_500ms_or_less_do_not_count() {
        let pools = pools(4, 2, Duration::from_millis(10));
        for _ in 0..20 {
            pools.record_dispatch_time(JobId(7), SLOW_DISPATCH, MINUTE_START);
        }
        assert_eq!(pools.pool_for(JobId(7), MINUTE_START), PoolKind::Fast);
    }

    #[tokio::test]
    async fn a_full_pool_answers_overloaded_after_the_wait_and_frees_slots_on_drop() {
        let pools = pools(1, 1, Duration::from_millis(50));
        let held = pools
            .acquire(JobId(1), MINUTE_START)
            .await
            .expect("first slot");
        assert_eq!(held.pool, PoolKind::Fast);
        let started = std::time::Instant::now();
        let refused = pools
            .acquire(JobId(2), MINUTE_START)
            .await
            .err()
            .expect("pool is full");
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(refused.pool, PoolKind::Fast);
        assert!(
            refused
                .to_string()
                .starts_with("overloaded: fast trigger pool (1 slots)")
        );
        drop(held);
        assert!(pools.acquire(JobId(2), MINUTE_START).await.is_ok());
    }

    #[tokio::test]
    async fn a_waiting_fire_gets_a_slot_freed_within_the_wait() {
        let pools = Arc::new(pools(1, 1, Duration::from_secs(5)));
        let held = pools
            .acquire(JobId(1), MINUTE_START)
            .await
            .expect("first slot");
        let waiter = {
            let pools = Arc::clone(&pools);
            tokio::spawn(async move {
                pools
                    .acquire(JobId(2), MINUTE_START)
                    .await
                    .map(|permit| permit.pool)
            })
        };
        tokio::task::yield_now().await;
        drop(held);
        let got = waiter.await.expect("join");
        assert_eq!(got, Ok(PoolKind::Fast));
    }

    #[tokio::test]
    async fn slow_jobs_use_the_slow_pool_and_leave_the_fast_one_free() {
        let pools = pools(1, 1, Duration::from_millis(20));
        for _ in 0..11 {
            pools.record_dispatch_time(JobId(5), Duration::from_secs(1), MINUTE_START);
        }
        let slow_permit = pools
            .acquire(JobId(5), MINUTE_START)
            .await
            .expect("slow slot");
        assert_eq!(slow_permit.pool, PoolKind::Slow);
        let refused = pools
            .acquire(JobId(5), MINUTE_START)
            .await
            .err()
            .expect("slow pool full");
        assert_eq!(refused.pool, PoolKind::Slow);
        let fast_permit = pools
            .acquire(JobId(6), MINUTE_START)
            .await
            .expect("fast slot");
        assert_eq!(fast_permit.pool, PoolKind::Fast);
    }

    #[test]
    fn a_full_pool_is_warned_about_once_a_second_with_the_runs_it_failed() {
        let pools = TriggerPools::new(PoolSettings {
            fast_size: 1,
            slow_size: 1,
            wait: Duration::from_millis(1),
        });
        let start = std::time::Instant::now();
        assert_eq!(pools.overload_to_warn(start), Some(1), "the first at once");
        for ms in 1..1_000 {
            let now = start + Duration::from_millis(ms);
            assert_eq!(pools.overload_to_warn(now), None, "{ms} ms after the first");
        }
        let second = start + OVERLOAD_WARNING_PERIOD;
        assert_eq!(
            pools.overload_to_warn(second),
            Some(1_000),
            "the 999 unwarned and this one"
        );
        assert_eq!(pools.overload_to_warn(second), None);
        let later = second + 10 * OVERLOAD_WARNING_PERIOD;
        assert_eq!(pools.overload_to_warn(later), Some(2));
    }
}
