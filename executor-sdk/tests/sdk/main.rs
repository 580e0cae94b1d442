//! Executor SDK scenarios over real gRPC on 127.0.0.1: the executor is started through the
//! builder and called through the generated `ExecutorServiceClient`; a small in-process admin
//! serves `Registry` (Session + Callback) and reports what it sees as events. Every wait is
//! bounded by a deadline. The built-in `command` handler's scenarios are in `command.rs`.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status, Streaming};
use xjob_executor::{Executor, ExecutorBuilder, JobContext, JobError, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_proto::pb::admin_message::Kind as AdminKind;
use xjob_proto::pb::executor_message::Kind as ExecutorKind;
use xjob_proto::pb::executor_service_client::ExecutorServiceClient;
use xjob_proto::pb::registry_server::{Registry, RegistryServer};

#[cfg(unix)]
mod command;
#[cfg(unix)]
mod glue;

const DEADLINE: Duration = Duration::from_secs(20);

#[derive(Debug)]
enum AdminEvent {
    Registered {
        register: pb::Register,
        authorization: Option<String>,
    },
    Heartbeat(pb::Heartbeat),
    Deregistered,
    SessionEnded {
        deregistered: bool,
    },
    Callback(Vec<pb::RunResult>),
}

/// A minimal admin: answers Register with Registered (50 ms heartbeats), Deregister with
/// Deregistered, accepts every callback, and reports all of it as events.
struct FakeAdmin {
    events_tx: mpsc::UnboundedSender<AdminEvent>,
}

#[tonic::async_trait]
impl Registry for FakeAdmin {
    type SessionStream = ReceiverStream<Result<pb::AdminMessage, Status>>;

    async fn session(
        &self,
        request: Request<Streaming<pb::ExecutorMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let authorization = request
            .metadata()
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let mut inbound = request.into_inner();
        let (outbound_tx, outbound_rx) = mpsc::channel(16);
        let events_tx = self.events_tx.clone();
        tokio::spawn(async move {
            let mut deregistered = false;
            while let Ok(Some(message)) = inbound.message().await {
                match message.kind {
                    Some(ExecutorKind::Register(register)) => {
                        let authorization = authorization.clone();
                        let _ = events_tx.send(AdminEvent::Registered {
                            register,
                            authorization,
                        });
                        let registered = pb::Registered {
                            executor_id: "executor-1".to_owned(),
                            heartbeat_interval_ms: 50,
                            lease_ms: 1000,
                            dispatch_mode: pb::DispatchMode::Dial as i32,
                        };
                        let reply = pb::AdminMessage {
                            kind: Some(AdminKind::Registered(registered)),
                        };
                        let _ = outbound_tx.send(Ok(reply)).await;
                    }
                    Some(ExecutorKind::Heartbeat(heartbeat)) => {
                        let _ = events_tx.send(AdminEvent::Heartbeat(heartbeat));
                    }
                    Some(ExecutorKind::Deregister(_)) => {
                        deregistered = true;
                        let _ = events_tx.send(AdminEvent::Deregistered);
                        let reply = pb::AdminMessage {
                            kind: Some(AdminKind::Deregistered(pb::Deregistered {})),
                        };
                        let _ = outbound_tx.send(Ok(reply)).await;
                        break;
                    }
                    // This fake admin sends no session calls nor clock probes, so no reply or
                    // echo comes.
                    Some(ExecutorKind::Reply(_) | ExecutorKind::ClockEcho(_)) | None => {}
                }
            }
            let _ = events_tx.send(AdminEvent::SessionEnded { deregistered });
        });
        Ok(Response::new(ReceiverStream::new(outbound_rx)))
    }

    async fn callback(
        &self,
        request: Request<pb::CallbackRequest>,
    ) -> Result<Response<pb::CallbackResponse>, Status> {
        let results = request.into_inner().results;
        let accepted_log_ids = results.iter().map(|result| result.log_id).collect();
        let _ = self.events_tx.send(AdminEvent::Callback(results));
        Ok(Response::new(pb::CallbackResponse {
            accepted_log_ids,
            unknown_log_ids: Vec::new(),
        }))
    }
}

struct AdminHandle {
    address: String,
    events_rx: mpsc::UnboundedReceiver<AdminEvent>,
}

impl AdminHandle {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind admin");
        let address = format!("http://{}", listener.local_addr().expect("admin addr"));
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let service = RegistryServer::new(FakeAdmin { events_tx });
        tokio::spawn(
            Server::builder()
                .add_service(service)
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        Self { address, events_rx }
    }

    /// Returns the next event `select` picks, skipping the others.
    async fn wait_for<T>(&mut self, mut select: impl FnMut(AdminEvent) -> Option<T>) -> T {
        let waited = tokio::time::timeout(DEADLINE, async {
            while let Some(event) = self.events_rx.recv().await {
                if let Some(found) = select(event) {
                    return found;
                }
            }
            panic!("admin event channel closed");
        });
        waited.await.expect("admin event before the deadline")
    }

    async fn wait_for_result(&mut self, log_id: i64) -> pb::RunResult {
        self.wait_for(|event| match event {
            AdminEvent::Callback(results) => {
                results.into_iter().find(|result| result.log_id == log_id)
            }
            _ => None,
        })
        .await
    }
}

/// An admin address nobody listens on.
async fn unused_address() -> String {
    xjob_testkit::unused_address().expect("a free port")
}

/// Polls `condition` until it holds; panics naming `what` after the deadline.
async fn wait_until<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let holds = || {
        let check = condition();
        async move { check.await.then_some(()) }
    };
    xjob_testkit::wait_until(DEADLINE, what, holds)
        .await
        .expect("the awaited event");
}

