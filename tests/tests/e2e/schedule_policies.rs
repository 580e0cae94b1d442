//! Policies of a job's schedule beyond its times (docs/scheduling.md), on a real admin and a
//! real executor over loopback gRPC: jitter, the catch-up window.

use std::collections::HashSet;
use std::time::Duration;

use xjob_admin::model::JobId;
use xjob_admin::model::jitter::jitter_ms;
use xjob_executor::{JobContext, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_tests::{TestCluster, wait_until};

const APP: &str = "policies-app";

async fn ok_handler(_ctx: JobContext) -> JobResult {
    Ok(JobOutput::message("done"))
}

async fn cluster_with_executor() -> anyhow::Result<(TestCluster, i64)> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let executor = cluster.executor(APP).handler("ok", ok_handler);
    cluster.start_executor(executor).await?;
    Ok((cluster, group_id))
}

/// Every second, each fire held back by up to 8 s (more than the 5 s misfire threshold): every
/// run keeps its whole-second scheduled time, is sent no earlier than that time plus the delay
/// the preview announced, and none is skipped as a misfire, also across an admin restart that
/// leaves held-back fires to the next admin.
#[tokio::test]
async fn jittered_fires_go_at_their_announced_delay_and_survive_a_restart() -> anyhow::Result<()> {
    const JITTER_MS: i64 = 8_000;
    let (mut cluster, group_id) = cluster_with_executor().await?;
    let mut job = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, "* * * * * ?");
    job.jitter_max_ms = JITTER_MS;
    let job = cluster.create_job(job).await?;
    assert_eq!(job.jitter_max_ms, JITTER_MS, "stored and returned");

    // The preview shows each fire's own delay for this job.
    let preview = cluster
        .client()
        .preview_schedule(pb::PreviewScheduleRequest {
            schedule_type: pb::ScheduleType::Cron as i32,
            schedule_conf: "* * * * * ?".into(),
            count: 10,
            jitter_max_ms: JITTER_MS,
            job_id: job.id,
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(preview.dispatch_times_ms.len(), preview.fire_times_ms.len());
    for (fire, sent) in preview.fire_times_ms.iter().zip(&preview.dispatch_times_ms) {
        assert_eq!(*sent, fire + jitter_ms(JobId(job.id), *fire, JITTER_MS));
    }

    cluster.start_job(job.id).await?;
    // Some held-back fires are written (PENDING, waiting for their delay) before the restart.
    wait_until(Duration::from_secs(20), "a first jittered run", || async {
        let logs = cluster.logs(job.id).await.ok()?;
        logs.iter()
            .any(|log| log.status == pb::RunStatus::Success as i32)
            .then_some(())
    })
    .await?;
    cluster.restart_admin().await?;
    let successes = wait_until(Duration::from_secs(40), "8 jittered runs", || async {
        let logs = cluster
            .logs_with_status(job.id, pb::RunStatus::Success)
            .await
            .ok()?;
        (logs.len() >= 8).then_some(logs)
    })
    .await?;

    let mut delays = HashSet::new();
    for log in &successes {
        assert_eq!(
            log.scheduled_at_ms % 1000,
            0,
            "the run reports its scheduled second"
        );
        let delay = jitter_ms(JobId(job.id), log.scheduled_at_ms, JITTER_MS);
        delays.insert(delay);
        assert!(
            log.trigger_time_ms >= log.scheduled_at_ms + delay,
            "run {} sent at {} before its jittered time {}",
            log.id,
            log.trigger_time_ms,
            log.scheduled_at_ms + delay
        );
        assert_eq!(log.trigger_type, pb::TriggerType::Cron as i32);
    }
    assert!(
        delays.len() > 1,
        "the delays differ between occurrences: {delays:?}"
    );
    let scheduled: HashSet<i64> = successes.iter().map(|log| log.scheduled_at_ms).collect();
    assert_eq!(scheduled.len(), successes.len(), "no occurrence ran twice");
    // The delay is not lateness: none of the held-back fires was skipped as a misfire.
    let misfires: Vec<pb::Log> = cluster
        .logs_with_status(job.id, pb::RunStatus::Skipped)
        .await?
        .into_iter()
        .filter(|log| log.trigger_msg.contains("misfire"))
        .collect();
    assert!(misfires.is_empty(), "skipped as misfires: {misfires:?}");

    // Out-of-range jitter is refused, naming the field.
    let mut bad = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, "* * * * * ?");
    bad.jitter_max_ms = -1;
    let refused = cluster
        .client()
        .create_job(pb::CreateJobRequest { job: Some(bad) })
        .await
        .expect_err("negative jitter");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused
            .message()
            .starts_with("job.jitter_max_ms: must be between 0 and 3600000"),
        "{}",
        refused.message()
    );
    cluster.shutdown().await;
    Ok(())
}

