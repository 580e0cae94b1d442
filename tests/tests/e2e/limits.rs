//! Resource limits (docs/security.md, "Limits"), each hit by a careless or hostile client while a
//! normal client keeps working: request size, sessions per peer, handlers per registration,
//! session message rate, and HTTP/2 streams per connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use tonic::{Status, Streaming};
use xjob_executor::{JobContext, JobError, JobOutput};
use xjob_proto::pb;
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::{HandlerFuture, TestCluster, wait_until};

const APP: &str = "limits-app";
const WAIT: Duration = Duration::from_secs(10);

fn register(address: &str, handlers: usize) -> pb::ExecutorMessage {
    pb::ExecutorMessage {
        kind: Some(pb::executor_message::Kind::Register(pb::Register {
            app_name: APP.to_string(),
            address: address.to_string(),
            handlers: (0..handlers)
                .map(|index| format!("handler-{index}"))
                .collect(),
            protocol_version: xjob_proto::PROTOCOL_VERSION,
            ..Default::default()
        })),
    }
}

fn heartbeat() -> pb::ExecutorMessage {
    pb::ExecutorMessage {
        kind: Some(pb::executor_message::Kind::Heartbeat(
            pb::Heartbeat::default(),
        )),
    }
}

/// An open session: the sender keeps it alive, the stream carries the admin's answers.
struct Session {
    outbound: mpsc::Sender<pb::ExecutorMessage>,
    inbound: Streaming<pb::AdminMessage>,
}

/// Opens a session on `channel` and sends Register; `Err` when the call itself is refused.
async fn open_session(
    channel: Channel,
    address: &str,
    handlers: usize,
) -> anyhow::Result<Result<Session, Status>> {
    let (outbound, rx) = mpsc::channel(64);
    outbound.send(register(address, handlers)).await?;
    let opened = RegistryClient::new(channel)
        .session(ReceiverStream::new(rx))
        .await;
    Ok(opened.map(|response| Session {
        outbound,
        inbound: response.into_inner(),
    }))
}

/// The session's next answer within the wait: `Ok(message)` or the status it ended with.
async fn next_answer(session: &mut Session) -> anyhow::Result<Result<pb::AdminMessage, Status>> {
    match tokio::time::timeout(WAIT, session.inbound.message()).await? {
        Ok(Some(message)) => Ok(Ok(message)),
        Ok(None) => anyhow::bail!("session ended without a status"),
        Err(status) => Ok(Err(status)),
    }
}

async fn registered(session: &mut Session) -> anyhow::Result<()> {
    match next_answer(session).await? {
        Ok(pb::AdminMessage {
            kind: Some(pb::admin_message::Kind::Registered(_)),
        }) => Ok(()),
        other => anyhow::bail!("expected Registered, got {other:?}"),
    }
}

fn channel(cluster: &TestCluster) -> anyhow::Result<Channel> {
    Ok(Endpoint::from_shared(cluster.admin_url())?
        .timeout(WAIT)
        .connect_lazy())
}

/// The concurrent normal client: an API call answers at once.
async fn normal_client_works(cluster: &TestCluster) -> anyhow::Result<()> {
    tokio::time::timeout(
        Duration::from_secs(3),
        cluster
            .client()
            .list_groups(pb::ListGroupsRequest::default()),
    )
    .await??;
    Ok(())
}

#[tokio::test]
async fn oversized_request_is_refused_with_out_of_range_and_pages_are_capped() -> anyhow::Result<()>
{
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.max_request_bytes = 16 * 1024;
            config.max_page_size = 2;
        })
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    for extra in ["limits-app-2", "limits-app-3"] {
        cluster.create_group(extra).await?;
    }
    let page = cluster
        .client()
        .list_groups(pb::ListGroupsRequest {
            page_size: 1000,
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(page.groups.len(), 2, "page capped at max_page_size");
    assert!(
        !page.next_page_token.is_empty(),
        "the rest is on the next page"
    );
    let mut job = TestCluster::job(group_id, "h", pb::ScheduleType::None, "");
    job.glue_source = "x".repeat(32 * 1024);
    let refused = cluster
        .client()
        .create_job(pb::CreateJobRequest { job: Some(job) })
        .await
        .expect_err("oversized request");
    assert_eq!(refused.code(), tonic::Code::OutOfRange, "{refused:?}");
    normal_client_works(&cluster).await?;
    cluster.shutdown().await;
    Ok(())
}

/// Counts its runs as they start, holds them until `gate` lets them go, then succeeds with a
/// message of as many characters as its params say.
fn sized_result_handler(
    started: Arc<AtomicUsize>,
    gate: Arc<Semaphore>,
) -> impl Fn(JobContext) -> HandlerFuture + Send + Sync + 'static {
    move |ctx: JobContext| {
        let (started, gate) = (Arc::clone(&started), Arc::clone(&gate));
        Box::pin(async move {
            started.fetch_add(1, Ordering::SeqCst);
            let _permit = gate.acquire().await.map_err(|_| JobError::new("closed"))?;
            let chars = ctx.params().parse::<usize>().unwrap_or(0);
            Ok(JobOutput::message("m".repeat(chars)))
        })
    }
}

