//! Unmodified XXL-JOB executors under an xjob admin: the test app `examples/xxl-job-compat`
//! (built on `xxl-job-core` 3.2.0 and 2.4.2 through Maven, jars cached in
//! `$XJOB_CI_CACHE/m2`) runs as real JVMs pointed at the admin's `xxl_job_compat_listen`.
//!
//! Each version: two executors register and are listed online as `xxl-job-http`; a cron job
//! runs and its success comes back, a failure comes back as FAILED; params and sharding arrive;
//! `ReadRunLog` returns the handler's log lines; `KillRun` stops a sleeping handler; a wrong
//! token is refused; after a `kill -9` of one JVM, FAILOVER skips it, and its running run ends
//! LOST once its registration expires and is retried on the other executor; a JVM killed and
//! restarted on the same address before its registration expires has its lost run found by
//! `idleBeat`.
//!
//! Without java or mvn the test is skipped with the reason, except under `CI=true`, where it
//! fails.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use xjob_proto::pb;
use xjob_testkit::{ChildProcess, free_port, wait_until};
use xjob_tests::TestCluster;

const TOKEN: &str = "xxl-compat-test-token";
/// JVMs start slowly on a loaded machine; the first registration follows the start.
const REGISTERED_WITHIN: Duration = Duration::from_secs(90);
const RUN_WITHIN: Duration = Duration::from_secs(60);
/// Above XXL-JOB's 30 s registry interval (a shorter lease would expire live executors), below
/// the 90 s default to keep the kill -9 case short.
const TEST_LEASE: Duration = Duration::from_secs(35);

