//! Trigger pools end to end: a saturated pool turns fires into FAILED `overloaded:` runs (never
//! silent drops), and a job whose dispatches are slow moves to the slow pool.
//!
//! Slow dispatches come from a black hole: a loopback listener that accepts connections and never
//! answers, so a `Run` to it holds its pool slot until the executor timeout. Each accepted
//! connection is reported, which tells the test a dispatch holds its slot.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_tests::{TestCluster, ok_handler};

const APP: &str = "pools-app";
const FINAL_WITHIN: Duration = Duration::from_secs(10);

/// A listener that accepts connections, keeps them open and never answers.
struct BlackHole {
    address: String,
    accepted_rx: mpsc::UnboundedReceiver<()>,
    task: JoinHandle<()>,
}

impl BlackHole {
    async fn start() -> anyhow::Result<BlackHole> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = format!("http://{}", listener.local_addr()?);
        let (accepted_tx, accepted_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
                let _ = accepted_tx.send(());
            }
        });
        Ok(BlackHole {
            address,
            accepted_rx,
            task,
        })
    }

    /// Waits until a dispatch connected (it holds its pool slot from then on).
    async fn wait_connection(&mut self) -> anyhow::Result<()> {
        tokio::time::timeout(FINAL_WITHIN, self.accepted_rx.recv())
            .await?
            .ok_or_else(|| anyhow::anyhow!("black hole stopped"))
    }

    fn stop(self) {
        self.task.abort();
    }
}

/// Creates a MANUAL group routing to `address`; returns its id.
async fn manual_group(cluster: &TestCluster, app_name: &str, address: &str) -> anyhow::Result<i64> {
    let group = pb::Group {
        app_name: app_name.to_string(),
        title: "black hole".to_string(),
        address_type: pb::AddressType::Manual as i32,
        addresses: vec![address.to_string()],
        ..Default::default()
    };
    cluster
        .client()
        .create_group(pb::CreateGroupRequest { group: Some(group) })
        .await?
        .into_inner()
        .group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group returned"))
}

async fn manual_job(cluster: &TestCluster, group_id: i64, handler: &str) -> anyhow::Result<i64> {
    let mut job = TestCluster::job(group_id, handler, pb::ScheduleType::None, "");
    job.route_strategy = pb::RouteStrategy::Round as i32;
    Ok(cluster.create_job(job).await?.id)
}

/// Sends TriggerJob for `job_id` (optionally to other addresses) in its own task.
fn trigger_to(
    client: &JobAdminClient<tonic::transport::Channel>,
    job_id: i64,
    addresses: Vec<String>,
) -> JoinHandle<anyhow::Result<Vec<i64>>> {
    let mut client = client.clone();
    tokio::spawn(async move {
        let request = pb::TriggerJobRequest {
            id: job_id,
            params: None,
            addresses,
        };
        Ok(client.trigger_job(request).await?.into_inner().log_ids)
    })
}

fn trigger_in_background(
    client: &JobAdminClient<tonic::transport::Channel>,
    job_id: i64,
) -> JoinHandle<anyhow::Result<Vec<i64>>> {
    trigger_to(client, job_id, Vec::new())
}

async fn join_all(handles: Vec<JoinHandle<anyhow::Result<Vec<i64>>>>) -> anyhow::Result<Vec<i64>> {
    let mut log_ids = Vec::new();
    for handle in handles {
        log_ids.extend(handle.await??);
    }
    Ok(log_ids)
}

