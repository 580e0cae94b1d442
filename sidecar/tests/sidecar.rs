//! The `xjob-executor` binary as a real process, started from the example config in
//! `deploy/sidecar/` (overridden by `XJOB_*` variables only where a test needs its own ports and
//! directories), registered with a real admin (gRPC on loopback, a SQLite file; the admin runs
//! in the test process through the `xjob-tests` harness), running command, http and script jobs.
//! The http handler calls a small HTTP server the test starts, which records what it saw.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use xjob_proto::pb;
use xjob_tests::{TestCluster, wait_until};

/// The example config shipped in deploy/: the one these tests load.
const EXAMPLE_CONFIG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/sidecar/xjob-executor.toml"
);
/// Its app name (the group the tests create).
const APP_NAME: &str = "demo-app";
const DEADLINE: Duration = Duration::from_secs(30);

/// A spawned `xjob-executor`, killed when dropped so a failing test leaves nothing running.
struct Sidecar {
    child: Child,
    address: String,
    _log_dir: tempfile::TempDir,
}

impl Sidecar {
    /// Starts the binary from the example config with the given extra variables.
    fn spawn(admin_url: &str, app_url: &str, extra_env: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::spawn_with_config(Path::new(EXAMPLE_CONFIG), admin_url, app_url, extra_env)
    }

    /// Starts the binary from another config (a setting the example does not show).
    fn spawn_with_config(
        config: &Path,
        admin_url: &str,
        app_url: &str,
        extra_env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let log_dir = tempfile::tempdir()?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_xjob-executor"));
        command
            .arg("--config")
            .arg(config)
            .env("XJOB_ADMIN_ADDRS", admin_url)
            .env("XJOB_BIND", format!("127.0.0.1:{port}"))
            .env("XJOB_LOG_DIR", log_dir.path())
            .env("XJOB_APP_URL", app_url)
            .env("XJOB_SHUTDOWN_GRACE", "5s")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (key, value) in extra_env {
            command.env(key, value);
        }
        Ok(Sidecar {
            child: command.spawn()?,
            address: format!("http://127.0.0.1:{port}"),
            _log_dir: log_dir,
        })
    }

    /// Sends SIGTERM and waits for the process to exit; returns whether it exited with 0.
    async fn terminate(mut self) -> anyhow::Result<bool> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status()?;
        anyhow::ensure!(sent.success(), "kill -TERM {pid} failed");
        let status = wait_until(DEADLINE, "the sidecar to exit after SIGTERM", || {
            let exited = self.child.try_wait().ok().flatten();
            async move { exited }
        })
        .await?;
        Ok(status.success())
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The body of `GET /metrics` at `address` (host:port).
async fn scrape_metrics(address: &str) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(address).await?;
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(DEADLINE, stream.read_to_string(&mut response)).await??;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP header end in {response:.200}"))?;
    anyhow::ensure!(head.starts_with("HTTP/1.0 200"), "status line: {head:.100}");
    Ok(body.to_string())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until the admin lists `address` online in the group.
async fn wait_online(cluster: &TestCluster, group_id: i64, address: &str) -> anyhow::Result<()> {
    wait_until(DEADLINE, &format!("{address} to register"), || {
        let mut client = cluster.client();
        async move {
            let group = client
                .get_group(pb::GetGroupRequest { id: group_id })
                .await
                .ok()?
                .into_inner()
                .group?;
            group
                .online
                .iter()
                .any(|online| online == address)
                .then_some(())
        }
    })
    .await
}

/// Creates a job of the example app's group, triggers it once, waits for its final state.
async fn run_once(cluster: &TestCluster, job: pb::Job, params: &str) -> anyhow::Result<pb::Log> {
    let job = cluster.create_job(job).await?;
    let log_id = trigger(cluster, job.id, params).await?;
    cluster.wait_log_final(log_id, DEADLINE).await
}

async fn trigger(cluster: &TestCluster, job_id: i64, params: &str) -> anyhow::Result<i64> {
    let response = cluster
        .client()
        .trigger_job(pb::TriggerJobRequest {
            id: job_id,
            params: Some(params.to_owned()),
            addresses: Vec::new(),
        })
        .await?
        .into_inner();
    response
        .log_ids
        .first()
        .copied()
        .ok_or_else(|| anyhow::anyhow!("no run created"))
}

/// The whole run log, read through the admin from the sidecar.
async fn run_log(cluster: &TestCluster, log_id: i64) -> anyhow::Result<String> {
    let response = cluster
        .client()
        .read_run_log(pb::ReadRunLogRequest {
            log_id,
            from_line: 1,
        })
        .await?
        .into_inner();
    Ok(response.content)
}

fn status_of(log: &pb::Log) -> pb::RunStatus {
    pb::RunStatus::try_from(log.status).unwrap_or(pb::RunStatus::Unspecified)
}

fn bean_job(group_id: i64, handler: &str) -> pb::Job {
    TestCluster::job(group_id, handler, pb::ScheduleType::None, "")
}

fn glue_job(group_id: i64, glue_type: pb::GlueType, source: &str) -> pb::Job {
    pb::Job {
        glue_type: glue_type as i32,
        glue_source: source.to_owned(),
        glue_remark: "first version".to_owned(),
        name: format!("{} job", glue_type.as_str_name()),
        ..bean_job(group_id, "")
    }
}

// ---- the app: a small HTTP/1.1 server that records requests and closed connections

/// What the app saw.
#[derive(Debug, Default)]
struct Seen {
    /// Bodies of the requests received.
    bodies: Vec<String>,
    /// Headers (lowercased names) of the requests received.
    headers: Vec<Vec<(String, String)>>,
    /// How many slow requests saw their connection closed by the client.
    slow_closed: usize,
}

type SeenRef = Arc<Mutex<Seen>>;

/// Serves `/jobs/report`: params "ok" → 200, "fail" → 500, "delay" → 200 after a second,
/// "slow" → no answer until the client goes away (counted in `slow_closed`).
async fn start_app() -> anyhow::Result<(String, SeenRef)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let seen = SeenRef::default();
    let app_seen = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_connection(stream, Arc::clone(&app_seen)));
        }
    });
    Ok((url, seen))
}