/// Two scenarios at a time, whatever the harness's thread count: each runs one or two JVMs and
/// spends most of its time waiting out registration leases (`TEST_LEASE`, twice per version),
/// so two overlap their waits; more JVMs at once would only slow each other's start down.
static TWO_AT_A_TIME: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xxl_job_core_3_2_0_runs_its_jobs_under_xjob() -> anyhow::Result<()> {
    let _turn = TWO_AT_A_TIME.acquire().await?;
    scenario("3.2.0").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xxl_job_core_2_4_2_runs_its_jobs_under_xjob() -> anyhow::Result<()> {
    let _turn = TWO_AT_A_TIME.acquire().await?;
    scenario("2.4.2").await
}

/// Two admins sharing one database: an XXL-JOB executor registered with the first is routed to
/// and called over HTTP by the second too, and stays so past `executor_lease` although it
/// calls the first only every 30 s (the first rewrites its row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xxl_job_executor_held_by_one_admin_runs_the_fires_of_another() -> anyhow::Result<()> {
    let _turn = TWO_AT_A_TIME.acquire().await?;
    if !java_available()? {
        return Ok(());
    }
    let jar = tokio::task::spawn_blocking(|| executor_jar("3.2.0")).await??;
    let shared = tempfile::tempdir()?;
    let database_url = format!("sqlite://{}", shared.path().join("xjob.db").display());
    let holder = TestCluster::builder()
        .configure({
            let database_url = database_url.clone();
            move |config| {
                config.database_url = database_url;
                config.node_id = "holder".into();
                config.xxl_job_compat_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            }
        })
        .start()
        .await?;
    let other = TestCluster::builder()
        .configure(move |config| {
            config.database_url = database_url;
            config.node_id = "other".into();
        })
        .start()
        .await?;
    let compat = holder
        .xxl_compat_addr()
        .ok_or_else(|| anyhow::anyhow!("no XXL-JOB compatibility listener"))?;
    let app = "xxl-compat-cluster";
    let group = other
        .client()
        .create_group(pb::CreateGroupRequest {
            group: Some(pb::Group {
                app_name: app.into(),
                title: "XXL-JOB executors".into(),
                address_type: pb::AddressType::Auto as i32,
                access_token: TOKEN.into(),
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group"))?;
    let logs = tempfile::tempdir()?;
    let mut executor = start_executor(&jar, compat, app, TOKEN, logs.path())?;
    wait_online(&holder, app, &executor.address).await?;
    // The other admin lists it from the shared table, with its protocol and holder.
    let listed = wait_until(RUN_WITHIN, "the other admin to list it", || async {
        xxl_executors(&other, app)
            .await
            .into_iter()
            .find(|listed| listed.address == executor.address)
    })
    .await?;
    assert_eq!(
        (listed.protocol.as_str(), listed.admin_node.as_str()),
        ("xxl-job-http", "holder")
    );
    let job = create_job(&other, group, "succeed", |_| {}).await?;
    for round in 0..2 {
        if round == 1 {
            // Well past executor_lease (3 s here) with no registry call from the executor.
            tokio::time::sleep(Duration::from_secs(8)).await;
        }
        let log_id = other.trigger(job, Some(&format!("round {round}"))).await?;
        let log = other.wait_log_final(log_id, RUN_WITHIN).await?;
        assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
        assert_eq!(log.executor_address, executor.address);
        assert!(
            log.handle_msg.contains(&format!("ok params=round {round}")),
            "{log:?}"
        );
    }
    // Those rounds came after several registry refreshes: the token the executor registered
    // with was accepted each time (it used to be taken as stale every second).

    // A token rotation through the other admin: the holder drops the executor, which still
    // holds the old token, from routing at its next refresh, as it closes gRPC sessions.
    let sleeping = create_job(&other, group, "sleep", |_| {}).await?;
    let in_flight = other.trigger(sleeping, Some("60")).await?;
    wait_until(RUN_WITHIN, "the sleeping run on the executor", || async {
        let log = other.get_log(in_flight).await.ok()?;
        (log.trigger_code == 200).then_some(())
    })
    .await?;
    let mut group_now = other
        .client()
        .get_group(pb::GetGroupRequest { id: group })
        .await?
        .into_inner()
        .group
        .ok_or_else(|| anyhow::anyhow!("no group"))?;
    group_now.access_token = format!("{TOKEN}-rotated");
    let rotated_at = std::time::Instant::now();
    other
        .client()
        .update_group(pb::UpdateGroupRequest {
            group: Some(group_now),
        })
        .await?;
    for cluster in [&holder, &other] {
        wait_until(
            Duration::from_secs(10),
            "the executor out of routing",
            || async {
                let listed = xxl_executors(cluster, app).await;
                (!listed.iter().any(|e| e.address == executor.address)).then_some(())
            },
        )
        .await?;
    }
    let left_after = rotated_at.elapsed();
    eprintln!("XXL-JOB executor out of routing {left_after:?} after the token rotation");
    // Its run in flight is judged as a closed gRPC session's: lost once its executor has had
    // no registration for executor_lease, with that reason (not left RUNNING for 90 s).
    let lost = other.wait_log_final(in_flight, RUN_WITHIN).await?;
    assert_eq!(lost.status, pb::RunStatus::Lost as i32, "{lost:?}");
    assert!(lost.handle_msg.contains("no live session"), "{lost:?}");
    let _ = executor.process.ask_to_exit();
    let _ = executor
        .process
        .wait_exit(std::time::Instant::now() + Duration::from_secs(15));
    other.shutdown().await;
    holder.shutdown().await;
    Ok(())
}

/// Whether java and mvn are here; `Err` under CI when they are not.
/// A MANUAL group listing an XXL-JOB executor as `xxl-job+http://HOST:PORT` reaches it over
/// HTTP although it never registered (its admin address is closed): the run is dispatched, its
/// log is read and it is killed through XXL-JOB's API, where a plain `http://` address would be
/// called over gRPC and fail with an h2 protocol error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_group_reaches_an_unregistered_xxl_job_executor_by_its_prefix()
-> anyhow::Result<()> {
    let _turn = TWO_AT_A_TIME.acquire().await?;
    if !java_available()? {
        return Ok(());
    }
    let jar = tokio::task::spawn_blocking(|| executor_jar("3.2.0")).await??;
    let cluster = TestCluster::builder().start().await?;
    let logs = tempfile::tempdir()?;
    let closed_admin = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let executor = start_executor(&jar, closed_admin, "xxl-manual", TOKEN, logs.path())?;
    let port = executor
        .address
        .rsplit(':')
        .next()
        .and_then(|port| port.parse::<u16>().ok())
        .ok_or_else(|| anyhow::anyhow!("no port in {}", executor.address))?;
    wait_until(
        REGISTERED_WITHIN,
        "the executor's HTTP port",
        || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        },
    )
    .await?;
    let group = cluster
        .client()
        .create_group(pb::CreateGroupRequest {
            group: Some(pb::Group {
                app_name: "xxl-manual".into(),
                title: "Listed XXL-JOB executor".into(),
                address_type: pb::AddressType::Manual as i32,
                addresses: vec![format!("xxl-job+{}", executor.address)],
                access_token: TOKEN.into(),
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group"))?;
    let sleep = create_job(&cluster, group, "sleep", |_| {}).await?;
    let log_id = cluster.trigger(sleep, Some("60")).await?;
    wait_until(
        RUN_WITHIN,
        "the listed executor's first log line",
        || async {
            let read = cluster
                .client()
                .read_run_log(pb::ReadRunLogRequest {
                    log_id,
                    from_line: 1,
                })
                .await
                .ok()?
                .into_inner();
            read.content.contains("sleeping 0").then_some(())
        },
    )
    .await?;
    let run = cluster.get_log(log_id).await?;
    assert_eq!(run.trigger_code, 200, "{run:?}");
    let killed = cluster
        .client()
        .kill_run(pb::KillRunRequest { log_id })
        .await?
        .into_inner();
    assert!(killed.killed, "{killed:?}");

    // The group routes to XXL-JOB executors only, so it takes a GLUE_GROOVY job, which the
    // executor's JVM compiles and runs. (Its result cannot come back: this executor's admin
    // address is closed. Its run log, read from the executor, shows the Groovy code ran.)
    let mut groovy = TestCluster::job(group, "", pb::ScheduleType::None, "");
    groovy.glue_type = pb::GlueType::Groovy as i32;
    groovy.glue_source = GROOVY_JOB.into();
    let groovy = cluster.create_job(groovy).await?.id;
    let log_id = cluster.trigger(groovy, Some("from-xjob")).await?;
    wait_until(RUN_WITHIN, "the Groovy job's log line", || async {
        let read = cluster
            .client()
            .read_run_log(pb::ReadRunLogRequest {
                log_id,
                from_line: 1,
            })
            .await
            .ok()?
            .into_inner();
        read.content
            .contains("groovy ran with from-xjob")
            .then_some(())
    })
    .await?;
    let run = cluster.get_log(log_id).await?;
    assert_eq!(run.trigger_code, 200, "{run:?}");
    Ok(())
}

/// A Groovy glue job as XXL-JOB runs them: a class extending its `IJobHandler`.
const GROOVY_JOB: &str = r#"
import com.xxl.job.core.context.XxlJobHelper;
import com.xxl.job.core.handler.IJobHandler;

public class GroovyFromXjob extends IJobHandler {
    @Override
    public void execute() throws Exception {
        XxlJobHelper.log("groovy ran with " + XxlJobHelper.getJobParam());
    }
}
"#;

fn java_available() -> anyhow::Result<bool> {
    let found = |tool: &str| {
        Command::new(tool)
            .arg("-version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    };
    if found("java") && found("mvn") {
        return Ok(true);
    }
    if std::env::var("CI").is_ok_and(|value| value == "true") {
        anyhow::bail!("java and mvn are required under CI for the XXL-JOB compatibility test");
    }
    eprintln!("SKIPPED: java or mvn not found; the XXL-JOB compatibility test needs both");
    Ok(false)
}

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/xxl-job-compat")
}

/// The executor jar for `version`, built with Maven unless `.ci/run` built it already.
fn executor_jar(version: &str) -> anyhow::Result<PathBuf> {
    let dir = example_dir();
    let jar = dir.join(format!("target/{version}/xxl-job-compat-executor.jar"));
    if jar.exists() {
        return Ok(jar);
    }
    let cache = std::env::var("XJOB_CI_CACHE").unwrap_or_else(|_| "/var/cache/xjob-ci".into());
    let status = Command::new("mvn")
        .current_dir(&dir)
        .args(["-B", "-q", "-Dstyle.color=never"])
        .arg(format!("-Dmaven.repo.local={cache}/m2"))
        .arg(format!("-Dxxl.job.version={version}"))
        .arg("package")
        .stdin(Stdio::null())
        .status()?;
    anyhow::ensure!(
        status.success(),
        "mvn package for xxl-job-core {version} failed"
    );
    anyhow::ensure!(jar.exists(), "mvn package left no {}", jar.display());
    Ok(jar)
}

/// One XXL-JOB executor JVM; killed when dropped.
struct XxlExecutor {
    process: ChildProcess,
    address: String,
}

fn start_executor(
    jar: &Path,
    admin: SocketAddr,
    app: &str,
    token: &str,
    log_dir: &Path,
) -> anyhow::Result<XxlExecutor> {
    start_executor_on(jar, admin, app, token, log_dir, free_port()?)
}

fn start_executor_on(
    jar: &Path,
    admin: SocketAddr,
    app: &str,
    token: &str,
    log_dir: &Path,
    port: u16,
) -> anyhow::Result<XxlExecutor> {
    let mut command = Command::new("java");
    command
        .args([
            "-Xmx96m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xshare:auto",
            "-jar",
        ])
        .arg(jar)
        // The old admin's context path: only the end of the path counts.
        .env("XXL_ADMIN", format!("http://{admin}/xxl-job-admin"))
        .env("XXL_TOKEN", token)
        .env("XXL_APP", app)
        .env("XXL_PORT", port.to_string())
        .env("XXL_LOG_PATH", log_dir.join(port.to_string()));
    let process = ChildProcess::spawn(&format!("xxl-job executor :{port}"), &mut command)?;
    Ok(XxlExecutor {
        process,
        // What xxl-job-core registers, without its trailing slash.
        address: format!("http://127.0.0.1:{port}"),
    })
}

async fn xxl_executors(cluster: &TestCluster, app: &str) -> Vec<pb::Executor> {
    cluster
        .client()
        .list_executors(pb::ListExecutorsRequest {
            app_name: app.to_string(),
        })
        .await
        .map(|response| response.into_inner().executors)
        .unwrap_or_default()
}

async fn wait_online(cluster: &TestCluster, app: &str, address: &str) -> anyhow::Result<()> {
    wait_until(REGISTERED_WITHIN, &format!("{address} online"), || async {
        xxl_executors(cluster, app)
            .await
            .iter()
            .any(|executor| executor.address == address && executor.protocol == "xxl-job-http")
            .then_some(())
    })
    .await
}

async fn create_job(
    cluster: &TestCluster,
    group: i64,
    handler: &str,
    change: impl FnOnce(&mut pb::Job),
) -> anyhow::Result<i64> {
    let mut job = TestCluster::job(group, handler, pb::ScheduleType::None, "");
    change(&mut job);
    Ok(cluster.create_job(job).await?.id)
}

/// A raw XXL-JOB call to the compatibility listener; returns the JSON answer.
fn post(address: SocketAddr, path: &str, token: &str, body: &str) -> anyhow::Result<String> {
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         XXL-JOB-ACCESS-TOKEN: {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

async fn scenario(version: &str) -> anyhow::Result<()> {
    if !java_available()? {
        return Ok(());
    }
    let jar = tokio::task::spawn_blocking({
        let version = version.to_string();
        move || executor_jar(&version)
    })
    .await??;
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.xxl_job_compat_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            config.xxl_job_compat_lease = TEST_LEASE;
        })
        .start()
        .await?;
    let compat = cluster
        .xxl_compat_addr()
        .ok_or_else(|| anyhow::anyhow!("no XXL-JOB compatibility listener"))?;
    let app = format!("xxl-compat-{}", version.replace('.', "-"));
    let group = cluster
        .client()
        .create_group(pb::CreateGroupRequest {
            group: Some(pb::Group {
                app_name: app.clone(),
                title: "XXL-JOB executors".into(),
                address_type: pb::AddressType::Auto as i32,
                access_token: TOKEN.into(),
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group"))?;

    // Two executors register; the listing names their protocol.
    let logs = tempfile::tempdir()?;
    let mut executors = vec![
        start_executor(&jar, compat, &app, TOKEN, logs.path())?,
        start_executor(&jar, compat, &app, TOKEN, logs.path())?,
    ];
    executors.sort_by(|a, b| a.address.cmp(&b.address));
    for executor in &executors {
        wait_online(&cluster, &app, &executor.address).await?;
    }
    let (first, second) = (executors[0].address.clone(), executors[1].address.clone());

    // Every registered executor of this AUTO group is an XXL-JOB one: it takes a Groovy job.
    let mut groovy = TestCluster::job(group, "", pb::ScheduleType::None, "");
    groovy.glue_type = pb::GlueType::Groovy as i32;
    groovy.glue_source = GROOVY_JOB.into();
    cluster.create_job(groovy).await?;

    // A wrong token is refused: the registration answers code 500, and the
    // address never joins the group.
    let refused = post(
        compat,
        "/api/registry",
        "wrong-token",
        &format!(
            r#"{{"registryGroup":"EXECUTOR","registryKey":"{app}","registryValue":"http://127.0.0.1:1/"}}"#
        ),
    )?;
    assert!(refused.contains("\"code\":500"), "{refused}");
    assert!(
        !xxl_executors(&cluster, &app)
            .await
            .iter()
            .any(|executor| executor.address == "http://127.0.0.1:1"),
        "a wrong token registered an executor"
    );

    // A cron job runs on them and its success comes back, with the job's params.
    let cron = create_job(&cluster, group, "succeed", |job| {
        job.schedule_type = pb::ScheduleType::Cron as i32;
        job.schedule_conf = "* * * * * ?".into();
        job.params = "cron-params".into();
    })
    .await?;
    cluster.start_job(cron).await?;
    // The dispatch outcome (trigger code, address) of a scheduled run is written apart from
    // its result and may land a moment after it, so wait for a success with both.
    let success = wait_until(RUN_WITHIN, "a cron run to succeed", || async {
        cluster
            .logs_with_status(cron, pb::RunStatus::Success)
            .await
            .ok()?
            .into_iter()
            .find(|log| log.trigger_code != 0)
    })
    .await?;
    cluster
        .client()
        .stop_job(pb::StopJobRequest { id: cron })
        .await?;
    assert_eq!(success.handle_code, 200);
    assert!(
        success.handle_msg.contains("ok params=cron-params"),
        "{}",
        success.handle_msg
    );
    assert_eq!(success.executor_address, first, "route FIRST");

    // A failure comes back as FAILED with the handler's message.
    let fail = create_job(&cluster, group, "fail", |_| {}).await?;
    let log_id = cluster.trigger(fail, Some("bad input")).await?;
    let failed = cluster.wait_log_final(log_id, RUN_WITHIN).await?;
    assert_eq!(failed.status, pb::RunStatus::Failed as i32, "{failed:?}");
    assert!(
        failed
            .handle_msg
            .contains("failed on purpose params=bad input"),
        "{}",
        failed.handle_msg
    );
    // A result with a wrong token is refused too.
    let refused = post(
        compat,
        "/api/callback",
        "wrong-token",
        &format!(r#"[{{"logId":{log_id},"logDateTim":0,"handleCode":200,"handleMsg":"forged"}}]"#),
    )?;
    assert!(refused.contains("\"code\":500"), "{refused}");

    // Sharding: one run per executor, each told its index and the total.
    let shard = create_job(&cluster, group, "shard", |job| {
        job.route_strategy = pb::RouteStrategy::ShardingBroadcast as i32;
        job.params = "sharded".into();
    })
    .await?;
    let shard_logs = cluster.trigger_on(shard, Vec::new()).await?;
    assert_eq!(shard_logs.len(), 2, "one run per executor");
    let mut messages = Vec::new();
    for log_id in shard_logs {
        let log = cluster.wait_log_final(log_id, RUN_WITHIN).await?;
        assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
        messages.push(log.handle_msg);
    }
    messages.sort();
    assert!(
        messages[0].contains("shard 0/2 params=sharded")
            && messages[1].contains("shard 1/2 params=sharded"),
        "{messages:?}"
    );

    // ReadRunLog returns the handler's log lines.
    let lines = create_job(&cluster, group, "logLines", |_| {}).await?;
    let log_id = cluster.trigger(lines, Some("3")).await?;
    let done = cluster.wait_log_final(log_id, RUN_WITHIN).await?;
    assert_eq!(done.status, pb::RunStatus::Success as i32, "{done:?}");
    let read = cluster
        .client()
        .read_run_log(pb::ReadRunLogRequest {
            log_id,
            from_line: 1,
        })
        .await?
        .into_inner();
    for line in ["log line 1", "log line 2", "log line 3"] {
        assert!(read.content.contains(line), "{line} in {:?}", read.content);
    }
    assert!(read.to_line >= 3, "{read:?}");

    // KillRun stops a sleeping handler; the run ends KILLED.
    let sleep = create_job(&cluster, group, "sleep", |job| {
        job.route_strategy = pb::RouteStrategy::Last as i32;
    })
    .await?;
    let log_id = cluster.trigger(sleep, Some("60")).await?;
    wait_until(
        RUN_WITHIN,
        "the sleeping handler's first log line",
        || async {
            let read = cluster
                .client()
                .read_run_log(pb::ReadRunLogRequest {
                    log_id,
                    from_line: 1,
                })
                .await
                .ok()?
                .into_inner();
            read.content.contains("sleeping 0").then_some(())
        },
    )
    .await?;
    let killed = cluster
        .client()
        .kill_run(pb::KillRunRequest { log_id })
        .await?
        .into_inner();
    assert!(killed.killed, "{killed:?}");
    let ended = cluster
        .wait_log_final(log_id, Duration::from_secs(20))
        .await?;
    assert_eq!(ended.status, pb::RunStatus::Killed as i32, "{ended:?}");

    // kill -9 of the first executor while it runs a long handler: FAILOVER skips it at once,
    // and the run ends LOST once its registration expires, then is retried on the other.
    let long = create_job(&cluster, group, "sleep", |job| {
        job.fail_retry_count = 1;
        job.params = "8".into();
    })
    .await?;
    let long_log = cluster.trigger(long, None).await?;
    wait_until(RUN_WITHIN, "the long run to start", || async {
        let log = cluster.get_log(long_log).await.ok()?;
        (log.trigger_code == 200).then_some(())
    })
    .await?;
    assert_eq!(cluster.get_log(long_log).await?.executor_address, first);
    executors[0].process.kill_now()?;
    let failover = create_job(&cluster, group, "succeed", |job| {
        job.route_strategy = pb::RouteStrategy::Failover as i32;
    })
    .await?;
    let log_id = cluster.trigger(failover, Some("after kill")).await?;
    let moved = cluster.wait_log_final(log_id, RUN_WITHIN).await?;
    assert_eq!(moved.status, pb::RunStatus::Success as i32, "{moved:?}");
    assert_eq!(moved.executor_address, second, "{moved:?}");
    assert!(
        moved.trigger_msg.contains(&first),
        "probe transcript: {}",
        moved.trigger_msg
    );

    let lost = cluster
        .wait_log_final(long_log, TEST_LEASE + Duration::from_secs(30))
        .await?;
    assert_eq!(lost.status, pb::RunStatus::Lost as i32, "{lost:?}");
    let retried = wait_until(RUN_WITHIN, "the LOST run's retry to succeed", || async {
        cluster
            .logs_with_status(long, pb::RunStatus::Success)
            .await
            .ok()?
            .into_iter()
            .find(|log| log.attempt == 1 && log.trigger_code != 0)
    })
    .await?;
    assert_eq!(retried.executor_address, second, "{retried:?}");
    assert!(
        !xxl_executors(&cluster, &app)
            .await
            .iter()
            .any(|executor| executor.address == first),
        "the killed executor left the listing"
    );

    // A JVM that crashes and comes back on the same address before its registration expires:
    // it lists no runs, so its lost run is found by asking it (idleBeat of the job answers
    // idle for a whole lease) rather than by the registration expiring.
    let log_id = cluster.trigger(sleep, Some("120")).await?;
    wait_until(
        RUN_WITHIN,
        "the second sleeping handler's first line",
        || async {
            let read = cluster
                .client()
                .read_run_log(pb::ReadRunLogRequest {
                    log_id,
                    from_line: 1,
                })
                .await
                .ok()?
                .into_inner();
            read.content.contains("sleeping 0").then_some(())
        },
    )
    .await?;
    assert_eq!(cluster.get_log(log_id).await?.executor_address, second);
    executors[1].process.kill_now()?;
    // The registration is renewed right away (as the restarted JVM will), so it cannot be its
    // expiry that ends the run.
    let port: u16 = second.rsplit(':').next().unwrap_or_default().parse()?;
    let renewed = post(
        compat,
        "/api/registry",
        TOKEN,
        &format!(
            r#"{{"registryGroup":"EXECUTOR","registryKey":"{app}","registryValue":"{second}/"}}"#
        ),
    )?;
    assert!(renewed.contains("\"code\":200"), "{renewed}");
    executors[1] = start_executor_on(&jar, compat, &app, TOKEN, logs.path(), port)?;
    let lost = cluster
        .wait_log_final(log_id, TEST_LEASE + Duration::from_secs(60))
        .await?;
    assert_eq!(lost.status, pb::RunStatus::Lost as i32, "{lost:?}");
    assert!(
        lost.handle_msg.contains(&format!("no run of job {sleep}")),
        "{}",
        lost.handle_msg
    );

    for mut executor in executors {
        let _ = executor.process.ask_to_exit();
        let _ = executor
            .process
            .wait_exit(std::time::Instant::now() + Duration::from_secs(15));
    }
    cluster.shutdown().await;
    Ok(())
}
