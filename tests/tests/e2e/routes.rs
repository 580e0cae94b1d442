//! Route strategies end to end: three real executors, each strategy picks what its definition
//! says (reference §3.1), and SHARDING_BROADCAST gives one shard `i/n` per sorted executor.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use xjob_admin::model::{JobId, LogFilter};
use xjob_admin::store::Store;
use xjob_admin::trigger::route::consistent_hash_index;
use xjob_executor::{ExecutorBuilder, JobContext, JobError, JobOutput};
use xjob_proto::pb;
use xjob_tests::{TestCluster, ok_handler, wait_until};

const APP: &str = "routes-app";
const FINAL_WITHIN: Duration = Duration::from_secs(10);

/// A cluster with three executors of `APP` in an AUTO group; `addresses` sorted as routed.
struct Fixture {
    cluster: TestCluster,
    group_id: i64,
    addresses: Vec<String>,
}

async fn fixture(
    cluster: TestCluster,
    add_handlers: impl Fn(ExecutorBuilder) -> ExecutorBuilder,
) -> anyhow::Result<Fixture> {
    let mut cluster = cluster;
    let group_id = cluster.create_group(APP).await?;
    for _ in 0..3 {
        let builder = add_handlers(cluster.executor(APP));
        cluster.start_executor(builder).await?;
    }
    let client = cluster.client();
    let addresses = wait_until(Duration::from_secs(5), "3 executors online", || {
        let mut client = client.clone();
        async move {
            let group = client
                .get_group(pb::GetGroupRequest { id: group_id })
                .await
                .ok()?
                .into_inner()
                .group?;
            (group.online.len() == 3).then_some(group.online)
        }
    })
    .await?;
    let mut sorted = addresses.clone();
    sorted.sort();
    assert_eq!(addresses, sorted, "the admin lists online executors sorted");
    Ok(Fixture {
        cluster,
        group_id,
        addresses,
    })
}

async fn ok_fixture() -> anyhow::Result<Fixture> {
    fixture(TestCluster::builder().start().await?, |builder| {
        builder.handler("ok", ok_handler)
    })
    .await
}

async fn create_job(
    cluster: &TestCluster,
    group_id: i64,
    handler: &str,
    route: pb::RouteStrategy,
) -> anyhow::Result<pb::Job> {
    let mut job = TestCluster::job(group_id, handler, pb::ScheduleType::None, "");
    job.route_strategy = route as i32;
    cluster.create_job(job).await
}

/// Triggers `job_id` once and waits until the run is final; returns its log.
async fn trigger_and_finish(cluster: &TestCluster, job_id: i64) -> anyhow::Result<pb::Log> {
    let log_ids = cluster.trigger_on(job_id, vec![]).await?;
    assert_eq!(log_ids.len(), 1, "one run per trigger");
    let log = cluster.wait_log_final(log_ids[0], FINAL_WITHIN).await?;
    assert_eq!(
        log.status,
        pb::RunStatus::Success as i32,
        "run {} failed: {}",
        log.id,
        log.trigger_msg
    );
    Ok(log)
}

