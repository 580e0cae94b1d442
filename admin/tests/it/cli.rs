//! The `xjob` client commands end to end: the real binary run as a subprocess against a real
//! admin process, with a real executor (the SDK, in the test process) whose handlers write log
//! lines and wait to be killed. Checks what a person and a script see: exit codes (0 ok, 1 the
//! admin said no, 2 usage, 3 unreachable), one-line errors naming the field, tables, JSON.

use std::path::Path;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use serde_json::Value;
use xjob_executor::{Executor, JobContext, JobError, JobOutput, JobResult, RunningExecutor};
use xjob_testkit::{
    AdminOutput, AdminProcess, AdminSpec, LatencyProxy, free_port, unused_address, wait_until,
};

const XJOB: &str = env!("CARGO_BIN_EXE_xjob");
/// Upper bound of one CLI command (`runs log --follow` included).
const COMMAND_WITHIN: Duration = Duration::from_secs(30);
const APP: &str = "cli-test-app";

/// What one `xjob` command did.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_str(&self.stdout)
            .map_err(|error| anyhow::anyhow!("stdout is not JSON ({error}): {}", self.stdout))
    }
}

impl std::fmt::Debug for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `xjob ARGS` against `admin` (XJOB_ADMIN), bounded in time.
async fn xjob(admin: &str, args: &[&str]) -> anyhow::Result<Ran> {
    xjob_with(admin, args, None).await
}

