//! Backfill (docs/scheduling.md, "Backfill") on a real admin and real executors over loopback
//! gRPC: a job's occurrences in a past range run once each, in order, at the backfill's
//! concurrency, with the time each stands for; a cancel stops it; an admin restart in the
//! middle continues from the cursor without a duplicate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xjob_executor::{JobContext, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_tests::{TestCluster, wait_until};

const APP: &str = "backfill-app";
const MINUTE: i64 = 60_000;

/// What the handler saw: (scheduled time, trigger type) per run, and the most runs at once.
#[derive(Default)]
struct Seen {
    runs: Mutex<Vec<(i64, i32)>>,
    now: AtomicI64,
    most: AtomicI64,
}

/// Records what the run stands for, holds it a while, succeeds.
async fn record(seen: Arc<Seen>, ctx: JobContext, hold: Duration) -> JobResult {
    let running = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
    seen.most.fetch_max(running, Ordering::SeqCst);
    if let Ok(mut runs) = seen.runs.lock() {
        runs.push((ctx.scheduled_at_ms(), ctx.trigger_type() as i32));
    }
    tokio::time::sleep(hold).await;
    seen.now.fetch_sub(1, Ordering::SeqCst);
    Ok(JobOutput::message("backfilled"))
}

/// A cluster with `executors` executors of one handler; returns it and the group.
async fn cluster(
    executors: usize,
    seen: &Arc<Seen>,
    hold: Duration,
) -> anyhow::Result<(TestCluster, i64)> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    for _ in 0..executors {
        let seen = Arc::clone(seen);
        let executor = cluster
            .executor(APP)
            .handler("record", move |ctx: JobContext| {
                record(Arc::clone(&seen), ctx, hold)
            });
        cluster.start_executor(executor).await?;
    }
    Ok((cluster, group_id))
}

/// The start of a whole minute `minutes` before now.
fn minutes_ago(minutes: i64) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_millis() as i64)
        .unwrap_or_default();
    now - now.rem_euclid(MINUTE) - minutes * MINUTE
}

/// A backfill request of job `job_id`'s occurrences from `from_ms` to `to_ms`.
fn range(job_id: i64, from_ms: i64, to_ms: i64, max_concurrent: i32) -> pb::BackfillJobRequest {
    pb::BackfillJobRequest {
        job_id,
        from_ms,
        to_ms,
        max_concurrent,
    }
}

async fn backfill(
    cluster: &TestCluster,
    request: pb::BackfillJobRequest,
) -> anyhow::Result<pb::Backfill> {
    let started = cluster.client().backfill_job(request).await?.into_inner();
    started
        .backfill
        .ok_or_else(|| anyhow::anyhow!("no backfill in the answer"))
}

async fn get(cluster: &TestCluster, id: i64) -> Option<pb::Backfill> {
    let found = cluster
        .client()
        .get_backfill(pb::GetBackfillRequest { id })
        .await
        .ok()?;
    found.into_inner().backfill
}

/// Waits until backfill `id` is in `state` with nothing running; returns it.
async fn wait_ended(
    cluster: &TestCluster,
    id: i64,
    state: pb::BackfillState,
    timeout: Duration,
) -> anyhow::Result<pb::Backfill> {
    wait_until(timeout, "the backfill to end", || async {
        let backfill = get(cluster, id).await?;
        (backfill.state == state as i32 && backfill.running == 0).then_some(backfill)
    })
    .await
}

/// Six past minutes at two at a time, on two executors: each minute runs exactly once as a
/// BACKFILL run whose handler sees that minute, the runs are created in occurrence order, never
/// more than two are out at once, and the live schedule (the job is stopped) adds nothing.
/// Bad requests get precise statuses.
#[tokio::test]
async fn a_backfill_runs_each_occurrence_once_in_order_at_its_concurrency() -> anyhow::Result<()> {
    let seen = Arc::new(Seen::default());
    let (cluster, group_id) = cluster(2, &seen, Duration::from_millis(400)).await?;
    let mut job = TestCluster::job(group_id, "record", pb::ScheduleType::Cron, "0 * * * * ?");
    job.route_strategy = pb::RouteStrategy::Round as i32;
    let job = cluster.create_job(job).await?;
    let from = minutes_ago(30);
    let to = from + 5 * MINUTE;
    let started = backfill(&cluster, range(job.id, from, to, 2)).await?;
    assert_eq!(started.total, 6, "both ends included");
    assert_eq!(started.state, pb::BackfillState::Running as i32);
    let done = wait_ended(
        &cluster,
        started.id,
        pb::BackfillState::Done,
        Duration::from_secs(60),
    )
    .await?;
    assert_eq!((done.created, done.succeeded, done.failed), (6, 6, 0));

    let expected: Vec<i64> = (0..6).map(|minute| from + minute * MINUTE).collect();
    let mut handled: Vec<(i64, i32)> = seen
        .runs
        .lock()
        .map(|runs| runs.clone())
        .unwrap_or_default();
    handled.sort();
    let backfill_type = pb::TriggerType::Backfill as i32;
    assert_eq!(
        handled,
        expected
            .iter()
            .map(|&at| (at, backfill_type))
            .collect::<Vec<_>>(),
        "each occurrence handled once, with its own time"
    );
    assert!(
        seen.most.load(Ordering::SeqCst) <= 2,
        "at most 2 at once, saw {}",
        seen.most.load(Ordering::SeqCst)
    );
    let mut logs = cluster.logs(job.id).await?;
    assert_eq!(logs.len(), 6, "no other run: {logs:?}");
    logs.sort_by_key(|log| log.id);
    let in_id_order: Vec<i64> = logs.iter().map(|log| log.scheduled_at_ms).collect();
    assert_eq!(in_id_order, expected, "created in occurrence order");
    assert!(logs.iter().all(|log| log.trigger_type == backfill_type));
    // A run is created only once an earlier one finished: the third was sent after the first
    // of the two before it ended.
    for (index, log) in logs.iter().enumerate().skip(2) {
        let earliest_end = logs[..index]
            .iter()
            .map(|earlier| earlier.handle_time_ms)
            .collect::<Vec<_>>();
        let finished_before = earliest_end
            .iter()
            .filter(|&&end| end > 0 && end <= log.trigger_time_ms)
            .count();
        assert!(
            finished_before >= index - 1,
            "run {} sent with more than 2 unfinished: {logs:?}",
            log.id
        );
    }

    let listed = cluster
        .client()
        .list_backfills(pb::ListBackfillsRequest { job_id: job.id })
        .await?
        .into_inner()
        .backfills;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].succeeded, 6);

    // Precise refusals: each request, its status code and what its message says.
    let every_second = cluster
        .create_job(TestCluster::job(
            group_id,
            "record",
            pb::ScheduleType::Cron,
            "* * * * * ?",
        ))
        .await?;
    let refusals = [
        (
            range(every_second.id, from, from + 3 * 3_600_000, 1),
            tonic::Code::InvalidArgument,
            "more than 10000 occurrences",
        ),
        (
            range(job.id, to, from, 1),
            tonic::Code::InvalidArgument,
            "must not be after",
        ),
        (
            range(999_999, from, to, 1),
            tonic::Code::NotFound,
            "job 999999 not found",
        ),
    ];
    for (request, code, says) in refusals {
        let refused = cluster
            .client()
            .backfill_job(request)
            .await
            .expect_err("refused");
        assert_eq!(refused.code(), code, "{refused:?}");
        assert!(refused.message().contains(says), "{}", refused.message());
    }
    cluster.shutdown().await;
    Ok(())
}

