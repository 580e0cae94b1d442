//! `/metrics`: the admin's Prometheus endpoint, scraped over loopback like Prometheus would,
//! moves with fires (outcome counters, the lateness histogram, callbacks, online executors).
//!
//! The metrics registry is process-wide and other tests of this binary fire too, so every
//! check is "grew by at least", on series this test drives.

use std::collections::HashMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xjob_executor::{JobContext, JobError, JobResult};
use xjob_proto::pb;
use xjob_tests::{TestCluster, ok_handler, wait_until};

const APP: &str = "metrics-app";
/// An app with a group and no executor.
const IDLE_APP: &str = "metrics-idle-app";

async fn fails(_ctx: JobContext) -> JobResult {
    Err(JobError::new("failing on purpose"))
}

/// One scrape: `GET /metrics` over HTTP/1.0, the body parsed into `series -> value`.
async fn scrape(address: std::net::SocketAddr) -> anyhow::Result<HashMap<String, f64>> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    // The listener answers only requests naming its own address.
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response)).await??;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP header end in {response:.200}"))?;
    anyhow::ensure!(head.starts_with("HTTP/1.0 200"), "status line: {head:.100}");
    anyhow::ensure!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "content type: {head}"
    );
    anyhow::ensure!(body.trim_end().ends_with("# EOF"), "body not terminated");
    Ok(parse(body))
}