async fn xjob_with(admin: &str, args: &[&str], token: Option<&str>) -> anyhow::Result<Ran> {
    let mut command = tokio::process::Command::new(XJOB);
    command
        .args(args)
        .env("XJOB_ADMIN", admin)
        .env("TZ", "UTC")
        .env_remove("XJOB_TOKEN")
        .env_remove("XJOB_OUTPUT")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Some(token) = token {
        command.env("XJOB_TOKEN", token);
    }
    let output = tokio::time::timeout(COMMAND_WITHIN, command.output())
        .await
        .map_err(|_| anyhow::anyhow!("xjob {args:?} did not exit within {COMMAND_WITHIN:?}"))??;
    Ok(Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// Runs `xjob ARGS` as `token` with `input` on stdin (passwords are read from there).
async fn xjob_stdin(admin: &str, args: &[&str], token: &str, input: &str) -> anyhow::Result<Ran> {
    use tokio::io::AsyncWriteExt;
    let mut command = tokio::process::Command::new(XJOB);
    command
        .args(args)
        .env("XJOB_ADMIN", admin)
        .env("XJOB_TOKEN", token)
        .env_remove("XJOB_OUTPUT")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).await?;
        // Dropped here: the command sees the end of its input.
    }
    let output = tokio::time::timeout(COMMAND_WITHIN, child.wait_with_output())
        .await
        .map_err(|_| anyhow::anyhow!("xjob {args:?} did not exit within {COMMAND_WITHIN:?}"))??;
    Ok(Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// Runs a command that must succeed and returns its JSON output.
async fn xjob_json(admin: &str, args: &[&str]) -> anyhow::Result<Value> {
    let mut with_json = args.to_vec();
    with_json.extend(["--output", "json"]);
    let ran = xjob(admin, &with_json).await?;
    anyhow::ensure!(ran.code == 0, "xjob {args:?} failed: {ran:?}");
    ran.json()
}

fn admin_spec(data_dir: &Path, port: u16, extra_config: &str) -> anyhow::Result<AdminSpec> {
    let leases = "heartbeat_interval = \"500ms\"\nexecutor_lease = \"3s\"\n";
    admin_spec_with_leases(data_dir, port, leases, extra_config)
}

fn admin_spec_with_leases(
    data_dir: &Path,
    port: u16,
    leases: &str,
    extra_config: &str,
) -> anyhow::Result<AdminSpec> {
    let config_file = data_dir.join("admin.toml");
    std::fs::write(
        &config_file,
        format!("{leases}node_lease = \"2s\"\ntime_zone = \"UTC\"\n{extra_config}"),
    )?;
    Ok(AdminSpec {
        binary: XJOB.into(),
        node_id: "cli-test-admin".into(),
        port,
        data_dir: data_dir.to_path_buf(),
        database_url: None,
        config_file,
        log_filter: "warn".into(),
        output: AdminOutput::Quiet,
        env: Vec::new(),
    })
}

/// Waits until `xjob groups list` is answered (the admin serves and its database is up).
async fn wait_serving(admin: &str, token: Option<&str>) -> anyhow::Result<()> {
    wait_until(Duration::from_secs(30), "the admin to serve", || async {
        let ran = xjob_with(admin, &["groups", "list"], token).await.ok()?;
        (ran.code == 0).then_some(())
    })
    .await
}

/// `echo` logs its params over a second (so `--follow` sees the log grow); `long` runs until
/// it is killed; `quick` and `fails` end at once, so their log ends before their result
/// reaches the admin.
async fn start_executor(admin: &str, log_dir: &Path) -> anyhow::Result<RunningExecutor> {
    let executor = Executor::builder()
        .app_name(APP)
        .admin_addrs([admin.to_string()])
        .bind("127.0.0.1:0")
        .log_dir(log_dir)
        .handler("echo", |ctx: JobContext| async move {
            ctx.log(format!("echo params={}", ctx.params()));
            tokio::time::sleep(Duration::from_millis(1200)).await;
            ctx.log("echo second line");
            Ok::<_, JobError>(JobOutput::message("echoed"))
        })
        .handler("quick", |ctx: JobContext| async move {
            ctx.log(format!("quick params={}", ctx.params()));
            Ok::<_, JobError>(JobOutput::message("quick done"))
        })
        .handler("fails", |ctx: JobContext| async move {
            ctx.log("fails on purpose");
            Err::<JobOutput, _>(JobError::new("failed on purpose"))
        })
        .handler("long", |ctx: JobContext| async move {
            ctx.log("long run started");
            tokio::select! {
                _ = ctx.cancelled() => ctx.log("long run cancelled"),
                _ = tokio::time::sleep(Duration::from_secs(120)) => {}
            }
            JobResult::Ok(JobOutput::default())
        })
        .start()
        .await?;
    executor.wait_registered(Duration::from_secs(15)).await?;
    Ok(executor)
}

/// The status of run `id`, as `runs show -o json` says.
async fn run_status(admin: &str, id: i64) -> anyhow::Result<String> {
    let run = xjob_json(admin, &["runs", "show", &id.to_string()]).await?;
    Ok(run["status"].as_str().unwrap_or_default().to_string())
}

fn id_of(value: &Value) -> anyhow::Result<i64> {
    value["id"]
        .as_i64()
        .ok_or_else(|| anyhow::anyhow!("no id in {value}"))
}

/// `jobs trigger --follow` ends with the run's final status and exit code, every time. The
/// executor reaches the admin through a proxy that delivers its messages a second late, so its
/// log has ended (the admin reads it from the executor directly) while its result is still on
/// the way: the command must wait for the result instead of reporting the run still RUNNING.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_follow_ends_with_the_final_status_every_time() -> anyhow::Result<()> {
    let data_dir = tempfile::tempdir()?;
    let port = free_port()?;
    // Heartbeats arrive a second late too: an interval longer than that keeps the admin from
    // taking a run missing from a heartbeat sent before its dispatch for a lost one.
    let leases = "heartbeat_interval = \"2s\"\nexecutor_lease = \"6s\"\n";
    let spec = admin_spec_with_leases(data_dir.path(), port, leases, "")?;
    let mut admin = AdminProcess::spawn(spec)?;
    let url = admin.spec.url();
    let url = url.as_str();
    wait_serving(url, None).await?;
    xjob_json(url, &["groups", "create", "--app-name", APP]).await?;
    let late = LatencyProxy::start(([127, 0, 0, 1], port).into(), Duration::from_secs(1)).await?;
    let executor = start_executor(&late.url(), &data_dir.path().join("executor-logs")).await?;
    let create = |name: &'static str, handler: &'static str| {
        let args = [
            "jobs",
            "create",
            "--group",
            APP,
            "--name",
            name,
            "--handler",
            handler,
        ];
        async move { id_of(&xjob_json(url, &args).await?) }
    };
    let quick = create("follow quick", "quick").await?.to_string();
    let fails = create("follow fails", "fails").await?.to_string();

    for attempt in 0..10 {
        let params = format!("adhoc-{attempt}");
        let args = ["jobs", "trigger", &quick, "--params", &params, "--follow"];
        let followed = xjob(url, &args).await?;
        assert!(
            followed.code == 0
                && followed.stdout.contains(&format!("quick params={params}"))
                && followed
                    .stderr
                    .lines()
                    .any(|line| line.starts_with("run ") && line.contains(" ended SUCCESS after ")),
            "attempt {attempt}: {followed:?}"
        );
    }
    // A failed run: exit 1 (docs/cli.md) and the final status, not RUNNING.
    for attempt in 0..3 {
        let followed = xjob(url, &["jobs", "trigger", &fails, "--follow"]).await?;
        assert!(
            followed.code == 1
                && followed.stdout.contains("fails on purpose")
                && followed.stderr.contains(" ended FAILED: ")
                && followed.stderr.contains("failed on purpose"),
            "attempt {attempt}: {followed:?}"
        );
    }
    executor.shutdown().await;
    admin.process_mut().kill_now()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_runs_from_the_command_line() -> anyhow::Result<()> {
    let data_dir = tempfile::tempdir()?;
    let port = free_port()?;
    let mut admin = AdminProcess::spawn(admin_spec(data_dir.path(), port, "")?)?;
    let url = admin.spec.url();
    let url = url.as_str();
    wait_serving(url, None).await?;

    let group = xjob_json(
        url,
        &["groups", "create", "--app-name", APP, "--title", "cli"],
    )
    .await?;
    let group_id = id_of(&group)?;
    let executor = start_executor(url, &data_dir.path().join("executor-logs")).await?;

    // An invalid cron: the admin says no (1), in one line naming the field.
    let bad = xjob(
        url,
        &[
            "jobs",
            "create",
            "--group",
            APP,
            "--name",
            "bad",
            "--cron",
            "0 0 25 * * ?",
            "--handler",
            "echo",
        ],
    )
    .await?;
    assert_eq!(bad.code, 1, "{bad:?}");
    assert!(
        bad.stderr
            .contains("invalid argument: job.schedule_conf: invalid cron '0 0 25 * * ?'")
            && bad.stderr.trim().lines().count() == 1,
        "{bad:?}"
    );
    // Usage errors (2): a missing required flag, an unknown enum value named with its choices.
    let usage = xjob(url, &["jobs", "create", "--name", "no group"]).await?;
    assert!(
        usage.code == 2 && usage.stderr.contains("--group"),
        "{usage:?}"
    );
    let usage = xjob(url, &["jobs", "list", "--status", "sleeping"]).await?;
    assert!(
        usage.code == 2 && usage.stderr.contains("running"),
        "{usage:?}"
    );
    // The same check in preview, where the field has no prefix.
    let preview = xjob(url, &["preview", "0 0 25 * * ?"]).await?;
    assert!(
        preview.code == 1 && preview.stderr.contains("schedule_conf"),
        "{preview:?}"
    );
    let fires = xjob_json(url, &["preview", "*/5 * * * * ?", "-n", "3"]).await?;
    assert_eq!(fires.as_array().map(Vec::len), Some(3), "{fires}");

    // A valid job, by the group's app name, with the proto field names and their aliases.
    let job = xjob_json(
        url,
        &[
            "jobs",
            "create",
            "--group",
            APP,
            "--name",
            "cli echo",
            "--cron",
            "0 0 3 * * ?",
            "--handler",
            "echo",
            "--params",
            "default",
            "--route",
            "first",
            "--block",
            "discard-later",
            "--timeout",
            "30s",
            "--retries",
            "0",
        ],
    )
    .await?;
    let job_id = id_of(&job)?;
    let job_arg = job_id.to_string();
    let job_arg = job_arg.as_str();
    assert_eq!(
        (
            &job["group_id"],
            &job["schedule_type"],
            &job["block_strategy"],
            &job["timeout_ms"],
            &job["status"]
        ),
        (
            &Value::from(group_id),
            &Value::from("CRON"),
            &Value::from("DISCARD_LATER"),
            &Value::from(30_000),
            &Value::from("STOPPED")
        ),
        "{job}"
    );

    // The table for people, the JSON array for scripts.
    let table = xjob(url, &["jobs", "list"]).await?;
    assert_eq!(table.code, 0, "{table:?}");
    let header = table.stdout.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("ID") && header.contains("NAME"),
        "{table:?}"
    );
    let row = table.stdout.lines().find(|line| line.contains("cli echo"));
    assert!(
        row.is_some_and(|row| row.contains("cron 0 0 3 * * ?") && row.contains(APP)),
        "{table:?}"
    );
    let listed = xjob_json(url, &["jobs", "list", "--group", APP]).await?;
    assert_eq!(listed[0]["id"], Value::from(job_id), "{listed}");

    // update changes only what it is given.
    let updated = xjob_json(url, &["jobs", "update", job_arg, "--params", "changed"]).await?;
    assert_eq!(
        (
            &updated["params"],
            &updated["name"],
            &updated["schedule_conf"]
        ),
        (
            &Value::from("changed"),
            &Value::from("cli echo"),
            &Value::from("0 0 3 * * ?")
        ),
        "{updated}"
    );

    let started = xjob_json(url, &["jobs", "start", job_arg]).await?;
    assert_eq!(started["status"], Value::from("RUNNING"), "{started}");

    // Trigger with params, then follow the log: the handler's lines, and an exit when it ends.
    let triggered = xjob_json(url, &["jobs", "trigger", job_arg, "--params", "hello-cli"]).await?;
    let log_id = triggered["log_ids"][0]
        .as_i64()
        .ok_or_else(|| anyhow::anyhow!("no log id: {triggered}"))?;
    let log_arg = log_id.to_string();
    let followed = xjob(url, &["runs", "log", &log_arg, "--follow"]).await?;
    assert_eq!(followed.code, 0, "{followed:?}");
    assert!(
        followed.stdout.contains("echo params=hello-cli")
            && followed.stdout.contains("echo second line")
            && followed.stderr.contains("ended SUCCESS"),
        "{followed:?}"
    );
    let runs = xjob(url, &["runs", "list", "--job", job_arg]).await?;
    let run_row = runs
        .stdout
        .lines()
        .find(|line| line.starts_with(&format!("{log_id} ")));
    assert!(
        run_row.is_some_and(|row| row.contains("SUCCESS") && row.contains("MANUAL")),
        "{runs:?}"
    );
    let run = xjob_json(url, &["runs", "show", &log_arg]).await?;
    assert_eq!(
        (&run["params"], &run["handle_msg"]),
        (&Value::from("hello-cli"), &Value::from("echoed")),
        "{run}"
    );

    // A long run, killed from the command line.
    let long = xjob_json(
        url,
        &[
            "jobs",
            "create",
            "--group",
            APP,
            "--name",
            "cli long",
            "--handler",
            "long",
        ],
    )
    .await?;
    let long_arg = id_of(&long)?.to_string();
    let triggered = xjob_json(url, &["jobs", "trigger", &long_arg]).await?;
    let long_run = triggered["log_ids"][0]
        .as_i64()
        .ok_or_else(|| anyhow::anyhow!("no log id: {triggered}"))?;
    wait_until(
        Duration::from_secs(20),
        "the long run to be RUNNING",
        || async { (run_status(url, long_run).await.ok()? == "RUNNING").then_some(()) },
    )
    .await?;
    let executors = xjob_json(url, &["executors", "--app", APP]).await?;
    assert!(
        executors[0]["handlers"]
            .as_array()
            .is_some_and(|handlers| handlers.contains(&Value::from("long"))),
        "{executors}"
    );
    let killed = xjob(url, &["runs", "kill", &long_run.to_string()]).await?;
    assert!(
        killed.code == 0 && killed.stdout.contains("Killed run"),
        "{killed:?}"
    );
    wait_until(
        Duration::from_secs(20),
        "the long run to be KILLED",
        || async { (run_status(url, long_run).await.ok()? == "KILLED").then_some(()) },
    )
    .await?;
    // Following a run that did not succeed ends with 1 and says how it ended.
    let followed = xjob(url, &["runs", "log", &long_run.to_string(), "-f"]).await?;
    assert!(
        followed.code == 1
            && followed.stdout.contains("long run cancelled")
            && followed.stderr.contains("ended KILLED"),
        "{followed:?}"
    );

    // The daylight-saving policy by its flags, in JSON and in `jobs show`.
    let dst = xjob_json(
        url,
        &[
            "jobs",
            "update",
            job_arg,
            "--tz",
            "Europe/Berlin",
            "--dst-gap",
            "skip",
            "--dst-overlap",
            "both",
            "--overlap",
            "buffer-one",
        ],
    )
    .await?;
    assert_eq!(
        (&dst["dst_gap_policy"], &dst["dst_overlap_policy"]),
        (&Value::from("SKIP"), &Value::from("BOTH")),
        "{dst}"
    );
    let shown = xjob(url, &["jobs", "show", job_arg]).await?;
    assert!(shown.stdout.contains("gap skip, overlap both"), "{shown:?}");
    // Enums print as their flags take them: `jobs show` can be pasted back into flags.
    let line = |label: &str| {
        let found = shown.stdout.lines().find(|line| line.starts_with(label));
        found.map(|line| line[label.len()..].trim().to_string())
    };
    assert_eq!(line("overlap ").as_deref(), Some("buffer-one"), "{shown:?}");
    assert_eq!(line("misfire ").as_deref(), Some("do-nothing"), "{shown:?}");
    let usage = xjob(url, &["jobs", "update", job_arg, "--dst-overlap", "twice"]).await?;
    assert!(
        usage.code == 2 && usage.stderr.contains("first, second, both"),
        "{usage:?}"
    );

    let stopped = xjob_json(url, &["jobs", "stop", job_arg]).await?;
    assert_eq!(stopped["status"], Value::from("STOPPED"), "{stopped}");
    // Deleting asks for confirmation; without a terminal, --yes is required.
    let unconfirmed = xjob(url, &["jobs", "delete", job_arg]).await?;
    assert!(
        unconfirmed.code == 2 && unconfirmed.stderr.contains("--yes"),
        "{unconfirmed:?}"
    );
    let deleted = xjob(url, &["jobs", "delete", job_arg, "--yes"]).await?;
    assert_eq!(deleted.code, 0, "{deleted:?}");
    let gone = xjob(url, &["jobs", "show", job_arg]).await?;
    assert!(
        gone.code == 1 && gone.stderr.contains("not found"),
        "{gone:?}"
    );
    // A group still used by a job: FAILED_PRECONDITION, printed as a refusal.
    let in_use = xjob(url, &["groups", "delete", APP, "--yes"]).await?;
    assert!(
        in_use.code == 1 && in_use.stderr.contains("refused: "),
        "{in_use:?}"
    );

    executor.shutdown().await;
    admin.process_mut().kill_now()?;
    Ok(())
}

/// `xjob backfill`: five past minutes at two at a time against a real admin process; `status`
/// follows it to DONE, `list` shows it, each minute has one BACKFILL run with its own time, and
/// bad ranges get exit code 2 with the times named as typed (a time the CLI cannot read, a
/// reversed range).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_from_the_command_line() -> anyhow::Result<()> {
    let data_dir = tempfile::tempdir()?;
    let port = free_port()?;
    let mut admin = AdminProcess::spawn(admin_spec(data_dir.path(), port, "")?)?;
    let url = admin.spec.url();
    let url = url.as_str();
    wait_serving(url, None).await?;
    xjob_json(url, &["groups", "create", "--app-name", APP]).await?;
    let executor = start_executor(url, &data_dir.path().join("executor-logs")).await?;
    let args = [
        "jobs",
        "create",
        "--group",
        APP,
        "--name",
        "minutely",
        "--handler",
        "quick",
        "--cron",
        "0 * * * * ?",
    ];
    let job = id_of(&xjob_json(url, &args).await?)?.to_string();
    let (from, to) = ("2026-01-01T00:00:00Z", "2026-01-01 00:04");
    let args = [
        "backfill",
        &job,
        "--from",
        from,
        "--to",
        to,
        "--concurrency",
        "2",
    ];
    let started = xjob_json(url, &args).await?;
    assert_eq!(started["total"], 5, "{started}");
    assert_eq!(started["state"], "RUNNING", "{started}");
    let id = id_of(&started)?.to_string();
    let done = wait_until(
        Duration::from_secs(60),
        "the backfill to finish",
        || async {
            let status = xjob_json(url, &["backfill", "status", &id]).await.ok()?;
            (status["state"] == "DONE").then_some(status)
        },
    )
    .await?;
    assert_eq!(
        (done["succeeded"].as_i64(), done["failed"].as_i64()),
        (Some(5), Some(0))
    );
    let listed = xjob(url, &["backfill", "list", &job]).await?;
    assert!(
        listed.code == 0 && listed.stdout.contains("DONE") && listed.stdout.contains("5/5"),
        "{listed:?}"
    );
    let runs = xjob_json(url, &["runs", "list", "--job", &job]).await?;
    let mut scheduled: Vec<i64> = runs
        .as_array()
        .map(|runs| {
            runs.iter()
                .filter(|run| run["trigger_type"] == "BACKFILL")
                .filter_map(|run| run["scheduled_at_ms"].as_i64())
                .collect()
        })
        .unwrap_or_default();
    scheduled.sort();
    let minute0 = 1_767_225_600_000_i64; // 2026-01-01T00:00:00Z
    let expected: Vec<i64> = (0..5).map(|minute| minute0 + minute * 60_000).collect();
    assert_eq!(scheduled, expected, "{runs}");

    let unreadable = xjob(url, &["backfill", &job, "--from", "yesterday", "--to", to]).await?;
    assert!(
        unreadable.code == 2 && unreadable.stderr.contains("is not a time"),
        "{unreadable:?}"
    );
    // A reversed range is named in the words typed, before the admin is asked.
    let reversed = xjob(url, &["backfill", &job, "--from", "2026-01-02", "--to", to]).await?;
    assert!(
        reversed.code == 2
            && reversed
                .stderr
                .contains(&format!("--from 2026-01-02 is after --to {to}")),
        "{reversed:?}"
    );
    let ended = xjob(url, &["backfill", "cancel", &id]).await?;
    assert!(
        ended.code == 1 && ended.stderr.contains("is DONE already"),
        "{ended:?}"
    );
    executor.shutdown().await;
    admin.process_mut().kill_now()?;
    Ok(())
}

