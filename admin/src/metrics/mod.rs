//! Prometheus metrics of the admin: one process-wide registry and typed handles, so the code
//! where something happens only says `metrics::finished(RunEnd::Lost)`.
//!
//! The registry is process-wide (a `LazyLock`), not per admin: a process serves one admin in
//! production, and the handles stay free functions instead of a field threaded through every
//! module. Tests that start several admins in one process see their sum. `/metrics` is served
//! by [`serve`] on `metrics_listen` (docs/observability.md lists every metric), with the
//! process metrics of `xjob_metrics_http::process`.
//!
//! Series fed once per fire cost atomic adds only: counters and gauges are resolved once and
//! kept (no label lookup per fire), and the per-fire histograms are
//! `xjob_metrics_http::AtomicHistogram`s.

mod kinds;
mod runs;
mod state;

pub use runs::{Dispatch, RunEnd};
pub use state::{
    ResultWrite, ScheduleLockHeld, loop_known, loop_round, node_lease, recorder_backlog,
    result_write, schedule_lock_held, set_followup_lag, set_max_unsent_runs, unsent_runs,
};

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

use kinds::Label;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use xjob_metrics_http::AtomicHistogram;

/// The `reason` labels of `xjob_alarms_dropped_total` (`monitor::alarm_queue::DropReason`).
pub const ALARM_DROP_REASONS: [&str; 2] = ["queue_full", "stopped"];

