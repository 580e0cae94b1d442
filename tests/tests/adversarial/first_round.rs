//! The first security review replayed as an attacker on the same network would, and refused: a
//! rogue process taking over a live executor's address, a forged callback finishing someone else's
//! run, malformed results, and an executor that keeps its session after its group's token
//! changed. The attacker connects from 127.0.0.2 (another peer IP on loopback); the real
//! executor from 127.0.0.1.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use xjob_proto::pb;
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::{TestCluster, held_handler, ok_handler, wait_until};

const WAIT: Duration = Duration::from_secs(10);

/// A channel to the admin opened from another loopback address than the executors'.
async fn attacker_channel(cluster: &TestCluster) -> anyhow::Result<Channel> {
    let attacker: IpAddr = "127.0.0.2".parse()?;
    Ok(Endpoint::from_shared(cluster.admin_url())?
        .local_address(Some(attacker))
        .connect()
        .await?)
}

/// An admin listening on every interface (JobAdmin opened explicitly for the test: no users)
/// with `executor_token` as its cluster-wide executor token (empty: none), and the loopback URL
/// executors dial it on.
async fn open_network_cluster(executor_token: &str) -> anyhow::Result<(TestCluster, String)> {
    let executor_token = executor_token.to_string();
    let cluster = TestCluster::builder()
        .configure(move |config| {
            config.listen = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
            config.insecure_open_admin_api = true;
            config.executor_token = executor_token;
        })
        .start()
        .await?;
    let port = cluster
        .admin_url()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let loopback_admin = format!("http://127.0.0.1:{port}");
    Ok((cluster, loopback_admin))
}

async fn executors_of(cluster: &TestCluster, app_name: &str) -> anyhow::Result<Vec<pb::Executor>> {
    let request = pb::ListExecutorsRequest {
        app_name: app_name.to_string(),
    };
    Ok(cluster
        .client()
        .list_executors(request)
        .await?
        .into_inner()
        .executors)
}

#[tokio::test]
async fn a_rogue_session_cannot_take_over_a_live_executors_address() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group("victim-app").await?;
    let real = cluster.executor("victim-app").handler("ok", ok_handler);
    let address = cluster.start_executor(real).await?;

    let mut rogue = RegistryClient::new(attacker_channel(&cluster).await?);
    let register = pb::Register {
        app_name: "victim-app".to_string(),
        address: address.clone(),
        handlers: vec!["ok".to_string()],
        protocol_version: xjob_proto::PROTOCOL_VERSION,
        ..Default::default()
    };
    let (outbound_tx, outbound_rx) = mpsc::channel(1);
    outbound_tx
        .send(pb::ExecutorMessage {
            kind: Some(pb::executor_message::Kind::Register(register)),
        })
        .await?;
    let mut inbound = rogue
        .session(ReceiverStream::new(outbound_rx))
        .await?
        .into_inner();
    let first = tokio::time::timeout(WAIT, inbound.message()).await?;
    let refusal = first.expect_err("the takeover is refused");
    assert_eq!(refusal.code(), tonic::Code::AlreadyExists, "{refusal:?}");
    drop(outbound_tx);

    // The real executor keeps its session and its runs.
    let executors = executors_of(&cluster, "victim-app").await?;
    assert_eq!(executors.len(), 1, "{executors:?}");
    let job = TestCluster::job(group_id, "ok", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let log_id = cluster.trigger(job_id, None).await?;
    let finished = cluster.wait_log_final(log_id, WAIT).await?;
    assert_eq!(
        finished.status,
        pb::RunStatus::Success as i32,
        "{finished:?}"
    );
    assert_eq!(finished.executor_address, address);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_forged_callback_cannot_finish_another_sessions_run() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group("forged-app").await?;
    let gate = Arc::new(Semaphore::new(0));
    let executor = cluster
        .executor("forged-app")
        .handler("held", held_handler(Arc::clone(&gate)));
    cluster.start_executor(executor).await?;
    let job = TestCluster::job(group_id, "held", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let log_id = cluster.trigger(job_id, None).await?;
    let running = pb::RunStatus::Running as i32;
    wait_until(WAIT, "the run to be dispatched", || async {
        let log = cluster.get_log(log_id).await.ok()?;
        (log.status == running && !log.executor_address.is_empty()).then_some(())
    })
    .await?;

    let mut attacker = RegistryClient::new(attacker_channel(&cluster).await?);
    let forged = pb::CallbackRequest {
        results: vec![pb::RunResult {
            log_id,
            status: pb::RunStatus::Success as i32,
            code: 200,
            message: "forged".to_string(),
            ..Default::default()
        }],
    };
    let answer = attacker.callback(forged).await?.into_inner();
    assert!(!answer.accepted_log_ids.contains(&log_id), "{answer:?}");
    assert_eq!(cluster.get_log(log_id).await?.status, running);

    // Malformed results are refused whole, naming the result.
    for (status, code) in [
        (pb::RunStatus::Running, 200),
        (pb::RunStatus::Unspecified, 0),
    ] {
        let malformed = pb::CallbackRequest {
            results: vec![pb::RunResult {
                log_id,
                status: status as i32,
                code,
                ..Default::default()
            }],
        };
        let refused = attacker.callback(malformed).await.expect_err("malformed");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().contains("results[0]"), "{refused:?}");
    }
    assert_eq!(cluster.get_log(log_id).await?.status, running);

    // The real executor's own result goes through.
    gate.add_permits(1);
    let finished = cluster.wait_log_final(log_id, WAIT).await?;
    assert_eq!(finished.status, pb::RunStatus::Success as i32);
    assert_eq!(finished.handle_msg, "released");
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_new_group_token_closes_sessions_opened_without_it() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group("rotated-app").await?;
    let stale = cluster.executor("rotated-app").handler("ok", ok_handler);
    cluster.start_executor(stale).await?;
    assert_eq!(executors_of(&cluster, "rotated-app").await?.len(), 1);

    let mut client = cluster.client();
    let group = client
        .get_group(pb::GetGroupRequest { id: group_id })
        .await?
        .into_inner()
        .group
        .ok_or_else(|| anyhow::anyhow!("no group"))?;
    let secured = pb::Group {
        access_token: "rotated-secret".to_string(),
        ..group
    };
    client
        .update_group(pb::UpdateGroupRequest {
            group: Some(secured),
        })
        .await?;
    // The executor without the token loses its session and cannot open a new one.
    wait_until(WAIT, "the stale session to close", || async {
        let executors = executors_of(&cluster, "rotated-app").await.ok()?;
        executors.is_empty().then_some(())
    })
    .await?;
    let with_token = cluster
        .executor("rotated-app")
        .access_token("rotated-secret")
        .handler("ok", ok_handler);
    cluster.start_executor(with_token).await?;
    let executors = executors_of(&cluster, "rotated-app").await?;
    assert_eq!(
        executors.len(),
        1,
        "only the executor holding the token: {executors:?}"
    );
    cluster.shutdown().await;
    Ok(())
}

