//! Rogue sessions and forged callbacks without a group's access token: a group's token is
//! required on `Registry.Session` and on `Registry.Callback` for that group's runs; a mismatch is
//! `UNAUTHENTICATED` and changes nothing, not even the other results of a refused batch. A group
//! without a token accepts any caller on loopback (the laptop default; off loopback see
//! `first_round`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use xjob_proto::pb;
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::{TestCluster, held_handler, ok_handler};

use crate::attacker::{WAIT, group_with_token, with_token};

const SECURED_APP: &str = "secured-app";
const OPEN_APP: &str = "open-app";
const TOKEN: &str = "s3cret-token";

async fn create_job(cluster: &TestCluster, group_id: i64, handler: &str) -> anyhow::Result<i64> {
    let job = TestCluster::job(group_id, handler, pb::ScheduleType::None, "");
    Ok(cluster.create_job(job).await?.id)
}

async fn log_status(cluster: &TestCluster, id: i64) -> anyhow::Result<i32> {
    let log = cluster.client().get_log(pb::GetLogRequest { id }).await?;
    let log = log.into_inner().log;
    Ok(log.map(|log| log.status).unwrap_or_default())
}

/// Opens a raw session for `app_name` and returns the status its first answer carries.
async fn session_refusal(
    cluster: &TestCluster,
    app_name: &str,
    token: Option<&str>,
) -> anyhow::Result<tonic::Status> {
    let mut client = RegistryClient::connect(cluster.admin_url()).await?;
    let register = pb::Register {
        app_name: app_name.to_string(),
        address: "http://127.0.0.1:9".to_string(),
        protocol_version: xjob_proto::PROTOCOL_VERSION,
        ..Default::default()
    };
    let (outbound_tx, outbound_rx) = mpsc::channel(1);
    let message = pb::ExecutorMessage {
        kind: Some(pb::executor_message::Kind::Register(register)),
    };
    outbound_tx.send(message).await?;
    let request = with_token(ReceiverStream::new(outbound_rx), token)?;
    let mut inbound = client.session(request).await?.into_inner();
    let first = tokio::time::timeout(WAIT, inbound.message()).await?;
    drop(outbound_tx);
    match first {
        Err(status) => Ok(status),
        Ok(answer) => anyhow::bail!("session accepted: {answer:?}"),
    }
}

async fn executor_count(cluster: &TestCluster, app_name: &str) -> anyhow::Result<usize> {
    let request = pb::ListExecutorsRequest {
        app_name: app_name.to_string(),
    };
    let response = cluster.client().list_executors(request).await?;
    Ok(response.into_inner().executors.len())
}

#[tokio::test]
async fn wrong_or_missing_token_is_rejected_on_session() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    group_with_token(&cluster, SECURED_APP, TOKEN).await?;

    for token in [None, Some("wrong-token")] {
        let status = session_refusal(&cluster, SECURED_APP, token).await?;
        assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    }

    // An SDK executor with the wrong token never gets a session.
    let wrong = cluster
        .executor(SECURED_APP)
        .access_token("wrong-token")
        .handler("ok", ok_handler)
        .start()
        .await?;
    let refused = wrong.wait_registered(Duration::from_secs(2)).await;
    assert!(
        matches!(
            &refused,
            Err(xjob_executor::Error::RegistrationRefused { message, .. })
                if message.contains("wrong or missing access token")
        ),
        "{refused:?}"
    );
    assert!(wrong.is_refused());
    assert_eq!(executor_count(&cluster, SECURED_APP).await?, 0);
    wrong.shutdown().await;

    let right = cluster
        .executor(SECURED_APP)
        .access_token(TOKEN)
        .handler("ok", ok_handler);
    cluster.start_executor(right).await?;
    assert_eq!(executor_count(&cluster, SECURED_APP).await?, 1);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn wrong_or_missing_token_is_rejected_on_callback() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let secured_group = group_with_token(&cluster, SECURED_APP, TOKEN).await?;
    let open_group = group_with_token(&cluster, OPEN_APP, "").await?;
    let gate = Arc::new(Semaphore::new(0));
    let secured = cluster
        .executor(SECURED_APP)
        .access_token(TOKEN)
        .handler("held", held_handler(Arc::clone(&gate)));
    cluster.start_executor(secured).await?;
    let open = cluster
        .executor(OPEN_APP)
        .handler("held", held_handler(Arc::clone(&gate)));
    cluster.start_executor(open).await?;
    let secured_log = cluster
        .trigger(create_job(&cluster, secured_group, "held").await?, None)
        .await?;
    let open_log = cluster
        .trigger(create_job(&cluster, open_group, "held").await?, None)
        .await?;
    let running = pb::RunStatus::Running as i32;
    assert_eq!(log_status(&cluster, secured_log).await?, running);

    let forged = |log_ids: &[i64]| pb::CallbackRequest {
        results: log_ids
            .iter()
            .map(|log_id| pb::RunResult {
                log_id: *log_id,
                status: pb::RunStatus::Success as i32,
                code: 200,
                message: "reported by a raw client".to_string(),
                ..Default::default()
            })
            .collect(),
    };
    let mut registry = RegistryClient::connect(cluster.admin_url()).await?;
    for token in [None, Some("wrong-token")] {
        let refused = registry
            .callback(with_token(forged(&[open_log, secured_log]), token)?)
            .await
            .expect_err("a callback for a secured run needs the group token");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    }
    // Nothing of a refused batch is persisted, not even the run of the open group.
    assert_eq!(log_status(&cluster, secured_log).await?, running);
    assert_eq!(log_status(&cluster, open_log).await?, running);

    // The open group's runs accept any caller; the secured group's accept its token.
    registry
        .callback(with_token(forged(&[open_log]), None)?)
        .await?;
    registry
        .callback(with_token(forged(&[secured_log]), Some(TOKEN))?)
        .await?;
    let success = pb::RunStatus::Success as i32;
    assert_eq!(log_status(&cluster, open_log).await?, success);
    assert_eq!(log_status(&cluster, secured_log).await?, success);

    gate.add_permits(2);
    cluster.shutdown().await;
    Ok(())
}