async fn echo(context: JobContext) -> JobResult {
    context.log(format!("echoing {}", context.params()));
    if context.params() == "fail" {
        return Err(JobError::new("asked to fail"));
    }
    Ok(JobOutput::message(context.params()))
}

fn test_executor(
    admin_addrs: Vec<String>,
    log_dir: &Path,
) -> (ExecutorBuilder, mpsc::UnboundedReceiver<i64>) {
    let (started_tx, started_rx) = mpsc::unbounded_channel();
    let builder = Executor::builder()
        .app_name("orders")
        .admin_addrs(admin_addrs)
        .bind("127.0.0.1:0")
        .log_dir(log_dir)
        .label("zone", "a")
        .handler("echo", echo)
        .handler("waitCancel", move |context: JobContext| {
            let started_tx = started_tx.clone();
            async move {
                context.log("waiting for cancellation");
                let _ = started_tx.send(context.log_id());
                context.cancelled().await;
                Ok(JobOutput::message("cancelled"))
            }
        });
    (builder, started_rx)
}

fn run_request(job_id: i64, log_id: i64, handler: &str, params: &str) -> pb::RunRequest {
    pb::RunRequest {
        job_id,
        log_id,
        handler: handler.to_owned(),
        params: params.to_owned(),
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        glue_type: pb::GlueType::Bean as i32,
        log_date_ms: now_ms(),
        shard_total: 1,
        trigger_type: pb::TriggerType::Manual as i32,
        ..Default::default()
    }
}

fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after epoch");
    i64::try_from(since_epoch.as_millis()).expect("millis fit")
}