/// In a cluster the token may change through another admin: this admin finds out at its next
/// registry refresh and closes the sessions that no longer hold the token.
#[tokio::test]
async fn a_group_token_changed_through_another_admin_closes_sessions_here() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group("rotated-elsewhere").await?;
    let stale = cluster
        .executor("rotated-elsewhere")
        .handler("ok", ok_handler);
    cluster.start_executor(stale).await?;
    assert_eq!(executors_of(&cluster, "rotated-elsewhere").await?.len(), 1);

    // Another admin writes the new token to the shared database; this one serves no call.
    let store = xjob_admin::store::Store::connect(&format!(
        "sqlite://{}",
        cluster.data_dir().join("xjob.db").display()
    ))
    .await?;
    let group = store
        .get_group(xjob_admin::model::GroupId(group_id))
        .await?
        .ok_or_else(|| anyhow::anyhow!("no group"))?;
    let secured = xjob_admin::model::Group {
        access_token: "changed-elsewhere".to_string(),
        ..group
    };
    assert!(store.update_group(&secured).await?);
    store.close().await;

    wait_until(WAIT, "the stale session to close", || async {
        let executors = executors_of(&cluster, "rotated-elsewhere").await.ok()?;
        executors.is_empty().then_some(())
    })
    .await?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn off_loopback_executors_of_groups_without_a_token_are_refused() -> anyhow::Result<()> {
    let (mut cluster, loopback_admin) = open_network_cluster("").await?;
    cluster.create_group("tokenless-app").await?;
    let rogue = cluster
        .executor("tokenless-app")
        .admin_addrs([loopback_admin.clone()])
        .handler("ok", ok_handler)
        .start()
        .await?;
    assert!(rogue.wait_registered(Duration::from_secs(2)).await.is_err());
    assert!(executors_of(&cluster, "tokenless-app").await?.is_empty());
    rogue.shutdown().await;

    // With a group token, its holder registers.
    let mut client = cluster.client();
    let secured = pb::Group {
        app_name: "tokened-app".to_string(),
        title: "tokened".to_string(),
        address_type: pb::AddressType::Auto as i32,
        access_token: "network-secret".to_string(),
        ..Default::default()
    };
    client
        .create_group(pb::CreateGroupRequest {
            group: Some(secured),
        })
        .await?;
    let holder = cluster
        .executor("tokened-app")
        .admin_addrs([loopback_admin])
        .access_token("network-secret")
        .handler("ok", ok_handler);
    cluster.start_executor(holder).await?;
    assert_eq!(executors_of(&cluster, "tokened-app").await?.len(), 1);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_cluster_executor_token_stands_in_for_groups_without_one() -> anyhow::Result<()> {
    let (mut cluster, loopback_admin) = open_network_cluster("cluster-secret").await?;
    let group_id = cluster.create_group("clustered-app").await?;
    let without = cluster
        .executor("clustered-app")
        .admin_addrs([loopback_admin.clone()])
        .handler("ok", ok_handler)
        .start()
        .await?;
    assert!(
        without
            .wait_registered(Duration::from_secs(2))
            .await
            .is_err()
    );
    without.shutdown().await;

    // The holder registers, and the admin presents the same token on Run (the SDK checks it),
    // and the callback carrying it is accepted.
    let holder = cluster
        .executor("clustered-app")
        .admin_addrs([loopback_admin])
        .access_token("cluster-secret")
        .handler("ok", ok_handler);
    cluster.start_executor(holder).await?;
    let job = TestCluster::job(group_id, "ok", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let log_id = cluster.trigger(job_id, None).await?;
    let finished = cluster.wait_log_final(log_id, WAIT).await?;
    assert_eq!(
        finished.status,
        pb::RunStatus::Success as i32,
        "{finished:?}"
    );
    cluster.shutdown().await;
    Ok(())
}