async fn serve_connection(mut stream: TcpStream, seen: SeenRef) {
    let Some((headers, body)) = read_request(&mut stream).await else {
        return;
    };
    let params = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|json| json["params"].as_str().map(str::to_owned))
        .unwrap_or_default();
    if let Ok(mut seen) = seen.lock() {
        seen.bodies.push(body.clone());
        seen.headers.push(headers);
    }
    let (status, text) = match params.as_str() {
        "ok" => ("200 OK", "report done\nrows: 42\n".to_owned()),
        "fail" => ("500 Internal Server Error", "database is down\n".to_owned()),
        "delay" => {
            // Answers after a second: a run still in flight when the sidecar gets SIGTERM.
            tokio::time::sleep(Duration::from_secs(1)).await;
            ("200 OK", "late but done\n".to_owned())
        }
        "slow" => {
            // Never answers: waits for the client to close the connection.
            let mut rest = [0_u8; 64];
            while matches!(stream.read(&mut rest).await, Ok(n) if n > 0) {}
            if let Ok(mut seen) = seen.lock() {
                seen.slow_closed += 1;
            }
            return;
        }
        _ => ("404 Not Found", format!("unknown params {params:?}\n")),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads one request: headers (lowercased names) and a `content-length` body.
async fn read_request(stream: &mut TcpStream) -> Option<(Vec<(String, String)>, String)> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 4096];
    let header_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end;
        }
        let read = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let headers: Vec<(String, String)> = head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[header_end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        body.extend_from_slice(&chunk[..read]);
    }
    Some((headers, String::from_utf8_lossy(&body).into_owned()))
}

fn slow_closed(seen: &SeenRef) -> usize {
    seen.lock().map(|seen| seen.slow_closed).unwrap_or(0)
}

