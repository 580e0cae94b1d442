//! Process-level scenarios: the real `xjob` binary, killed with SIGKILL and restarted, with a
//! real executor (the SDK) in the test process. Cargo builds the binary for these tests and
//! passes its path in `CARGO_BIN_EXE_xjob`.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xjob_executor::{Executor, JobContext, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_testkit::{AdminOutput, AdminProcess, AdminSpec, connect_admin, free_port, wait_until};

/// The admin of these tests: the default SQLite database in its data directory, short
/// leases, warnings on the test's stderr.
fn admin_spec(data_dir: &Path, port: u16) -> anyhow::Result<AdminSpec> {
    let config_file = data_dir.join("admin.toml");
    std::fs::write(
        &config_file,
        "heartbeat_interval = \"500ms\"\nexecutor_lease = \"3s\"\nnode_lease = \"2s\"\ntime_zone = \"UTC\"\n",
    )?;
    Ok(AdminSpec {
        binary: env!("CARGO_BIN_EXE_xjob").into(),
        node_id: "process-test-admin".into(),
        port,
        data_dir: data_dir.to_path_buf(),
        database_url: None,
        config_file,
        log_filter: "warn".into(),
        output: AdminOutput::Quiet,
        env: Vec::new(),
    })
}

async fn connect(url: &str) -> anyhow::Result<JobAdminClient<tonic::transport::Channel>> {
    connect_admin(url, Duration::from_secs(20)).await
}

type Seen = Arc<Mutex<Vec<i64>>>;

fn recorder(
    seen: Seen,
) -> impl Fn(JobContext) -> std::pin::Pin<Box<dyn std::future::Future<Output = JobResult> + Send>>
+ Send
+ Sync
+ 'static {
    move |ctx: JobContext| {
        let seen = Arc::clone(&seen);
        Box::pin(async move {
            if let Ok(mut seen) = seen.lock() {
                seen.push(ctx.scheduled_at_ms());
            }
            Ok(JobOutput::default())
        })
    }
}

