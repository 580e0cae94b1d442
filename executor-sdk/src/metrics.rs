//! Prometheus metrics of an executor: one process-wide registry and typed handles (runs
//! started, runs ended by status, handler duration, queued runs, build), served with the
//! process metrics (`xjob_metrics_http::process`) on `GET /metrics` when the builder's
//! `metrics_listen` is set. Several executors in one process add up in the same series.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use xjob_proto::pb;

/// The statuses a run ends with, each a series from the start (at 0).
const STATUSES: [&str; 6] = ["success", "failed", "timeout", "killed", "skipped", "other"];

/// The SDK's version, and the git commit it was built from when the build set `XJOB_GIT_SHA`.
const VERSION: &str = env!("CARGO_PKG_VERSION");
const GIT_SHA: &str = match option_env!("XJOB_GIT_SHA") {
    Some(sha) => sha,
    None => "unknown",
};

struct Metrics {
    registry: Registry,
    started: Counter,
    runs: Family<[(&'static str, &'static str); 1], Counter>,
    handler_duration: Histogram,
    queued: Gauge,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("xjob_executor");
    let runs: Family<[(&'static str, &'static str); 1], Counter> = Family::default();
    // 10 ms to ~23 h in factors of 4: handlers range from a ping to a nightly batch.
    let handler_duration = Histogram::new(exponential_buckets(0.01, 4.0, 14));
    let queued = Gauge::default();
    let started = Counter::default();
    registry.register(
        "runs_started",
        "Runs whose handler started on this executor",
        started.clone(),
    );
    for status in STATUSES {
        runs.get_or_create_owned(&[("status", status)]);
    }
    let build_info: Family<[(&'static str, &'static str); 2], Gauge> = Family::default();
    build_info
        .get_or_create(&[("version", VERSION), ("git_sha", GIT_SHA)])
        .set(1);
    registry.register(
        "build_info",
        "Always 1; the labels name the executor SDK's version and git commit",
        build_info,
    );
    registry.register(
        "runs",
        "Runs ended on this executor, by final status",
        runs.clone(),
    );
    registry.register(
        "handler_duration_seconds",
        "Time from a run's start to its result (handler, timeout or kill)",
        handler_duration.clone(),
    );
    registry.register(
        "queued_runs",
        "Runs waiting in job queues behind a running run of the same job",
        queued.clone(),
    );
    Metrics {
        registry,
        started,
        runs,
        handler_duration,
        queued,
    }
});

/// Counts a run that ended with `status`.
pub(crate) fn run_ended(status: i32) {
    let label = match pb::RunStatus::try_from(status) {
        Ok(pb::RunStatus::Success) => "success",
        Ok(pb::RunStatus::Failed) => "failed",
        Ok(pb::RunStatus::Timeout) => "timeout",
        Ok(pb::RunStatus::Killed) => "killed",
        Ok(pb::RunStatus::Skipped) => "skipped",
        _ => "other",
    };
    METRICS.runs.get_or_create(&[("status", label)]).inc();
}

/// Counts a run whose handler starts.
pub(crate) fn run_started() {
    METRICS.started.inc();
}

/// Observes one run's duration.
pub(crate) fn observe_handler(duration: Duration) {
    METRICS.handler_duration.observe(duration.as_secs_f64());
}

/// The queued-runs gauge (incremented on enqueue, decremented when a run leaves its queue).
pub(crate) fn queued() -> &'static Gauge {
    &METRICS.queued
}

/// The registry and the process metrics in the text exposition format (OpenMetrics).
pub fn render() -> String {
    xjob_metrics_http::render(&METRICS.registry)
}

/// Serves `GET /metrics` (HTTP/1.1) on `listener` until `cancel`; other paths get 404.
///
/// Any `Host` is answered: the executor has no setting for the names it is scraped under yet,
/// and its counters hold no job data.
pub(crate) async fn serve(listener: TcpListener, cancel: CancellationToken) {
    let hosts = xjob_metrics_http::AllowedHosts::any();
    xjob_metrics_http::serve(listener, cancel, render, hosts).await;
}