// ---- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_and_http_jobs_run_in_the_sidecar_process() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP_NAME).await?;
    let (app_url, seen) = start_app().await?;
    let metrics = format!("127.0.0.1:{}", free_port()?);
    let sidecar = Sidecar::spawn(
        &cluster.admin_url(),
        &app_url,
        &[("XJOB_METRICS_LISTEN", metrics.as_str())],
    )?;
    wait_online(&cluster, group_id, &sidecar.address).await?;

    // gRPC health answers SERVING on the executor's port.
    let probe = Command::new(env!("CARGO_BIN_EXE_xjob-probe"))
        .arg(&sidecar.address)
        .status()?;
    assert!(probe.success(), "xjob-probe: {probe}");

    // command: argv + params, output in the run log.
    let log = run_once(&cluster, bean_job(group_id, "greet"), "world").await?;
    assert_eq!(status_of(&log), pb::RunStatus::Success, "{log:?}");
    let text = run_log(&cluster, log.id).await?;
    assert!(
        text.contains("hello from xjob-executor: world"),
        "run log: {text}"
    );

    // http 2xx: success, the body template expanded, the response body in the run log.
    let report = cluster.create_job(bean_job(group_id, "report")).await?;
    let log_id = trigger(&cluster, report.id, "ok").await?;
    let log = cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(status_of(&log), pb::RunStatus::Success, "{log:?}");
    assert_eq!(log.handle_msg, "HTTP 200 OK");
    let text = run_log(&cluster, log_id).await?;
    assert!(text.contains("rows: 42"), "run log: {text}");
    {
        let seen = seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let body: serde_json::Value = serde_json::from_str(&seen.bodies[0])?;
        assert_eq!(body["params"], "ok");
        assert_eq!(body["log_id"], log_id);
        assert_eq!(body["shard"], serde_json::json!([0, 1]));
        assert!(
            seen.headers[0]
                .iter()
                .any(|(name, value)| name == "x-xjob-log-id" && *value == log_id.to_string()),
            "headers: {:?}",
            seen.headers[0]
        );
    }

    // http 500: failure with the status and the body excerpt.
    let log_id = trigger(&cluster, report.id, "fail").await?;
    let log = cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(status_of(&log), pb::RunStatus::Failed, "{log:?}");
    assert!(
        log.handle_msg.contains("HTTP 500") && log.handle_msg.contains("database is down"),
        "{}",
        log.handle_msg
    );

    // A slow endpoint ended by the job's timeout: the connection is closed.
    let slow = cluster
        .create_job(pb::Job {
            timeout_ms: 1_000,
            name: "slow report".to_owned(),
            ..bean_job(group_id, "report")
        })
        .await?;
    let log_id = trigger(&cluster, slow.id, "slow").await?;
    let log = cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(status_of(&log), pb::RunStatus::Timeout, "{log:?}");
    wait_until(
        DEADLINE,
        "the app to see the timed-out request closed",
        || {
            let closed = slow_closed(&seen);
            async move { (closed >= 1).then_some(()) }
        },
    )
    .await?;

    // The same endpoint ended by KillRun: the connection is closed too.
    let log_id = trigger(&cluster, report.id, "slow").await?;
    wait_until(DEADLINE, "the slow request to reach the app", || {
        let count = seen.lock().map(|seen| seen.bodies.len()).unwrap_or(0);
        async move { (count >= 4).then_some(()) }
    })
    .await?;
    let killed = cluster
        .client()
        .kill_run(pb::KillRunRequest { log_id })
        .await?
        .into_inner();
    assert!(killed.killed, "{killed:?}");
    let log = cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(status_of(&log), pb::RunStatus::Killed, "{log:?}");
    wait_until(DEADLINE, "the app to see the killed request closed", || {
        let closed = slow_closed(&seen);
        async move { (closed >= 2).then_some(()) }
    })
    .await?;

    // The sidecar's own metrics count what ran: command and http successes, the http failure,
    // the timeout and the kill, each started first; and its process.
    // The killed run's result may be counted just after the admin recorded the kill.
    let value = |scraped: &str, series: &str| {
        scraped
            .lines()
            .find_map(|line| {
                line.strip_prefix(series)?
                    .strip_prefix(' ')?
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(-1.0)
    };
    let killed = r#"xjob_executor_runs_total{status="killed"}"#;
    let scraped = wait_until(DEADLINE, "the killed run in the sidecar's metrics", || {
        let metrics = metrics.clone();
        async move {
            let scraped = scrape_metrics(&metrics).await.ok()?;
            (value(&scraped, killed) >= 1.0).then_some(scraped)
        }
    })
    .await?;
    let value = |series: &str| value(&scraped, series);
    assert_eq!(value("xjob_executor_runs_started_total"), 5.0, "{scraped}");
    for (status, count) in [
        ("success", 2.0),
        ("failed", 1.0),
        ("timeout", 1.0),
        ("killed", 1.0),
    ] {
        let series = format!("xjob_executor_runs_total{{status=\"{status}\"}}");
        assert_eq!(value(&series), count, "{series}");
    }
    assert_eq!(value("xjob_executor_handler_duration_seconds_count"), 5.0);
    assert_eq!(value("xjob_executor_queued_runs"), 0.0);
    assert!(value("process_resident_memory_bytes") > 1e6, "{scraped}");
    assert!(value("process_open_fds") >= 3.0, "{scraped}");

    // SIGTERM while a run is in flight: the run finishes within the grace and its result is
    // delivered, the sidecar deregisters and exits with status 0.
    let log_id = trigger(&cluster, report.id, "delay").await?;
    wait_until(DEADLINE, "the delayed request to reach the app", || {
        let count = seen.lock().map(|seen| seen.bodies.len()).unwrap_or(0);
        async move { (count >= 5).then_some(()) }
    })
    .await?;
    let address = sidecar.address.clone();
    assert!(sidecar.terminate().await?, "exit status after SIGTERM");
    let log = cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(status_of(&log), pb::RunStatus::Success, "{log:?}");
    wait_until(DEADLINE, "the sidecar to leave the group", || {
        let mut client = cluster.client();
        let address = address.clone();
        async move {
            let group = client
                .get_group(pb::GetGroupRequest { id: group_id })
                .await
                .ok()?
                .into_inner()
                .group?;
            (!group.online.contains(&address)).then_some(())
        }
    })
    .await?;
    cluster.shutdown().await;
    Ok(())
}

/// The interpreter of each glue type, and a script printing its first argument and the job id.
const GLUE_SCRIPTS: [(pb::GlueType, &str, &str); 5] = [
    (
        pb::GlueType::Shell,
        "bash",
        "echo \"glue says $1 job=$XJOB_JOB_ID\"\n",
    ),
    (
        pb::GlueType::Python,
        "python3",
        "import os, sys\nprint(f\"glue says {sys.argv[1]} job={os.environ['XJOB_JOB_ID']}\")\n",
    ),
    (
        pb::GlueType::Nodejs,
        "node",
        "console.log(`glue says ${process.argv[2]} job=${process.env.XJOB_JOB_ID}`);\n",
    ),
    (
        pb::GlueType::Php,
        "php",
        "<?php echo \"glue says {$argv[1]} job=\" . getenv('XJOB_JOB_ID') . \"\\n\";\n",
    ),
    (
        pb::GlueType::Powershell,
        "pwsh",
        "Write-Output \"glue says $($args[0]) job=$env:XJOB_JOB_ID\"\n",
    ),
];

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Turns the in-process admin's tracing on, once for this test binary. Its exporter points at a
/// closed port: spans are dropped, but runs get real trace ids and `traceparent`s.
fn admin_traces() -> anyhow::Result<()> {
    static STARTED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    if STARTED.get().is_some() {
        return Ok(());
    }
    let telemetry =
        xjob_admin::telemetry::Telemetry::start(&format!("http://127.0.0.1:{}", free_port()?))?;
    // The tracer lives as long as the process; nothing is left to flush at its end.
    std::mem::forget(telemetry);
    let _ = STARTED.set(());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_run_hands_its_trace_to_the_app_and_to_scripts() -> anyhow::Result<()> {
    admin_traces()?;
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP_NAME).await?;
    let (app_url, seen) = start_app().await?;
    let sidecar = Sidecar::spawn(
        &cluster.admin_url(),
        &app_url,
        &[("XJOB_GLUE_ENABLED", "shell")],
    )?;
    wait_online(&cluster, group_id, &sidecar.address).await?;

    // The HTTP handler sends the run's trace context to the app.
    let log = run_once(&cluster, bean_job(group_id, "report"), "ok").await?;
    assert_eq!(status_of(&log), pb::RunStatus::Success, "{log:?}");
    assert_eq!(log.trace_id.len(), 32, "the run is traced: {log:?}");
    let in_trace = format!("00-{}-", log.trace_id);
    {
        let seen = seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let headers = seen.headers.last().cloned().unwrap_or_default();
        assert!(
            headers
                .iter()
                .any(|(name, value)| name == "traceparent" && value.starts_with(&in_trace)),
            "headers: {headers:?}"
        );
    }
    // The run log names the trace.
    let text = run_log(&cluster, log.id).await?;
    assert!(
        text.contains(&format!("trace_id={}", log.trace_id)),
        "run log: {text}"
    );

    // A script sees it as TRACEPARENT, and its run is named by its type.
    let script = glue_job(
        group_id,
        pb::GlueType::Shell,
        "echo \"TRACEPARENT=$TRACEPARENT\"\n",
    );
    let log = run_once(&cluster, script, "").await?;
    assert_eq!(status_of(&log), pb::RunStatus::Success, "{log:?}");
    let text = run_log(&cluster, log.id).await?;
    assert!(
        text.contains(&format!("TRACEPARENT=00-{}-", log.trace_id)),
        "run log: {text}"
    );
    assert!(text.contains("handler=glue:bash"), "run log: {text}");
    sidecar.terminate().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_jobs_run_in_each_present_language_and_follow_source_edits() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    // A group with an access token: the sidecar must present it, and scripts must not see it.
    let group_id = cluster
        .client()
        .create_group(pb::CreateGroupRequest {
            group: Some(pb::Group {
                app_name: APP_NAME.to_owned(),
                title: "with a token".to_owned(),
                address_type: pb::AddressType::Auto as i32,
                access_token: "group-secret".to_owned(),
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group"))?;
    let sidecar = Sidecar::spawn(
        &cluster.admin_url(),
        "http://127.0.0.1:1",
        &[
            ("XJOB_GLUE_ENABLED", "shell,python,nodejs,php,powershell"),
            ("XJOB_ACCESS_TOKEN", "group-secret"),
        ],
    )?;
    wait_online(&cluster, group_id, &sidecar.address).await?;

    for (glue_type, interpreter, source) in GLUE_SCRIPTS {
        if !on_path(interpreter) {
            eprintln!(
                "skipped {}: {interpreter} is not on the PATH",
                glue_type.as_str_name()
            );
            continue;
        }
        let log = run_once(&cluster, glue_job(group_id, glue_type, source), "hi").await?;
        assert_eq!(
            status_of(&log),
            pb::RunStatus::Success,
            "{}: {log:?}",
            glue_type.as_str_name()
        );
        let text = run_log(&cluster, log.id).await?;
        let expected = format!("glue says hi job={}", log.job_id);
        assert!(
            text.contains(&expected),
            "{}: run log: {text}",
            glue_type.as_str_name()
        );
    }

    // Editing the source: the next run uses the new version.
    let job = cluster
        .create_job(glue_job(
            group_id,
            pb::GlueType::Shell,
            "echo \"version one token=[$XJOB_ACCESS_TOKEN]\"\n",
        ))
        .await?;
    let log_id = trigger(&cluster, job.id, "").await?;
    cluster.wait_log_final(log_id, DEADLINE).await?;
    let text = run_log(&cluster, log_id).await?;
    assert!(text.contains("version one token=[]"), "{text}");
    let updated = cluster
        .client()
        .update_glue(pb::UpdateGlueRequest {
            job_id: job.id,
            glue_source: "echo version two\n".to_owned(),
            glue_remark: "second".to_owned(),
        })
        .await?
        .into_inner()
        .job
        .ok_or_else(|| anyhow::anyhow!("no job"))?;
    assert!(updated.glue_updated_ms > job.glue_updated_ms);
    let log_id = trigger(&cluster, job.id, "").await?;
    let log = cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(status_of(&log), pb::RunStatus::Success, "{log:?}");
    let text = run_log(&cluster, log_id).await?;
    assert!(
        text.contains("version two") && !text.contains("version one"),
        "{text}"
    );

    // The version list keeps the latest 30, newest first; one version reads back whole.
    for edit in 3..=33 {
        cluster
            .client()
            .update_glue(pb::UpdateGlueRequest {
                job_id: job.id,
                glue_source: format!("echo version {edit}\n"),
                glue_remark: format!("edit {edit}"),
            })
            .await?;
    }
    let versions = cluster
        .client()
        .list_glue_versions(pb::ListGlueVersionsRequest { job_id: job.id })
        .await?
        .into_inner()
        .versions;
    assert_eq!(versions.len(), 30);
    assert_eq!(versions[0].glue_remark, "edit 33");
    assert_eq!(versions[29].glue_remark, "edit 4");
    assert!(
        versions
            .iter()
            .all(|version| version.glue_source.is_empty())
    );
    let newest = cluster
        .client()
        .get_glue_version(pb::GetGlueVersionRequest { id: versions[0].id })
        .await?
        .into_inner()
        .version
        .ok_or_else(|| anyhow::anyhow!("no version"))?;
    assert_eq!(newest.glue_source, "echo version 33\n");

    drop(sidecar);
    cluster.shutdown().await;
    Ok(())
}

/// Whether `pid` is gone (or a zombie waiting for init to reap it).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_shell_glue_stops_its_whole_process_group() -> anyhow::Result<()> {
    if !on_path("bash") {
        eprintln!("skipped: bash is not on the PATH");
        return Ok(());
    }
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP_NAME).await?;
    let sidecar = Sidecar::spawn(
        &cluster.admin_url(),
        "http://127.0.0.1:1",
        &[("XJOB_GLUE_ENABLED", "shell")],
    )?;
    wait_online(&cluster, group_id, &sidecar.address).await?;
    let dir = tempfile::tempdir()?;
    let pids: PathBuf = dir.path().join("pids");
    let script = format!(
        "sleep 60 &\necho $! > {child}\necho $$ > {leader}\nwait\n",
        child = pids.with_extension("child").display(),
        leader = pids.with_extension("leader").display()
    );
    let job = cluster
        .create_job(glue_job(group_id, pb::GlueType::Shell, &script))
        .await?;
    let log_id = trigger(&cluster, job.id, "").await?;
    let (leader, child) = wait_until(DEADLINE, "the script to write its pids", || {
        let leader = read_pid(&pids.with_extension("leader"));
        let child = read_pid(&pids.with_extension("child"));
        async move { leader.zip(child) }
    })
    .await?;
    let killed = cluster
        .client()
        .kill_run(pb::KillRunRequest { log_id })
        .await?
        .into_inner();
    assert!(killed.killed, "{killed:?}");
    let log = cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(status_of(&log), pb::RunStatus::Killed, "{log:?}");
    wait_until(DEADLINE, "the script and its sleep to be gone", || {
        let gone = process_gone(leader) && process_gone(child);
        async move { gone.then_some(()) }
    })
    .await?;
    drop(sidecar);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_glue_run_on_an_executor_without_glue_is_refused_with_the_reason() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP_NAME).await?;
    // The example config enables no glue language.
    let sidecar = Sidecar::spawn(&cluster.admin_url(), "http://127.0.0.1:1", &[])?;
    wait_online(&cluster, group_id, &sidecar.address).await?;
    let log = run_once(
        &cluster,
        glue_job(group_id, pb::GlueType::Shell, "echo never\n"),
        "",
    )
    .await?;
    assert_eq!(status_of(&log), pb::RunStatus::Failed, "{log:?}");
    assert!(
        log.trigger_msg
            .contains("glue type GLUE_TYPE_SHELL is not enabled on this executor"),
        "trigger_msg: {}",
        log.trigger_msg
    );

    // GROOVY never gets that far: its group routes to an xjob executor (this sidecar), so the
    // admin refuses the job, naming it.
    let refused = cluster
        .client()
        .create_job(pb::CreateJobRequest {
            job: Some(glue_job(group_id, pb::GlueType::Groovy, "println 1")),
        })
        .await
        .expect_err("groovy refused");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains(&format!(
            "xjob executor registered at '{}'",
            sidecar.address
        )),
        "{}",
        refused.message()
    );
    drop(sidecar);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_config_error_stops_the_start_naming_the_key() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let typo = dir.path().join("typo.toml");
    let example = std::fs::read_to_string(EXAMPLE_CONFIG)?;
    std::fs::write(
        &typo,
        example.replace("timeout = \"10m\"", "timout = \"10m\""),
    )?;
    let output = Command::new(env!("CARGO_BIN_EXE_xjob-executor"))
        .arg("--config")
        .arg(&typo)
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("unknown field `timout`"), "{stderr}");

    let output = Command::new(env!("CARGO_BIN_EXE_xjob-executor"))
        .args(["--config", EXAMPLE_CONFIG, "--check"])
        .env("XJOB_GLUE_ENABLED", "shell,groovy")
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("config key XJOB_GLUE_ENABLED: unknown glue language \"groovy\""),
        "{stderr}"
    );

    // The example itself passes the check the deploy files rely on.
    let output = Command::new(env!("CARGO_BIN_EXE_xjob-executor"))
        .args(["--config", EXAMPLE_CONFIG, "--check"])
        .output()?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// A spawned `xjob serve`, killed when dropped.