/// The runs of job `id` (newest first) once `enough` says they are enough.
async fn runs_until(
    admin: &str,
    id: &str,
    what: &str,
    enough: impl Fn(&[Value]) -> bool,
) -> anyhow::Result<Vec<Value>> {
    wait_until(Duration::from_secs(40), what, || async {
        let runs = xjob_json(admin, &["runs", "list", "--job", id, "--limit", "200"])
            .await
            .ok()?;
        let runs = runs.as_array()?.clone();
        enough(&runs).then_some(runs)
    })
    .await
}

fn skipped_by(run: &Value, text: &str) -> bool {
    run["status"] == "SKIPPED"
        && run["trigger_msg"]
            .as_str()
            .is_some_and(|message| message.contains(text))
}

/// Calendars end to end on a real admin process: created and refused through the CLI, a job
/// every second with a calendar holding every day gets SKIPPED runs naming the calendar and
/// the rule, the preview shows the same, an edit of the calendar or of the job's mode takes
/// effect without a restart, and a calendar in use cannot be deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calendars_skip_fires_from_the_command_line() -> anyhow::Result<()> {
    let data_dir = tempfile::tempdir()?;
    let port = free_port()?;
    let mut admin = AdminProcess::spawn(admin_spec(data_dir.path(), port, "")?)?;
    let url = admin.spec.url();
    let url = url.as_str();
    wait_serving(url, None).await?;
    xjob_json(url, &["groups", "create", "--app-name", APP]).await?;
    let executor = start_executor(url, &data_dir.path().join("executor-logs")).await?;

    let calendar = xjob_json(
        url,
        &[
            "calendars",
            "create",
            "every-day",
            "--rule",
            "weekly mon-sun",
            "--rule",
            "2026-12-25",
            "--tz",
            "Asia/Shanghai",
            "--description",
            "always closed",
        ],
    )
    .await?;
    assert_eq!(
        calendar["rules"].as_array().map(Vec::len),
        Some(2),
        "{calendar}"
    );
    // A bad rule: refused, naming the rule and what is wrong with it.
    let bad = xjob(
        url,
        &["calendars", "create", "bad", "--rule", "weekly funday"],
    )
    .await?;
    assert!(
        bad.code == 1
            && bad
                .stderr
                .contains("calendar.rules[0]: 'funday' is not a day"),
        "{bad:?}"
    );
    let duplicate = xjob(url, &["calendars", "create", "every-day"]).await?;
    assert!(
        duplicate.code == 1 && duplicate.stderr.contains("already exists"),
        "{duplicate:?}"
    );

    // The preview marks each fire the calendar keeps out.
    let preview = xjob_json(
        url,
        &[
            "preview",
            "* * * * * ?",
            "-n",
            "3",
            "--calendar",
            "every-day",
        ],
    )
    .await?;
    let fires = preview.as_array().cloned().unwrap_or_default();
    assert_eq!(fires.len(), 3, "{preview}");
    assert!(
        fires.iter().all(|fire| fire["skipped"]
            .as_str()
            .is_some_and(|why| why.contains("calendar 'every-day'"))),
        "{preview}"
    );

    let unknown = xjob(
        url,
        &[
            "jobs",
            "create",
            "--group",
            APP,
            "--name",
            "x",
            "--cron",
            "* * * * * ?",
            "--handler",
            "quick",
            "--calendar",
            "nope",
        ],
    )
    .await?;
    assert!(
        unknown.code == 1
            && unknown
                .stderr
                .contains("job.calendar: calendar 'nope' not found"),
        "{unknown:?}"
    );
    let job = xjob_json(
        url,
        &[
            "jobs",
            "create",
            "--group",
            APP,
            "--name",
            "closed",
            "--cron",
            "* * * * * ?",
            "--handler",
            "quick",
            "--calendar",
            "every-day",
        ],
    )
    .await?;
    assert_eq!(
        (&job["calendar"], &job["calendar_mode"]),
        (&Value::from("every-day"), &Value::from("SKIP")),
        "{job}"
    );
    let job_id = id_of(&job)?;
    let job_arg = job_id.to_string();
    let job_arg = job_arg.as_str();
    xjob_json(url, &["jobs", "start", job_arg]).await?;

    // Every occurrence is in the blackout: SKIPPED rows naming the calendar and the rule.
    let runs = runs_until(url, job_arg, "3 runs skipped by the calendar", |runs| {
        runs.iter()
            .filter(|run| skipped_by(run, "calendar 'every-day'"))
            .count()
            >= 3
    })
    .await?;
    assert!(
        runs.iter()
            .all(|run| skipped_by(run, "blackout rule 'weekly mon-sun'")),
        "every run skipped by the calendar: {runs:#?}"
    );

    // In use: the delete is refused, naming the job.
    let in_use = xjob(url, &["calendars", "delete", "every-day", "--yes"]).await?;
    assert!(
        in_use.code == 1
            && in_use
                .stderr
                .contains(&format!("used by 1 job(s) ({job_id})")),
        "{in_use:?}"
    );
    let shown = xjob_json(url, &["calendars", "show", "every-day"]).await?;
    assert_eq!(shown["job_ids"], serde_json::json!([job_id]), "{shown}");

    // Run only inside a calendar that now holds a past day: the scan picks the change up at
    // once and every later fire is skipped as outside it.
    xjob_json(
        url,
        &["calendars", "update", "every-day", "--rule", "2020-01-01"],
    )
    .await?;
    let updated = xjob_json(url, &["jobs", "update", job_arg, "--calendar-mode", "only"]).await?;
    assert_eq!(updated["calendar_mode"], Value::from("ONLY"), "{updated}");
    runs_until(
        url,
        job_arg,
        "a run skipped as outside the calendar",
        |runs| {
            runs.iter()
                .any(|run| skipped_by(run, "outside the calendar"))
        },
    )
    .await?;

    // Without the calendar the job runs again, and the calendar can go.
    xjob_json(url, &["jobs", "update", job_arg, "--calendar", ""]).await?;
    runs_until(url, job_arg, "a successful run", |runs| {
        runs.iter().any(|run| run["status"] == "SUCCESS")
    })
    .await?;
    let deleted = xjob(url, &["calendars", "delete", "every-day", "--yes"]).await?;
    assert_eq!(deleted.code, 0, "{deleted:?}");
    let listed = xjob(url, &["calendars", "list"]).await?;
    assert!(listed.stdout.contains("No calendars"), "{listed:?}");

    executor.shutdown().await;
    admin.process_mut().kill_now()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_unreachable_admins() -> anyhow::Result<()> {
    // Nobody listens there: exit 3, saying so.
    let nowhere = unused_address()?;
    let unreachable = xjob(&nowhere, &["jobs", "list"]).await?;
    assert!(
        unreachable.code == 3 && unreachable.stderr.contains("cannot connect to the admin"),
        "{unreachable:?}"
    );
    let malformed = xjob("ftp://127.0.0.1:1", &["jobs", "list"]).await?;
    assert_eq!(malformed.code, 2, "{malformed:?}");

    // An admin with a user (the bootstrap token): every call needs the token.
    let token = "cli-test-bootstrap-0123456789abcdef";
    let data_dir = tempfile::tempdir()?;
    let port = free_port()?;
    let extra = format!("bootstrap_token = \"{token}\"\n");
    let mut admin = AdminProcess::spawn(admin_spec(data_dir.path(), port, &extra)?)?;
    let url = admin.spec.url();
    wait_serving(&url, Some(token)).await?;

    let refused = xjob(&url, &["jobs", "list"]).await?;
    assert!(
        refused.code == 1
            && refused.stderr.contains("unauthenticated: ")
            && refused.stderr.contains("pass --token or set XJOB_TOKEN"),
        "{refused:?}"
    );
    let wrong = xjob(&url, &["jobs", "list", "--token", "xjob_not-a-token"]).await?;
    assert!(
        wrong.code == 1 && wrong.stderr.contains("XJOB_TOKEN was refused"),
        "{wrong:?}"
    );
    let flag = xjob(&url, &["groups", "list", "--token", token]).await?;
    assert_eq!(flag.code, 0, "{flag:?}");
    let env = xjob_with(&url, &["jobs", "list", "-o", "json"], Some(token)).await?;
    assert_eq!(env.json()?, Value::Array(Vec::new()), "{env:?}");

    admin.process_mut().kill_now()?;
    Ok(())
}