/// An admin that takes smaller requests than the executor's result batches still gets every
/// result: the executor splits a batch the admin refuses as too large (OUT_OF_RANGE), and cuts
/// the message of a single result too large on its own, instead of retrying them for ever.
#[tokio::test]
async fn results_larger_than_the_admin_takes_are_split_and_cut_not_retried_for_ever()
-> anyhow::Result<()> {
    const LIMIT: usize = 16 * 1024;
    let mut cluster = TestCluster::builder()
        .configure(|config| config.max_request_bytes = LIMIT)
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let started = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let executor = cluster.executor(APP).handler(
        "sized",
        sized_result_handler(Arc::clone(&started), Arc::clone(&gate)),
    );
    cluster.start_executor(executor).await?;
    // Twelve results of 3 000 characters, finishing together: one batch of about 36 kB.
    // And one of 40 000 characters: over the limit even alone.
    let mut sizes = vec![3_000; 12];
    sizes.push(40_000);
    let mut log_ids = Vec::new();
    for chars in &sizes {
        let mut job = TestCluster::job(group_id, "sized", pb::ScheduleType::None, "");
        job.params = chars.to_string();
        let job = cluster.create_job(job).await?;
        log_ids.push(cluster.trigger(job.id, None).await?);
    }
    let total = sizes.len();
    wait_until(WAIT, "every run started", || {
        let started = started.load(Ordering::SeqCst);
        async move { (started == total).then_some(()) }
    })
    .await?;
    gate.add_permits(sizes.len());
    for (log_id, chars) in log_ids.iter().zip(&sizes) {
        let log = cluster.wait_log_final(*log_id, WAIT).await?;
        assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
        if *chars < LIMIT {
            assert_eq!(log.handle_msg.len(), *chars, "a small result arrives whole");
        } else {
            assert!(
                log.handle_msg.len() < LIMIT && log.handle_msg.ends_with("..."),
                "the oversized message is cut, and says so: {} bytes",
                log.handle_msg.len()
            );
        }
    }
    normal_client_works(&cluster).await?;
    cluster.shutdown().await;
    Ok(())
}

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
    let mut first = open_session(channel.clone(), "http://127.0.0.1:9001", 1)
        .await?
        .map_err(anyhow::Error::from)?;
    registered(&mut first).await?;
    let mut second = open_session(channel.clone(), "http://127.0.0.1:9002", 1)
        .await?
        .map_err(anyhow::Error::from)?;
    registered(&mut second).await?;
    let third = open_session(channel.clone(), "http://127.0.0.1:9003", 1).await?;
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
            open_session(channel, "http://127.0.0.1:9004", 4)
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
            open_session(channel, "http://127.0.0.1:9005", 1)
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

/// An executor whose `ReadLog` takes far longer than any deadline: a slow peer behind an API
/// call.
struct SlowLogExecutor;

#[tonic::async_trait]
impl pb::executor_service_server::ExecutorService for SlowLogExecutor {
    async fn beat(
        &self,
        _request: tonic::Request<pb::BeatRequest>,
    ) -> Result<tonic::Response<pb::BeatResponse>, Status> {
        Ok(tonic::Response::new(pb::BeatResponse {}))
    }

    async fn idle_beat(
        &self,
        _request: tonic::Request<pb::IdleBeatRequest>,
    ) -> Result<tonic::Response<pb::IdleBeatResponse>, Status> {
        Ok(tonic::Response::new(pb::IdleBeatResponse {
            idle: true,
            reason: String::new(),
        }))
    }

    async fn run(
        &self,
        _request: tonic::Request<pb::RunRequest>,
    ) -> Result<tonic::Response<pb::RunResponse>, Status> {
        Ok(tonic::Response::new(pb::RunResponse {
            accepted: true,
            message: String::new(),
        }))
    }

    async fn run_batch(
        &self,
        _request: tonic::Request<pb::RunBatchRequest>,
    ) -> Result<tonic::Response<pb::RunBatchResponse>, Status> {
        Err(Status::unimplemented("RunBatch is not implemented"))
    }

    async fn kill(
        &self,
        _request: tonic::Request<pb::KillRequest>,
    ) -> Result<tonic::Response<pb::KillResponse>, Status> {
        Ok(tonic::Response::new(pb::KillResponse::default()))
    }

    async fn read_log(
        &self,
        _request: tonic::Request<pb::ReadLogRequest>,
    ) -> Result<tonic::Response<pb::ReadLogResponse>, Status> {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(tonic::Response::new(pb::ReadLogResponse::default()))
    }
}

#[tokio::test]
async fn a_call_past_the_request_timeout_is_cancelled() -> anyhow::Result<()> {
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.request_timeout = Duration::from_secs(1);
            // The admin's own deadline on the executor call is longer: only the server's
            // request deadline can end the API call at 1 s.
            config.executor_timeout = Duration::from_secs(6);
        })
        .start()
        .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let fake_url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(pb::executor_service_server::ExecutorServiceServer::new(
                SlowLogExecutor,
            ))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                async {
                    let _ = stopped.await;
                },
            ),
    );
    let group_id = cluster.create_group(APP).await?;
    let mut session = open_session(channel(&cluster)?, &fake_url, 1)
        .await?
        .map_err(anyhow::Error::from)?;
    registered(&mut session).await?;
    let job = TestCluster::job(group_id, "handler-0", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let log_id = cluster.trigger(job_id, None).await?;
    xjob_testkit::wait_until(WAIT, "the run to reach the fake executor", || async {
        let log = cluster.get_log(log_id).await.ok()?;
        (!log.executor_address.is_empty()).then_some(())
    })
    .await?;

    let started = std::time::Instant::now();
    let refused = cluster
        .client()
        .read_run_log(pb::ReadRunLogRequest {
            log_id,
            from_line: 1,
        })
        .await
        .expect_err("ReadRunLog behind a slow executor");
    let took = started.elapsed();
    assert_eq!(refused.code(), tonic::Code::Cancelled, "{refused:?}");
    assert!(took < Duration::from_secs(4), "answered after {took:?}");
    normal_client_works(&cluster).await?;
    drop(session);
    let _ = stop.send(());
    let _ = server.await;
    cluster.shutdown().await;
    Ok(())
}
