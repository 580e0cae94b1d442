//! Overlap policies (docs/scheduling.md), enforced by a real admin over loopback gRPC for a
//! real executor whose handler is a real process: `sh` writes its start time (and, when `sleep`
//! ends, its end time) to files named by the run's log id. The schedule fires more often than
//! the command takes, so every policy has earlier runs still going to deal with.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use xjob_proto::pb;
use xjob_testkit::is_gone;
use xjob_tests::{TestCluster, wait_until};

const APP: &str = "overlap-app";
const HANDLER: &str = "sleeper";

/// Writes `{log_id}.start` (epoch ms) and `{log_id}.pid`, sleeps `$1` seconds, then writes
/// `{log_id}.end`.
fn sleeper_script(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "date +%s%3N > {dir}/$XJOB_LOG_ID.start; echo $$ > {dir}/$XJOB_LOG_ID.pid; \
         sleep \"$1\"; date +%s%3N > {dir}/$XJOB_LOG_ID.end"
    )
}

/// A cluster with one executor serving the sleeper; returns the group id and the files' folder.
async fn cluster_with_sleeper() -> anyhow::Result<(TestCluster, i64, PathBuf)> {
    let (cluster, group_id, dir, _) = cluster_with_sleeper_at().await?;
    Ok((cluster, group_id, dir))
}

/// `cluster_with_sleeper`, with the executor's address too.
async fn cluster_with_sleeper_at() -> anyhow::Result<(TestCluster, i64, PathBuf, String)> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let dir = cluster.data_dir().join("sleepers");
    std::fs::create_dir_all(&dir)?;
    let script = sleeper_script(&dir);
    let executor = cluster
        .executor(APP)
        .kill_grace(Duration::from_secs(1))
        .command_handler(HANDLER, ["sh", "-c", script.as_str(), HANDLER]);
    let address = cluster.start_executor(executor).await?;
    Ok((cluster, group_id, dir, address))
}

/// A running job on `cron` whose runs sleep `seconds`, with `policy`.
async fn started_job(
    cluster: &TestCluster,
    group_id: i64,
    cron: &str,
    seconds: u32,
    policy: pb::OverlapPolicy,
) -> anyhow::Result<pb::Job> {
    let job = pb::Job {
        name: format!("sleep {seconds} s, {}", policy.as_str_name()),
        params: seconds.to_string(),
        overlap_policy: policy as i32,
        ..TestCluster::job(group_id, HANDLER, pb::ScheduleType::Cron, cron)
    };
    let job = cluster.create_job(job).await?;
    assert_eq!(job.overlap_policy, policy as i32, "stored and returned");
    cluster.start_job(job.id).await?;
    Ok(job)
}

/// The number in `{log_id}.{kind}`, when the command wrote it in full.
fn number(dir: &Path, log_id: i64, kind: &str) -> Option<i64> {
    let text = std::fs::read_to_string(dir.join(format!("{log_id}.{kind}"))).ok()?;
    text.strip_suffix('\n')?.trim().parse().ok()
}

/// `(start, end)` of every run whose command started, by log id (end `None`: still going).
fn spans(dir: &Path, logs: &[pb::Log]) -> Vec<(i64, i64, Option<i64>)> {
    let mut spans: Vec<(i64, i64, Option<i64>)> = logs
        .iter()
        .filter_map(|log| {
            Some((
                log.id,
                number(dir, log.id, "start")?,
                number(dir, log.id, "end"),
            ))
        })
        .collect();
    spans.sort_by_key(|(_, start, _)| *start);
    spans
}

/// No command started before the one before it ended.
fn assert_no_two_ran_at_once(spans: &[(i64, i64, Option<i64>)]) {
    for pair in spans.windows(2) {
        let ((before, _, end), (after, start, _)) = (pair[0], pair[1]);
        let end = end.unwrap_or_else(|| panic!("run {after} started while run {before} still ran"));
        assert!(
            start >= end,
            "run {after} started at {start}, before run {before} ended at {end}"
        );
    }
}

