//! Child jobs: a successful run starts each child job once (trigger type PARENT); a broadcast
//! parent starts them once, after every shard of the fire succeeded.

use std::sync::Arc;
use std::time::Duration;

use xjob_admin::model::now_ms;
use xjob_proto::pb;
use xjob_tests::{RunSpans, TestCluster, sleeping_handler, spans_of, wait_until};

const APP: &str = "children-app";

/// Extra sleep per shard index, so a broadcast's shards end at different times.
const PER_SHARD_MS: u64 = 200;

async fn only_log(cluster: &TestCluster, job_id: i64) -> anyhow::Result<pb::Log> {
    let logs = cluster.logs(job_id).await?;
    anyhow::ensure!(
        logs.len() == 1,
        "job {job_id} ran {} times: {logs:?}",
        logs.len()
    );
    logs.into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("no log of job {job_id}"))
}

#[tokio::test]
async fn child_chain_runs_in_order() -> anyhow::Result<()> {
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
                .handler("step", sleeping_handler(Arc::clone(&spans), PER_SHARD_MS)),
        )
        .await?;
    let step = |name: &str, children: Vec<i64>| pb::Job {
        name: name.to_string(),
        params: "150".to_string(),
        child_job_ids: children,
        ..TestCluster::job(group_id, "step", pb::ScheduleType::None, "")
    };
    let job_c = cluster.create_job(step("C", vec![])).await?;
    let job_b = cluster.create_job(step("B", vec![job_c.id])).await?;
    let job_a = cluster.create_job(step("A", vec![job_b.id])).await?;

    let request = pb::TriggerJobRequest {
        id: job_a.id,
        params: None,
        addresses: vec![],
    };
    cluster.client().trigger_job(request).await?;
    wait_until(Duration::from_secs(10), "job C to succeed", || async {
        let logs = cluster
            .logs_with_status(job_c.id, pb::RunStatus::Success)
            .await
            .ok()?;
        (!logs.is_empty()).then_some(())
    })
    .await?;

    // Once per parent run: C's success comes after B's follow-up, which came after A's.
    let log_a = only_log(&cluster, job_a.id).await?;
    let log_b = only_log(&cluster, job_b.id).await?;
    let log_c = only_log(&cluster, job_c.id).await?;
    assert_eq!(log_a.trigger_type, pb::TriggerType::Manual as i32);
    for log in [&log_a, &log_b, &log_c] {
        assert_eq!(log.status, pb::RunStatus::Success as i32);
    }
    assert_eq!(log_b.trigger_type, pb::TriggerType::Parent as i32);
    assert_eq!(log_c.trigger_type, pb::TriggerType::Parent as i32);
    // In order: each child was dispatched after its parent finished, and ran after it.
    assert!(log_b.trigger_time_ms >= log_a.handle_time_ms);
    assert!(log_c.trigger_time_ms >= log_b.handle_time_ms);
    let (span_a, span_b, span_c) = (
        spans_of(&spans, Some(job_a.id)),
        spans_of(&spans, Some(job_b.id)),
        spans_of(&spans, Some(job_c.id)),
    );
    assert_eq!((span_a.len(), span_b.len(), span_c.len()), (1, 1, 1));
    assert!(
        span_b[0].started_ms >= span_a[0].finished_ms,
        "B started before A ended"
    );
    assert!(
        span_c[0].started_ms >= span_b[0].finished_ms,
        "C started before B ended"
    );
    cluster.shutdown().await;
    Ok(())
}

/// A Quartz cron firing once, at the whole UTC second `at_ms` (until the same time tomorrow).
fn cron_at(at_ms: i64) -> String {
    let seconds_of_day = at_ms.div_euclid(1000).rem_euclid(86_400);
    format!(
        "{} {} {} * * ?",
        seconds_of_day % 60,
        (seconds_of_day / 60) % 60,
        seconds_of_day / 3600
    )
}

#[tokio::test]
async fn broadcast_parent_triggers_children_once_after_all_shards() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let spans: RunSpans = Arc::default();
    for _ in 0..3 {
        let executor = cluster
            .executor(APP)
            .handler("step", sleeping_handler(Arc::clone(&spans), PER_SHARD_MS));
        cluster.start_executor(executor).await?;
    }
    let child = cluster
        .create_job(pb::Job {
            name: "child".into(),
            ..TestCluster::job(group_id, "step", pb::ScheduleType::None, "")
        })
        .await?;
    // Fires once, 7 s from now (StartJob's first fire is at least 5 s away); shard i sleeps
    // 300 + 200·i ms, so the shards finish apart and the child must wait for the slowest.
    let fire_at = (now_ms() / 1000 + 7) * 1000;
    let parent = cluster
        .create_job(pb::Job {
            name: "broadcast parent".into(),
            time_zone: "UTC".into(),
            params: "300".into(),
            route_strategy: pb::RouteStrategy::ShardingBroadcast as i32,
            child_job_ids: vec![child.id],
            ..TestCluster::job(group_id, "step", pb::ScheduleType::Cron, &cron_at(fire_at))
        })
        .await?;
    let started = cluster.start_job(parent.id).await?;
    assert_eq!(started.next_fire_ms, fire_at);

    wait_until(Duration::from_secs(20), "the child to succeed", || async {
        let logs = cluster
            .logs_with_status(child.id, pb::RunStatus::Success)
            .await
            .ok()?;
        (!logs.is_empty()).then_some(())
    })
    .await?;
    let shards = cluster.logs(parent.id).await?;
    assert_eq!(shards.len(), 3, "one run per executor: {shards:?}");
    let mut shard_indexes: Vec<(i32, i32)> = shards
        .iter()
        .map(|log| (log.shard_index, log.shard_total))
        .collect();
    shard_indexes.sort_unstable();
    assert_eq!(shard_indexes, vec![(0, 3), (1, 3), (2, 3)]);
    assert!(
        shards
            .iter()
            .all(|log| log.status == pb::RunStatus::Success as i32)
    );
    assert!(shards.iter().all(|log| log.scheduled_at_ms == fire_at));

    // Once, not once per shard, and only after the last shard finished.
    let child_log = only_log(&cluster, child.id).await?;
    assert_eq!(child_log.trigger_type, pb::TriggerType::Parent as i32);
    let last_shard_end = shards
        .iter()
        .map(|log| log.handle_time_ms)
        .max()
        .unwrap_or(i64::MAX);
    assert!(
        child_log.trigger_time_ms >= last_shard_end,
        "child dispatched at {} before the last shard finished at {last_shard_end}",
        child_log.trigger_time_ms
    );
    cluster.shutdown().await;
    Ok(())
}