fn seen_count(seen: &Seen) -> usize {
    seen.lock().map(|seen| seen.len()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_killed_with_sigkill_resumes_without_losing_or_duplicating_fires()
-> anyhow::Result<()> {
    let data_dir = tempfile::tempdir()?;
    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    let mut admin = AdminProcess::spawn(admin_spec(data_dir.path(), port)?)?;
    let mut client = connect(&url).await?;

    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let executor = Executor::builder()
        .app_name("process-app")
        .admin_addrs([url.clone()])
        .bind("127.0.0.1:0")
        .log_dir(data_dir.path().join("executor-logs"))
        .handler("record", recorder(Arc::clone(&seen)))
        .start()
        .await?;
    executor.wait_registered(Duration::from_secs(10)).await?;

    let group = pb::Group {
        app_name: "process-app".into(),
        title: "process test".into(),
        address_type: pb::AddressType::Auto as i32,
        ..Default::default()
    };
    let group = client
        .create_group(pb::CreateGroupRequest { group: Some(group) })
        .await?
        .into_inner()
        .group;
    let group_id = group.map(|group| group.id).unwrap_or_default();
    let job = pb::Job {
        group_id,
        name: "every second".into(),
        schedule_type: pb::ScheduleType::Cron as i32,
        schedule_conf: "*/1 * * * * ?".into(),
        misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
        route_strategy: pb::RouteStrategy::First as i32,
        handler: "record".into(),
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        glue_type: pb::GlueType::Bean as i32,
        ..Default::default()
    };
    let job = client
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await?
        .into_inner()
        .job;
    let job_id = job.map(|job| job.id).unwrap_or_default();
    client.start_job(pb::StartJobRequest { id: job_id }).await?;

    wait_until(
        Duration::from_secs(15),
        "3 fires before the kill",
        || async { (seen_count(&seen) >= 3).then_some(()) },
    )
    .await?;
    // Mid-second, so fires planned for the next seconds sit in the dead admin's ring.
    admin.kill_9()?;
    let at_kill = seen_count(&seen);

    admin.restart()?;
    let mut client = connect(&url).await?;
    wait_until(
        Duration::from_secs(20),
        "4 fires after the restart",
        || async { (seen_count(&seen) >= at_kill + 4).then_some(()) },
    )
    .await?;
    client.stop_job(pb::StopJobRequest { id: job_id }).await?;
    executor.shutdown().await;

    let ran: Vec<i64> = seen
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    let distinct: HashSet<i64> = ran.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        ran.len(),
        "the handler saw a scheduled second twice: {ran:?}"
    );

    // Every scheduled second from the first fire to the last one the handler saw is accounted
    // for by exactly one log row: run (SUCCESS) or recorded as skipped (misfire).
    let logs = client
        .list_logs(pb::ListLogsRequest {
            job_id,
            page_size: 1000,
            ..Default::default()
        })
        .await?
        .into_inner()
        .logs;
    let mut by_second: BTreeMap<i64, Vec<i32>> = BTreeMap::new();
    for log in &logs {
        by_second
            .entry(log.scheduled_at_ms)
            .or_default()
            .push(log.status);
    }
    let first = ran.iter().copied().min().unwrap_or_default();
    let last = ran.iter().copied().max().unwrap_or_default();
    let mut second = first;
    while second <= last {
        let statuses = by_second.get(&second).cloned().unwrap_or_default();
        assert_eq!(
            statuses.len(),
            1,
            "second {second} has log rows {statuses:?}"
        );
        let accounted = [pb::RunStatus::Success as i32, pb::RunStatus::Skipped as i32];
        assert!(
            accounted.contains(&statuses[0]),
            "second {second} ended as {:?}",
            statuses[0]
        );
        if statuses[0] == pb::RunStatus::Success as i32 {
            assert!(
                distinct.contains(&second),
                "a SUCCESS row the handler never saw at {second}"
            );
        }
        second += 1000;
    }
    Ok(())
}

const XJOB: &str = env!("CARGO_BIN_EXE_xjob");

/// `xjob ARGS` with stderr on a pipe (as in a container or a log file), colours left to the
/// admin (`NO_COLOR` unset); killed when dropped.
fn xjob_on_a_pipe(args: &[&str], envs: &[(&str, &str)]) -> anyhow::Result<tokio::process::Child> {
    let mut command = tokio::process::Command::new(XJOB);
    command
        .args(args)
        .env_remove("NO_COLOR")
        .env_remove("XJOB_LOG_FORMAT")
        .env_remove("XJOB_CONFIG")
        .env("RUST_LOG", "info")
        .envs(envs.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    Ok(command.spawn()?)
}

/// Reads `serve`'s stderr until a line holds `until`; returns the raw bytes read.
async fn stderr_until(child: &mut tokio::process::Child, until: &str) -> anyhow::Result<String> {
    use tokio::io::AsyncBufReadExt;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| anyhow::anyhow!("stderr is not piped"))?;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let mut read = String::new();
    let deadline = Duration::from_secs(30);
    tokio::time::timeout(deadline, async {
        while let Some(line) = lines.next_line().await? {
            read.push_str(&line);
            read.push('\n');
            if line.contains(until) {
                return Ok(());
            }
        }
        anyhow::bail!("stderr ended before a line with {until:?}")
    })
    .await
    .map_err(|_| anyhow::anyhow!("no line with {until:?} within {deadline:?}: {read}"))??;
    Ok(read)
}

/// Serve on free loopback ports, console included, in `data_dir`.
fn serve_args(data_dir: &Path) -> anyhow::Result<Vec<String>> {
    Ok(vec![
        "serve".into(),
        "--listen".into(),
        format!("127.0.0.1:{}", free_port()?),
        "--http-listen".into(),
        format!("127.0.0.1:{}", free_port()?),
        "--data-dir".into(),
        data_dir.display().to_string(),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_on_a_pipe_are_plain_text_without_colours_or_debug_values() -> anyhow::Result<()> {
    let data_dir = tempfile::tempdir()?;
    let args = serve_args(data_dir.path())?;
    let console_address = args[4].clone();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut admin = xjob_on_a_pipe(&args, &[])?;
    let logs = stderr_until(&mut admin, "web console listening").await?;
    admin.kill().await?;
    assert!(!logs.contains("\x1b["), "ANSI codes on a pipe: {logs:?}");
    let console_line = logs
        .lines()
        .find(|line| line.contains("web console listening"));
    assert!(
        console_line
            .is_some_and(|line| line.contains(&format!("address={console_address}"))
                && !line.contains("Some(")),
        "{logs}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line() -> anyhow::Result<()> {
    let data_dir = tempfile::tempdir()?;
    let args = serve_args(data_dir.path())?;
    let console_address = args[4].clone();
    let mut flag_args: Vec<&str> = args.iter().map(String::as_str).collect();
    flag_args.extend(["--log-format", "json"]);
    let mut admin = xjob_on_a_pipe(&flag_args, &[])?;
    let logs = stderr_until(&mut admin, "web console listening").await?;
    admin.kill().await?;
    let mut console = None;
    for line in logs.lines() {
        let object: serde_json::Value = serde_json::from_str(line)
            .map_err(|error| anyhow::anyhow!("not JSON ({error}): {line}"))?;
        assert!(
            object["level"].is_string() && object["fields"]["message"].is_string(),
            "{line}"
        );
        if object["fields"]["message"] == "web console listening" {
            console = Some(object);
        }
    }
    assert_eq!(
        console.map(|object| object["fields"]["address"].clone()),
        Some(serde_json::Value::from(console_address)),
        "{logs}"
    );

    // The same with XJOB_LOG_FORMAT, and a startup error as one JSON object.
    let refused = xjob_on_a_pipe(
        &["migrate", "--database-url", "nowhere://x"],
        &[("XJOB_LOG_FORMAT", "json")],
    )?
    .wait_with_output()
    .await?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(!refused.status.success() && lines.len() == 1, "{stderr}");
    let error: serde_json::Value = serde_json::from_str(lines[0])?;
    assert_eq!(error["level"], "ERROR", "{stderr}");
    Ok(())
}

/// A command that cannot start says why on one line, each cause once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_startup_error_is_one_line_with_its_causes_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "listen = \"not an address\"\n")?;
    let bad = bad.display().to_string();
    for args in [
        vec!["serve", "--config", bad.as_str()],
        vec!["migrate", "--config", bad.as_str()],
        vec!["serve", "--config", "/nonexistent/xjob.toml"],
    ] {
        let ran = xjob_on_a_pipe(&args, &[])?.wait_with_output().await?;
        let stderr = String::from_utf8_lossy(&ran.stderr);
        let line = stderr.trim_end();
        assert!(
            ran.status.code() == Some(1) && line.lines().count() == 1 && line.starts_with("xjob: "),
            "{args:?}: {stderr}"
        );
        // No cause repeated: each `: `-separated part appears once.
        let parts: Vec<&str> = line.split(": ").collect();
        let unique: HashSet<&str> = parts.iter().copied().collect();
        assert_eq!(parts.len(), unique.len(), "{args:?}: {line}");
    }
    Ok(())
}

/// `migrate` reads the configuration as `serve` does: on a fresh database, a listener off
/// loopback is refused by `serve` until a user exists, and `migrate` says so and what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_warns_when_serve_would_refuse_the_configuration() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("xjob.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"0.0.0.0:8080\"\ndata_dir = {:?}\n",
            dir.path().join("data").display().to_string()
        ),
    )?;
    let config = config.display().to_string();
    let migrate = ["migrate", "--config", config.as_str()];
    let ran = xjob_on_a_pipe(&migrate, &[])?.wait_with_output().await?;
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        ran.status.success()
            && stderr.contains("database is migrated")
            && stderr.contains("will not start yet")
            && stderr.contains("xjob user create --role admin NAME"),
        "{stderr}"
    );
    // Once the first admin exists, nothing stands in the way: no warning.
    let create = [
        "user",
        "create",
        "--role",
        "admin",
        "first",
        "--config",
        config.as_str(),
    ];
    let created = xjob_on_a_pipe(&create, &[])?.wait_with_output().await?;
    assert!(created.status.success(), "{created:?}");
    let ran = xjob_on_a_pipe(&migrate, &[])?.wait_with_output().await?;
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        ran.status.success() && !stderr.contains("will not start yet"),
        "{stderr}"
    );
    Ok(())
}

