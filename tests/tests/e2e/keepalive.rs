//! A frozen executor (a real process stopped with SIGSTOP) leaves routing after the admin's
//! HTTP/2 keepalive gives up on it, long before its lease would expire, and rejoins when it is
//! continued.

use std::process::Stdio;
use std::time::{Duration, Instant};

use xjob_proto::pb;
use xjob_tests::{TestCluster, wait_until};

const APP: &str = "frozen-app";

async fn online_addresses(cluster: &TestCluster) -> Vec<String> {
    let request = pb::ListExecutorsRequest {
        app_name: APP.to_string(),
    };
    match cluster.client().list_executors(request).await {
        Ok(response) => response
            .into_inner()
            .executors
            .into_iter()
            .map(|executor| executor.address)
            .collect(),
        Err(_) => Vec::new(),
    }
}

async fn signal(pid: u32, name: &str) -> anyhow::Result<()> {
    let status = tokio::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .await?;
    anyhow::ensure!(status.success(), "kill -{name} {pid} failed: {status}");
    Ok(())
}

#[tokio::test]
async fn a_stopped_executor_leaves_routing_within_the_keepalive_bound_not_the_lease()
-> anyhow::Result<()> {
    // A lease of a minute and heartbeats every 20 s: only the keepalive can see the freeze
    // within the bounds checked below.
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.heartbeat_interval = Duration::from_secs(20);
            config.executor_lease = Duration::from_secs(60);
            config.keepalive_interval = Duration::from_millis(300);
            config.keepalive_timeout = Duration::from_millis(700);
        })
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let log_dir = cluster.data_dir().join("frozen-executor-logs");
    let mut process = tokio::process::Command::new(env!("CARGO_BIN_EXE_test-executor"))
        .args([&cluster.admin_url(), APP, "127.0.0.1:0"])
        .arg(&log_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = process
        .id()
        .ok_or_else(|| anyhow::anyhow!("the executor process has no pid"))?;
    wait_until(
        Duration::from_secs(10),
        "the executor to register",
        || async { (!online_addresses(&cluster).await.is_empty()).then_some(()) },
    )
    .await?;

    signal(pid, "STOP").await?;
    let frozen_at = Instant::now();
    // keepalive_interval + keepalive_timeout is 1 s; 10 s leaves room for a loaded machine and
    // is still far below the 60 s lease.
    let left = wait_until(
        Duration::from_secs(10),
        "the frozen executor to leave",
        || async { online_addresses(&cluster).await.is_empty().then_some(()) },
    )
    .await;
    let seen_after = frozen_at.elapsed();
    signal(pid, "CONT").await?;
    left?;
    eprintln!("the freeze was seen after {seen_after:?}");

    // Continued, the executor finds its connection closed, reconnects and takes runs again.
    wait_until(
        Duration::from_secs(15),
        "the executor to rejoin",
        || async { (!online_addresses(&cluster).await.is_empty()).then_some(()) },
    )
    .await?;
    let job = cluster
        .create_job(TestCluster::job(group_id, "ok", pb::ScheduleType::None, ""))
        .await?;
    let log_ids = cluster
        .client()
        .trigger_job(pb::TriggerJobRequest {
            id: job.id,
            params: None,
            addresses: vec![],
        })
        .await?
        .into_inner()
        .log_ids;
    let [log_id] = log_ids.as_slice() else {
        anyhow::bail!("expected one run, got {log_ids:?}");
    };
    let log = cluster
        .wait_log_final(*log_id, Duration::from_secs(10))
        .await?;
    assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
    assert_eq!(cluster.logs(job.id).await?.len(), 1, "exactly one run");

    process.start_kill()?;
    let _ = tokio::time::timeout(Duration::from_secs(5), process.wait()).await;
    cluster.shutdown().await;
    Ok(())
}
