//! Retries with backoff and the alarm hook: each retry is a new log row of the same fire
//! (scheduled time, params, shard) dispatched after its delay; the alarm fires on the final
//! failure only, or on every failure when the job asks for it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xjob_executor::{JobContext, JobError, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_tests::{CountingAlarm, HandlerFuture, TestCluster, wait_until};

const APP: &str = "retry-app";

async fn always_fails(ctx: JobContext) -> JobResult {
    Err(JobError::new(format!("attempt {} failed", ctx.attempt())))
}

fn retrying_job(group_id: i64, retries: i32, backoff: pb::RetryBackoff) -> pb::Job {
    pb::Job {
        name: format!("fails, {retries} retries, {backoff:?}"),
        fail_retry_count: retries,
        retry_backoff: Some(backoff),
        ..TestCluster::job(group_id, "fail", pb::ScheduleType::None, "")
    }
}

/// The job's attempts by attempt number, once `count` of them are final.
async fn final_attempts(
    cluster: &TestCluster,
    job_id: i64,
    count: usize,
) -> anyhow::Result<BTreeMap<i32, pb::Log>> {
    wait_until(
        Duration::from_secs(15),
        &format!("{count} final attempts of job {job_id}"),
        || async {
            let logs = cluster.logs(job_id).await.ok()?;
            let open = [pb::RunStatus::Pending as i32, pb::RunStatus::Running as i32];
            let finished: BTreeMap<i32, pb::Log> = logs
                .into_iter()
                .filter(|log| !open.contains(&log.status))
                .map(|log| (log.attempt, log))
                .collect();
            (finished.len() >= count).then_some(finished)
        },
    )
    .await
}

/// Asserts attempt `n + 1` was dispatched at least `delays[n]` after attempt `n`.
fn assert_gaps(attempts: &BTreeMap<i32, pb::Log>, delays: &[i64]) {
    for (index, delay) in delays.iter().enumerate() {
        let attempt = index as i32;
        let earlier = &attempts[&attempt];
        let later = &attempts[&(attempt + 1)];
        let gap = later.trigger_time_ms - earlier.trigger_time_ms;
        assert!(
            gap >= *delay,
            "attempt {} came {gap} ms after attempt {attempt}, expected >= {delay} ms",
            attempt + 1
        );
        // The retry waits for the failure, then the backoff.
        assert!(later.trigger_time_ms >= earlier.handle_time_ms + delay);
    }
}

#[tokio::test]
async fn retries_follow_the_configured_backoff_and_alarm_fires_once() -> anyhow::Result<()> {
    let alarm = Arc::new(CountingAlarm::default());
    let mut cluster = TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .alarm(Arc::clone(&alarm) as _)
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    cluster
        .start_executor(cluster.executor(APP).handler("fail", always_fails))
        .await?;

    let fixed = pb::RetryBackoff {
        initial_delay_ms: 400,
        factor: 1.0,
        max_delay_ms: 0,
    };
    let exponential = pb::RetryBackoff {
        initial_delay_ms: 200,
        factor: 2.0,
        max_delay_ms: 700,
    };
    let fixed_job = cluster.create_job(retrying_job(group_id, 2, fixed)).await?;
    let exponential_job = cluster
        .create_job(retrying_job(group_id, 3, exponential))
        .await?;
    let every_failure_job = cluster
        .create_job(pb::Job {
            alarm_on_every_failure: true,
            ..retrying_job(group_id, 2, fixed)
        })
        .await?;
    for job in [&fixed_job, &exponential_job, &every_failure_job] {
        cluster.trigger(job.id, None).await?;
    }

    // Fixed 400 ms: attempts 0, 1, 2, each at least 400 ms after the one before.
    let attempts = final_attempts(&cluster, fixed_job.id, 3).await?;
    assert_gaps(&attempts, &[400, 400]);
    // Exponential 200 ms × 2, capped at 700 ms: 200, 400, 700.
    let exponential_attempts = final_attempts(&cluster, exponential_job.id, 4).await?;
    assert_gaps(&exponential_attempts, &[200, 400, 700]);
    for attempts in [&attempts, &exponential_attempts] {
        for (attempt, log) in attempts.iter() {
            assert_eq!(log.status, pb::RunStatus::Failed as i32);
            let expected_type = if *attempt == 0 {
                pb::TriggerType::Manual
            } else {
                pb::TriggerType::Retry
            };
            assert_eq!(log.trigger_type, expected_type as i32);
        }
    }

    // One alarm per job, for its last attempt, raised after that attempt failed. (The earlier
    // attempts were followed up before: their follow-ups created the later attempts.)
    for (job, attempts) in [
        (&fixed_job, &attempts),
        (&exponential_job, &exponential_attempts),
    ] {
        let last = attempts
            .values()
            .last()
            .ok_or_else(|| anyhow::anyhow!("no attempt"))?;
        let raised = wait_until(Duration::from_secs(5), "the final alarm", || async {
            let raised = alarm.of_job(job.id);
            (!raised.is_empty()).then_some(raised)
        })
        .await?;
        assert_eq!(raised.len(), 1, "exactly one alarm: {raised:?}");
        assert_eq!(raised[0].log_id, last.id);
        assert_eq!(raised[0].attempt, last.attempt);
        assert!(raised[0].at_ms >= last.handle_time_ms);
    }

    // With alarm_on_every_failure, every failed attempt alarms.
    let every_attempts = final_attempts(&cluster, every_failure_job.id, 3).await?;
    let raised = wait_until(Duration::from_secs(5), "an alarm per failure", || async {
        let raised = alarm.of_job(every_failure_job.id);
        (raised.len() >= 3).then_some(raised)
    })
    .await?;
    let mut alarmed: Vec<i64> = raised.iter().map(|alarm| alarm.log_id).collect();
    alarmed.sort_unstable();
    let mut failed: Vec<i64> = every_attempts.values().map(|log| log.id).collect();
    failed.sort_unstable();
    assert_eq!(alarmed, failed, "one alarm per failed attempt");
    cluster.shutdown().await;
    Ok(())
}

