//! Floods an attacker can send at the admin's port, each cut off with a status naming the limit
//! while a normal client keeps working: sessions from one peer, handlers in one registration,
//! messages on one session, streams on one HTTP/2 connection, and connections that never speak
//! or never make a call.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Endpoint;
use xjob_proto::pb;
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::TestCluster;

use crate::attacker::{
    WAIT, channel, heartbeat, next_answer, normal_client_works, open_session, register, registered,
};

const APP: &str = "flood-app";

#[tokio::test]
async fn sessions_per_peer_handlers_and_message_rate_are_bounded() -> anyhow::Result<()> {
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.max_sessions_per_peer = 2;
            config.max_handlers_per_registration = 3;
            config.session_message_rate = 5;
        })
        .start()
        .await?;
    cluster.create_group(APP).await?;
    let channel = channel(&cluster)?;

    // Two sessions from this address register; the third is refused before it opens.
    let mut first = open_session(channel.clone(), register(APP, "http://127.0.0.1:9001", 1))
        .await?
        .map_err(anyhow::Error::from)?;
    registered(&mut first).await?;
    let mut second = open_session(channel.clone(), register(APP, "http://127.0.0.1:9002", 1))
        .await?
        .map_err(anyhow::Error::from)?;
    registered(&mut second).await?;
    let third = open_session(channel.clone(), register(APP, "http://127.0.0.1:9003", 1)).await?;
    let refused = third
        .err()
        .ok_or_else(|| anyhow::anyhow!("third session opened"))?;
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("max_sessions_per_peer"),
        "{refused:?}"
    );
    normal_client_works(&cluster).await?;

    // Closing one gives its place back: a registration with too many handlers takes it and
    // is refused for that.
    drop(second);
    let mut crowded = xjob_testkit::wait_until(WAIT, "a session place to free up", || {
        let channel = channel.clone();
        async move {
            open_session(channel, register(APP, "http://127.0.0.1:9004", 4))
                .await
                .ok()?
                .ok()
        }
    })
    .await?;
    let refused = next_answer(&mut crowded).await?.expect_err("4 handlers");
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(refused.message().contains("max_handlers_per_registration"));
    drop(crowded);

    // A session flooding heartbeats is closed; the first session is untouched.
    let mut flood = xjob_testkit::wait_until(WAIT, "a session place to free up", || {
        let channel = channel.clone();
        async move {
            open_session(channel, register(APP, "http://127.0.0.1:9005", 1))
                .await
                .ok()?
                .ok()
        }
    })
    .await?;
    registered(&mut flood).await?;
    for _ in 0..50 {
        if flood.outbound.send(heartbeat()).await.is_err() {
            break;
        }
    }
    let refused = loop {
        match next_answer(&mut flood).await? {
            Ok(_) => continue,
            Err(status) => break status,
        }
    };
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(refused.message().contains("session_message_rate"));
    // The first session still serves: a heartbeat keeps it listed (one: the rate is 5/s).
    first.outbound.send(heartbeat()).await?;
    let client = cluster.client();
    xjob_testkit::wait_until(WAIT, "the first session to stay listed", || {
        let mut client = client.clone();
        async move {
            let executors = client
                .list_executors(pb::ListExecutorsRequest {
                    app_name: APP.to_string(),
                })
                .await
                .ok()?
                .into_inner()
                .executors;
            executors
                .iter()
                .any(|executor| executor.address == "http://127.0.0.1:9001")
                .then_some(())
        }
    })
    .await?;
    normal_client_works(&cluster).await?;
    drop(first);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn http2_streams_per_connection_are_capped() -> anyhow::Result<()> {
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.max_concurrent_streams = 2;
            // The held streams below are sessions waiting for Register: keep them waiting.
            config.handshake_timeout = Duration::from_secs(30);
        })
        .start()
        .await?;
    let crowded = Endpoint::from_shared(cluster.admin_url())?
        .connect()
        .await?;
    // Two streams that stay open (sessions that never send Register) fill the connection.
    let mut held = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = mpsc::channel::<pb::ExecutorMessage>(1);
        let response = RegistryClient::new(crowded.clone())
            .session(ReceiverStream::new(rx))
            .await?;
        held.push((tx, response));
    }
    // A third stream on the same connection is not opened: the client waits for a free one.
    let waited = tokio::time::timeout(
        Duration::from_secs(1),
        xjob_proto::pb::job_admin_client::JobAdminClient::new(crowded.clone())
            .list_groups(pb::ListGroupsRequest::default()),
    )
    .await;
    assert!(waited.is_err(), "a third stream was served: {waited:?}");
    // Other connections are not affected.
    normal_client_works(&cluster).await?;
    // Ending one held stream lets the waiting kind of call through.
    held.pop();
    tokio::time::timeout(
        WAIT,
        xjob_proto::pb::job_admin_client::JobAdminClient::new(crowded)
            .list_groups(pb::ListGroupsRequest::default()),
    )
    .await??;
    drop(held);
    cluster.shutdown().await;
    Ok(())
}