struct AdminProcess {
    child: Child,
    url: String,
    _data_dir: tempfile::TempDir,
}

impl Drop for AdminProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `xjob` binary next to `xjob-executor` in the target dir: built by `cargo test
/// --workspace` (the admin's own process tests need it), not by `cargo test -p xjob-sidecar`.
fn admin_binary() -> Option<PathBuf> {
    let sidecar = Path::new(env!("CARGO_BIN_EXE_xjob-executor"));
    let admin = sidecar.with_file_name(format!("xjob{}", std::env::consts::EXE_SUFFIX));
    admin.is_file().then_some(admin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecar_runs_jobs_for_the_xjob_serve_binary() -> anyhow::Result<()> {
    let Some(binary) = admin_binary() else {
        eprintln!(
            "skipped: no xjob binary next to xjob-executor (cargo test --workspace builds it, \
             or cargo build -p xjob-admin --bin xjob)"
        );
        return Ok(());
    };
    let data_dir = tempfile::tempdir()?;
    let port = free_port()?;
    let child = Command::new(binary)
        .args(["serve", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(data_dir.path())
        .env("XJOB_TIME_ZONE", "UTC")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    let admin = AdminProcess {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _data_dir: data_dir,
    };
    let mut client = wait_until(DEADLINE, "xjob serve to answer", || {
        let url = admin.url.clone();
        async move {
            let mut client = xjob_proto::pb::job_admin_client::JobAdminClient::connect(url)
                .await
                .ok()?;
            client
                .list_groups(pb::ListGroupsRequest::default())
                .await
                .ok()?;
            Some(client)
        }
    })
    .await?;
    let (app_url, _seen) = start_app().await?;
    let sidecar = Sidecar::spawn(&admin.url, &app_url, &[])?;
    let group_id = client
        .create_group(pb::CreateGroupRequest {
            group: Some(pb::Group {
                app_name: APP_NAME.to_owned(),
                title: "demo".to_owned(),
                address_type: pb::AddressType::Auto as i32,
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group"))?;
    wait_until(DEADLINE, "the sidecar to register with xjob serve", || {
        let mut client = client.clone();
        let address = sidecar.address.clone();
        async move {
            let group = client
                .get_group(pb::GetGroupRequest { id: group_id })
                .await
                .ok()?
                .into_inner()
                .group?;
            group.online.contains(&address).then_some(())
        }
    })
    .await?;
    let job = client
        .create_job(pb::CreateJobRequest {
            job: Some(bean_job(group_id, "report")),
        })
        .await?
        .into_inner()
        .job
        .ok_or_else(|| anyhow::anyhow!("no job"))?;
    let log_id = client
        .trigger_job(pb::TriggerJobRequest {
            id: job.id,
            params: Some("ok".to_owned()),
            addresses: Vec::new(),
        })
        .await?
        .into_inner()
        .log_ids
        .first()
        .copied()
        .ok_or_else(|| anyhow::anyhow!("no run"))?;
    let log = wait_until(DEADLINE, "the run to finish", || {
        let mut client = client.clone();
        async move {
            let log = client
                .get_log(pb::GetLogRequest { id: log_id })
                .await
                .ok()?
                .into_inner()
                .log?;
            let open = [pb::RunStatus::Pending as i32, pb::RunStatus::Running as i32];
            (!open.contains(&log.status)).then_some(log)
        }
    })
    .await?;
    assert_eq!(status_of(&log), pb::RunStatus::Success, "{log:?}");
    assert_eq!(log.handle_msg, "HTTP 200 OK");
    drop(sidecar);
    drop(admin);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_handler_timeout_cancels_the_request() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP_NAME).await?;
    let (app_url, seen) = start_app().await?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("quick.toml");
    std::fs::write(
        &config,
        format!(
            "app_name = \"{APP_NAME}\"\nadmin_addrs = [\"http://unused:1\"]\n\
             [handlers.quick]\nkind = \"http\"\nurl = \"/jobs/report\"\n\
             body = '{{\"params\": {{params_json}}}}'\ntimeout = \"300ms\"\n"
        ),
    )?;
    let sidecar = Sidecar::spawn_with_config(&config, &cluster.admin_url(), &app_url, &[])?;
    wait_online(&cluster, group_id, &sidecar.address).await?;
    let log = run_once(&cluster, bean_job(group_id, "quick"), "slow").await?;
    assert_eq!(status_of(&log), pb::RunStatus::Failed, "{log:?}");
    assert_eq!(
        log.handle_msg,
        "http request timed out after 300ms (handler timeout)"
    );
    wait_until(DEADLINE, "the app to see the request closed", || {
        let closed = slow_closed(&seen);
        async move { (closed >= 1).then_some(()) }
    })
    .await?;
    drop(sidecar);
    cluster.shutdown().await;
    Ok(())
}

/// Follows the sidecar's gRPC health (`grpc.health.v1.Health/Watch`, service `""`, what the
/// Kubernetes probes ask) until it reports `wanted`; fails after DEADLINE.
async fn wait_health(
    address: &str,
    wanted: tonic_health::pb::health_check_response::ServingStatus,
) -> anyhow::Result<()> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let mut client = wait_until(DEADLINE, "the sidecar's health service to answer", || {
        let address = address.to_owned();
        async move {
            let channel = tonic::transport::Channel::from_shared(address)
                .ok()?
                .connect()
                .await
                .ok()?;
            Some(HealthClient::new(channel))
        }
    })
    .await?;
    let mut updates = client
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await?
        .into_inner();
    let reached = tokio::time::timeout(DEADLINE, async {
        while let Some(update) = updates.message().await? {
            if update.status == wanted as i32 {
                return Ok(());
            }
        }
        anyhow::bail!("the health watch ended before {wanted:?}")
    })
    .await;
    reached.map_err(|_| anyhow::anyhow!("health did not become {wanted:?} within {DEADLINE:?}"))?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_not_serving_while_the_admin_refuses_the_token() -> anyhow::Result<()> {
    use tonic_health::pb::health_check_response::ServingStatus;
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP_NAME).await?;
    let mut client = cluster.client();
    let mut group = client
        .get_group(pb::GetGroupRequest { id: group_id })
        .await?
        .into_inner()
        .group
        .ok_or_else(|| anyhow::anyhow!("no group"))?;
    group.access_token = "the-groups-token-0123456789".to_owned();
    client
        .update_group(pb::UpdateGroupRequest {
            group: Some(group.clone()),
        })
        .await?;
    let (app_url, _seen) = start_app().await?;
    let sidecar_token = "the-sidecars-token-0123456789";
    let sidecar = Sidecar::spawn(
        &cluster.admin_url(),
        &app_url,
        &[("XJOB_ACCESS_TOKEN", sidecar_token)],
    )?;

    // The admin answers UNAUTHENTICATED: the sidecar must not look ready.
    wait_health(&sidecar.address, ServingStatus::NotServing).await?;
    let probe = Command::new(env!("CARGO_BIN_EXE_xjob-probe"))
        .arg(&sidecar.address)
        .output()?;
    assert!(
        !probe.status.success(),
        "xjob-probe passed a refused sidecar: {}",
        String::from_utf8_lossy(&probe.stdout)
    );

    // Once the group's token is the sidecar's, its next attempt registers and it is SERVING.
    group.access_token = sidecar_token.to_owned();
    client
        .update_group(pb::UpdateGroupRequest { group: Some(group) })
        .await?;
    wait_online(&cluster, group_id, &sidecar.address).await?;
    wait_health(&sidecar.address, ServingStatus::Serving).await?;
    drop(sidecar);
    cluster.shutdown().await;
    Ok(())
}

/// `xjob-executor ARGS` with `config` and stderr on a pipe, bounded in time (a start that is
/// not refused would run until killed).
async fn executor_exit(config: &Path, check: bool) -> anyhow::Result<(bool, String)> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_xjob-executor"));
    command.arg("--config").arg(config);
    if check {
        command.arg("--check");
    }
    command
        .env_remove("NO_COLOR")
        .env_remove("XJOB_LOG_FORMAT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(20), command.output())
        .await
        .map_err(|_| {
            anyhow::anyhow!("xjob-executor (check: {check}) was not refused: it runs")
        })??;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    Ok((output.status.success(), stderr))
}

/// `--check` refuses what the start refuses, with the same line: an open bind without a token,
/// an admin address without its scheme, an app name the admin would never register.
#[tokio::test]
async fn check_refuses_what_the_start_refuses() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let admin = format!(
        "http://{}",
        TcpListener::bind("127.0.0.1:0").await?.local_addr()?
    );
    let config = |app: &str, admin: &str, bind: &str| {
        format!(
            "app_name = \"{app}\"\nadmin_addrs = [\"{admin}\"]\nbind = \"{bind}\"\n\
             log_dir = {:?}\n[handlers.greet]\nkind = \"command\"\nargv = [\"echo\", \"hi\"]\n",
            dir.path().join("logs").display().to_string()
        )
    };
    // A fixed port, so both name the same address (the start names the port it bound).
    let port = TcpListener::bind("127.0.0.1:0").await?.local_addr()?.port();
    let open = format!("0.0.0.0:{port}");
    let refused = [
        (
            "open bind",
            config("demo-app", &admin, &open),
            "insecure_open_network",
        ),
        (
            "no scheme",
            config("demo-app", "127.0.0.1:8080", "127.0.0.1:0"),
            "admin_addrs",
        ),
        (
            "short app name",
            config("x", &admin, "127.0.0.1:0"),
            "app_name",
        ),
    ];
    for (case, text, names) in refused {
        let path = dir.path().join("executor.toml");
        std::fs::write(&path, &text)?;
        let (checked, check_stderr) = executor_exit(&path, true).await?;
        let (started, start_stderr) = executor_exit(&path, false).await?;
        assert!(
            !checked && !started,
            "{case}: check ok {checked}, start ok {started}\n{check_stderr}\n{start_stderr}"
        );
        let check_line = check_stderr.trim_end();
        assert!(
            check_line.lines().count() == 1
                && check_line.starts_with("xjob-executor: ")
                && check_line.contains(names)
                && !check_line.contains("\x1b["),
            "{case}: {check_stderr}"
        );
        // The start refuses with the very same line (after its own log lines, if any).
        assert_eq!(
            start_stderr.trim_end().lines().last(),
            Some(check_line),
            "{case}: {start_stderr}"
        );
    }
    // A valid one passes, listing its handlers without Rust's debug quotes.
    let path = dir.path().join("executor.toml");
    std::fs::write(&path, config("demo-app", &admin, "127.0.0.1:0"))?;
    let (checked, stderr) = executor_exit(&path, true).await?;
    assert!(
        checked && stderr.contains("ok (app demo-app, handlers: greet; glue: none)"),
        "{stderr}"
    );
    Ok(())
}

/// Session dispatch: the sidecar opens no port; the run and its log read travel down its
/// session to the admin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_session_dispatch_the_sidecar_opens_no_port_and_runs_jobs() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP_NAME).await?;
    let name = format!("session://demo-sidecar-{}", std::process::id());
    let mut sidecar = Sidecar::spawn(
        &cluster.admin_url(),
        "http://127.0.0.1:1",
        &[
            ("XJOB_DISPATCH", "session"),
            ("XJOB_ADVERTISE_ADDRESS", &name),
        ],
    )?;
    let port = sidecar
        .address
        .rsplit(':')
        .next()
        .and_then(|port| port.parse::<u16>().ok())
        .ok_or_else(|| anyhow::anyhow!("no port in {}", sidecar.address))?;
    sidecar.address = name;
    wait_online(&cluster, group_id, &sidecar.address).await?;
    anyhow::ensure!(
        TcpStream::connect(("127.0.0.1", port)).await.is_err(),
        "the sidecar opened its port {port} in session dispatch"
    );
    let log = run_once(&cluster, bean_job(group_id, "greet"), "nat").await?;
    assert_eq!(status_of(&log), pb::RunStatus::Success, "{log:?}");
    assert_eq!(log.executor_address, sidecar.address);
    let text = run_log(&cluster, log.id).await?;
    assert!(
        text.contains("hello from xjob-executor: nat"),
        "run log: {text}"
    );
    assert!(sidecar.terminate().await?, "a clean exit after SIGTERM");
    cluster.shutdown().await;
    Ok(())
}