#[tokio::test]
async fn consistent_hash_is_stable_for_a_job_while_executors_stay_the_same() -> anyhow::Result<()> {
    let fixture = ok_fixture().await?;
    let cluster = &fixture.cluster;
    let mut chosen = HashSet::new();
    for _ in 0..3 {
        let job = create_job(
            cluster,
            fixture.group_id,
            "ok",
            pb::RouteStrategy::ConsistentHash,
        )
        .await?;
        let expected = &fixture.addresses[consistent_hash_index(job.id, &fixture.addresses)];
        for _ in 0..4 {
            let log = trigger_and_finish(cluster, job.id).await?;
            assert_eq!(
                &log.executor_address, expected,
                "job {} left its hashed executor",
                job.id
            );
        }
        chosen.insert(expected.clone());
    }
    assert!(!chosen.is_empty());
    fixture.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn least_frequently_used_spreads_runs() -> anyhow::Result<()> {
    let fixture = ok_fixture().await?;
    let cluster = &fixture.cluster;
    let job = create_job(
        cluster,
        fixture.group_id,
        "ok",
        pb::RouteStrategy::LeastFrequentlyUsed,
    )
    .await?;
    let mut runs: HashMap<String, u32> = HashMap::new();
    for _ in 0..9 {
        let log = trigger_and_finish(cluster, job.id).await?;
        *runs.entry(log.executor_address).or_default() += 1;
    }
    // Start counts are random below 3 (XXL-JOB's seeding); after that the least used address
    // always gets the run, so every executor gets runs and no two differ by more than 3.
    let counts: Vec<u32> = fixture
        .addresses
        .iter()
        .map(|address| runs.get(address).copied().unwrap_or(0))
        .collect();
    let (least, most) = (
        counts.iter().min().copied().unwrap_or(0),
        counts.iter().max().copied().unwrap_or(0),
    );
    assert!(least >= 1, "an executor got no run: {runs:?}");
    assert!(most - least <= 3, "runs not spread: {runs:?}");
    fixture.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn least_recently_used_rotates() -> anyhow::Result<()> {
    let fixture = ok_fixture().await?;
    let cluster = &fixture.cluster;
    let job = create_job(
        cluster,
        fixture.group_id,
        "ok",
        pb::RouteStrategy::LeastRecentlyUsed,
    )
    .await?;
    let mut picked = Vec::new();
    for _ in 0..6 {
        picked.push(trigger_and_finish(cluster, job.id).await?.executor_address);
    }
    let expected: Vec<String> = fixture
        .addresses
        .iter()
        .chain(fixture.addresses.iter())
        .cloned()
        .collect();
    assert_eq!(picked, expected, "least recently used first, in list order");
    fixture.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn failover_skips_a_dead_executor() -> anyhow::Result<()> {
    let mut fixture = ok_fixture().await?;
    let dead = fixture.addresses[0].clone();
    let executor = fixture
        .cluster
        .take_executor(&dead)
        .ok_or_else(|| anyhow::anyhow!("executor {dead} not found"))?;
    executor.crash();
    // A MANUAL group keeps the dead address first in its list (an AUTO group would drop it).
    let manual = pb::Group {
        app_name: "routes-manual".to_string(),
        title: "manual list with a dead executor first".to_string(),
        address_type: pb::AddressType::Manual as i32,
        addresses: fixture.addresses.clone(),
        ..Default::default()
    };
    let group_id = fixture
        .cluster
        .client()
        .create_group(pb::CreateGroupRequest {
            group: Some(manual),
        })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group returned"))?;
    let cluster = &fixture.cluster;
    let job = create_job(cluster, group_id, "ok", pb::RouteStrategy::Failover).await?;

    let log = trigger_and_finish(cluster, job.id).await?;
    let next = &fixture.addresses[1];
    assert_eq!(
        &log.executor_address, next,
        "the next address in order takes the run"
    );
    assert!(
        log.trigger_msg.contains(&format!("{dead}: error"))
            && log.trigger_msg.contains(&format!("{next}: ok")),
        "probe transcript missing from: {}",
        log.trigger_msg
    );

    // Only dead addresses: the run fails with the transcript.
    let log_ids = cluster.trigger_on(job.id, vec![dead.clone()]).await?;
    let failed = cluster.wait_log_final(log_ids[0], FINAL_WITHIN).await?;
    assert_eq!(failed.status, pb::RunStatus::Failed as i32);
    assert_eq!(failed.trigger_code, 500);
    assert!(
        failed.trigger_msg.contains("no executor answered")
            && failed.trigger_msg.contains(&format!("{dead}: error")),
        "unexpected message: {}",
        failed.trigger_msg
    );
    fixture.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn busyover_skips_a_busy_executor() -> anyhow::Result<()> {
    let (started_tx, mut started_rx) = mpsc::unbounded_channel::<i64>();
    let (release_tx, release_rx) = watch::channel(false);
    // Reports its start, then blocks until the test releases it.
    let blocking = move |ctx: JobContext| {
        let started_tx = started_tx.clone();
        let mut release_rx = release_rx.clone();
        async move {
            let _ = started_tx.send(ctx.log_id());
            release_rx
                .wait_for(|released| *released)
                .await
                .map_err(|_| JobError::new("test ended"))?;
            Ok(JobOutput::message("released"))
        }
    };
    let cluster = TestCluster::builder().start().await?;
    let fixture = fixture(cluster, move |builder| {
        builder.handler("block", blocking.clone())
    })
    .await?;
    let cluster = &fixture.cluster;
    let job = create_job(
        cluster,
        fixture.group_id,
        "block",
        pb::RouteStrategy::Busyover,
    )
    .await?;

    let first = cluster.trigger_on(job.id, vec![]).await?;
    let started = tokio::time::timeout(FINAL_WITHIN, started_rx.recv()).await?;
    assert_eq!(started, Some(first[0]), "the first run started");
    // TriggerJob answers after the dispatch is recorded, so the row names its executor.
    let first_log = cluster.get_log(first[0]).await?;
    assert_eq!(
        first_log.executor_address, fixture.addresses[0],
        "all idle: the first wins"
    );

    let second = cluster.trigger_on(job.id, vec![]).await?;
    let started = tokio::time::timeout(FINAL_WITHIN, started_rx.recv()).await?;
    assert_eq!(started, Some(second[0]), "the second run started elsewhere");
    release_tx.send(true)?;
    let second_log = cluster.wait_log_final(second[0], FINAL_WITHIN).await?;
    let busy = &fixture.addresses[0];
    let idle = &fixture.addresses[1];
    assert_eq!(
        &second_log.executor_address, idle,
        "the busy executor is skipped"
    );
    assert!(
        second_log.trigger_msg.contains(&format!("{busy}: busy"))
            && second_log.trigger_msg.contains(&format!("{idle}: ok")),
        "probe transcript missing from: {}",
        second_log.trigger_msg
    );
    assert_eq!(second_log.status, pb::RunStatus::Success as i32);
    let first_log = cluster.wait_log_final(first[0], FINAL_WITHIN).await?;
    assert_eq!(first_log.status, pb::RunStatus::Success as i32);
    fixture.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn broadcast_runs_one_shard_per_executor() -> anyhow::Result<()> {
    let seen: Arc<Mutex<Vec<(i64, i32, i32)>>> = Arc::new(Mutex::new(Vec::new()));
    let recording = {
        let seen = Arc::clone(&seen);
        move |ctx: JobContext| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().map_err(|_| JobError::new("poisoned"))?.push((
                    ctx.log_id(),
                    ctx.shard_index(),
                    ctx.shard_total(),
                ));
                Ok(JobOutput::message(format!(
                    "shard {}/{}",
                    ctx.shard_index(),
                    ctx.shard_total()
                )))
            }
        }
    };
    let cluster = TestCluster::builder().start().await?;
    let fixture = fixture(cluster, move |builder| {
        builder.handler("shard", recording.clone())
    })
    .await?;
    let cluster = &fixture.cluster;

    // A cron firing once a minute, at the first whole second at least 5 s from now (the
    // earliest first fire a started job gets); the manual part runs meanwhile.
    let second = (xjob_admin::model::now_ms() + 6_000) / 1000 % 60;
    let mut scheduled_job = TestCluster::job(
        fixture.group_id,
        "shard",
        pb::ScheduleType::Cron,
        &format!("{second} * * * * ?"),
    );
    scheduled_job.route_strategy = pb::RouteStrategy::ShardingBroadcast as i32;
    let scheduled_job = cluster.create_job(scheduled_job).await?;
    cluster.start_job(scheduled_job.id).await?;

    let job = create_job(
        cluster,
        fixture.group_id,
        "shard",
        pb::RouteStrategy::ShardingBroadcast,
    )
    .await?;
    let log_ids = cluster.trigger_on(job.id, vec![]).await?;
    assert_eq!(log_ids.len(), 3, "TriggerJob returns every shard's log id");
    for (index, log_id) in log_ids.iter().enumerate() {
        let log = cluster.wait_log_final(*log_id, FINAL_WITHIN).await?;
        assert_eq!(
            log.status,
            pb::RunStatus::Success as i32,
            "{}",
            log.trigger_msg
        );
        assert_eq!((log.shard_index, log.shard_total), (index as i32, 3));
        assert_eq!(
            log.executor_address, fixture.addresses[index],
            "shard {index}"
        );
        assert!(log.trigger_msg.contains(&format!("(shard {index}/3)")));
    }
    let mut handled: Vec<(i64, i32, i32)> = seen
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .iter()
        .copied()
        .filter(|(log_id, _, _)| log_ids.contains(log_id))
        .collect();
    handled.sort();
    let expected: Vec<(i64, i32, i32)> = log_ids
        .iter()
        .enumerate()
        .map(|(index, log_id)| (*log_id, index as i32, 3))
        .collect();
    assert_eq!(handled, expected, "each handler saw its own shard i/3");

    let scheduled = wait_until(Duration::from_secs(15), "3 scheduled shards", || async {
        let logs = cluster
            .logs_with_status(scheduled_job.id, pb::RunStatus::Success)
            .await
            .ok()?;
        (logs.len() >= 3).then_some(logs)
    })
    .await?;
    cluster
        .client()
        .stop_job(pb::StopJobRequest {
            id: scheduled_job.id,
        })
        .await?;
    let instants: HashSet<i64> = scheduled.iter().map(|log| log.scheduled_at_ms).collect();
    assert_eq!(instants.len(), 1, "one scheduled fire, three shards");
    let fire_keys = stored_fire_keys(cluster, scheduled_job.id).await?;
    let scheduled_at = scheduled[0].scheduled_at_ms;
    let expected_keys: HashSet<String> = (0..3)
        .map(|shard| format!("{}:{scheduled_at}:{shard}:0", scheduled_job.id))
        .collect();
    assert_eq!(fire_keys, expected_keys, "each shard has its own fire key");
    fixture.cluster.shutdown().await;
    Ok(())
}

/// The fire keys of a job's rows, read straight from the admin's SQLite file.
async fn stored_fire_keys(cluster: &TestCluster, job_id: i64) -> anyhow::Result<HashSet<String>> {
    let url = format!("sqlite://{}", cluster.data_dir().join("xjob.db").display());
    let store = Store::connect(&url).await?;
    let filter = LogFilter {
        job_id: Some(JobId(job_id)),
        limit: 100,
        ..LogFilter::default()
    };
    let runs = store.list_logs(&filter).await;
    store.close().await;
    Ok(runs?.into_iter().filter_map(|run| run.fire_key).collect())
}