struct Metrics {
    registry: Registry,
    fires: Family<Label, Counter>,
    /// `fires` per dispatch outcome, `None` for `sent` (not a fire outcome).
    fires_of_dispatch: [Option<Counter>; 5],
    fires_of_end: [Counter; 5],
    dispatches: [Counter; 5],
    runs_finished: [Counter; 5],
    dispatch_latency: AtomicHistogram,
    lateness: AtomicHistogram,
    scan_duration: Histogram,
    lock_wait: Histogram,
    planned_ahead: Gauge,
    pool_in_flight: Family<Label, Gauge>,
    pool_waiting: Family<Label, Gauge>,
    online_executors: Family<[(&'static str, String); 1], Gauge>,
    callbacks: Counter,
    retries: Counter,
    alarms: Family<Label, Counter>,
    alarm_deliveries: Family<[(&'static str, &'static str); 2], Counter>,
    alarms_rate_limited: Counter,
    alarms_dropped: Family<Label, Counter>,
    alarm_queue_depth: Gauge,
    database_errors: Counter,
}

/// Seconds, from 1 ms to ~65 s: lateness and scan times of a healthy admin sit in the low
/// buckets, and an outage's still shows which power of two it reached.
fn seconds_buckets() -> Histogram {
    Histogram::new(seconds_bounds())
}

fn seconds_bounds() -> impl Iterator<Item = f64> {
    exponential_buckets(0.001, 2.0, 17)
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("xjob");
    let fires: Family<Label, Counter> = Family::default();
    let dispatches: Family<Label, Counter> = Family::default();
    let runs_finished: Family<Label, Counter> = Family::default();
    let metrics = Metrics {
        fires_of_dispatch: Dispatch::ALL.map(|outcome| {
            (outcome != Dispatch::Sent)
                .then(|| fires.get_or_create_owned(&[("outcome", outcome.label())]))
        }),
        fires_of_end: RunEnd::ALL.map(|end| fires.get_or_create_owned(&[("outcome", end.label())])),
        dispatches: Dispatch::ALL
            .map(|outcome| dispatches.get_or_create_owned(&[("outcome", outcome.label())])),
        runs_finished: RunEnd::ALL
            .map(|end| runs_finished.get_or_create_owned(&[("status", end.label())])),
        fires,
        dispatch_latency: AtomicHistogram::new(seconds_bounds()),
        lateness: AtomicHistogram::new(seconds_bounds()),
        scan_duration: seconds_buckets(),
        lock_wait: seconds_buckets(),
        planned_ahead: Gauge::default(),
        pool_in_flight: Family::default(),
        pool_waiting: Family::default(),
        online_executors: Family::default(),
        callbacks: Counter::default(),
        retries: Counter::default(),
        alarms: Family::default(),
        alarm_deliveries: Family::default(),
        alarms_rate_limited: Counter::default(),
        alarms_dropped: Family::default(),
        alarm_queue_depth: Gauge::default(),
        database_errors: Counter::default(),
        registry: Registry::default(),
    };
    registry.register(
        "fires",
        "Fires by how they ended (final run status, or why they were not delivered); \
         superseded by dispatches and runs_finished",
        metrics.fires.clone(),
    );
    registry.register(
        "dispatches",
        "Fires by how their dispatch went (sent, failed, refused, overloaded, skipped), \
         counted when decided",
        dispatches,
    );
    registry.register(
        "runs_finished",
        "Sent runs by final status, counted when the status is written",
        runs_finished,
    );
    registry.register(
        "dispatch_latency_seconds",
        "Time from a first attempt's instant to its acceptance by an executor",
        metrics.dispatch_latency.clone(),
    );
    registry.register(
        "fire_lateness_seconds",
        "Time from a scheduled fire's instant to its dispatch",
        metrics.lateness.clone(),
    );
    registry.register(
        "schedule_scan_seconds",
        "Duration of one schedule round (lock, read due jobs, plan, write, commit)",
        metrics.scan_duration.clone(),
    );
    registry.register(
        "schedule_lock_wait_seconds",
        "Time a schedule round waited for the schedule lock",
        metrics.lock_wait.clone(),
    );
    registry.register(
        "planned_fires",
        "Fires planned and waiting in the time ring for their second",
        metrics.planned_ahead.clone(),
    );
    registry.register(
        "trigger_pool_in_flight",
        "Dispatches holding a trigger-pool slot, by pool",
        metrics.pool_in_flight.clone(),
    );
    registry.register(
        "trigger_pool_waiting",
        "Fires waiting for a trigger-pool slot, by pool",
        metrics.pool_waiting.clone(),
    );
    registry.register(
        "executors_online",
        "Live executors per app, in the whole cluster as this admin sees it",
        metrics.online_executors.clone(),
    );
    registry.register(
        "callbacks",
        "Run results received from executors",
        metrics.callbacks.clone(),
    );
    registry.register(
        "retries",
        "Retries of failed runs scheduled by the follow-up",
        metrics.retries.clone(),
    );
    registry.register(
        "alarms",
        "Alarms due for failed runs, each counted once by result: sent (every channel \
         delivered), failed (a channel failed, or the alarm was dropped) or rate_limited (the \
         job's rate limit held it back)",
        metrics.alarms.clone(),
    );
    registry.register(
        "alarm_deliveries",
        "Alarm deliveries by channel (email, webhook) and result (sent, failed)",
        metrics.alarm_deliveries.clone(),
    );
    registry.register(
        "alarms_rate_limited",
        "Alarms held back by the per-job rate limit (not sent)",
        metrics.alarms_rate_limited.clone(),
    );
    registry.register(
        "alarms_dropped",
        "Alarms not sent because they could not be queued for delivery, by reason \
         (queue_full, stopped)",
        metrics.alarms_dropped.clone(),
    );
    registry.register(
        "alarm_queue_depth",
        "Alarms queued and waiting for the delivery task",
        metrics.alarm_queue_depth.clone(),
    );
    registry.register(
        "database_errors",
        "Database calls that failed (unreachable, or answered with an error)",
        metrics.database_errors.clone(),
    );
    state::gauges().register(&mut registry);
    // Every labelled series exists from the start at 0, so an alert on `increase(…)` or a
    // dashboard sees the first event as a change, not as a series appearing.
    for outcome in runs::FIRE_OUTCOMES {
        metrics.fires.get_or_create_owned(&[("outcome", outcome)]);
    }
    for pool in ["fast", "slow"] {
        metrics
            .pool_in_flight
            .get_or_create_owned(&[("pool", pool)]);
        metrics.pool_waiting.get_or_create_owned(&[("pool", pool)]);
    }
    for result in ["sent", "failed", "rate_limited"] {
        metrics.alarms.get_or_create_owned(&[("result", result)]);
    }
    for result in ["sent", "failed"] {
        for channel in ["email", "webhook"] {
            metrics
                .alarm_deliveries
                .get_or_create_owned(&[("channel", channel), ("result", result)]);
        }
    }
    for reason in ALARM_DROP_REASONS {
        metrics
            .alarms_dropped
            .get_or_create_owned(&[("reason", reason)]);
    }
    register_connection_metrics(&mut registry);
    Metrics {
        registry,
        ..metrics
    }
});

/// `count` fires whose dispatch went `outcome` (also counted in `xjob_fires_total`, but for
/// `sent`).
pub fn dispatched(outcome: Dispatch, count: u64) {
    METRICS.dispatches[outcome.index()].inc_by(count);
    if let Some(fires) = &METRICS.fires_of_dispatch[outcome.index()] {
        fires.inc_by(count);
    }
}

/// One sent run finished with `end` (also counted in `xjob_fires_total`).
pub fn finished(end: RunEnd) {
    METRICS.runs_finished[end.index()].inc();
    METRICS.fires_of_end[end.index()].inc();
}

/// Observes how late a scheduled fire left (negative lateness counts as 0).
pub fn observe_lateness(lateness_ms: i64) {
    METRICS.lateness.observe(lateness_ms as f64 / 1000.0);
}

/// Observes the time from a first attempt's instant to its acceptance by an executor.
pub fn observe_dispatch_latency(latency_ms: i64) {
    METRICS.dispatch_latency.observe(latency_ms as f64 / 1000.0);
}

/// Observes one schedule round.
pub fn observe_scan(duration: Duration) {
    METRICS.scan_duration.observe(duration.as_secs_f64());
}

/// Observes the wait for the schedule lock.
pub fn observe_lock_wait(duration: Duration) {
    METRICS.lock_wait.observe(duration.as_secs_f64());
}

/// Sets the number of fires waiting in the ring.
pub fn set_planned_fires(count: usize) {
    METRICS
        .planned_ahead
        .set(i64::try_from(count).unwrap_or(i64::MAX));
}

/// Dispatches holding a slot of `pool` (`fast`, `slow`).
pub fn pool_in_flight(pool: &'static str) -> Gauge {
    METRICS
        .pool_in_flight
        .get_or_create_owned(&[("pool", pool)])
}

/// Fires waiting for a slot of `pool`.
pub fn pool_waiting(pool: &'static str) -> Gauge {
    METRICS.pool_waiting.get_or_create_owned(&[("pool", pool)])
}

/// Publishes the live executors per app: every app of `group_apps` (the groups in the store),
/// 0 when none of its executors is online, and any app with a live executor but no group.
/// `published` holds what this admin's refresh loop published last round: an app gone from both
/// (its group deleted, its executors gone) loses its series, and admins sharing a process
/// (tests, embedded admins) never remove an app only another of them publishes.
pub fn set_online_executors<'a>(
    online: impl IntoIterator<Item = &'a str>,
    group_apps: &BTreeSet<String>,
    published: &mut BTreeSet<String>,
) {
    let counts = online_counts(online, group_apps);
    for app in published.iter() {
        if !counts.contains_key(app) {
            METRICS.online_executors.remove(&[("app", app.clone())]);
        }
    }
    for (app, count) in &counts {
        METRICS
            .online_executors
            .get_or_create(&[("app", app.clone())])
            .set(*count);
    }
    *published = counts.into_keys().collect();
}