/// Reads from a raw connection until the admin closes it; returns how long that took.
async fn closed_after(mut stream: tokio::net::TcpStream) -> anyhow::Result<Duration> {
    use tokio::io::AsyncReadExt;
    let started = std::time::Instant::now();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout(WAIT, stream.read(&mut buffer)).await? {
            Ok(0) | Err(_) => return Ok(started.elapsed()),
            Ok(_) => continue,
        }
    }
}

#[tokio::test]
async fn silent_and_idle_connections_are_closed() -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.connection_handshake_timeout = Duration::from_millis(500);
            config.max_connection_age = Duration::from_secs(1);
        })
        .start()
        .await?;
    let address = cluster
        .admin_url()
        .trim_start_matches("http://")
        .to_string();

    // A connection that never sends a byte is closed after the handshake deadline.
    let silent = tokio::net::TcpStream::connect(&address).await?;
    let took = closed_after(silent).await?;
    assert!(
        took < Duration::from_secs(3),
        "silent connection open for {took:?}"
    );

    // An HTTP/2 connection with no calls is closed at its age (GOAWAY), well before the
    // keepalive (2 s + 5 s) would have to find it: the client answers SETTINGS and PINGs as a
    // live but idle client does.
    let mut idle = tokio::net::TcpStream::connect(&address).await?;
    idle.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await?;
    idle.write_all(&frame(4, 0, &[])).await?;
    let took = tokio::time::timeout(WAIT, idle_http2_client(idle)).await??;
    assert!(
        took < Duration::from_secs(4),
        "idle connection open for {took:?}"
    );
    normal_client_works(&cluster).await?;
    cluster.shutdown().await;
    Ok(())
}

/// One HTTP/2 frame on stream 0.
fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let length = payload.len();
    let mut bytes = vec![
        (length >> 16) as u8,
        (length >> 8) as u8,
        length as u8,
        kind,
        flags,
    ];
    bytes.extend_from_slice(&[0, 0, 0, 0]);
    bytes.extend_from_slice(payload);
    bytes
}

/// Acknowledges SETTINGS and PINGs and opens no stream, until the server closes the
/// connection; returns how long that took.
async fn idle_http2_client(mut stream: tokio::net::TcpStream) -> anyhow::Result<Duration> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const SETTINGS: u8 = 4;
    const PING: u8 = 6;
    const ACK: u8 = 1;
    let started = std::time::Instant::now();
    loop {
        let mut header = [0u8; 9];
        if stream.read_exact(&mut header).await.is_err() {
            return Ok(started.elapsed());
        }
        let length =
            (usize::from(header[0]) << 16) | (usize::from(header[1]) << 8) | usize::from(header[2]);
        let mut payload = vec![0u8; length];
        if stream.read_exact(&mut payload).await.is_err() {
            return Ok(started.elapsed());
        }
        let (kind, flags) = (header[3], header[4]);
        let reply = match kind {
            SETTINGS if flags & ACK == 0 => Some(frame(SETTINGS, ACK, &[])),
            PING if flags & ACK == 0 => Some(frame(PING, ACK, &payload)),
            _ => None,
        };
        if let Some(reply) = reply
            && stream.write_all(&reply).await.is_err()
        {
            return Ok(started.elapsed());
        }
    }
}
