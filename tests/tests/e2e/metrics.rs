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
    bucket_at_least(metrics, "xjob_fire_lateness_seconds", seconds)
}

/// The bucket of `histogram` with the smallest bound >= `seconds`.
fn bucket_at_least(
    metrics: &HashMap<String, f64>,
    histogram: &str,
    seconds: f64,
) -> Option<String> {
    let prefix = format!("{histogram}_bucket{{le=\"");
    metrics
        .keys()
        .filter_map(|series| {
            let bound = series
                .strip_prefix(prefix.as_str())?
                .strip_suffix("\"}")?
                .parse::<f64>()
                .ok()?;
            (bound >= seconds).then(|| (bound, series.clone()))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, series)| series)
}

/// The admin's state gauges after real activity: each present, in a plausible range. Other
/// tests of this binary run admins in the same process, so ranges, not exact values.
fn assert_state_is_plausible(metrics: &HashMap<String, f64>) -> anyhow::Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    // The periodic loops, and `claim` (this test's fires were claimed); `recorder` reports only
    // when it writes, and its outcomes may all have been folded into the result writes.
    for which in [
        "scan",
        "claim",
        "followup",
        "lease_renewal",
        "registry_refresh",
        "adoption",
    ] {
        let last = value(
            metrics,
            &format!("xjob_loop_last_success_timestamp_seconds{{loop=\"{which}\"}}"),
        );
        assert!(
            (now - 60.0..=now + 1.0).contains(&last),
            "{which}: last success at {last}, now {now}"
        );
    }
    for which in [
        "scan",
        "claim",
        "recorder",
        "followup",
        "lost_runs",
        "adoption",
    ] {
        let failing = format!("xjob_loop_failing{{loop=\"{which}\"}}");
        assert!(metrics.contains_key(&failing), "{failing} missing");
        let last = format!("xjob_loop_last_success_timestamp_seconds{{loop=\"{which}\"}}");
        assert!(metrics.contains_key(&last), "{last} missing");
    }
    let in_range = |series: &str, low: f64, high: f64| {
        let got = metrics
            .get(series)
            .copied()
            .ok_or_else(|| anyhow::anyhow!("{series} missing"))?;
        anyhow::ensure!(
            (low..=high).contains(&got),
            "{series} = {got}, not in [{low}, {high}]"
        );
        Ok(())
    };
    let max_unsent = value(metrics, "xjob_max_unsent_runs");
    in_range("xjob_max_unsent_runs", 1.0, 1e9)?;
    in_range("xjob_unsent_runs", 0.0, max_unsent * 16.0)?;
    in_range("xjob_recorder_backlog", 0.0, 1e6)?;
    in_range("xjob_result_writes_in_flight", 0.0, 1e3)?;
    // The failing run was followed up within seconds of its end.
    in_range("xjob_followup_lag_seconds", 0.0, 30.0)?;
    in_range("xjob_schedule_lock_held", 0.0, 16.0)?;
    in_range("xjob_schedule_lock_acquisitions_total", 1.0, 1e9)?;
    // The test config's lease is a few seconds, renewed every third of it.
    in_range("xjob_node_lease_remaining_seconds", 0.1, 60.0)?;
    in_range(r#"xjob_alarms_total{result="rate_limited"}"#, 0.0, 1e9)?;
    let build = format!(
        "xjob_build_info{{version=\"{}\",git_sha=\"{}\"}}",
        env!("CARGO_PKG_VERSION"),
        option_env!("XJOB_GIT_SHA").unwrap_or("unknown")
    );
    in_range(&build, 1.0, 1.0)?;
    assert_process_metrics(metrics)
}

