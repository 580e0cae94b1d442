//! Limits that protect the admin from its own executors and from slow peers (docs/security.md,
//! "Limits"), each hit while a normal client keeps working: result batches larger than the admin
//! takes, and a call held up past the request deadline. The limits hostile clients hit (request
//! size, sessions, handlers, message rate, streams, silent connections) are replayed in the
//! adversarial suite.

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

/// An open session: the stream carries the admin's answers.
struct Session {
    /// Held, never sent on: dropping it would end the session.
    _outbound: mpsc::Sender<pb::ExecutorMessage>,
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
        _outbound: outbound,
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
            ..Default::default()
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
