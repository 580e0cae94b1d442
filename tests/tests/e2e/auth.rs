//! Access tokens (DESIGN §3.4): a group's token is required on `Registry.Session`, on
//! `Registry.Callback` for that group's runs, and by the SDK on its executor service; the admin
//! presents the group token on every call to the executor. A group without a token accepts any
//! caller. Mismatches are `UNAUTHENTICATED` and change nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Request;
use tonic::metadata::MetadataValue;
use xjob_proto::pb;
use xjob_proto::pb::executor_service_client::ExecutorServiceClient;
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::{TestCluster, held_handler, ok_handler};

const SECURED_APP: &str = "secured-app";
const OPEN_APP: &str = "open-app";
const TOKEN: &str = "s3cret-token";
const WAIT: Duration = Duration::from_secs(10);

async fn create_group(cluster: &TestCluster, app_name: &str, token: &str) -> anyhow::Result<i64> {
    let group = pb::Group {
        app_name: app_name.to_string(),
        title: app_name.to_string(),
        address_type: pb::AddressType::Auto as i32,
        access_token: token.to_string(),
        ..Default::default()
    };
    let response = cluster
        .client()
        .create_group(pb::CreateGroupRequest { group: Some(group) })
        .await?;
    let group = response.into_inner().group;
    group
        .map(|group| group.id)
        .ok_or_else(|| anyhow::anyhow!("no group"))
}

async fn create_job(cluster: &TestCluster, group_id: i64, handler: &str) -> anyhow::Result<i64> {
    let job = TestCluster::job(group_id, handler, pb::ScheduleType::None, "");
    Ok(cluster.create_job(job).await?.id)
}

async fn log_status(cluster: &TestCluster, id: i64) -> anyhow::Result<i32> {
    let log = cluster.client().get_log(pb::GetLogRequest { id }).await?;
    let log = log.into_inner().log;
    Ok(log.map(|log| log.status).unwrap_or_default())
}

/// Wraps a message with `authorization: Bearer <token>` when a token is given.
fn with_token<T>(message: T, token: Option<&str>) -> anyhow::Result<Request<T>> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        let value = MetadataValue::try_from(format!("Bearer {token}"))?;
        request.metadata_mut().insert("authorization", value);
    }
    Ok(request)
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
    create_group(&cluster, SECURED_APP, TOKEN).await?;

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
    let secured_group = create_group(&cluster, SECURED_APP, TOKEN).await?;
    let open_group = create_group(&cluster, OPEN_APP, "").await?;
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

#[tokio::test]
async fn wrong_or_missing_token_is_rejected_by_the_executor_service() -> anyhow::Result<()> {
    let mut cluster = TestCluster::builder().start().await?;
    let group_id = create_group(&cluster, SECURED_APP, TOKEN).await?;
    let executor = cluster
        .executor(SECURED_APP)
        .access_token(TOKEN)
        .handler("ok", ok_handler);
    let address = cluster.start_executor(executor).await?;

    let mut executor_client = ExecutorServiceClient::connect(address).await?;
    for token in [None, Some("wrong-token")] {
        let refused = executor_client
            .beat(with_token(pb::BeatRequest {}, token)?)
            .await
            .expect_err("the executor checks the token");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        let run = pb::RunRequest {
            job_id: 1,
            log_id: 1,
            handler: "ok".to_string(),
            ..Default::default()
        };
        let refused = executor_client
            .run(with_token(run, token)?)
            .await
            .expect_err("runs need the token too");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    }
    executor_client
        .beat(with_token(pb::BeatRequest {}, Some(TOKEN))?)
        .await?;

    // The admin presents the group token: a triggered run goes through and succeeds.
    let job_id = create_job(&cluster, group_id, "ok").await?;
    let log_id = cluster.trigger(job_id, None).await?;
    let finished = cluster.wait_log_final(log_id, WAIT).await?;
    assert_eq!(
        finished.status,
        pb::RunStatus::Success as i32,
        "{finished:?}"
    );
    assert_eq!(finished.trigger_code, 200);
    cluster.shutdown().await;
    Ok(())
}
