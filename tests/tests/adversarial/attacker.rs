//! What an attacker's client does by hand, shared by several attack modules: calls made with
//! (or without) a bearer token, a group with an access token to attack, and raw
//! `Registry.Session` streams driven message by message instead of through the SDK.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status, Streaming};
use xjob_proto::pb;
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::TestCluster;

pub const WAIT: Duration = Duration::from_secs(10);

/// Wraps a message with `authorization: Bearer <token>` when a token is given.
pub fn with_token<T>(message: T, token: Option<&str>) -> anyhow::Result<Request<T>> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        let value = MetadataValue::try_from(format!("Bearer {token}"))?;
        request.metadata_mut().insert("authorization", value);
    }
    Ok(request)
}

/// Creates an AUTO group for `app_name` with `token` as its access token ("" for none).
pub async fn group_with_token(
    cluster: &TestCluster,
    app_name: &str,
    token: &str,
) -> anyhow::Result<i64> {
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

/// A `Register` for `app_name` at `address` with `handlers` handler names.
pub fn register(app_name: &str, address: &str, handlers: usize) -> pb::ExecutorMessage {
    pb::ExecutorMessage {
        kind: Some(pb::executor_message::Kind::Register(pb::Register {
            app_name: app_name.to_string(),
            address: address.to_string(),
            handlers: (0..handlers)
                .map(|index| format!("handler-{index}"))
                .collect(),
            protocol_version: xjob_proto::PROTOCOL_VERSION,
            ..Default::default()
        })),
    }
}

pub fn heartbeat() -> pb::ExecutorMessage {
    pb::ExecutorMessage {
        kind: Some(pb::executor_message::Kind::Heartbeat(
            pb::Heartbeat::default(),
        )),
    }
}

/// An open session: the sender keeps it alive, the stream carries the admin's answers.
pub struct Session {
    pub outbound: mpsc::Sender<pb::ExecutorMessage>,
    pub inbound: Streaming<pb::AdminMessage>,
}

/// Opens a session on `channel` and sends `first`; `Err` when the call itself is refused.
pub async fn open_session(
    channel: Channel,
    first: pb::ExecutorMessage,
) -> anyhow::Result<Result<Session, Status>> {
    let (outbound, rx) = mpsc::channel(64);
    outbound.send(first).await?;
    let opened = RegistryClient::new(channel)
        .session(ReceiverStream::new(rx))
        .await;
    Ok(opened.map(|response| Session {
        outbound,
        inbound: response.into_inner(),
    }))
}

/// The session's next answer within the wait: `Ok(message)` or the status it ended with.
pub async fn next_answer(
    session: &mut Session,
) -> anyhow::Result<Result<pb::AdminMessage, Status>> {
    match tokio::time::timeout(WAIT, session.inbound.message()).await? {
        Ok(Some(message)) => Ok(Ok(message)),
        Ok(None) => anyhow::bail!("session ended without a status"),
        Err(status) => Ok(Err(status)),
    }
}

/// Waits for the admin's `Registered` answer.
pub async fn registered(session: &mut Session) -> anyhow::Result<()> {
    match next_answer(session).await? {
        Ok(pb::AdminMessage {
            kind: Some(pb::admin_message::Kind::Registered(_)),
        }) => Ok(()),
        other => anyhow::bail!("expected Registered, got {other:?}"),
    }
}

/// A lazily connected channel to the admin, every call bounded.
pub fn channel(cluster: &TestCluster) -> anyhow::Result<Channel> {
    Ok(Endpoint::from_shared(cluster.admin_url())?
        .timeout(WAIT)
        .connect_lazy())
}

/// The concurrent normal client: an API call answers at once.
pub async fn normal_client_works(cluster: &TestCluster) -> anyhow::Result<()> {
    tokio::time::timeout(
        Duration::from_secs(3),
        cluster
            .client()
            .list_groups(pb::ListGroupsRequest::default()),
    )
    .await??;
    Ok(())
}