#[tokio::test]
async fn pool_saturation_records_overloaded_runs_instead_of_losing_them() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| {
            config.fast_pool_size = 1;
            config.slow_pool_size = 1;
            config.pool_wait = Duration::from_millis(100);
            config.executor_timeout = Duration::from_secs(2);
        })
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    for _ in 0..3 {
        let builder = cluster.executor(APP).handler("ok", ok_handler);
        cluster.start_executor(builder).await?;
    }
    let mut black_hole = BlackHole::start().await?;
    let stuck_group = manual_group(&cluster, "pools-black-hole", &black_hole.address).await?;
    let stuck_job = manual_job(&cluster, stuck_group, "ok").await?;
    let ok_job = manual_job(&cluster, group_id, "ok").await?;
    let client = cluster.client();

    // The stuck dispatch holds the only fast slot until the executor timeout (2 s).
    let stuck = trigger_in_background(&client, stuck_job);
    black_hole.wait_connection().await?;
    let fires: Vec<_> = (0..3)
        .map(|_| trigger_in_background(&client, ok_job))
        .collect();
    let overloaded_ids = join_all(fires).await?;
    assert_eq!(overloaded_ids.len(), 3, "every fire got a log row");
    for log_id in &overloaded_ids {
        let log = cluster.wait_log_final(*log_id, FINAL_WITHIN).await?;
        assert_eq!(log.status, pb::RunStatus::Failed as i32);
        assert_eq!(log.trigger_code, 500);
        assert!(
            log.trigger_msg
                .starts_with("overloaded: fast trigger pool (1 slots)"),
            "unexpected message: {}",
            log.trigger_msg
        );
    }
    let stuck_ids = join_all(vec![stuck]).await?;
    assert_eq!(stuck_ids.len(), 1);

    // Once the slot is free again fires go through.
    let after = join_all(vec![trigger_in_background(&client, ok_job)]).await?;
    let log = cluster.wait_log_final(after[0], FINAL_WITHIN).await?;
    assert_eq!(
        log.status,
        pb::RunStatus::Success as i32,
        "{}",
        log.trigger_msg
    );
    let rows = cluster.logs(ok_job).await?;
    assert_eq!(rows.len(), 4, "3 overloaded + 1 success, none lost");
    black_hole.stop();
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_job_with_more_than_ten_slow_dispatches_moves_to_the_slow_pool() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| {
            config.fast_pool_size = 16;
            config.slow_pool_size = 1;
            config.pool_wait = Duration::from_millis(100);
            config.executor_timeout = Duration::from_millis(700);
            // The fresh black hole below is outside the job's group (admins only, with this).
            config.trigger_any_address = true;
        })
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    for _ in 0..3 {
        let builder = cluster.executor(APP).handler("ok", ok_handler);
        cluster.start_executor(builder).await?;
    }
    let black_hole = BlackHole::start().await?;
    let slow_group = manual_group(&cluster, "pools-black-hole", &black_hole.address).await?;
    let slow_job = manual_job(&cluster, slow_group, "ok").await?;
    let ok_job = manual_job(&cluster, group_id, "ok").await?;
    let client = cluster.client();
    wait_for_room_in_the_minute(Duration::from_secs(8)).await;

    // 11 dispatches of > 500 ms within the minute (each waits for the 700 ms timeout).
    let first_round: Vec<_> = (0..11)
        .map(|_| trigger_in_background(&client, slow_job))
        .collect();
    for log_id in join_all(first_round).await? {
        let log = cluster.get_log(log_id).await?;
        assert!(log.trigger_msg.contains("fast pool"), "{}", log.trigger_msg);
    }

    // Now in the slow pool, which has one slot: a second concurrent fire is overloaded. A fresh
    // black hole (new connection) tells when the first one holds the slot.
    let mut second_hole = BlackHole::start().await?;
    let holding = trigger_to(&client, slow_job, vec![second_hole.address.clone()]);
    second_hole.wait_connection().await?;
    let refused = join_all(vec![trigger_in_background(&client, slow_job)]).await?;
    let refused_log = cluster.wait_log_final(refused[0], FINAL_WITHIN).await?;
    assert!(
        refused_log
            .trigger_msg
            .starts_with("overloaded: slow trigger pool (1 slots)"),
        "unexpected message: {}",
        refused_log.trigger_msg
    );
    let held = join_all(vec![holding]).await?;
    let held_log = cluster.get_log(held[0]).await?;
    assert!(
        held_log.trigger_msg.contains("slow pool"),
        "{}",
        held_log.trigger_msg
    );

    // Other jobs keep the fast pool.
    let other = join_all(vec![trigger_in_background(&client, ok_job)]).await?;
    let other_log = cluster.wait_log_final(other[0], FINAL_WITHIN).await?;
    assert_eq!(other_log.status, pb::RunStatus::Success as i32);
    assert!(
        other_log.trigger_msg.contains("fast pool"),
        "{}",
        other_log.trigger_msg
    );
    black_hole.stop();
    second_hole.stop();
    cluster.shutdown().await;
    Ok(())
}

/// The slow-dispatch counts reset when the minute changes: if fewer than `needed` remain in
/// this minute, waits for the next one to begin.
async fn wait_for_room_in_the_minute(needed: Duration) {
    let into_minute = xjob_admin::model::now_ms().rem_euclid(60_000) as u64;
    let left = Duration::from_millis(60_000 - into_minute);
    if left < needed {
        tokio::time::sleep(left + Duration::from_millis(50)).await;
    }
}
