//! The web console in a real browser: the real `xjob` binary with `http_listen`, an SDK executor
//! in the test process (handlers `echo`, which logs its params, `sleep`, which runs until
//! killed, `flaky`, whose first attempt fails, and `hold`, which runs until the driver
//! releases it; SHELL scripts run with bash), and headless Chromium driven by Playwright (`console-tests/console.test.js`):
//! login, a cron error shown inline then a valid job, a SUCCESS run, a trigger whose params
//! show in the live log, a kill, a multi-line script typed in the editor that runs, errors
//! under their field (time zone, timeout, trigger address), CSRF refusals, clearing logs, times
//! in the zone picked in the header with the runs filter reading typed times in it, a RUNNING
//! run turning SUCCESS in the runs list without a reload (live updates), a calendar created
//! (its bad zone refused under the field) and edited, the job form's jitter, catch-up, calendar,
//! DST and overlap fields saved and shown back, a calendar in use refused deletion, a backfill
//! started from a job's page (a reversed range refused as typed) whose progress shows while its
//! first run is held and which is cancelled, those pages in Chinese, and a viewer without
//! controls whose forged post the API refuses. Screenshots of each page go to
//! `target/console-screenshots/`.
//!
//! Needs Debian's `chromium` (`XJOB_CHROMIUM`, default `/usr/bin/chromium`), `node`, and
//! `npm ci` in `console-tests/` (`.ci/run`'s console stage). Without them the test says so and
//! passes outside CI; in CI (`CI` set) it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xjob_executor::{Executor, JobContext, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_testkit::{AdminOutput, AdminProcess, AdminSpec, connect_admin, free_port, wait_until};

const APP: &str = "console-app";
const ADMIN_USER: &str = "alice";
const ADMIN_PASSWORD: &str = "alice-console-password";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Chromium and the Playwright driver, or why the test cannot run.
fn browser_tools() -> Result<PathBuf, String> {
    let chromium =
        PathBuf::from(std::env::var("XJOB_CHROMIUM").unwrap_or("/usr/bin/chromium".into()));
    if !chromium.is_file() {
        return Err(format!(
            "no Chromium at {} (apt-get install chromium, or set XJOB_CHROMIUM)",
            chromium.display()
        ));
    }
    let driver = repo_root().join("console-tests/node_modules/playwright-core");
    if !driver.is_dir() {
        return Err(format!(
            "{} is missing (run `npm ci` in console-tests/)",
            driver.display()
        ));
    }
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|output| output.status.success()) {
        return Err("node is not on PATH".to_string());
    }
    Ok(chromium)
}

/// Logs its params: the browser reads them back from the live log.
async fn echo(ctx: JobContext) -> JobResult {
    ctx.log(format!("params: {}", ctx.params()));
    Ok(JobOutput::message(format!(
        "echoed {} bytes",
        ctx.params().len()
    )))
}

/// The workflow whose page's buttons the browser presses: h (held until the file
/// `workflow-hold` is released) → f (fails: a node run is a first attempt) → e (echo).
async fn workflow_for_the_buttons(
    client: &mut xjob_proto::pb::job_admin_client::JobAdminClient<tonic::transport::Channel>,
    group_id: i64,
) -> anyhow::Result<i64> {
    let job = |name: &str, handler: &str, params: &str| pb::Job {
        group_id,
        name: name.into(),
        handler: handler.into(),
        params: params.into(),
        schedule_type: pb::ScheduleType::None as i32,
        route_strategy: pb::RouteStrategy::First as i32,
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
        glue_type: pb::GlueType::Bean as i32,
        ..Default::default()
    };
    let mut ids = Vec::new();
    for (name, handler, params) in [
        ("workflow hold", "hold", "workflow-hold"),
        ("workflow flaky", "flaky", ""),
        ("workflow echo", "echo", ""),
    ] {
        let request = pb::CreateJobRequest {
            job: Some(job(name, handler, params)),
        };
        let created = client.create_job(request).await?.into_inner().job;
        ids.push(created.map(|job| job.id).unwrap_or_default());
    }
    let node = |key: &str, job_id: i64| pb::WorkflowNode {
        key: key.into(),
        job_id,
        fan_in: pb::WorkflowFanIn::AllSuccess as i32,
    };
    let edge = |from: &str, to: &str| pb::WorkflowEdge {
        from: from.into(),
        to: to.into(),
        condition: pb::WorkflowEdgeCondition::OnSuccess as i32,
    };
    let workflow = pb::Workflow {
        group_id,
        name: "console buttons".into(),
        nodes: vec![node("h", ids[0]), node("f", ids[1]), node("e", ids[2])],
        edges: vec![edge("h", "f"), edge("f", "e")],
        ..Default::default()
    };
    let request = pb::CreateWorkflowRequest {
        workflow: Some(workflow),
    };
    let created = client.create_workflow(request).await?.into_inner().workflow;
    created
        .map(|workflow| workflow.id)
        .ok_or_else(|| anyhow::anyhow!("CreateWorkflow returned no workflow"))
}