async fn client(address: &str) -> ExecutorServiceClient<Channel> {
    ExecutorServiceClient::connect(address.to_owned())
        .await
        .expect("connect to executor")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_beat_run_idle_beat_kill_and_read_log_without_an_admin() {
    let log_dir = tempfile::tempdir().expect("tempdir");
    let (builder, mut started_rx) = test_executor(vec![unused_address().await], log_dir.path());
    let executor = builder
        .callback_flush_timeout(Duration::from_millis(200))
        .start()
        .await
        .expect("start");
    assert!(executor.address().starts_with("http://127.0.0.1:"));
    let mut client = client(executor.address()).await;

    client.beat(pb::BeatRequest {}).await.expect("beat");
    let idle = client
        .idle_beat(pb::IdleBeatRequest { job_id: 1 })
        .await
        .expect("idle beat");
    assert!(idle.into_inner().idle);

    let accepted = client
        .run(run_request(1, 11, "waitCancel", ""))
        .await
        .expect("run")
        .into_inner();
    assert!(accepted.accepted, "{accepted:?}");
    let started = tokio::time::timeout(DEADLINE, started_rx.recv())
        .await
        .expect("handler started");
    assert_eq!(started, Some(11));
    let busy = client
        .idle_beat(pb::IdleBeatRequest { job_id: 1 })
        .await
        .expect("idle beat")
        .into_inner();
    assert_eq!(
        (busy.idle, busy.reason.as_str()),
        (false, "job 1 is running or has queued runs")
    );

    let duplicate = client
        .run(run_request(1, 11, "echo", ""))
        .await
        .expect("run")
        .into_inner();
    assert_eq!(
        duplicate.message,
        "duplicate run: log_id 11 already queued or running"
    );
    let unknown = client
        .run(run_request(2, 12, "nope", ""))
        .await
        .expect("run")
        .into_inner();
    assert_eq!(
        (unknown.accepted, unknown.message.as_str()),
        (false, "job handler [nope] not found")
    );

    let log_date_ms = run_request(0, 0, "", "").log_date_ms;
    let read = pb::ReadLogRequest {
        log_id: 11,
        log_date_ms,
        from_line: 1,
        ..Default::default()
    };
    let log = client.read_log(read).await.expect("read log").into_inner();
    assert_eq!(
        (log.from_line, log.to_line, log.is_end),
        (1, 2, false),
        "{log:?}"
    );
    assert!(
        log.content
            .contains("run start: job_id=1 log_id=11 handler=waitCancel")
    );
    assert!(log.content.contains("waiting for cancellation"));

    let killed = client
        .kill(pb::KillRequest {
            job_id: 1,
            log_id: 11,
            held_only: false,
        })
        .await
        .expect("kill")
        .into_inner();
    assert!(killed.killed);
    wait_until("job 1 is idle", || {
        let mut client = client.clone();
        async move {
            let response = client
                .idle_beat(pb::IdleBeatRequest { job_id: 1 })
                .await
                .expect("idle beat");
            response.into_inner().idle
        }
    })
    .await;
    let not_killed = client
        .kill(pb::KillRequest {
            job_id: 1,
            log_id: 11,
            held_only: false,
        })
        .await
        .expect("kill")
        .into_inner();
    assert_eq!(
        (not_killed.killed, not_killed.message.as_str()),
        (false, "job 1 has no running or queued run")
    );

    let rest = pb::ReadLogRequest {
        log_id: 11,
        log_date_ms,
        from_line: 3,
        ..Default::default()
    };
    let rest = client.read_log(rest).await.expect("read log").into_inner();
    assert_eq!(
        (rest.from_line, rest.to_line, rest.is_end),
        (3, 3, true),
        "{rest:?}"
    );
    assert!(
        rest.content
            .contains("run end: status=RUN_STATUS_KILLED code=500 message=killed by admin")
    );

    let missing = pb::ReadLogRequest {
        log_id: 999,
        log_date_ms,
        from_line: 0,
        ..Default::default()
    };
    let missing = client
        .read_log(missing)
        .await
        .expect("read log")
        .into_inner();
    assert!(missing.is_end && missing.content.starts_with("log file not found: "));
    assert_eq!((missing.from_line, missing.to_line), (1, 0));

    executor.shutdown().await;
}

/// A fencing read (`ReadLog` with `fence_node`) of a run this executor never received makes it
/// refuse that run from the fenced admin node at that epoch or earlier, and from a sender that
/// names no node, while the admin that fenced it (or the node at a later epoch) can send it.
/// A run it has already received is not fenced: the read answers with its log as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_run_is_refused_from_the_fenced_admin_only() {
    let log_dir = tempfile::tempdir().expect("tempdir");
    let (builder, mut started_rx) = test_executor(vec![unused_address().await], log_dir.path());
    let executor = builder.start().await.expect("start");
    let mut client = client(executor.address()).await;
    let log_date_ms = now_ms();
    let fencing_read = |log_id: i64| pb::ReadLogRequest {
        log_id,
        log_date_ms,
        from_line: 1,
        fence_node: "admin-a".into(),
        fence_epoch: 3,
    };
    let sent_by = |log_id: i64, node: &str, epoch: i64| pb::RunRequest {
        sender_node: node.into(),
        sender_epoch: epoch,
        log_date_ms,
        ..run_request(log_id, log_id, "waitCancel", "")
    };

    let never_seen = client
        .read_log(fencing_read(21))
        .await
        .expect("read log")
        .into_inner();
    assert!(
        never_seen.fenced && never_seen.is_end && never_seen.to_line == 0,
        "{never_seen:?}"
    );
    for (node, epoch) in [("admin-a", 3), ("admin-a", 2), ("", 0)] {
        let refused = client
            .run(sent_by(21, node, epoch))
            .await
            .expect("run")
            .into_inner();
        assert!(
            !refused.accepted && refused.fenced,
            "{node}/{epoch}: {refused:?}"
        );
        assert_eq!(
            refused.message,
            "fenced run: another admin took log_id 21 over from its sender"
        );
    }
    let taken_over = client
        .run(sent_by(21, "admin-b", 1))
        .await
        .expect("run")
        .into_inner();
    assert!(taken_over.accepted && !taken_over.fenced, "{taken_over:?}");
    let restarted = client
        .run(sent_by(22, "admin-a", 4))
        .await
        .expect("run")
        .into_inner();
    assert!(restarted.accepted, "not fenced: {restarted:?}");
    let mut started = Vec::new();
    for _ in 0..2 {
        let log_id = tokio::time::timeout(DEADLINE, started_rx.recv())
            .await
            .expect("handler started");
        started.extend(log_id);
    }
    started.sort_unstable();
    assert_eq!(started, [21, 22]);

    // Received already: the read answers with its log and fences nothing.
    let received = client
        .read_log(fencing_read(22))
        .await
        .expect("read log")
        .into_inner();
    assert!(!received.fenced, "{received:?}");
    assert!(received.to_line >= 1, "{received:?}");
    for job_id in [21, 22] {
        let kill = pb::KillRequest {
            job_id,
            log_id: job_id,
            held_only: false,
        };
        client.kill(kill).await.expect("kill");
    }
    executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_token_is_required_on_incoming_calls() {
    let log_dir = tempfile::tempdir().expect("tempdir");
    let (builder, _started_rx) = test_executor(vec![unused_address().await], log_dir.path());
    let executor = builder.access_token("secret").start().await.expect("start");
    let mut client = client(executor.address()).await;
    let refused = client.beat(pb::BeatRequest {}).await.expect_err("no token");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let mut request = Request::new(pb::BeatRequest {});
    request
        .metadata_mut()
        .insert("authorization", MetadataValue::from_static("Bearer wrong"));
    assert_eq!(
        client.beat(request).await.expect_err("wrong token").code(),
        tonic::Code::Unauthenticated
    );
    let mut request = Request::new(pb::BeatRequest {});
    request
        .metadata_mut()
        .insert("authorization", MetadataValue::from_static("Bearer secret"));
    client.beat(request).await.expect("right token");
    executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_with_the_next_admin_heartbeats_calls_back_and_deregisters_first() {
    let mut admin = AdminHandle::start().await;
    let log_dir = tempfile::tempdir().expect("tempdir");
    let admins = vec![unused_address().await, admin.address.clone()];
    let (builder, mut started_rx) = test_executor(admins, log_dir.path());
    let executor = builder
        .access_token("secret")
        .shutdown_grace(Duration::from_millis(200))
        .kill_grace(Duration::from_millis(200))
        .start()
        .await
        .expect("start");
    executor
        .wait_registered(DEADLINE)
        .await
        .expect("registered");
    assert_eq!(executor.executor_id().as_deref(), Some("executor-1"));
    let (register, authorization) = admin
        .wait_for(|event| match event {
            AdminEvent::Registered {
                register,
                authorization,
            } => Some((register, authorization)),
            _ => None,
        })
        .await;
    assert_eq!(register.app_name, "orders");
    assert_eq!(register.address, executor.address());
    assert_eq!(
        register.handlers,
        vec!["echo".to_owned(), "waitCancel".to_owned()]
    );
    assert_eq!(register.protocol_version, xjob_proto::PROTOCOL_VERSION);
    assert_eq!(register.labels.get("zone").map(String::as_str), Some("a"));
    assert_eq!(authorization.as_deref(), Some("Bearer secret"));

    let mut client = client(executor.address()).await;
    let mut run = Request::new(run_request(5, 51, "echo", "hello"));
    run.metadata_mut()
        .insert("authorization", MetadataValue::from_static("Bearer secret"));
    assert!(client.run(run).await.expect("run").into_inner().accepted);
    let result = admin.wait_for_result(51).await;
    assert_eq!(
        (result.status, result.code, result.message.as_str()),
        (pb::RunStatus::Success as i32, 200, "hello")
    );

    let mut run = Request::new(run_request(6, 61, "waitCancel", ""));
    run.metadata_mut()
        .insert("authorization", MetadataValue::from_static("Bearer secret"));
    assert!(client.run(run).await.expect("run").into_inner().accepted);
    assert_eq!(
        tokio::time::timeout(DEADLINE, started_rx.recv())
            .await
            .expect("started"),
        Some(61)
    );
    admin
        .wait_for(|event| match event {
            AdminEvent::Heartbeat(heartbeat) => {
                heartbeat.running_log_ids.contains(&61).then_some(())
            }
            _ => None,
        })
        .await;

    // The running handler outlives the grace: Deregister comes first, its KILLED result after.
    let shutdown = tokio::spawn(executor.shutdown());
    admin
        .wait_for(|event| matches!(event, AdminEvent::Deregistered).then_some(()))
        .await;
    let killed = admin.wait_for_result(61).await;
    assert_eq!(
        (killed.status, killed.code, killed.message.as_str()),
        (
            pb::RunStatus::Killed as i32,
            500,
            "executor shut down before the run finished"
        )
    );
    tokio::time::timeout(DEADLINE, shutdown)
        .await
        .expect("shutdown in time")
        .expect("shutdown task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_ends_the_session_without_deregister() {
    let mut admin = AdminHandle::start().await;
    let log_dir = tempfile::tempdir().expect("tempdir");
    let (builder, _started_rx) = test_executor(vec![admin.address.clone()], log_dir.path());
    let executor = builder.start().await.expect("start");
    executor
        .wait_registered(DEADLINE)
        .await
        .expect("registered");
    let address = executor.address().to_owned();
    executor.crash();
    let deregistered = admin
        .wait_for(|event| match event {
            AdminEvent::SessionEnded { deregistered } => Some(deregistered),
            _ => None,
        })
        .await;
    assert!(!deregistered, "a crash sends no Deregister");
    wait_until("the executor stops answering", || {
        let address = address.clone();
        async move {
            match ExecutorServiceClient::connect(address).await {
                Ok(mut client) => client.beat(pb::BeatRequest {}).await.is_err(),
                Err(_) => true,
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsent_results_are_spooled_at_shutdown_and_resent_by_the_next_start() {
    let log_dir = tempfile::tempdir().expect("tempdir");
    let spool_dir = log_dir.path().join("callbacklogs");
    let (builder, _started_rx) = test_executor(vec![unused_address().await], log_dir.path());
    let executor = builder
        .callback_flush_timeout(Duration::from_millis(300))
        .start()
        .await
        .expect("start");
    let mut client = client(executor.address()).await;
    assert!(
        client
            .run(run_request(7, 71, "echo", "fail"))
            .await
            .expect("run")
            .into_inner()
            .accepted
    );
    wait_until("run 71 is over", || {
        let mut client = client.clone();
        async move {
            let read = pb::ReadLogRequest {
                log_id: 71,
                log_date_ms: now_ms(),
                from_line: 1,
                ..Default::default()
            };
            client
                .read_log(read)
                .await
                .expect("read log")
                .into_inner()
                .is_end
        }
    })
    .await;
    executor.shutdown().await;
    // Shutdown waits for the callback task only up to a bound, so the spool file is awaited.
    let spool_files = || {
        std::fs::read_dir(&spool_dir)
            .map(|entries| entries.count())
            .unwrap_or(0)
    };
    wait_until("the undelivered result is spooled", || async {
        spool_files() > 0
    })
    .await;
    assert_eq!(spool_files(), 1, "one spool file");

    let mut admin = AdminHandle::start().await;
    let (builder, _started_rx) = test_executor(vec![admin.address.clone()], log_dir.path());
    let executor = builder.start().await.expect("restart");
    let result = admin.wait_for_result(71).await;
    assert_eq!(
        (result.status, result.code, result.message.as_str()),
        (pb::RunStatus::Failed as i32, 500, "asked to fail")
    );
    wait_until("the spool file is deleted", || {
        let spool_dir = spool_dir.clone();
        async move {
            std::fs::read_dir(&spool_dir)
                .map(|entries| entries.count() == 0)
                .unwrap_or(false)
        }
    })
    .await;
    executor.shutdown().await;
}
