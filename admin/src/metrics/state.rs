//! Gauges of the admin's state an operator alerts on: build, loop progress, the bound on
//! unsent runs, write backlogs, the follow-up's lag, the schedule lock and the node lease.

use std::sync::{LazyLock, Mutex};
use std::time::Instant;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::kinds::{Label, Seconds};

/// The admin's version, and the git commit it was built from when the build set
/// `XJOB_GIT_SHA` (the release images do); `unknown` otherwise.
const VERSION: &str = env!("CARGO_PKG_VERSION");
const GIT_SHA: &str = match option_env!("XJOB_GIT_SHA") {
    Some(sha) => sha,
    None => "unknown",
};

#[derive(Default)]
pub(super) struct Gauges {
    build_info: Family<[(&'static str, &'static str); 2], Gauge>,
    loop_last_success: Family<Label, Seconds>,
    loop_failing: Family<Label, Gauge>,
    unsent_runs: Gauge,
    max_unsent_runs: Gauge,
    recorder_backlog: Gauge,
    result_writes_in_flight: Gauge,
    followup_lag: Seconds,
    schedule_lock_held: Gauge,
    schedule_lock_acquisitions: Counter,
    lease_remaining: Seconds,
    /// When the lease was last renewed (monotonic) and how long it had left then: the remaining
    /// time is worked out at each scrape, not only at each renewal.
    lease: Mutex<Option<(Instant, i64)>>,
}

impl Gauges {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "build_info",
            "Always 1; the labels name the admin's version and git commit",
            self.build_info.clone(),
        );
        self.build_info
            .get_or_create(&[("version", VERSION), ("git_sha", GIT_SHA)])
            .set(1);
        registry.register(
            "loop_last_success_timestamp_seconds",
            "Unix time of each background loop's last successful round (0: none yet)",
            self.loop_last_success.clone(),
        );
        registry.register(
            "loop_failing",
            "1 while a background loop's rounds fail (since its last success), else 0",
            self.loop_failing.clone(),
        );
        registry.register(
            "unsent_runs",
            "Runs this admin claimed whose dispatch outcome is not written yet",
            self.unsent_runs.clone(),
        );
        registry.register(
            "max_unsent_runs",
            "The bound on unsent runs (max_unsent_runs); scheduled fires beyond it are skipped",
            self.max_unsent_runs.clone(),
        );
        registry.register(
            "recorder_backlog",
            "Dispatch outcomes handed to the recorder and not yet written",
            self.recorder_backlog.clone(),
        );
        registry.register(
            "result_writes_in_flight",
            "Batches of run results from executors being written to the database",
            self.result_writes_in_flight.clone(),
        );
        registry.register(
            "followup_lag_seconds",
            "Age of the oldest finished run the follow-up's last round handled (0: none waiting)",
            self.followup_lag.clone(),
        );
        registry.register(
            "schedule_lock_held",
            "1 while this admin holds the schedule lock (inside a schedule round), else 0",
            self.schedule_lock_held.clone(),
        );
        registry.register(
            "schedule_lock_acquisitions",
            "Schedule rounds this admin ran holding the schedule lock",
            self.schedule_lock_acquisitions.clone(),
        );
        registry.register(
            "node_lease_remaining_seconds",
            "Time left on this admin's node lease; at 0 it stops sending runs",
            self.lease_remaining.clone(),
        );
    }

    /// Brings the gauges that depend on the time of the scrape up to date.
    pub(super) fn before_scrape(&self) {
        let lease = *self
            .lease
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((renewed, remaining_ms)) = lease {
            let left = remaining_ms as f64 / 1000.0 - renewed.elapsed().as_secs_f64();
            self.lease_remaining.set(left.max(0.0));
        }
    }
}

/// The state gauges, apart from the registry's other handles so this file needs nothing from
/// `mod.rs`; the registry registers them when it is built, and the handles are shared clones, so
/// a value set before that shows all the same.
static GAUGES: LazyLock<Gauges> = LazyLock::new(Gauges::default);

pub(super) fn gauges() -> &'static Gauges {
    &GAUGES
}

/// Creates the series of the loop `name` (at 0) before its first round, so a loop that never
/// succeeds shows as such instead of missing.
pub fn loop_known(name: &'static str) {
    let label = [("loop", name)];
    gauges().loop_last_success.get_or_create_owned(&label);
    gauges().loop_failing.get_or_create_owned(&label);
}

/// Reports one round of the loop `name`: its success at `now_ms`, or a failure.
pub fn loop_round(name: &'static str, succeeded_at_ms: Option<i64>) {
    let label = [("loop", name)];
    match succeeded_at_ms {
        Some(now_ms) => {
            gauges()
                .loop_last_success
                .get_or_create(&label)
                .set(now_ms as f64 / 1000.0);
            gauges().loop_failing.get_or_create(&label).set(0);
        }
        None => {
            // Created (at 0) if this is the loop's first report.
            gauges().loop_last_success.get_or_create_owned(&label);
            gauges().loop_failing.get_or_create(&label).set(1);
        }
    }
}

/// Runs claimed and not yet recorded (incremented per admitted run, decremented per freed slot).
pub fn unsent_runs() -> &'static Gauge {
    &gauges().unsent_runs
}

/// The configured bound on unsent runs.
pub fn set_max_unsent_runs(max: usize) {
    gauges()
        .max_unsent_runs
        .set(i64::try_from(max).unwrap_or(i64::MAX));
}

/// Dispatch outcomes waiting for the recorder's write.
pub fn recorder_backlog() -> &'static Gauge {
    &gauges().recorder_backlog
}

/// A batch of results is being written until the returned guard is dropped (also when the
/// caller's future is dropped: an executor that hangs up mid-write).
pub fn result_write() -> ResultWrite {
    gauges().result_writes_in_flight.inc();
    ResultWrite(())
}

/// Counts one result write in flight while alive.
#[must_use = "the write counts as in flight only while the guard lives"]
pub struct ResultWrite(());

impl Drop for ResultWrite {
    fn drop(&mut self) {
        gauges().result_writes_in_flight.dec();
    }
}

/// The follow-up's lag after a round: the age of the oldest run it handled.
pub fn set_followup_lag(lag_ms: i64) {
    gauges().followup_lag.set(lag_ms.max(0) as f64 / 1000.0);
}

/// This admin holds the schedule lock until the returned guard is dropped.
pub fn schedule_lock_held() -> ScheduleLockHeld {
    gauges().schedule_lock_acquisitions.inc();
    gauges().schedule_lock_held.inc();
    ScheduleLockHeld(())
}

/// Marks the schedule lock held while alive.
#[must_use = "the lock counts as held only while the guard lives"]
pub struct ScheduleLockHeld(());

impl Drop for ScheduleLockHeld {
    fn drop(&mut self) {
        gauges().schedule_lock_held.dec();
    }
}

/// The node lease now has `remaining_ms` left.
pub fn node_lease(remaining_ms: i64) {
    *gauges()
        .lease
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((Instant::now(), remaining_ms));
    gauges()
        .lease_remaining
        .set(remaining_ms.max(0) as f64 / 1000.0);
}