/// Live executors per app, with every app of `group_apps` present (0 when none is online).
fn online_counts<'a>(
    online: impl IntoIterator<Item = &'a str>,
    group_apps: &BTreeSet<String>,
) -> BTreeMap<String, i64> {
    let mut counts: BTreeMap<String, i64> = group_apps.iter().map(|app| (app.clone(), 0)).collect();
    for app in online {
        *counts.entry(app.to_string()).or_default() += 1;
    }
    counts
}

/// Run results received from executors.
pub fn callbacks() -> Counter {
    METRICS.callbacks.clone()
}

/// Retries scheduled.
pub fn retries() -> Counter {
    METRICS.retries.clone()
}

/// Alarms due, by `result`: `sent`, `failed`, `rate_limited`.
pub fn alarms(result: &'static str) -> Counter {
    METRICS.alarms.get_or_create_owned(&[("result", result)])
}

/// One alarm delivery on `channel` (`email`, `webhook`) with `result` (`sent`, `failed`).
pub fn alarm_deliveries(channel: &'static str, result: &'static str) -> Counter {
    METRICS
        .alarm_deliveries
        .get_or_create_owned(&[("channel", channel), ("result", result)])
}

/// Alarms the per-job rate limit held back.
pub fn alarms_rate_limited() -> Counter {
    METRICS.alarms_rate_limited.clone()
}

