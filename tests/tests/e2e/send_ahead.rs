//! Send ahead (`send_ahead_ms`): a job firing every second on one SDK executor, whose clock
//! offset the admin measures over its session. A run sent ahead is held by the executor and
//! starts at its instant, not on arrival; a stop or kill inside the lead cancels it (its
//! handler never runs, its row says so), through the admin that sent it or another one; with
//! the lead on, each occurrence runs exactly once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use xjob_admin::model::now_ms;
use xjob_proto::pb;
use xjob_tests::{RunSpans, TestCluster, sleeping_handler, spans_of, wait_until};

const APP: &str = "send-ahead-app";
const HANDLER: &str = "record";
const DEADLINE: Duration = Duration::from_secs(15);
/// What a row of a run sent ahead says.
const SENT_AHEAD: &str = "sent ahead";
/// What the row of a held run cancelled before its start says.
const CANCELLED: &str = "cancelled before start";

/// An admin sending runs `lead_ms` ahead, one executor recording each run's start, and a
/// stopped job firing every second; returns the job id.
async fn every_second(lead_ms: u64, spans: &RunSpans) -> anyhow::Result<(TestCluster, i64)> {
    let mut cluster = TestCluster::builder()
        .configure(move |config| config.send_ahead_ms = lead_ms)
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let builder = cluster
        .executor(APP)
        .handler(HANDLER, sleeping_handler(Arc::clone(spans), 0));
    cluster.start_executor(builder).await?;
    let job = TestCluster::job(group_id, HANDLER, pb::ScheduleType::Cron, "* * * * * ?");
    let job = cluster.create_job(job).await?;
    Ok((cluster, job.id))
}

/// Waits for a row of the job sent ahead and accepted by its executor (its address is
/// recorded) while its instant is still at least `margin_ms` away: it is held there.
async fn a_held_run(cluster: &TestCluster, job_id: i64, margin_ms: i64) -> anyhow::Result<i64> {
    wait_until(DEADLINE, "a run sent ahead, still held", || async move {
        let logs = cluster.logs(job_id).await.ok()?;
        let now = now_ms();
        logs.into_iter()
            .find(|log| {
                log.trigger_msg.contains(SENT_AHEAD)
                    && !log.executor_address.is_empty()
                    && log.scheduled_at_ms > now + margin_ms
            })
            .map(|log| log.id)
    })
    .await
}

/// Waits until the run's instant is well past and checks its handler never ran and its row
/// says it was cancelled before start.
async fn assert_cancelled(
    cluster: &TestCluster,
    spans: &RunSpans,
    job_id: i64,
    log_id: i64,
) -> anyhow::Result<()> {
    let log = cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(log.status, pb::RunStatus::Killed as i32, "{log:?}");
    assert!(log.handle_msg.contains(CANCELLED), "{log:?}");
    let past_instant = Duration::from_millis(u64::try_from(log.scheduled_at_ms + 500 - now_ms())?);
    tokio::time::sleep(past_instant).await;
    let ran: Vec<i64> = spans_of(spans, Some(job_id))
        .iter()
        .map(|span| span.log_id)
        .collect();
    assert!(
        !ran.contains(&log_id),
        "the cancelled run {log_id} ran: {ran:?}"
    );
    Ok(())
}

