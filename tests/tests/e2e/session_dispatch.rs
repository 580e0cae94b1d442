//! Session dispatch end to end: executors that open no port, reached down their own session
//! stream. The route strategies that probe (FAILOVER's Beat, BUSYOVER's IdleBeat), sharding
//! over a group mixing a dialed and a session executor, kill and the run log all work as they
//! do for dialed executors; a session that ends takes the executor out of routing at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use xjob_executor::{JobContext, JobError, JobOutput};
use xjob_proto::pb;
use xjob_tests::{HandlerFuture, TestCluster, held_handler, ok_handler, wait_until};

const APP: &str = "session-app";
const FINAL_WITHIN: Duration = Duration::from_secs(15);

async fn online(cluster: &TestCluster, group_id: i64, count: usize) -> anyhow::Result<Vec<String>> {
    let client = cluster.client();
    wait_until(Duration::from_secs(10), "executors online", || {
        let mut client = client.clone();
        async move {
            let group = client
                .get_group(pb::GetGroupRequest { id: group_id })
                .await
                .ok()?
                .into_inner()
                .group?;
            (group.online.len() == count).then_some(group.online)
        }
    })
    .await
}

fn job(group_id: i64, handler: &str, route: pb::RouteStrategy) -> pb::Job {
    let mut job = TestCluster::job(group_id, handler, pb::ScheduleType::None, "");
    job.route_strategy = route as i32;
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probing_routes_and_sharding_reach_session_executors() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let gate = Arc::new(Semaphore::new(0));
    for index in 0..2 {
        let builder = cluster
            .executor(APP)
            .session_dispatch(true)
            .advertise_address(format!("session://{APP}-{index}"))
            .handler("ok", ok_handler)
            .handler("held", held_handler(Arc::clone(&gate)));
        cluster.start_executor(builder).await?;
    }
    // A dialed executor in the same group: routing mixes both transports.
    let dialed = cluster
        .start_executor(cluster.executor(APP).handler("ok", ok_handler))
        .await?;
    let addresses = online(&cluster, group_id, 3).await?;
    assert!(addresses.contains(&dialed), "{addresses:?}");
    let sessions: Vec<String> = addresses
        .iter()
        .filter(|address| address.starts_with("session://"))
        .cloned()
        .collect();
    assert_eq!(
        sessions,
        [format!("session://{APP}-0"), format!("session://{APP}-1")]
    );

    // FAILOVER: its Beat probe goes down the session; the first live executor wins.
    let failover = cluster
        .create_job(job(group_id, "ok", pb::RouteStrategy::Failover))
        .await?;
    let log_ids = cluster.trigger_on(failover.id, vec![]).await?;
    let log = cluster.wait_log_final(log_ids[0], FINAL_WITHIN).await?;
    assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
    assert_eq!(log.executor_address, addresses[0]);
    assert!(log.trigger_msg.contains("ok"), "{}", log.trigger_msg);

    // SHARDING_BROADCAST: one shard per executor, whatever its transport.
    let sharded = cluster
        .create_job(job(group_id, "ok", pb::RouteStrategy::ShardingBroadcast))
        .await?;
    let log_ids = cluster.trigger_on(sharded.id, vec![]).await?;
    assert_eq!(log_ids.len(), 3);
    let mut reached = Vec::new();
    for log_id in log_ids {
        let log = cluster.wait_log_final(log_id, FINAL_WITHIN).await?;
        assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
        reached.push(log.executor_address);
    }
    reached.sort();
    assert_eq!(reached, addresses);

    cluster.shutdown().await;
    Ok(())
}

/// Logs a line, then holds its run until the gate opens (or the run is killed).
fn logging_held(gate: Arc<Semaphore>) -> impl Fn(JobContext) -> HandlerFuture + Send + Sync {
    move |ctx: JobContext| {
        let gate = Arc::clone(&gate);
        Box::pin(async move {
            ctx.log(format!("holding run {}", ctx.log_id()));
            let _permit = tokio::select! {
                permit = gate.acquire() => permit.map_err(|_| JobError::new("closed"))?,
                () = ctx.cancelled() => return Err(JobError::new("killed")),
            };
            Ok(JobOutput::message("released"))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busyover_kill_and_the_run_log_travel_down_the_session() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let gate = Arc::new(Semaphore::new(0));
    for index in 0..2 {
        let builder = cluster
            .executor(APP)
            .session_dispatch(true)
            .advertise_address(format!("session://{APP}-{index}"))
            .handler("held", logging_held(Arc::clone(&gate)));
        cluster.start_executor(builder).await?;
    }
    let addresses = online(&cluster, group_id, 2).await?;
    let busyover = cluster
        .create_job(job(group_id, "held", pb::RouteStrategy::Busyover))
        .await?;
    let first = cluster.trigger_on(busyover.id, vec![]).await?[0];
    let first_log = cluster.get_log(first).await?;
    assert_eq!(
        first_log.executor_address, addresses[0],
        "all idle: the first wins"
    );
    let second = cluster.trigger_on(busyover.id, vec![]).await?[0];
    let second_log = cluster.get_log(second).await?;
    assert_eq!(second_log.executor_address, addresses[1], "{second_log:?}");
    assert!(
        second_log
            .trigger_msg
            .contains(&format!("{}: busy", addresses[0])),
        "probe transcript: {}",
        second_log.trigger_msg
    );

    // ReadRunLog down the session, while the run holds.
    let mut client = cluster.client();
    let content = wait_until(FINAL_WITHIN, "the held run's log line", || {
        let mut client = client.clone();
        async move {
            let response = client
                .read_run_log(pb::ReadRunLogRequest {
                    log_id: first,
                    from_line: 1,
                })
                .await
                .ok()?
                .into_inner();
            response
                .content
                .contains(&format!("holding run {first}"))
                .then_some(response.content)
        }
    })
    .await?;
    assert!(!content.is_empty());

    // KillRun down the session stops the first run.
    let killed = client
        .kill_run(pb::KillRunRequest { log_id: first })
        .await?
        .into_inner();
    assert!(killed.killed, "{killed:?}");
    let first_log = cluster.wait_log_final(first, FINAL_WITHIN).await?;
    assert_eq!(
        first_log.status,
        pb::RunStatus::Killed as i32,
        "{first_log:?}"
    );
    gate.add_permits(1);
    let second_log = cluster.wait_log_final(second, FINAL_WITHIN).await?;
    assert_eq!(
        second_log.status,
        pb::RunStatus::Success as i32,
        "{second_log:?}"
    );

    // A session that ends takes its executor out of routing at once.
    let executor = cluster
        .take_executor(&addresses[0])
        .ok_or_else(|| anyhow::anyhow!("no executor at {}", addresses[0]))?;
    executor.shutdown().await;
    let left = online(&cluster, group_id, 1).await?;
    assert_eq!(left, [addresses[1].clone()]);
    cluster.shutdown().await;
    Ok(())
}