/// Alarms dropped before delivery, by `reason` (`queue_full`, `stopped`).
pub fn alarms_dropped(reason: &'static str) -> Counter {
    METRICS
        .alarms_dropped
        .get_or_create_owned(&[("reason", reason)])
}

/// Alarms waiting in the alarm queue.
pub fn alarm_queue_depth() -> Gauge {
    METRICS.alarm_queue_depth.clone()
}

/// Database calls that failed.
pub fn database_errors() -> Counter {
    METRICS.database_errors.clone()
}

// ---- Connections closed at accept (kept in their own block: its own static, registered by one
// call above).

/// The listeners whose accept loops bound connections.
const LISTENERS: [&str; 3] = ["grpc", "console", "xxl_compat"];

static CONNECTIONS_REFUSED: LazyLock<Family<[(&'static str, &'static str); 2], Counter>> =
    LazyLock::new(|| {
        let family = Family::<[(&'static str, &'static str); 2], Counter>::default();
        for listener in LISTENERS {
            for refusal in xjob_tls::Refusal::ALL {
                family.get_or_create_owned(&[("listener", listener), ("bound", refusal.label())]);
            }
        }
        family
    });

fn register_connection_metrics(registry: &mut Registry) {
    registry.register(
        "connections_refused",
        "Connections closed at accept because a bound was hit, by listener (grpc, console, \
         xxl_compat) and bound (per_address: max_connections_per_address, total: \
         max_connections)",
        CONNECTIONS_REFUSED.clone(),
    );
}

fn refused_on(listener: &'static str, refusal: xjob_tls::Refusal) {
    CONNECTIONS_REFUSED
        .get_or_create_owned(&[("listener", listener), ("bound", refusal.label())])
        .inc();
}

/// One connection to the gRPC port closed at accept (its listener's `on_refused`).
pub fn connection_refused(refusal: xjob_tls::Refusal) {
    refused_on("grpc", refusal);
}

/// One connection to the console port closed at accept.
pub fn console_connection_refused(refusal: xjob_tls::Refusal) {
    refused_on("console", refusal);
}

/// One connection to the XXL-JOB compatibility port closed at accept.
pub fn xxl_connection_refused(refusal: xjob_tls::Refusal) {
    refused_on("xxl_compat", refusal);
}

/// The registry and the process metrics in the text exposition format (OpenMetrics).
pub fn render() -> String {
    state::gauges().before_scrape();
    xjob_metrics_http::render(&METRICS.registry)
}

/// Binds `address` for `/metrics`. The error stays an `io::Error`: metrics is a leaf every
/// layer calls, so it knows nothing of the admin's `Error` (the caller names the address).
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await
}

/// Serves `GET /metrics` (HTTP/1.1) on `listener` until `cancel`; other paths get 404, a
/// `Host` other than the listener's address or one of `hosts` 421.
pub async fn serve(
    listener: TcpListener,
    cancel: CancellationToken,
    hosts: xjob_metrics_http::AllowedHosts,
) {
    xjob_metrics_http::serve(listener, cancel, render, hosts).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_app_is_counted_even_with_no_executor_online() {
        let groups: BTreeSet<String> = ["billing", "reports"].map(String::from).into();
        let counts = online_counts(["billing", "billing", "adhoc"], &groups);
        let expected: BTreeMap<String, i64> = [("adhoc", 1), ("billing", 2), ("reports", 0)]
            .map(|(app, count)| (app.to_string(), count))
            .into();
        assert_eq!(counts, expected);
    }
}
