//! Timeout and kill that really stop, through the admin: the SDK's `command` handler runs
//! `sleep 60` in a real process on one of three executors; the job's `timeout_ms` and
//! `JobAdmin.KillRun` each end the run (TIMEOUT 502 / KILLED) and the process is gone afterwards.
//! A run queued behind a timed-out one starts only after the timed-out one was stopped.
//!
//! The command writes its start time and pid to files named by its log id (`exec` makes the
//! shell's pid the `sleep`'s), so the test can watch the process itself.

use std::path::{Path, PathBuf};
use std::time::Duration;

use xjob_proto::pb;
use xjob_testkit::is_gone;
use xjob_tests::{TestCluster, wait_until};

const APP: &str = "kill-app";
const HANDLER: &str = "sleeper";
const DEADLINE: Duration = Duration::from_secs(10);
/// SIGKILL follows SIGTERM after half of it; short to keep the tests fast.
const KILL_GRACE: Duration = Duration::from_secs(1);

/// Writes `{log_id}.start` (epoch ms) and `{log_id}.pid`, then becomes `sleep $1` (default 60).
fn sleeper_script(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "date +%s%3N > {dir}/$XJOB_LOG_ID.start; echo $$ > {dir}/$XJOB_LOG_ID.pid; \
         exec sleep \"${{1:-60}}\""
    )
}

/// A cluster with three executors serving the sleeper command; returns the group id and the
/// folder the commands write their files to.
async fn three_executors(cluster: &mut TestCluster) -> anyhow::Result<(i64, PathBuf)> {
    let group_id = cluster.create_group(APP).await?;
    let dir = cluster.data_dir().join("sleepers");
    std::fs::create_dir_all(&dir)?;
    let script = sleeper_script(&dir);
    for _ in 0..3 {
        let builder = cluster
            .executor(APP)
            .kill_grace(KILL_GRACE)
            .command_handler(HANDLER, ["sh", "-c", script.as_str(), HANDLER]);
        cluster.start_executor(builder).await?;
    }
    Ok((group_id, dir))
}

fn sleeper_job(group_id: i64, timeout_ms: i64) -> pb::Job {
    pb::Job {
        name: format!("sleep 60, timeout {timeout_ms} ms"),
        timeout_ms,
        ..TestCluster::job(group_id, HANDLER, pb::ScheduleType::None, "")
    }
}

/// Waits until the run's command wrote `{log_id}.{kind}` in full; returns the number in it.
async fn read_number<N: std::str::FromStr>(
    dir: &Path,
    log_id: i64,
    kind: &str,
) -> anyhow::Result<N> {
    let path = dir.join(format!("{log_id}.{kind}"));
    wait_until(DEADLINE, &format!("{}", path.display()), || {
        let path = path.clone();
        async move {
            let text = std::fs::read_to_string(&path).ok()?;
            let line = text.strip_suffix('\n')?;
            line.trim().parse().ok()
        }
    })
    .await
}

/// Waits until the command's process is gone (signals are delivered asynchronously).
async fn wait_gone(pid: i32) -> anyhow::Result<()> {
    xjob_testkit::wait_gone(pid, DEADLINE).await
}

#[tokio::test]
async fn a_command_sleeping_60_s_is_stopped_by_its_timeout_and_the_next_run_waits()
-> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let (group_id, dir) = three_executors(&mut cluster).await?;
    let timeout_ms = 1_500;
    let job = cluster
        .create_job(sleeper_job(group_id, timeout_ms))
        .await?;

    let timed_out = cluster.trigger(job.id, None).await?;
    let pid: i32 = read_number(&dir, timed_out, "pid").await?;
    assert!(!is_gone(pid), "the command is running");
    // Queued behind it (SERIAL, FIRST: same executor); `sleep 0` succeeds at once.
    let next = cluster.trigger(job.id, Some("0")).await?;

    let log = cluster.wait_log_final(timed_out, DEADLINE).await?;
    assert_eq!(log.status, pb::RunStatus::Timeout as i32, "{log:?}");
    assert_eq!(log.handle_code, 502);
    assert_eq!(
        log.handle_msg,
        format!("job execute timeout after {timeout_ms} ms")
    );
    assert!(log.handle_time_ms - log.trigger_time_ms >= timeout_ms);
    assert!(
        log.handle_time_ms - log.trigger_time_ms < 10_000,
        "stopped long before sleep 60 would end: {log:?}"
    );
    wait_gone(pid).await?;

    let next_log = cluster.wait_log_final(next, DEADLINE).await?;
    assert_eq!(
        next_log.status,
        pb::RunStatus::Success as i32,
        "{next_log:?}"
    );
    assert_eq!(next_log.executor_address, log.executor_address);
    assert!(
        next_log.trigger_time_ms < log.handle_time_ms,
        "the next run was queued while the first still ran"
    );
    let next_start: i64 = read_number(&dir, next, "start").await?;
    assert!(
        next_start >= log.handle_time_ms,
        "the next run started at {next_start}, before the timed-out run was stopped at {}",
        log.handle_time_ms
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn kill_run_stops_a_command_sleeping_60_s_and_its_process_is_gone() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let (group_id, dir) = three_executors(&mut cluster).await?;
    let job = cluster.create_job(sleeper_job(group_id, 0)).await?;

    let log_id = cluster.trigger(job.id, None).await?;
    let pid: i32 = read_number(&dir, log_id, "pid").await?;
    assert!(!is_gone(pid), "the command is running");
    let killed = cluster
        .client()
        .kill_run(pb::KillRunRequest { log_id })
        .await?
        .into_inner();
    assert!(killed.killed, "{killed:?}");

    let log = cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(log.status, pb::RunStatus::Killed as i32, "{log:?}");
    assert_eq!(log.handle_code, 500);
    assert_eq!(log.handle_msg, "killed by admin");
    assert!(
        log.handle_time_ms - log.trigger_time_ms < 10_000,
        "stopped long before sleep 60 would end: {log:?}"
    );
    wait_gone(pid).await?;
    cluster.shutdown().await;
    Ok(())
}
