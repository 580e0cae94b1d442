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