/// What a handler saw of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    log_id: i64,
    params: String,
    shard_index: i32,
    shard_total: i32,
    attempt: i32,
    scheduled_at_ms: i64,
}

/// Fails its first attempt of shard 1 (or of a non-broadcast run); records every run.
fn first_attempt_fails(
    seen: Arc<Mutex<Vec<Seen>>>,
) -> impl Fn(JobContext) -> HandlerFuture + Send + Sync + 'static {
    move |ctx: JobContext| {
        let seen = Arc::clone(&seen);
        Box::pin(async move {
            seen.lock()
                .map_err(|_| JobError::new("poisoned"))?
                .push(Seen {
                    log_id: ctx.log_id(),
                    params: ctx.params().to_string(),
                    shard_index: ctx.shard_index(),
                    shard_total: ctx.shard_total(),
                    attempt: ctx.attempt(),
                    scheduled_at_ms: ctx.scheduled_at_ms(),
                });
            let failing_shard = ctx.shard_total() <= 1 || ctx.shard_index() == 1;
            if ctx.attempt() == 0 && failing_shard {
                return Err(JobError::new("first attempt fails"));
            }
            Ok(JobOutput::message("retry succeeded"))
        })
    }
}

#[tokio::test]
async fn retry_keeps_params_shard_and_scheduled_time() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let seen = Arc::new(Mutex::new(Vec::new()));
    for _ in 0..3 {
        let executor = cluster
            .executor(APP)
            .handler("flaky", first_attempt_fails(Arc::clone(&seen)));
        cluster.start_executor(executor).await?;
    }

    // A manual run with params given at trigger time: the retry reuses them, not the job's.
    let manual = cluster
        .create_job(pb::Job {
            params: "job-params".into(),
            fail_retry_count: 1,
            ..TestCluster::job(group_id, "flaky", pb::ScheduleType::None, "")
        })
        .await?;
    let first = cluster.trigger(manual.id, Some("trigger-params")).await?;
    let attempts = final_attempts(&cluster, manual.id, 2).await?;
    assert_eq!(attempts[&0].id, first);
    assert_eq!(attempts[&0].status, pb::RunStatus::Failed as i32);
    let retry = &attempts[&1];
    assert_eq!(retry.status, pb::RunStatus::Success as i32);
    assert_eq!(retry.trigger_type, pb::TriggerType::Retry as i32);
    assert_eq!(retry.params, "trigger-params");
    assert!(
        attempts[&0].scheduled_at_ms > 0,
        "a manual fire is scheduled for the instant it was requested"
    );
    assert_eq!(
        retry.scheduled_at_ms, attempts[&0].scheduled_at_ms,
        "the retry keeps the fire's time"
    );

    // A scheduled broadcast whose shard 1 fails once: the retry is shard 1/3 of the same fire.
    let broadcast = cluster
        .create_job(pb::Job {
            params: "broadcast-params".into(),
            fail_retry_count: 1,
            route_strategy: pb::RouteStrategy::ShardingBroadcast as i32,
            ..TestCluster::job(group_id, "flaky", pb::ScheduleType::Cron, "*/1 * * * * ?")
        })
        .await?;
    cluster.start_job(broadcast.id).await?;
    let retry = wait_until(
        Duration::from_secs(15),
        "the shard retry to succeed",
        || async {
            let logs = cluster.logs(broadcast.id).await.ok()?;
            logs.into_iter()
                .find(|log| log.attempt == 1 && log.status == pb::RunStatus::Success as i32)
        },
    )
    .await?;
    cluster
        .client()
        .stop_job(pb::StopJobRequest { id: broadcast.id })
        .await?;
    let logs = cluster.logs(broadcast.id).await?;
    let failed = logs
        .iter()
        .find(|log| {
            log.scheduled_at_ms == retry.scheduled_at_ms && log.attempt == 0 && log.shard_index == 1
        })
        .ok_or_else(|| anyhow::anyhow!("the failed shard"))?;
    assert_eq!(failed.status, pb::RunStatus::Failed as i32);
    assert_eq!((retry.shard_index, retry.shard_total), (1, 3));
    assert_eq!(retry.trigger_type, pb::TriggerType::Retry as i32);
    assert_eq!(retry.params, "broadcast-params");
    assert!(retry.scheduled_at_ms > 0);
    // The handler saw the same fire again: same scheduled time, shard and params.
    let seen = seen
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    let handled = seen
        .iter()
        .find(|seen| seen.log_id == retry.id)
        .ok_or_else(|| anyhow::anyhow!("the retry never reached a handler"))?;
    let expected = Seen {
        log_id: retry.id,
        params: "broadcast-params".to_string(),
        shard_index: 1,
        shard_total: 3,
        attempt: 1,
        scheduled_at_ms: failed.scheduled_at_ms,
    };
    assert_eq!(handled, &expected);
    cluster.shutdown().await;
    Ok(())
}