/// `xjob users`: list, change a role, reset a password (admin), change one's own (any user),
/// with the refusals a person meets: not your own role, a short password, a missing line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_roles_and_passwords_from_the_command_line() -> anyhow::Result<()> {
    use xjob_proto::pb;
    let token = "cli-users-bootstrap-0123456789abcdef";
    let data_dir = tempfile::tempdir()?;
    let port = free_port()?;
    let extra = format!("bootstrap_token = \"{token}\"\n");
    let mut admin = AdminProcess::spawn(admin_spec(data_dir.path(), port, &extra)?)?;
    let url = admin.spec.url();
    wait_serving(&url, Some(token)).await?;
    let mut client = pb::job_admin_client::JobAdminClient::connect(url.clone()).await?;
    let mut create = tonic::Request::new(pb::CreateUserRequest {
        name: "vera".to_string(),
        role: "viewer".to_string(),
        password: "vera's first password".to_string(),
        token_ttl_ms: 0,
    });
    create
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    let vera_token = client.create_user(create).await?.into_inner().token;

    let listed = xjob_with(&url, &["users", "list", "-o", "json"], Some(token)).await?;
    let names: Vec<String> = listed
        .json()?
        .as_array()
        .map(|users| {
            users
                .iter()
                .filter_map(|user| user["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["admin", "vera"], "{listed:?}");

    let promoted = xjob_with(
        &url,
        &["users", "set-role", "vera", "operator"],
        Some(token),
    )
    .await?;
    assert!(
        promoted.code == 0 && promoted.stdout.contains("'vera' is now operator"),
        "{promoted:?}"
    );
    let own = xjob_with(&url, &["users", "set-role", "admin", "viewer"], Some(token)).await?;
    assert!(own.code == 1 && own.stderr.contains("own role"), "{own:?}");
    let nobody = xjob_with(
        &url,
        &["users", "set-role", "nobody", "viewer"],
        Some(token),
    )
    .await?;
    assert!(
        nobody.code == 1 && nobody.stderr.contains("no user named 'nobody'"),
        "{nobody:?}"
    );

    let reset = ["users", "reset-password", "vera"];
    let short = xjob_stdin(&url, &reset, token, "short\n").await?;
    assert!(
        short.code == 1
            && short
                .stderr
                .contains("new_password: at least 12 characters"),
        "{short:?}"
    );
    let done = xjob_stdin(&url, &reset, token, "reset by the admin\n").await?;
    assert_eq!(done.code, 0, "{done:?}");

    let change = ["users", "change-password"];
    let one_line = xjob_stdin(&url, &change, &vera_token, "reset by the admin\n").await?;
    assert!(
        one_line.code == 2 && one_line.stderr.contains("stdin line 2 is empty"),
        "{one_line:?}"
    );
    let wrong = xjob_stdin(&url, &change, &vera_token, "not it\nvera picks her own\n").await?;
    assert!(
        wrong.code == 1 && wrong.stderr.contains("current_password"),
        "{wrong:?}"
    );
    let changed = xjob_stdin(
        &url,
        &change,
        &vera_token,
        "reset by the admin\nvera picks her own\n",
    )
    .await?;
    assert!(
        changed.code == 0 && changed.stdout.contains("Password changed"),
        "{changed:?}"
    );
    // Listing users is an admin's: vera (an operator now) is refused.
    let denied = xjob_with(&url, &["users", "list"], Some(&vera_token)).await?;
    assert!(
        denied.code == 1 && denied.stderr.contains("users.manage"),
        "{denied:?}"
    );

    admin.process_mut().kill_now()?;
    Ok(())
}

/// Writes a CA, a server certificate for 127.0.0.1 and a client certificate, both signed by it,
/// into `dir` (`ca.pem`, `server.pem`/`server.key`, `client.pem`/`client.key`).
fn issue_mtls(dir: &Path) -> anyhow::Result<()> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "cli test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    std::fs::write(dir.join("ca.pem"), ca.pem())?;
    for (name, subject, usage) in [
        ("server", "127.0.0.1", ExtendedKeyUsagePurpose::ServerAuth),
        ("client", "cli-user", ExtendedKeyUsagePurpose::ClientAuth),
    ] {
        let mut params = CertificateParams::new(vec![subject.to_string()])?;
        params.extended_key_usages = vec![usage];
        let key_pair = KeyPair::generate()?;
        let certificate = params.signed_by(&key_pair, &*ca)?;
        std::fs::write(dir.join(format!("{name}.pem")), certificate.pem())?;
        std::fs::write(dir.join(format!("{name}.key")), key_pair.serialize_pem())?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_client_certificates() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    issue_mtls(dir.path())?;
    let file = |name: &str| dir.path().join(name).display().to_string();
    let extra = format!(
        "tls_cert = {:?}\ntls_key = {:?}\ntls_ca = {:?}\ntls_client_auth = \"all\"\n",
        file("server.pem"),
        file("server.key"),
        file("ca.pem")
    );
    let port = free_port()?;
    let data_dir = dir.path().join("data");
    std::fs::create_dir_all(&data_dir)?;
    let mut admin = AdminProcess::spawn(admin_spec(&data_dir, port, &extra)?)?;
    let url = format!("https://127.0.0.1:{port}");
    let (ca, cert, key) = (file("ca.pem"), file("client.pem"), file("client.key"));
    let mtls = [
        "groups", "list", "--ca", &ca, "--cert", &cert, "--key", &key,
    ];
    wait_until(
        Duration::from_secs(30),
        "the TLS admin to serve",
        || async {
            let ran = xjob(&url, &mtls).await.ok()?;
            (ran.code == 0).then_some(())
        },
    )
    .await?;

    // Without a client certificate the admin ends the handshake: unreachable for this client.
    let no_cert = xjob(&url, &["groups", "list", "--ca", &ca]).await?;
    assert!(
        no_cert.code == 3 && no_cert.stderr.contains("connection to the admin"),
        "{no_cert:?}"
    );
    eprintln!("without a client certificate: {}", no_cert.stderr.trim());
    // TLS options need an https:// admin, and a certificate needs its key: usage errors.
    let plain = format!("http://127.0.0.1:{port}");
    let mixed = xjob(&plain, &["groups", "list", "--ca", &ca]).await?;
    assert!(
        mixed.code == 2 && mixed.stderr.contains("https://"),
        "{mixed:?}"
    );
    let half = xjob(&url, &["groups", "list", "--ca", &ca, "--cert", &cert]).await?;
    assert!(half.code == 2 && half.stderr.contains("key"), "{half:?}");

    admin.process_mut().kill_now()?;
    Ok(())
}

/// The long flags `xjob ARGS --help` lists (the option column of its help).
fn flags_in_help(args: &[&str]) -> anyhow::Result<std::collections::BTreeSet<String>> {
    let output = std::process::Command::new(XJOB)
        .args(args)
        .arg("--help")
        .output()?;
    anyhow::ensure!(output.status.success(), "xjob {args:?} --help: {output:?}");
    let help = String::from_utf8(output.stdout)?;
    let mut flags = std::collections::BTreeSet::new();
    for line in help.lines() {
        let line = line.trim_start();
        if !line.starts_with('-') {
            continue;
        }
        let column = line.split("  ").next().unwrap_or_default();
        for token in column.split([' ', ',']) {
            if let Some(name) = token.strip_prefix("--") {
                flags.insert(format!("--{name}"));
            }
        }
    }
    Ok(flags)
}

/// Each command's `--help` shows the options it takes and no other: the database commands
/// their configuration flags (not serve's listeners), the client commands their connection
/// flags (not the configuration's).
#[test]
fn each_command_help_shows_only_its_own_options() -> anyhow::Result<()> {
    const CONFIGURATION: &[&str] = &["--config", "--data-dir", "--database-url", "--log-format"];
    const SERVE_ONLY: &[&str] = &[
        "--listen",
        "--node-id",
        "--demo",
        "--insecure-open-admin-api",
        "--metrics-listen",
        "--xxl-job-compat-listen",
        "--http-listen",
    ];
    const CONNECTION: &[&str] = &["--admin", "--token", "--ca", "--cert", "--key", "--output"];
    let database_commands: &[(&[&str], &[&str])] = &[
        (&["serve"], SERVE_ONLY),
        (&["migrate"], &[]),
        (
            &["user", "create"],
            &["--role", "--token-ttl", "--password-stdin"],
        ),
        (
            &["import-xxl-job"],
            &["--from", "--dry-run", "--import-stopped"],
        ),
    ];
    for (command, own) in database_commands {
        let flags = flags_in_help(command)?;
        for flag in CONFIGURATION.iter().chain(own.iter()) {
            assert!(flags.contains(*flag), "{command:?} lacks {flag}: {flags:?}");
        }
        for flag in SERVE_ONLY.iter().chain(CONNECTION) {
            let allowed = own.contains(flag);
            assert!(
                allowed || !flags.contains(*flag),
                "{command:?} shows {flag}: {flags:?}"
            );
        }
    }
    let client_commands: &[&[&str]] = &[
        &["jobs"],
        &["jobs", "list"],
        &["jobs", "trigger"],
        &["runs", "log"],
        &["groups", "create"],
        &["executors"],
        &["preview"],
        &["backfill"],
        &["backfill", "status"],
        &["users", "list"],
        &["users", "change-password"],
    ];
    for command in client_commands {
        let flags = flags_in_help(command)?;
        for flag in CONNECTION {
            assert!(flags.contains(*flag), "{command:?} lacks {flag}: {flags:?}");
        }
        for flag in CONFIGURATION.iter().chain(SERVE_ONLY) {
            assert!(
                !flags.contains(*flag),
                "{command:?} shows {flag}: {flags:?}"
            );
        }
    }
    // The top level takes no option but its own.
    let top = flags_in_help(&[])?;
    assert_eq!(
        top.into_iter().collect::<Vec<_>>(),
        ["--help", "--version"],
        "xjob --help"
    );
    Ok(())
}

/// docs/cli.md: the connection options go before or after the verb. Both orders parse (exit 3:
/// the admin is unreachable, not 2: a usage error); before the noun they are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_options_go_before_or_after_the_verb() -> anyhow::Result<()> {
    let nowhere = unused_address()?;
    for args in [
        ["jobs", "-o", "json", "list"],
        ["jobs", "list", "-o", "json"],
        ["runs", "--output", "json", "list"],
    ] {
        let ran = xjob(&nowhere, &args).await?;
        assert_eq!(ran.code, 3, "{args:?}: {ran:?}");
    }
    let before_the_noun = xjob(&nowhere, &["-o", "json", "jobs", "list"]).await?;
    assert_eq!(before_the_noun.code, 2, "{before_the_noun:?}");
    Ok(())
}

/// `xjob workflows start|runs|run|cancel|retry-node|skip-node`: a two-node workflow runs to
/// SUCCEEDED, its run shows each node's state and result; a run of a long node is cancelled,
/// and cancelling it again, or retrying its node, is refused; so are a skip in a succeeded run
/// and an unknown node.
#[tokio::test]
async fn workflow_runs_from_the_command_line() -> anyhow::Result<()> {
    let data_dir = tempfile::tempdir()?;
    let port = free_port()?;
    let mut admin = AdminProcess::spawn(admin_spec(data_dir.path(), port, "")?)?;
    let url = admin.spec.url();
    let url = url.as_str();
    wait_serving(url, None).await?;
    let group = id_of(&xjob_json(url, &["groups", "create", "--app-name", APP]).await?)?;
    let executor = start_executor(url, &data_dir.path().join("executor-logs")).await?;
    let mut jobs = Vec::new();
    for (name, handler) in [("first", "quick"), ("second", "quick"), ("slow", "long")] {
        let args = [
            "jobs",
            "create",
            "--group",
            APP,
            "--name",
            name,
            "--handler",
            handler,
        ];
        jobs.push(id_of(&xjob_json(url, &args).await?)?);
    }
    let chain = data_dir.path().join("chain.json");
    std::fs::write(
        &chain,
        format!(
            "{{\"group_id\": {group}, \"name\": \"chain\", \"nodes\": [{{\"key\": \"a\", \
             \"job_id\": {}}}, {{\"key\": \"b\", \"job_id\": {}}}], \
             \"edges\": [{{\"from\": \"a\", \"to\": \"b\"}}]}}",
            jobs[0], jobs[1]
        ),
    )?;
    let chain = chain.display().to_string();
    let workflow = id_of(&xjob_json(url, &["workflows", "create", "--file", &chain]).await?)?;
    let workflow = workflow.to_string();
    let started = xjob_json(url, &["workflows", "start", &workflow]).await?;
    let run = started["workflow_run_id"]
        .as_i64()
        .ok_or_else(|| anyhow::anyhow!("no run id in {started}"))?
        .to_string();
    let done = wait_until(
        Duration::from_secs(30),
        "the workflow run to end",
        || async {
            let shown = xjob_json(url, &["workflows", "run", &run]).await.ok()?;
            (shown["state"] != "RUNNING").then_some(shown)
        },
    )
    .await?;
    assert_eq!(done["state"], "SUCCEEDED", "{done}");
    assert_eq!(done["nodes"][1]["key"], "b", "{done}");
    assert_eq!(done["nodes"][1]["state"], "SUCCEEDED", "{done}");
    assert_eq!(done["nodes"][1]["result"], "quick done", "{done}");
    let text = xjob(url, &["workflows", "run", &run]).await?;
    assert!(
        text.code == 0 && text.stdout.contains("b SUCCEEDED (log "),
        "{text:?}"
    );
    let listed = xjob(url, &["workflows", "runs", &workflow]).await?;
    assert!(
        listed.code == 0 && listed.stdout.contains("SUCCEEDED"),
        "{listed:?}"
    );
    let succeeded = xjob(url, &["workflows", "skip-node", &run, "b"]).await?;
    assert!(
        succeeded.code == 1
            && (succeeded.stderr)
                .contains(&format!("workflow run {run} succeeded; nothing to skip")),
        "{succeeded:?}"
    );
    let unknown = xjob(url, &["workflows", "retry-node", &run, "zz"]).await?;
    assert!(
        unknown.code != 0
            && (unknown.stderr).contains(&format!("workflow run {run} has no node 'zz'")),
        "{unknown:?}"
    );

    let slow = data_dir.path().join("slow.json");
    std::fs::write(
        &slow,
        format!(
            "{{\"group_id\": {group}, \"name\": \"slow\", \"nodes\": [{{\"key\": \"s\", \
             \"job_id\": {}}}]}}",
            jobs[2]
        ),
    )?;
    let slow = slow.display().to_string();
    let workflow = id_of(&xjob_json(url, &["workflows", "create", "--file", &slow]).await?)?;
    let started = xjob_json(url, &["workflows", "start", &workflow.to_string()]).await?;
    let run = started["workflow_run_id"]
        .as_i64()
        .unwrap_or_default()
        .to_string();
    wait_until(Duration::from_secs(30), "the slow node to run", || async {
        let shown = xjob_json(url, &["workflows", "run", &run]).await.ok()?;
        (shown["nodes"][0]["run_status"] == "RUNNING").then_some(())
    })
    .await?;
    let cancelled = xjob_json(url, &["workflows", "cancel", &run, "--yes"]).await?;
    assert_eq!(cancelled["cancelled_workflow_run_id"].to_string(), run);
    let shown = xjob_json(url, &["workflows", "run", &run]).await?;
    assert_eq!(shown["state"], "CANCELLED", "{shown}");
    let again = xjob(url, &["workflows", "cancel", &run, "--yes"]).await?;
    assert!(
        again.code == 1
            && again
                .stderr
                .contains(&format!("workflow run {run} has ended")),
        "{again:?}"
    );
    let retry = xjob(url, &["workflows", "retry-node", &run, "s"]).await?;
    assert!(
        retry.code == 1
            && (retry.stderr).contains(&format!(
                "workflow run {run} was cancelled; start a new run instead"
            )),
        "{retry:?}"
    );
    executor.shutdown().await;
    admin.process_mut().kill_now()?;
    Ok(())
}

/// `xjob workflows create|update|show|preview` with schedule flags: a cron schedule in a zone
/// with its misfire policy and params is saved and shown, its preview lists the next runs, a bad
/// cron or zone is refused naming the field, and `--schedule-type none` takes it off.
#[tokio::test]
async fn workflow_schedules_from_the_command_line() -> anyhow::Result<()> {
    let data_dir = tempfile::tempdir()?;
    let port = free_port()?;
    let mut admin = AdminProcess::spawn(admin_spec(data_dir.path(), port, "")?)?;
    let url = admin.spec.url();
    let url = url.as_str();
    wait_serving(url, None).await?;
    let group = id_of(&xjob_json(url, &["groups", "create", "--app-name", APP]).await?)?;
    let args = [
        "jobs",
        "create",
        "--group",
        APP,
        "--name",
        "n",
        "--handler",
        "quick",
    ];
    let job = id_of(&xjob_json(url, &args).await?)?;
    let file = data_dir.path().join("nightly.json");
    std::fs::write(
        &file,
        format!(
            "{{\"group_id\": {group}, \"name\": \"nightly\", \
             \"nodes\": [{{\"key\": \"a\", \"job_id\": {job}}}]}}"
        ),
    )?;
    let file = file.display().to_string();
    let create = [
        "workflows",
        "create",
        "--file",
        &file,
        "--cron",
        "0 30 2 * * ?",
        "--tz",
        "Asia/Tokyo",
        "--misfire",
        "fire-once-now",
        "--overlap-policy",
        "skip",
        "--params",
        "day=today",
    ];
    let created = xjob_json(url, &create).await?;
    assert_eq!(created["schedule_type"], "CRON", "{created}");
    assert_eq!(created["schedule_conf"], "0 30 2 * * ?", "{created}");
    assert_eq!(created["time_zone"], "Asia/Tokyo", "{created}");
    assert_eq!(created["misfire_strategy"], "FIRE_ONCE_NOW", "{created}");
    assert_eq!(created["params"], "day=today", "{created}");
    assert_eq!(created["overlap_policy"], "SKIP", "{created}");
    let next = created["next_fire_ms"].as_i64().unwrap_or_default();
    // 02:30 in Tokyo (UTC+9) is 17:30 UTC.
    assert_eq!(next.rem_euclid(86_400_000), 63_000_000, "{created}");
    let id = id_of(&created)?.to_string();

    let shown = xjob(url, &["workflows", "show", &id]).await?;
    assert!(
        shown.code == 0
            && shown.stdout.contains("cron 0 30 2 * * ?")
            && shown.stdout.contains("Asia/Tokyo")
            && shown.stdout.contains("fire-once-now")
            && shown
                .stdout
                .lines()
                .any(|line| line.starts_with("overlap") && line.ends_with("skip")),
        "{shown:?}"
    );
    let preview = xjob_json(url, &["workflows", "preview", &id, "-n", "3"]).await?;
    let times: Vec<i64> = (preview.as_array().into_iter().flatten())
        .filter_map(|time| time["fire_time_ms"].as_i64())
        .collect();
    assert_eq!(times, [next, next + 86_400_000, next + 2 * 86_400_000]);

    let bad_cron = xjob(url, &["workflows", "update", &id, "--cron", "often"]).await?;
    assert!(
        bad_cron.code != 0
            && (bad_cron.stderr).contains("workflow.schedule_conf: invalid cron 'often'"),
        "{bad_cron:?}"
    );
    let buffered = ["workflows", "update", &id, "--overlap-policy", "buffer-one"];
    let buffered = xjob_json(url, &buffered).await?;
    assert_eq!(buffered["overlap_policy"], "BUFFER_ONE", "{buffered}");
    let bad = ["workflows", "update", &id, "--overlap-policy", "queue"];
    let bad = xjob(url, &bad).await?;
    assert!(
        bad.code != 0 && bad.stderr.contains("'queue' is not one of"),
        "{bad:?}"
    );
    let cancel = ["workflows", "update", &id, "--overlap", "cancel-other"];
    let cancel = xjob_json(url, &cancel).await?;
    assert_eq!(cancel["overlap_policy"], "CANCEL_OTHER", "{cancel}");
    let bad_zone = xjob(url, &["workflows", "update", &id, "--tz", "Mars/Base"]).await?;
    assert!(
        bad_zone.code != 0
            && (bad_zone.stderr).contains("workflow.time_zone: unknown time zone 'Mars/Base'"),
        "{bad_zone:?}"
    );
    let off = ["workflows", "update", &id, "--schedule-type", "none"];
    let off = xjob_json(url, &off).await?;
    assert_eq!(off["schedule_type"], "NONE", "{off}");
    assert_eq!(off["next_fire_ms"], 0, "{off}");
    assert_eq!(off["params"], "day=today", "the rest is kept: {off}");
    let none = xjob(url, &["workflows", "preview", &id]).await?;
    assert!(
        none.code != 0 && none.stderr.contains("has no schedule"),
        "{none:?}"
    );
    admin.process_mut().kill_now()?;
    Ok(())
}