/// The process metrics of this test process: it has run for a while and holds sockets.
fn assert_process_metrics(metrics: &HashMap<String, f64>) -> anyhow::Result<()> {
    let got = |series: &str| {
        metrics
            .get(series)
            .copied()
            .ok_or_else(|| anyhow::anyhow!("{series} missing"))
    };
    anyhow::ensure!(got("process_cpu_seconds_total")? > 0.0);
    anyhow::ensure!(got("process_resident_memory_bytes")? > 4.0 * 1024.0 * 1024.0);
    let open = got("process_open_fds")?;
    anyhow::ensure!(
        open >= 4.0 && open <= got("process_max_fds")?,
        "open files {open}"
    );
    anyhow::ensure!(got("process_threads")? >= 1.0);
    let started = got("process_start_time_seconds")?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    anyhow::ensure!(
        started <= now + 1.0 && started > now - 86_400.0,
        "started {started}"
    );
    Ok(())
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
    // Dispatches are counted when sent, finished runs when their result is written.
    assert!(grew(r#"xjob_dispatches_total{outcome="sent"}"#) >= 4.0);
    assert!(grew(r#"xjob_runs_finished_total{status="success"}"#) >= 3.0);
    assert!(grew(r#"xjob_runs_finished_total{status="failed"}"#) >= 1.0);
    assert!(grew("xjob_dispatch_latency_seconds_count") >= 4.0);
    let latency_bucket = bucket_at_least(&after, "xjob_dispatch_latency_seconds", 5.0)
        .ok_or_else(|| anyhow::anyhow!("no dispatch latency bucket >= 5 s"))?;
    assert!(grew(&latency_bucket) >= 4.0, "dispatch latency within 5 s");
    assert_state_is_plausible(&after)?;
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
    assert!(grew("xjob_executor_runs_started_total") >= 2.0);
    assert!(grew("xjob_executor_handler_duration_seconds_count") >= 2.0);
    // The handler answers at once: both runs in the lowest buckets, well under 10 s.
    let bucket = bucket_at_least(&after, "xjob_executor_handler_duration_seconds", 10.0)
        .ok_or_else(|| anyhow::anyhow!("no duration bucket >= 10 s"))?;
    assert!(grew(&bucket) >= 2.0, "runs within 10 s");
    assert!(after.contains_key(r#"xjob_executor_runs_total{status="timeout"}"#));
    let queued = value(&after, "xjob_executor_queued_runs");
    assert!((0.0..1e6).contains(&queued), "queued runs {queued}");
    assert!(
        after
            .keys()
            .any(|series| series.starts_with("xjob_executor_build_info{")),
        "executor build info missing"
    );
    assert_process_metrics(&after)?;
    executor.shutdown().await;
    cluster.shutdown().await;
    Ok(())
}

/// The deploy/ dashboard and alert rules and the docs' metric tables against the `/metrics` of
/// a real admin and executor after a run: every metric they name is served, with the label
/// values they select; every family served is documented. CI has no promtool, so the rules
/// file is read by a small line parser that also checks each rule's shape.
#[tokio::test]
async fn deploy_dashboard_alert_rules_and_docs_name_served_metrics() -> anyhow::Result<()> {
    let cluster = TestCluster::builder()
        .configure(|config| config.metrics_listen = Some(([127, 0, 0, 1], 0).into()))
        .start()
        .await?;
    let admin = cluster
        .metrics_addr()
        .ok_or_else(|| anyhow::anyhow!("no admin metrics address"))?;
    let group_id = cluster.create_group("deploy-metrics-app").await?;
    let executor = cluster
        .executor("deploy-metrics-app")
        .handler("ok", ok_handler)
        .metrics_listen("127.0.0.1:0")
        .start()
        .await?;
    executor.wait_registered(Duration::from_secs(5)).await?;
    let job = cluster
        .create_job(TestCluster::job(group_id, "ok", pb::ScheduleType::None, ""))
        .await?;
    let log_id = cluster.trigger(job.id, None).await?;
    cluster
        .wait_log_final(log_id, Duration::from_secs(10))
        .await?;
    let executor_address = executor
        .metrics_addr()
        .ok_or_else(|| anyhow::anyhow!("no executor metrics address"))?;
    // Per-app series appear with the registry refresh round after the group exists.
    let online = r#"xjob_executors_online{app="deploy-metrics-app"}"#;
    let mut served = wait_until(Duration::from_secs(10), "the app in the gauge", || async {
        let text = scrape_text(admin).await.ok()?;
        text.contains(online).then_some(text)
    })
    .await?;
    served.push_str(&scrape_text(executor_address).await?);
    let series = parse(&served);

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dashboard = std::fs::read_to_string(root.join("deploy/monitoring/xjob-dashboard.json"))?;
    let rules = std::fs::read_to_string(root.join("deploy/monitoring/xjob-alerts.yaml"))?;
    let mut exprs = deploy_check::dashboard_exprs(&dashboard)?;
    let rule_exprs = deploy_check::rule_exprs(&rules)?;
    assert!(rule_exprs.len() >= 15, "{} rules", rule_exprs.len());
    exprs.extend(rule_exprs);
    let mut problems = Vec::new();
    for expr in &exprs {
        for (name, matchers) in deploy_check::selectors(expr) {
            problems.extend(deploy_check::unserved(&series, &name, &matchers, expr));
        }
    }
    let docs = std::fs::read_to_string(root.join("docs/observability.md"))?;
    problems.extend(deploy_check::undocumented(&served, &docs));
    for name in deploy_check::documented(&docs) {
        let histogram = format!("{name}_count");
        if !deploy_check::is_served(&series, &name) && !series.contains_key(&histogram) {
            problems.push(format!("docs list {name}, not served"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    executor.shutdown().await;
    cluster.shutdown().await;
    Ok(())
}

/// One scrape's body, checked like [`scrape`] does.
async fn scrape_text(address: std::net::SocketAddr) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response)).await??;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP header end"))?;
    anyhow::ensure!(head.starts_with("HTTP/1.0 200"), "status line: {head:.100}");
    Ok(body.to_string())
}

/// The checks of the deploy/ monitoring files, kept apart from the scraping.
mod deploy_check {
    use std::collections::{BTreeSet, HashMap};

    /// Labels Prometheus adds at scrape time: not in `/metrics`.
    const TARGET_LABELS: [&str; 2] = ["job", "instance"];

    /// Every panel's queries; checks the panels' shape on the way.
    pub fn dashboard_exprs(text: &str) -> anyhow::Result<Vec<String>> {
        let dashboard: serde_json::Value = serde_json::from_str(text)?;
        anyhow::ensure!(dashboard["uid"].is_string() && dashboard["title"].is_string());
        let variables = dashboard["templating"]["list"]
            .as_array()
            .ok_or_else(|| anyhow::anyhow!("no templating list"))?;
        anyhow::ensure!(
            variables
                .iter()
                .any(|v| v["name"] == "datasource" && v["type"] == "datasource"),
            "no datasource variable"
        );
        let panels = dashboard["panels"]
            .as_array()
            .ok_or_else(|| anyhow::anyhow!("no panels"))?;
        let mut ids = BTreeSet::new();
        let mut exprs = Vec::new();
        for panel in panels {
            let title = panel["title"].as_str().unwrap_or_default();
            anyhow::ensure!(!title.is_empty(), "a panel without a title");
            anyhow::ensure!(ids.insert(panel["id"].as_i64()), "{title}: id repeated");
            anyhow::ensure!(panel["gridPos"]["w"].as_i64().is_some(), "{title}: gridPos");
            anyhow::ensure!(
                panel["datasource"]["uid"] == "${datasource}",
                "{title}: datasource"
            );
            let targets = panel["targets"].as_array().cloned().unwrap_or_default();
            anyhow::ensure!(!targets.is_empty(), "{title}: no query");
            for target in targets {
                let expr = target["expr"].as_str().unwrap_or_default();
                anyhow::ensure!(!expr.is_empty(), "{title}: an empty query");
                exprs.push(expr.to_string());
            }
        }
        Ok(exprs)
    }

    /// Every rule's `expr` from a Prometheus rules file; checks each rule names an alert, a
    /// severity and a summary, and that alert names are unique. A line parser for the subset
    /// the file uses: `key: value` and `key: |` blocks, by indentation.
    pub fn rule_exprs(text: &str) -> anyhow::Result<Vec<String>> {
        anyhow::ensure!(!text.contains('\t'), "tabs in YAML");
        anyhow::ensure!(
            text.lines().any(|line| line == "groups:"),
            "no top-level groups"
        );
        let lines: Vec<&str> = text.lines().collect();
        let mut rules: Vec<HashMap<String, String>> = Vec::new();
        let mut at = 0;
        while at < lines.len() {
            let line = lines[at];
            let indent = line.len() - line.trim_start().len();
            let trimmed = line.trim_start().trim_start_matches("- ");
            at += 1;
            if line.trim_start().starts_with("- alert:") {
                rules.push(HashMap::new());
            }
            let Some((key, value)) = trimmed.split_once(':') else {
                continue;
            };
            let Some(rule) = rules.last_mut() else {
                continue;
            };
            let mut value = value.trim().to_string();
            if value == "|" {
                let mut block = Vec::new();
                while at < lines.len() {
                    let next = lines[at];
                    let next_indent = next.len() - next.trim_start().len();
                    if !next.trim().is_empty() && next_indent <= indent {
                        break;
                    }
                    block.push(next.trim());
                    at += 1;
                }
                value = block.join(" ");
            }
            rule.insert(key.trim().to_string(), value);
        }
        let mut names = BTreeSet::new();
        let mut exprs = Vec::new();
        for rule in rules {
            let get = |key: &str| rule.get(key).cloned().unwrap_or_default();
            let alert = get("alert");
            anyhow::ensure!(names.insert(alert.clone()), "alert {alert} repeated");
            anyhow::ensure!(
                ["critical", "warning"].contains(&get("severity").as_str()),
                "{alert}: severity"
            );
            anyhow::ensure!(!get("summary").is_empty(), "{alert}: no summary");
            let expr = get("expr");
            anyhow::ensure!(!expr.is_empty(), "{alert}: no expr");
            anyhow::ensure!(
                expr.matches('(').count() == expr.matches(')').count(),
                "{alert}: unbalanced parentheses"
            );
            exprs.push(expr);
        }
        Ok(exprs)
    }

    /// The xjob and process metrics an expression selects, each with its `=` and `=~`
    /// matchers (`=~` alternatives split on `|`).
    pub fn selectors(expr: &str) -> Vec<(String, Vec<(String, String)>)> {
        let chars: Vec<char> = expr.chars().collect();
        let mut found = Vec::new();
        let mut at = 0;
        while at < chars.len() {
            if chars[at] == '"' {
                at = skip_string(&chars, at);
                continue;
            }
            let starts_word = at == 0 || !is_name_char(chars[at - 1]);
            if !(starts_word && is_name_char(chars[at])) {
                at += 1;
                continue;
            }
            let start = at;
            while at < chars.len() && is_name_char(chars[at]) {
                at += 1;
            }
            let name: String = chars[start..at].iter().collect();
            if !(name.starts_with("xjob_") || name.starts_with("process_")) {
                continue;
            }
            let mut matchers = Vec::new();
            if chars.get(at) == Some(&'{') {
                let end = chars[at..]
                    .iter()
                    .position(|c| *c == '}')
                    .map_or(chars.len(), |p| at + p);
                let inside: String = chars[at + 1..end].iter().collect();
                matchers = parse_matchers(&inside);
                at = end;
            }
            found.push((name, matchers));
        }
        found
    }

    fn is_name_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_' || c == ':'
    }

    fn skip_string(chars: &[char], quote: usize) -> usize {
        chars[quote + 1..]
            .iter()
            .position(|c| *c == '"')
            .map_or(chars.len(), |p| quote + p + 2)
    }

    fn parse_matchers(inside: &str) -> Vec<(String, String)> {
        inside
            .split(',')
            .filter_map(|matcher| {
                let (key, value, alternatives) = if let Some((k, v)) = matcher.split_once("=~") {
                    (k, v, true)
                } else if matcher.contains("!=") || matcher.contains("!~") {
                    // A negative matcher selects no value to look for.
                    return None;
                } else {
                    let (k, v) = matcher.split_once('=')?;
                    (k, v, false)
                };
                let (key, value) = (key.trim(), value.trim().trim_matches('"'));
                if TARGET_LABELS.contains(&key) {
                    return None;
                }
                let values: Vec<&str> = if alternatives {
                    value.split('|').collect()
                } else {
                    vec![value]
                };
                Some(
                    values
                        .into_iter()
                        .map(|v| (key.to_string(), v.to_string()))
                        .collect::<Vec<(String, String)>>(),
                )
            })
            .flatten()
            .collect()
    }

    /// What `expr` selects of `name` and no scraped series has.
    pub fn unserved(
        series: &HashMap<String, f64>,
        name: &str,
        matchers: &[(String, String)],
        expr: &str,
    ) -> Vec<String> {
        if !is_served(series, name) {
            return vec![format!("{name} not served (in `{expr}`)")];
        }
        matchers
            .iter()
            .filter(|(key, value)| {
                let label = format!("{key}=\"{value}\"");
                !series.keys().any(|s| {
                    s.strip_prefix(name)
                        .is_some_and(|rest| rest.starts_with('{') && rest.contains(&label))
                })
            })
            .map(|(key, value)| format!("{name} has no series with {key}=\"{value}\""))
            .collect()
    }

    /// Whether a series of exactly `name` was scraped.
    pub fn is_served(series: &HashMap<String, f64>, name: &str) -> bool {
        series.keys().any(|s| {
            s.strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('{'))
        })
    }

    /// The metric names the docs' tables list (`| \`xjob_…\` |` rows).
    pub fn documented(docs: &str) -> Vec<String> {
        docs.lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|rest| rest.split_once('`').map(|(name, _)| name.to_string()))
            .filter(|name| name.starts_with("xjob_") || name.starts_with("process_"))
            .collect()
    }

    /// Families served (`# TYPE` lines) without a row in the docs' tables, under the name a
    /// query uses (`_total` for counters).
    pub fn undocumented(served: &str, docs: &str) -> Vec<String> {
        let listed: BTreeSet<String> = documented(docs).into_iter().collect();
        served
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|rest| rest.split_once(' '))
            .map(|(family, kind)| match kind {
                "counter" => format!("{family}_total"),
                _ => family.to_string(),
            })
            .filter(|name| !listed.contains(name))
            .map(|name| format!("{name} served, not in docs/observability.md's tables"))
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect()
    }

    #[test]
    fn selectors_name_metrics_and_label_values_outside_strings() {
        let found = selectors(
            r#"sum(rate(xjob_dispatches_total{job="$a",outcome=~"failed|refused"}[5m])) / up{x="xjob_no"}"#,
        );
        assert_eq!(
            found,
            vec![(
                "xjob_dispatches_total".to_string(),
                vec![
                    ("outcome".to_string(), "failed".to_string()),
                    ("outcome".to_string(), "refused".to_string()),
                ]
            )]
        );
    }
}