/// Twelve past minutes one at a time, the admin restarted after the third run was created:
/// the restarted admin takes the backfill over and finishes it, each minute with exactly one
/// run. Then a second backfill is cancelled after its second run: no more start, the started
/// ones finish, and the answer says so.
#[tokio::test]
async fn a_restart_mid_backfill_continues_without_duplicates_and_cancel_stops_it()
-> anyhow::Result<()> {
    let seen = Arc::new(Seen::default());
    let (mut cluster, group_id) = cluster(1, &seen, Duration::from_millis(300)).await?;
    let job = cluster
        .create_job(TestCluster::job(
            group_id,
            "record",
            pb::ScheduleType::Cron,
            "0 * * * * ?",
        ))
        .await?;
    let from = minutes_ago(120);
    let started = backfill(&cluster, range(job.id, from, from + 11 * MINUTE, 1)).await?;
    assert_eq!(started.total, 12);
    let before = wait_until(Duration::from_secs(30), "3 runs created", || async {
        let backfill = get(&cluster, started.id).await?;
        (backfill.created >= 3).then_some(backfill)
    })
    .await?;
    cluster.restart_admin().await?;
    let after = get(&cluster, started.id)
        .await
        .ok_or_else(|| anyhow::anyhow!("gone"))?;
    assert!(
        before.created < 12 && after.created < 12,
        "the restart came mid-backfill: {before:?} {after:?}"
    );
    let done = wait_ended(
        &cluster,
        started.id,
        pb::BackfillState::Done,
        Duration::from_secs(60),
    )
    .await?;
    assert_eq!(done.created, 12);
    assert_eq!(done.succeeded + done.failed, 12, "{done:?}");
    let logs = cluster.logs(job.id).await?;
    let mut per_minute: HashMap<i64, usize> = HashMap::new();
    for log in &logs {
        *per_minute.entry(log.scheduled_at_ms).or_default() += 1;
    }
    for minute in 0..12 {
        assert_eq!(
            per_minute.get(&(from + minute * MINUTE)),
            Some(&1),
            "minute {minute} must have exactly one run: {logs:?}"
        );
    }
    assert_eq!(logs.len(), 12, "no run beyond the range: {logs:?}");

    // Cancel after the second run was created.
    let second = backfill(
        &cluster,
        range(job.id, from + 60 * MINUTE, from + 89 * MINUTE, 1),
    )
    .await?;
    wait_until(Duration::from_secs(30), "2 runs created", || async {
        let backfill = get(&cluster, second.id).await?;
        (backfill.created >= 2).then_some(())
    })
    .await?;
    let cancelled = cluster
        .client()
        .cancel_backfill(pb::CancelBackfillRequest { id: second.id })
        .await?
        .into_inner()
        .backfill
        .ok_or_else(|| anyhow::anyhow!("no backfill in the answer"))?;
    assert_eq!(cancelled.state, pb::BackfillState::Cancelled as i32);
    let ended = wait_ended(
        &cluster,
        second.id,
        pb::BackfillState::Cancelled,
        Duration::from_secs(30),
    )
    .await?;
    // Four runner ticks later still nothing more was created.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = get(&cluster, second.id)
        .await
        .ok_or_else(|| anyhow::anyhow!("gone"))?;
    assert_eq!(
        later.created, ended.created,
        "no run created after the cancel"
    );
    assert!(later.created < later.total);
    let again = cluster
        .client()
        .cancel_backfill(pb::CancelBackfillRequest { id: second.id })
        .await
        .expect_err("cancelled twice");
    assert_eq!(again.code(), tonic::Code::FailedPrecondition);
    cluster.shutdown().await;
    Ok(())
}