/// The text exposition format: `name{labels} value` per line, `#` lines are metadata.
fn parse(body: &str) -> HashMap<String, f64> {
    body.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The lateness bucket with the smallest bound >= `seconds` (cumulative: every faster fire).
fn lateness_bucket_at_least(metrics: &HashMap<String, f64>, seconds: f64) -> Option<String> {
    metrics
        .keys()
        .filter_map(|series| {
            let bound = series
                .strip_prefix("xjob_fire_lateness_seconds_bucket{le=\"")?
                .strip_suffix("\"}")?
                .parse::<f64>()
                .ok()?;
            (bound >= seconds).then(|| (bound, series.clone()))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, series)| series)
}

fn value(metrics: &HashMap<String, f64>, series: &str) -> f64 {
    metrics.get(series).copied().unwrap_or(0.0)
}

#[tokio::test]
async fn metrics_move_with_fires() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.metrics_listen = Some(([127, 0, 0, 1], 0).into()))
        .start()
        .await?;
    let address = cluster
        .metrics_addr()
        .ok_or_else(|| anyhow::anyhow!("metrics_listen set but no metrics address"))?;
    let group_id = cluster.create_group(APP).await?;
    // A group whose app has no executor online (none ever was) is in the gauge too, at 0,
    // from the next registry refresh round on.
    cluster.create_group(IDLE_APP).await?;
    let idle = r#"xjob_executors_online{app="metrics-idle-app"}"#;
    wait_until(
        Duration::from_secs(10),
        "the idle group's app in the gauge at 0",
        || async { (scrape(address).await.ok()?.get(idle) == Some(&0.0)).then_some(()) },
    )
    .await?;
    cluster
        .start_executor(
            cluster
                .executor(APP)
                .handler("ok", ok_handler)
                .handler("fail", fails),
        )
        .await?;
    let before = scrape(address).await?;
    // Alarm series exist before the first alarm, so an alert on their increase sees the first.
    for series in [
        r#"xjob_alarm_deliveries_total{channel="email",result="failed"}"#,
        r#"xjob_alarm_deliveries_total{channel="webhook",result="sent"}"#,
        r#"xjob_alarms_dropped_total{reason="queue_full"}"#,
        "xjob_alarm_queue_depth",
    ] {
        assert!(before.contains_key(series), "{series} missing at start");
    }
    let online = r#"xjob_executors_online{app="metrics-app"}"#;
    wait_until(
        Duration::from_secs(10),
        "the executor in the gauge",
        || async { (value(&scrape(address).await.ok()?, online) >= 1.0).then_some(()) },
    )
    .await?;

    // A job of the schedule (every second) feeds the lateness histogram and success counter.
    let every_second = cluster
        .create_job(TestCluster::job(
            group_id,
            "ok",
            pb::ScheduleType::FixRate,
            "1",
        ))
        .await?;
    cluster.start_job(every_second.id).await?;
    let failing = cluster
        .create_job(TestCluster::job(
            group_id,
            "fail",
            pb::ScheduleType::None,
            "",
        ))
        .await?;
    let failed_log = cluster.trigger(failing.id, None).await?;
    cluster
        .wait_log_final(failed_log, Duration::from_secs(10))
        .await?;
    wait_until(
        Duration::from_secs(15),
        "3 successful scheduled runs",
        || async {
            let logs = cluster.logs(every_second.id).await.ok()?;
            let succeeded = logs
                .iter()
                .filter(|log| log.status == pb::RunStatus::Success as i32)
                .count();
            (succeeded >= 3).then_some(())
        },
    )
    .await?;

    let after = scrape(address).await?;
    let grew = |series: &str| value(&after, series) - value(&before, series);
    assert!(grew(r#"xjob_fires_total{outcome="success"}"#) >= 3.0);
    assert!(grew(r#"xjob_fires_total{outcome="failed"}"#) >= 1.0);
    assert!(grew("xjob_callbacks_total") >= 4.0);
    let lateness_count = grew("xjob_fire_lateness_seconds_count");
    assert!(
        lateness_count >= 3.0,
        "lateness observations grew by {lateness_count}"
    );
    // Fires on an idle loopback admin leave well within 5 s of their instant: the bucket
    // holding 5 s (`le` between 5 and 11 s) grew with them.
    let bucket = lateness_bucket_at_least(&after, 5.0)
        .ok_or_else(|| anyhow::anyhow!("no lateness bucket >= 5 s"))?;
    let within = grew(&bucket);
    assert!(
        within >= 3.0,
        "lateness: {within} of {lateness_count} fires in {bucket}"
    );
    assert!(value(&after, "xjob_schedule_scan_seconds_count") >= 1.0);
    assert!(value(&after, "xjob_schedule_lock_wait_seconds_count") >= 1.0);
    assert_eq!(value(&after, online), 1.0);
    assert_eq!(after.get(idle), Some(&0.0), "the idle app stays at 0");
    for series in [
        "xjob_planned_fires",
        "xjob_retries_total",
        "xjob_database_errors_total",
        r#"xjob_trigger_pool_in_flight{pool="fast"}"#,
        r#"xjob_trigger_pool_waiting{pool="fast"}"#,
    ] {
        assert!(
            after.contains_key(series),
            "{series} missing from the scrape"
        );
    }
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn other_paths_are_not_found() -> anyhow::Result<()> {
    let cluster = TestCluster::builder()
        .configure(|config| config.metrics_listen = Some(([127, 0, 0, 1], 0).into()))
        .start()
        .await?;
    let address = cluster
        .metrics_addr()
        .ok_or_else(|| anyhow::anyhow!("no metrics address"))?;
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream.write_all(b"GET / HTTP/1.0\r\n\r\n").await?;
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response)).await??;
    assert!(response.starts_with("HTTP/1.0 404"), "{response:.100}");
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn executor_metrics_count_runs_and_their_duration() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group("executor-metrics-app").await?;
    let executor = cluster
        .executor("executor-metrics-app")
        .handler("ok", ok_handler)
        .metrics_listen("127.0.0.1:0")
        .start()
        .await?;
    executor.wait_registered(Duration::from_secs(5)).await?;
    let address = executor
        .metrics_addr()
        .ok_or_else(|| anyhow::anyhow!("executor has no metrics address"))?;
    let before = scrape(address).await?;
    let job = cluster
        .create_job(TestCluster::job(group_id, "ok", pb::ScheduleType::None, ""))
        .await?;
    for _ in 0..2 {
        let log_id = cluster.trigger(job.id, None).await?;
        cluster
            .wait_log_final(log_id, Duration::from_secs(10))
            .await?;
    }
    let after = scrape(address).await?;
    let grew = |series: &str| value(&after, series) - value(&before, series);
    assert!(grew(r#"xjob_executor_runs_total{status="success"}"#) >= 2.0);
    assert!(grew("xjob_executor_handler_duration_seconds_count") >= 2.0);
    assert!(after.contains_key("xjob_executor_queued_runs"));
    executor.shutdown().await;
    cluster.shutdown().await;
    Ok(())
}