/// Fails a fire's first attempt, succeeds on the retry (the run page's attempt history).
async fn flaky(ctx: JobContext) -> JobResult {
    if ctx.attempt() == 0 {
        return Err(xjob_executor::JobError::new(
            "first attempt fails on purpose",
        ));
    }
    Ok(JobOutput::message("the retry succeeds"))
}

/// Runs until killed.
async fn sleep(ctx: JobContext) -> JobResult {
    ctx.log("sleeping until killed");
    ctx.cancelled().await;
    Ok(JobOutput::message("cancelled"))
}

/// Runs until the browser test releases it: until a file named like the run's params appears
/// in `dir` (the driver writes it once it saw the run RUNNING), at most 60 s.
async fn hold(dir: PathBuf, ctx: JobContext) -> JobResult {
    let name = ctx.params().trim().to_string();
    if name.is_empty() || name.contains(['/', '.']) {
        return Err(xjob_executor::JobError::new("params: a plain file name"));
    }
    ctx.log(format!("holding until {name} is released"));
    let released = dir.join(&name);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !released.exists() {
        if Instant::now() > deadline {
            return Err(xjob_executor::JobError::new("not released within 60 s"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(JobOutput::message("released"))
}

/// `GET path` with an optional cookie: (status line and headers, body).
async fn http_get(port: u16, path: &str, cookie: &str) -> anyhow::Result<(String, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let cookie = if cookie.is_empty() {
        String::new()
    } else {
        format!("Cookie: {cookie}\r\n")
    };
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n{cookie}\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        stream.read_to_string(&mut response),
    )
    .await??;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP header in {response:.200}"))?;
    Ok((head.to_string(), body.to_string()))
}

/// The `name=value` of the session cookie a response sets.
fn session_cookie(head: &str) -> Option<String> {
    head.lines()
        .filter_map(|line| line.strip_prefix("set-cookie: "))
        .find(|value| value.starts_with("xjob_session="))
        .and_then(|value| value.split(';').next())
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_in_a_real_browser() -> anyhow::Result<()> {
    let chromium = match browser_tools() {
        Ok(chromium) => chromium,
        Err(reason) if std::env::var_os("CI").is_some() => {
            anyhow::bail!("the browser test of the console cannot run in CI: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping the console browser test: {reason}");
            return Ok(());
        }
    };
    let started = Instant::now();
    let dir = tempfile::tempdir()?;
    let (port, http_port) = (free_port()?, free_port()?);
    let url = format!("http://127.0.0.1:{port}");
    let config_file = dir.path().join("admin.toml");
    std::fs::write(
        &config_file,
        format!(
            "heartbeat_interval = \"500ms\"\nexecutor_lease = \"3s\"\nnode_lease = \"2s\"\n\
             followup_interval = \"100ms\"\nreport_interval = \"1s\"\nhttp_listen = \"127.0.0.1:{http_port}\"\n"
        ),
    )?;
    let data_dir = dir.path().join("admin");
    let log_file = dir.path().join("admin.log");
    let admin = AdminProcess::spawn(AdminSpec {
        binary: env!("CARGO_BIN_EXE_xjob").into(),
        node_id: "console-admin".into(),
        port,
        data_dir: data_dir.clone(),
        database_url: None,
        config_file: config_file.clone(),
        log_filter: "warn".into(),
        output: AdminOutput::AppendTo(log_file),
        env: Vec::new(),
    })?;
    let mut client = connect_admin(&url, Duration::from_secs(20)).await?;
    let release_dir = dir.path().join("release");
    std::fs::create_dir_all(&release_dir)?;
    let held = release_dir.clone();
    let executor = Executor::builder()
        .app_name(APP)
        .admin_addrs([url.clone()])
        .bind("127.0.0.1:0")
        .log_dir(dir.path().join("executor-logs"))
        .handler("echo", echo)
        .handler("sleep", sleep)
        .handler("flaky", flaky)
        .handler("hold", move |ctx| hold(held.clone(), ctx))
        .glue_interpreter(pb::GlueType::Shell, "bash")
        .start()
        .await?;
    executor.wait_registered(Duration::from_secs(10)).await?;
    let group_id = client
        .create_group(pb::CreateGroupRequest {
            group: Some(pb::Group {
                app_name: APP.into(),
                title: "console test app".into(),
                address_type: pb::AddressType::Auto as i32,
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .unwrap_or_default();

    let workflow_id = workflow_for_the_buttons(&mut client, group_id).await?;

    // No users yet on a loopback admin: no login, a banner saying so.
    let (head, _) = wait_until(Duration::from_secs(10), "the console to answer", || async {
        http_get(http_port, "/", "").await.ok()
    })
    .await?;
    let cookie = session_cookie(&head)
        .ok_or_else(|| anyhow::anyhow!("the open console sets a session cookie: {head}"))?;
    assert!(
        head.contains("HttpOnly") && head.contains("SameSite=Strict"),
        "{head}"
    );
    let (head, body) = http_get(http_port, "/", &cookie).await?;
    assert!(head.contains(" 200 "), "{head}");
    assert!(
        body.contains("id=\"open-banner\""),
        "open banner: {body:.500}"
    );

    // The first admin, with a console password read from stdin.
    let mut create = Command::new(env!("CARGO_BIN_EXE_xjob"))
        .args([
            "user",
            "create",
            "--role",
            "admin",
            "--password-stdin",
            ADMIN_USER,
        ])
        .arg("--data-dir")
        .arg(&data_dir)
        .arg("--config")
        .arg(&config_file)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    if let Some(stdin) = create.stdin.as_mut() {
        use std::io::Write;
        writeln!(stdin, "{ADMIN_PASSWORD}")?;
    }
    let created = create.wait_with_output()?;
    assert!(created.status.success(), "xjob user create failed");
    // The open session ends with the first user: the console asks for a login.
    let (head, _) = http_get(http_port, "/", &cookie).await?;
    assert!(
        head.contains(" 303 ") && head.contains("location: /login"),
        "{head}"
    );

    let screenshots = repo_root().join("target/console-screenshots");
    let driver = repo_root().join("console-tests/console.test.js");
    let output = tokio::time::timeout(
        Duration::from_secs(240),
        tokio::process::Command::new("node")
            .arg(&driver)
            .current_dir(repo_root().join("console-tests"))
            .env("XJOB_CONSOLE_URL", format!("http://127.0.0.1:{http_port}"))
            .env("XJOB_CHROMIUM", &chromium)
            .env("XJOB_SCREENSHOTS", &screenshots)
            .env("XJOB_ADMIN_USER", ADMIN_USER)
            .env("XJOB_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("XJOB_GROUP_ID", group_id.to_string())
            .env("XJOB_RELEASE_DIR", &release_dir)
            .env("XJOB_WORKFLOW_ID", workflow_id.to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| anyhow::anyhow!("the browser run took over 240 s"))??;
    let report = String::from_utf8_lossy(&output.stdout);
    eprintln!("{report}{}", String::from_utf8_lossy(&output.stderr));
    executor.shutdown().await;
    let log_tail = admin.log_tail(40);
    drop(admin);
    assert!(
        output.status.success(),
        "the browser scenarios failed (screenshots in {}):\n{report}\nadmin log:\n{log_tail}",
        screenshots.display()
    );
    eprintln!(
        "console browser test: {} scenarios in {:.1} s, screenshots in {}",
        report
            .lines()
            .filter(|line| line.starts_with("ok "))
            .count(),
        started.elapsed().as_secs_f64(),
        screenshots.display()
    );
    Ok(())
}
