//! Schedule types beyond cron: FIX_DELAY (next fire = completion + delay, never overlapping)
//! and FIX_RATE (its phase survives a late scan and an admin restart).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use xjob_admin::model::now_ms;
use xjob_executor::{JobContext, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_tests::{RunSpans, TestCluster, sleeping_handler, spans_of, wait_until};

const APP: &str = "schedule-types-app";

async fn quick(_ctx: JobContext) -> JobResult {
    Ok(JobOutput::message("done"))
}

#[tokio::test]
async fn fix_delay_never_overlaps() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let spans: RunSpans = Arc::default();
    cluster
        .start_executor(
            cluster
                .executor(APP)
                .handler("slow", sleeping_handler(Arc::clone(&spans), 0)),
        )
        .await?;
    // Each run takes 1.3 s, longer than the 1 s delay: a fixed rate would overlap.
    let job = cluster
        .create_job(pb::Job {
            params: "1300".into(),
            ..TestCluster::job(group_id, "slow", pb::ScheduleType::FixDelay, "1")
        })
        .await?;
    let started = cluster.start_job(job.id).await?;
    assert!(
        started.next_fire_ms >= now_ms() + 5_000,
        "first fire is at least 5 s away"
    );

    wait_until(Duration::from_secs(25), "3 finished runs", || async {
        let runs = spans.lock().ok()?.len();
        (runs >= 3).then_some(())
    })
    .await?;
    cluster
        .client()
        .stop_job(pb::StopJobRequest { id: job.id })
        .await?;

    let runs = spans_of(&spans, None);
    for pair in runs.windows(2) {
        let (previous, next) = (pair[0], pair[1]);
        assert!(
            next.started_ms >= previous.finished_ms + 1_000,
            "run started at {} although the previous one ended at {}: less than the delay",
            next.started_ms,
            previous.finished_ms
        );
    }
    // The log rows agree: each fire was scheduled the delay after the previous one ended
    // (rounded up to a whole second, like FIX_RATE), and went out on time.
    // A handler records its span before its result reaches the admin: the rows are awaited.
    let mut logs = wait_until(
        Duration::from_secs(10),
        "a success row per finished run",
        || async {
            let logs = cluster
                .logs_with_status(job.id, pb::RunStatus::Success)
                .await
                .ok()?;
            (logs.len() >= runs.len()).then_some(logs)
        },
    )
    .await?;
    logs.sort_by_key(|log| log.scheduled_at_ms);
    for pair in logs.windows(2) {
        let due = pair[0].handle_time_ms + 1_000;
        let whole_second = (due + 999) / 1000 * 1000;
        assert_eq!(pair[1].scheduled_at_ms, whole_second, "{pair:?}");
        let lateness = pair[1].trigger_time_ms - pair[1].scheduled_at_ms;
        assert!((0..1_000).contains(&lateness), "fired {lateness} ms late");
    }
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn fix_rate_keeps_its_phase_after_a_restart() -> anyhow::Result<()> {
    // A 1 s pre-read window, so the admin plans only the next fire and the restart below
    // finds that fire already due.
    let mut cluster = TestCluster::builder()
        .configure(|config| config.pre_read = Duration::from_secs(1))
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    cluster
        .start_executor(cluster.executor(APP).handler("quick", quick))
        .await?;
    let job = cluster
        .create_job(TestCluster::job(
            group_id,
            "quick",
            pb::ScheduleType::FixRate,
            "2",
        ))
        .await?;
    let first_fire = cluster.start_job(job.id).await?.next_fire_ms;
    wait_until(Duration::from_secs(15), "the first fire", || async {
        let logs = cluster
            .logs_with_status(job.id, pb::RunStatus::Success)
            .await
            .ok()?;
        logs.iter()
            .any(|log| log.scheduled_at_ms == first_fire)
            .then_some(())
    })
    .await?;

    // Down from just after the first fire until 2.5 s after it: the fire at +2 s comes due
    // meanwhile, and the restarted admin finds it half a second late. Re-anchored to "now" (as
    // XXL-JOB does) the schedule would continue at +5 s, +7 s; on its grid it is +4 s, +6 s.
    let downtime_ms = (first_fire + 2_500 - now_ms()).max(0) as u64;
    cluster
        .restart_admin_after(Duration::from_millis(downtime_ms))
        .await?;
    let logs = wait_until(
        Duration::from_secs(15),
        "two fires after the restart",
        || async {
            let logs = cluster.logs(job.id).await.ok()?;
            let after_restart = logs
                .iter()
                .filter(|log| log.scheduled_at_ms > first_fire + 2_000)
                .count();
            (after_restart >= 2).then_some(logs)
        },
    )
    .await?;
    cluster
        .client()
        .stop_job(pb::StopJobRequest { id: job.id })
        .await?;

    let mut scheduled: Vec<i64> = logs
        .iter()
        .map(|log| log.scheduled_at_ms - first_fire)
        .collect();
    scheduled.sort_unstable();
    assert!(
        scheduled.iter().all(|offset| offset % 2_000 == 0),
        "every fire on the 2 s grid of the first one: {scheduled:?}"
    );
    assert!(
        scheduled.contains(&4_000) && scheduled.contains(&6_000),
        "{scheduled:?}"
    );
    cluster.shutdown().await;
    Ok(())
}

/// The ring hands each second's fires to the trigger pipeline shortly before the second starts
/// (so the claim is done by then); no run may start before its scheduled instant.
#[tokio::test]
async fn no_run_starts_before_its_scheduled_time() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    // (scheduled_at_ms, handler start) of every run.
    let starts: Arc<Mutex<Vec<(i64, i64)>>> = Arc::default();
    let recorded = Arc::clone(&starts);
    let record = move |ctx: JobContext| {
        let started = now_ms();
        if let Ok(mut starts) = recorded.lock() {
            starts.push((ctx.scheduled_at_ms(), started));
        }
        async { JobResult::Ok(JobOutput::message("done")) }
    };
    cluster
        .start_executor(cluster.executor(APP).handler("record", record))
        .await?;
    let mut jobs = Vec::new();
    for _ in 0..5 {
        let job = cluster
            .create_job(TestCluster::job(
                group_id,
                "record",
                pb::ScheduleType::FixRate,
                "1",
            ))
            .await?;
        cluster.start_job(job.id).await?;
        jobs.push(job.id);
    }
    wait_until(Duration::from_secs(20), "15 recorded runs", || async {
        let count = starts.lock().ok()?.len();
        (count >= 15).then_some(())
    })
    .await?;
    for id in jobs {
        cluster.client().stop_job(pb::StopJobRequest { id }).await?;
    }
    let starts = starts
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    let early: Vec<&(i64, i64)> = starts
        .iter()
        .filter(|(scheduled, started)| started < scheduled)
        .collect();
    assert!(
        early.is_empty(),
        "runs started before their scheduled time (scheduled, started): {early:?}"
    );
    assert!(
        starts.iter().all(|(scheduled, _)| *scheduled > 0),
        "scheduled fires carry their time: {starts:?}"
    );
    cluster.shutdown().await;
    Ok(())
}