/// The run id named in a message `… run {id} …`.
fn named_run(message: &str) -> Option<i64> {
    message
        .split("run ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Every second a command of 3 s: the fires due while one runs get SKIPPED rows naming it, and
/// no two commands ever run at once.
#[tokio::test]
async fn skip_gives_the_fires_during_a_run_skipped_rows_naming_it() -> anyhow::Result<()> {
    let (cluster, group_id, dir) = cluster_with_sleeper().await?;
    let job = started_job(
        &cluster,
        group_id,
        "* * * * * ?",
        3,
        pb::OverlapPolicy::Skip,
    )
    .await?;
    let logs = wait_until(Duration::from_secs(40), "3 runs and 4 skips", || async {
        let logs = cluster.logs(job.id).await.ok()?;
        let done = logs
            .iter()
            .filter(|log| log.status == pb::RunStatus::Success as i32)
            .count();
        let skipped = logs
            .iter()
            .filter(|log| log.trigger_msg.starts_with("overlap policy SKIP"))
            .count();
        (done >= 3 && skipped >= 4).then_some(logs)
    })
    .await?;
    let by_id: HashMap<i64, &pb::Log> = logs.iter().map(|log| (log.id, log)).collect();
    for skipped in logs
        .iter()
        .filter(|log| log.status == pb::RunStatus::Skipped as i32)
    {
        assert!(
            skipped.trigger_msg.starts_with("overlap policy SKIP: run ")
                && skipped
                    .trigger_msg
                    .ends_with(" of this job is still running"),
            "{skipped:?}"
        );
        let running = named_run(&skipped.trigger_msg).expect("a run id");
        let running = by_id.get(&running).expect("the named run is of this job");
        assert!(running.scheduled_at_ms < skipped.scheduled_at_ms);
        assert_ne!(running.status, pb::RunStatus::Skipped as i32, "{running:?}");
        let started = number(&dir, running.id, "start").expect("the named run started");
        assert!(
            started <= skipped.scheduled_at_ms,
            "run {} started at {started}, after the fire it blocked ({})",
            running.id,
            skipped.scheduled_at_ms
        );
    }
    assert_no_two_ran_at_once(&spans(&dir, &logs));
    cluster.shutdown().await;
    Ok(())
}

/// Every 2 s a command of 5 s: the fire due while a run goes waits (WAITING) and is sent as soon
/// as that run ends, not at a later fire's time; the fire after it is SKIPPED because one
/// already waits.
#[tokio::test]
async fn buffer_one_runs_exactly_one_waiting_fire_after_the_running_one() -> anyhow::Result<()> {
    let (cluster, group_id, dir) = cluster_with_sleeper().await?;
    let job = started_job(
        &cluster,
        group_id,
        "*/2 * * * * ?",
        5,
        pb::OverlapPolicy::BufferOne,
    )
    .await?;
    // A run waits while the first one goes.
    let waiting = wait_until(Duration::from_secs(30), "a WAITING run", || async {
        let logs = cluster
            .logs_with_status(job.id, pb::RunStatus::Waiting)
            .await
            .ok()?;
        logs.into_iter().next()
    })
    .await?;
    assert!(
        waiting
            .trigger_msg
            .starts_with("overlap policy BUFFER_ONE: waiting for run "),
        "{waiting:?}"
    );
    let first = named_run(&waiting.trigger_msg).expect("the run it waits for");
    let logs = wait_until(Duration::from_secs(30), "the waiting run done", || async {
        let logs = cluster.logs(job.id).await.ok()?;
        let done = logs
            .iter()
            .any(|log| log.id == waiting.id && log.status == pb::RunStatus::Success as i32);
        done.then_some(logs)
    })
    .await?;
    let by_id: HashMap<i64, &pb::Log> = logs.iter().map(|log| (log.id, log)).collect();
    let (first, released) = (by_id[&first], by_id[&waiting.id]);
    assert_eq!(first.status, pb::RunStatus::Success as i32, "{first:?}");
    assert_eq!(released.trigger_type, pb::TriggerType::Cron as i32);
    // It was due while the first ran, and left when the first ended, before the next fire's
    // time (fires are 2 s apart).
    let first_end = number(&dir, first.id, "end").expect("the first run ended");
    let released_start = number(&dir, released.id, "start").expect("the released run started");
    assert!(released.scheduled_at_ms < first_end, "{released:?}");
    assert!(released_start >= first_end);
    assert!(
        released.trigger_time_ms >= first.handle_time_ms
            && released.trigger_time_ms - first.handle_time_ms < 2_000,
        "released at {} for a run that ended at {}",
        released.trigger_time_ms,
        first.handle_time_ms
    );
    // The fire after it found it waiting and was skipped.
    let skipped: Vec<&pb::Log> = logs
        .iter()
        .filter(|log| log.status == pb::RunStatus::Skipped as i32)
        .collect();
    assert!(
        skipped.iter().any(|log| log.trigger_msg
            == format!(
                "overlap policy BUFFER_ONE: run {} of this job already waits",
                waiting.id
            )),
        "{skipped:?}"
    );
    // Never two waiting at once.
    let still_waiting = logs
        .iter()
        .filter(|log| log.status == pb::RunStatus::Waiting as i32)
        .count();
    assert!(still_waiting <= 1, "{logs:?}");
    assert_no_two_ran_at_once(&spans(&dir, &logs));
    cluster.shutdown().await;
    Ok(())
}

/// Every second a command of 2 s: fires queue up WAITING; the admin restarts with some of them
/// waiting, and the next admin sends each of them, once, in order, one after the other.
#[tokio::test]
async fn buffer_all_runs_every_waiting_fire_in_order_across_an_admin_restart() -> anyhow::Result<()>
{
    let (mut cluster, group_id, dir, address) = cluster_with_sleeper_at().await?;
    // A MANUAL group: the restarted admin sends to the executor's address at once, without
    // waiting for its session to come back (a run released meanwhile would find no executor).
    let manual = pb::Group {
        id: group_id,
        app_name: APP.into(),
        title: "the sleeper by address".into(),
        address_type: pb::AddressType::Manual as i32,
        addresses: vec![address],
        ..Default::default()
    };
    cluster
        .client()
        .update_group(pb::UpdateGroupRequest {
            group: Some(manual),
        })
        .await?;
    let job = started_job(
        &cluster,
        group_id,
        "* * * * * ?",
        2,
        pb::OverlapPolicy::BufferAll,
    )
    .await?;
    let mut waiting = wait_until(Duration::from_secs(30), "2 WAITING runs", || async {
        let logs = cluster
            .logs_with_status(job.id, pb::RunStatus::Waiting)
            .await
            .ok()?;
        (logs.len() >= 2).then_some(logs)
    })
    .await?;
    waiting.sort_by_key(|log| log.id);
    cluster.restart_admin().await?;
    let logs = wait_until(Duration::from_secs(40), "the waiting runs done", || async {
        let logs = cluster.logs(job.id).await.ok()?;
        let done = waiting.iter().all(|was| {
            logs.iter()
                .any(|log| log.id == was.id && log.status == pb::RunStatus::Success as i32)
        });
        done.then_some(logs)
    })
    .await;
    let logs = match logs {
        Ok(logs) => logs,
        Err(error) => {
            for log in cluster.logs(job.id).await? {
                eprintln!(
                    "{} {} sched={} trig={} handle={} {:?} | {}",
                    log.id,
                    log.status,
                    log.scheduled_at_ms,
                    log.trigger_time_ms,
                    log.handle_time_ms,
                    log.trigger_msg,
                    log.handle_msg
                );
            }
            return Err(error);
        }
    };
    let starts: Vec<i64> = waiting
        .iter()
        .map(|log| number(&dir, log.id, "start").expect("started"))
        .collect();
    assert!(
        starts.windows(2).all(|pair| pair[0] < pair[1]),
        "sent in the order they waited: {starts:?}"
    );
    // Each ran once: one start file each, and no SKIPPED row for a buffered job's fires.
    assert!(
        logs.iter()
            .all(|log| log.status != pb::RunStatus::Skipped as i32),
        "{logs:?}"
    );
    assert_no_two_ran_at_once(&spans(&dir, &logs));
    cluster.shutdown().await;
    Ok(())
}

/// Every 3 s a command of 60 s: each fire kills the run still going (its process is gone) and
/// then runs.
#[tokio::test]
async fn cancel_other_kills_the_running_command_then_runs() -> anyhow::Result<()> {
    let (cluster, group_id, dir) = cluster_with_sleeper().await?;
    let job = started_job(
        &cluster,
        group_id,
        "*/3 * * * * ?",
        60,
        pb::OverlapPolicy::CancelOther,
    )
    .await?;
    let logs = wait_until(Duration::from_secs(40), "2 killed runs", || async {
        let logs = cluster
            .logs_with_status(job.id, pb::RunStatus::Killed)
            .await
            .ok()?;
        (logs.len() >= 2).then_some(logs)
    })
    .await?;
    let all = cluster.logs(job.id).await?;
    for killed in &logs {
        let pid = number(&dir, killed.id, "pid").expect("the killed run started");
        xjob_testkit::wait_gone(pid as i32, Duration::from_secs(10)).await?;
        assert!(is_gone(pid as i32));
        assert!(
            number(&dir, killed.id, "end").is_none(),
            "sleep 60 never ended"
        );
        // Killed by the next fire, 3 s after it began: long before sleep 60 would end.
        let next = all
            .iter()
            .filter(|log| log.scheduled_at_ms > killed.scheduled_at_ms)
            .min_by_key(|log| log.scheduled_at_ms)
            .expect("the fire that killed it");
        assert!(
            killed.handle_time_ms >= next.scheduled_at_ms
                && killed.handle_time_ms - next.scheduled_at_ms < 10_000,
            "killed at {}, the next fire was due at {}",
            killed.handle_time_ms,
            next.scheduled_at_ms
        );
        assert_ne!(next.status, pb::RunStatus::Skipped as i32, "{next:?}");
        let next_start = number(&dir, next.id, "start").expect("the next fire ran");
        assert!(next_start >= next.scheduled_at_ms, "{next:?}");
    }
    cluster.shutdown().await;
    Ok(())
}