/// On a terminal the text logs have colours, unless `NO_COLOR` is set. The terminal is a
/// pseudo-terminal made by util-linux `script`, which copies what the command wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colours_on_a_terminal_unless_no_color() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let migrate = format!("{XJOB} migrate --data-dir {}", dir.path().display());
    let on_a_terminal = |no_color: Option<&str>| {
        let mut command = tokio::process::Command::new("script");
        command
            .args(["-qec", migrate.as_str(), "/dev/null"])
            .env("RUST_LOG", "info")
            .env_remove("XJOB_LOG_FORMAT")
            .env_remove("NO_COLOR")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Some(value) = no_color {
            command.env("NO_COLOR", value);
        }
        async move {
            let output = tokio::time::timeout(Duration::from_secs(30), command.output())
                .await
                .map_err(|_| anyhow::anyhow!("xjob migrate on a terminal did not exit"))??;
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            anyhow::ensure!(
                output.status.success() && text.contains("database is migrated"),
                "{output:?}"
            );
            Ok::<_, anyhow::Error>(text)
        }
    };
    let coloured = on_a_terminal(None).await?;
    assert!(
        coloured.contains("\x1b["),
        "no colours on a terminal: {coloured:?}"
    );
    let plain = on_a_terminal(Some("1")).await?;
    assert!(!plain.contains("\x1b["), "colours with NO_COLOR: {plain:?}");
    Ok(())
}