/// Every 2 s, a 7 s catch-up window in mode ALL, the admin down for 16 s: when it comes back,
/// the fires missed in the last 7 s are all sent (MISFIRE runs, each with its own scheduled time),
/// the older missed ones get SKIPPED rows naming the window, and no occurrence is missing or
/// has two rows.
#[tokio::test]
async fn after_downtime_fires_inside_the_catch_up_window_run_and_older_ones_are_skipped()
-> anyhow::Result<()> {
    const WINDOW_MS: i64 = 7_000;
    let (mut cluster, group_id) = cluster_with_executor().await?;
    let mut job = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, "*/2 * * * * ?");
    job.catch_up_window_ms = WINDOW_MS;
    job.catch_up_mode = pb::CatchUpMode::All as i32;
    let job = cluster.create_job(job).await?;
    assert_eq!(job.catch_up_window_ms, WINDOW_MS, "stored and returned");
    assert_eq!(job.catch_up_mode, pb::CatchUpMode::All as i32);
    cluster.start_job(job.id).await?;
    wait_until(Duration::from_secs(20), "a first run", || async {
        let logs = cluster
            .logs_with_status(job.id, pb::RunStatus::Success)
            .await
            .ok()?;
        (!logs.is_empty()).then_some(())
    })
    .await?;

    cluster.restart_admin_after(Duration::from_secs(16)).await?;
    // 7 s of a 2 s schedule hold 3 or 4 fires: ALL sends each of them. (They go at the first
    // scan, maybe before the executor has reconnected: what is checked is that each was sent,
    // not its outcome.)
    let caught_up = wait_until(Duration::from_secs(30), "3 catch-up runs sent", || async {
        let logs = cluster.logs(job.id).await.ok()?;
        let misfire_runs: Vec<pb::Log> = logs
            .into_iter()
            .filter(|log| {
                log.trigger_type == pb::TriggerType::Misfire as i32 && log.trigger_time_ms > 0
            })
            .collect();
        (misfire_runs.len() >= 3).then_some(misfire_runs)
    })
    .await?;
    for log in &caught_up {
        assert_eq!(log.scheduled_at_ms % 2_000, 0, "its own scheduled time");
        assert!(
            log.trigger_time_ms - log.scheduled_at_ms <= WINDOW_MS + 5_000,
            "run {} of {} sent at {}: older than the window",
            log.id,
            log.scheduled_at_ms,
            log.trigger_time_ms
        );
    }
    let first_caught_up = caught_up
        .iter()
        .map(|log| log.scheduled_at_ms)
        .min()
        .unwrap_or_default();

    let all = cluster.logs(job.id).await?;
    let beyond_window: Vec<&pb::Log> = all
        .iter()
        .filter(|log| {
            log.status == pb::RunStatus::Skipped as i32
                && log
                    .trigger_msg
                    .contains("more than the job's catch-up window of 7000 ms")
        })
        .collect();
    assert!(
        !beyond_window.is_empty(),
        "the fires older than the window are recorded skipped: {all:?}"
    );
    assert!(
        beyond_window
            .iter()
            .all(|log| log.scheduled_at_ms < first_caught_up),
        "skipped ones are the older ones"
    );
    // Every occurrence from the first skipped one to the last caught-up one has exactly one row.
    let scheduled: Vec<i64> = all.iter().map(|log| log.scheduled_at_ms).collect();
    let unique: HashSet<i64> = scheduled.iter().copied().collect();
    assert_eq!(unique.len(), scheduled.len(), "an occurrence with two rows");
    let from = beyond_window
        .iter()
        .map(|log| log.scheduled_at_ms)
        .min()
        .unwrap_or_default();
    let to = caught_up
        .iter()
        .map(|log| log.scheduled_at_ms)
        .max()
        .unwrap_or_default();
    for at in (from..=to).step_by(2_000) {
        assert!(unique.contains(&at), "occurrence {at} has no row: {all:?}");
    }

    // A window over a day is refused, naming the field.
    let mut bad = TestCluster::job(group_id, "ok", pb::ScheduleType::Cron, "* * * * * ?");
    bad.catch_up_window_ms = 86_400_001;
    let refused = cluster
        .client()
        .create_job(pb::CreateJobRequest { job: Some(bad) })
        .await
        .expect_err("window too long");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused
            .message()
            .starts_with("job.catch_up_window_ms: must be between 0 (off) and 86400000"),
        "{}",
        refused.message()
    );
    cluster.shutdown().await;
    Ok(())
}