/// Kills the held run through `through`, checks through `sender` (the admin whose executor
/// holds it) that it never started, then stops the job.
async fn kill_and_expect_cancelled(
    through: &TestCluster,
    sender: &TestCluster,
    spans: &RunSpans,
    job_id: i64,
    log_id: i64,
) -> anyhow::Result<()> {
    let killed = through
        .client()
        .kill_run(pb::KillRunRequest { log_id })
        .await?
        .into_inner();
    assert!(killed.killed, "{killed:?}");
    assert_cancelled(sender, spans, job_id, log_id).await?;
    through
        .client()
        .stop_job(pb::StopJobRequest { id: job_id })
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_run_sent_ahead_starts_at_its_instant_not_on_arrival() -> anyhow::Result<()> {
    let spans = RunSpans::default();
    let (cluster, job_id) = every_second(1000, &spans).await?;
    cluster.start_job(job_id).await?;
    // The first fires may leave at their instant while the executor's offset is measured.
    // This one was seen accepted by the executor at least 300 ms before its instant...
    let log_id = a_held_run(&cluster, job_id, 300).await?;
    let log = cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
    // ...yet started at it: the executor held it. One admin and executor share a clock here,
    // so the measured offset is within a millisecond or two of 0.
    let span = spans_of(&spans, Some(job_id))
        .into_iter()
        .find(|span| span.log_id == log_id)
        .ok_or_else(|| anyhow::anyhow!("run {log_id} has no span"))?;
    let early_or_late = span.started_ms - log.scheduled_at_ms;
    assert!(
        (-3..=250).contains(&early_or_late),
        "started {early_or_late} ms from its instant: {span:?} {log:?}"
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_stop_inside_the_lead_cancels_the_held_run() -> anyhow::Result<()> {
    let spans = RunSpans::default();
    let (cluster, job_id) = every_second(2000, &spans).await?;
    cluster.start_job(job_id).await?;
    let log_id = a_held_run(&cluster, job_id, 800).await?;
    cluster
        .client()
        .stop_job(pb::StopJobRequest { id: job_id })
        .await?;
    assert_cancelled(&cluster, &spans, job_id, log_id).await?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_kill_inside_the_lead_cancels_the_held_run() -> anyhow::Result<()> {
    let spans = RunSpans::default();
    let (cluster, job_id) = every_second(2000, &spans).await?;
    cluster.start_job(job_id).await?;
    let log_id = a_held_run(&cluster, job_id, 800).await?;
    kill_and_expect_cancelled(&cluster, &cluster, &spans, job_id, log_id).await?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn an_edit_inside_the_lead_cancels_the_held_run() -> anyhow::Result<()> {
    let spans = RunSpans::default();
    let (cluster, job_id) = every_second(2000, &spans).await?;
    cluster.start_job(job_id).await?;
    let log_id = a_held_run(&cluster, job_id, 800).await?;
    let mut job = cluster
        .client()
        .get_job(pb::GetJobRequest { id: job_id })
        .await?
        .into_inner()
        .job
        .ok_or_else(|| anyhow::anyhow!("job {job_id} not found"))?;
    job.params = "edited".to_string();
    cluster
        .client()
        .update_job(pb::UpdateJobRequest { job: Some(job) })
        .await?;
    assert_cancelled(&cluster, &spans, job_id, log_id).await?;
    cluster
        .client()
        .stop_job(pb::StopJobRequest { id: job_id })
        .await?;
    cluster.shutdown().await;
    Ok(())
}

/// Two admins on one database file, a job of theirs firing every second, and one of its runs
/// held on the executor.
struct TwoAdmins {
    /// The executor's session, and so every run sent ahead, is on this admin.
    sender: TestCluster,
    /// Never sends anything.
    other: TestCluster,
    job_id: i64,
    held_log_id: i64,
    /// Holds the shared database file until both admins are shut down.
    _database: tempfile::TempDir,
}

async fn two_admins_and_a_held_run(spans: &RunSpans) -> anyhow::Result<TwoAdmins> {
    let shared = tempfile::tempdir()?;
    let database_url = format!("sqlite://{}", shared.path().join("xjob.db").display());
    let mut sender = TestCluster::builder()
        .configure({
            let database_url = database_url.clone();
            move |config| {
                config.database_url = database_url;
                config.node_id = "sender".into();
                config.send_ahead_ms = 2000;
            }
        })
        .start()
        .await?;
    // It plans no fire while the sender lives: it looks 1 s ahead, and the sender's rounds
    // plan every fire 5 s ahead.
    let other = TestCluster::builder()
        .configure(move |config| {
            config.database_url = database_url;
            config.node_id = "other".into();
            config.pre_read = Duration::from_secs(1);
        })
        .start()
        .await?;
    let group_id = sender.create_group(APP).await?;
    let builder = sender
        .executor(APP)
        .handler(HANDLER, sleeping_handler(Arc::clone(spans), 0));
    sender.start_executor(builder).await?;
    let job = TestCluster::job(group_id, HANDLER, pb::ScheduleType::Cron, "* * * * * ?");
    let job_id = sender.create_job(job).await?.id;
    sender.start_job(job_id).await?;
    let held_log_id = a_held_run(&sender, job_id, 800).await?;
    Ok(TwoAdmins {
        sender,
        other,
        job_id,
        held_log_id,
        _database: shared,
    })
}

/// The job is stopped through the admin that never sent anything. The rows say which runs went
/// ahead and to which executor, and the second admin reaches it at that address as `KillRun`
/// does: the held run is cancelled all the same.
#[tokio::test]
async fn a_stop_through_another_admin_cancels_the_held_run() -> anyhow::Result<()> {
    let spans = RunSpans::default();
    let TwoAdmins {
        sender,
        other,
        job_id,
        held_log_id: log_id,
        _database,
    } = two_admins_and_a_held_run(&spans).await?;
    other
        .client()
        .stop_job(pb::StopJobRequest { id: job_id })
        .await?;
    assert_cancelled(&sender, &spans, job_id, log_id).await?;
    other.shutdown().await;
    sender.shutdown().await;
    Ok(())
}

/// `KillRun` through the admin that did not send the run reaches the executor the row names:
/// the held run is cancelled before its start all the same.
#[tokio::test]
async fn a_kill_through_another_admin_cancels_the_held_run() -> anyhow::Result<()> {
    let spans = RunSpans::default();
    let TwoAdmins {
        sender,
        other,
        job_id,
        held_log_id: log_id,
        _database,
    } = two_admins_and_a_held_run(&spans).await?;
    kill_and_expect_cancelled(&other, &sender, &spans, job_id, log_id).await?;
    other.shutdown().await;
    sender.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn with_send_ahead_each_occurrence_runs_exactly_once() -> anyhow::Result<()> {
    let spans = RunSpans::default();
    let (cluster, job_id) = every_second(1000, &spans).await?;
    cluster.start_job(job_id).await?;
    // Several seconds of runs sent ahead.
    wait_until(DEADLINE, "five runs sent ahead and done", || async {
        let logs = cluster.logs(job_id).await.ok()?;
        let done = logs
            .iter()
            .filter(|log| {
                log.trigger_msg.contains(SENT_AHEAD) && log.status == pb::RunStatus::Success as i32
            })
            .count();
        (done >= 5).then_some(())
    })
    .await?;
    cluster
        .client()
        .stop_job(pb::StopJobRequest { id: job_id })
        .await?;
    // Whatever was held at the stop is cancelled; the rest finished.
    let logs = wait_until(DEADLINE, "every row final", || async {
        let logs = cluster.logs(job_id).await.ok()?;
        let final_status = |log: &pb::Log| {
            log.status != pb::RunStatus::Running as i32
                && log.status != pb::RunStatus::Pending as i32
        };
        logs.iter().all(final_status).then_some(logs)
    })
    .await?;
    let mut by_instant: HashMap<i64, Vec<i64>> = HashMap::new();
    for log in &logs {
        by_instant
            .entry(log.scheduled_at_ms)
            .or_default()
            .push(log.id);
    }
    for (instant, ids) in &by_instant {
        assert_eq!(ids.len(), 1, "occurrence {instant} has rows {ids:?}");
    }
    let ran = spans_of(&spans, Some(job_id));
    let mut started = HashSet::new();
    for span in &ran {
        assert!(
            started.insert(span.log_id),
            "run {} started twice",
            span.log_id
        );
    }
    for log in &logs {
        let ran_once = started.contains(&log.id);
        let succeeded = log.status == pb::RunStatus::Success as i32;
        assert_eq!(ran_once, succeeded, "{log:?}");
        // The stop skips the fires planned and not sent, and cancels those held.
        let skipped = log.status == pb::RunStatus::Skipped as i32;
        let cancelled =
            log.status == pb::RunStatus::Killed as i32 && log.handle_msg.contains(CANCELLED);
        assert!(succeeded || skipped || cancelled, "{log:?}");
    }
    cluster.shutdown().await;
    Ok(())
}

/// A job with an overlap policy other than ALLOW_ALL is judged when its fire leaves: a lead
/// early, a run ending just before the instant would skip or park the fire. So its runs go at
/// their instant while a plain job beside it, on the same executor, is sent ahead.
#[tokio::test]
async fn a_job_with_an_overlap_policy_is_not_sent_ahead() -> anyhow::Result<()> {
    let spans = RunSpans::default();
    let (cluster, plain_id) = every_second(1000, &spans).await?;
    let group_id = cluster
        .client()
        .get_job(pb::GetJobRequest { id: plain_id })
        .await?
        .into_inner()
        .job
        .ok_or_else(|| anyhow::anyhow!("job {plain_id} not found"))?
        .group_id;
    let skip = pb::Job {
        name: "every second, SKIP".to_string(),
        overlap_policy: pb::OverlapPolicy::Skip as i32,
        ..TestCluster::job(group_id, HANDLER, pb::ScheduleType::Cron, "* * * * * ?")
    };
    let skip_id = cluster.create_job(skip).await?.id;
    cluster.start_job(plain_id).await?;
    cluster.start_job(skip_id).await?;
    // The plain job's runs go ahead once the executor's offset is known...
    a_held_run(&cluster, plain_id, 300).await?;
    // ...and from then on the SKIP job's runs still leave at their instant.
    let since = now_ms();
    let logs = wait_until(
        DEADLINE,
        "three runs of the SKIP job after that",
        || async {
            let logs = cluster.logs(skip_id).await.ok()?;
            let after: Vec<pb::Log> = logs
                .into_iter()
                .filter(|log| log.scheduled_at_ms > since && !log.executor_address.is_empty())
                .collect();
            (after.len() >= 3).then_some(after)
        },
    )
    .await?;
    for log in &logs {
        assert!(!log.trigger_msg.contains(SENT_AHEAD), "{log:?}");
    }
    for id in [plain_id, skip_id] {
        cluster.client().stop_job(pb::StopJobRequest { id }).await?;
    }
    cluster.shutdown().await;
    Ok(())
}
