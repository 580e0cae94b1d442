//! Lost runs: an executor that dies mid-run (a real process killed with SIGKILL) turns its run
//! LOST and the retry runs elsewhere; a "maybe delivered" run (the Run call timed out after
//! sending) is resolved by the executor's heartbeats and callback, never re-sent.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use xjob_executor::{JobContext, JobOutput, JobResult};
use xjob_proto::pb;
use xjob_proto::pb::executor_service_server::{ExecutorService, ExecutorServiceServer};
use xjob_proto::pb::registry_client::RegistryClient;
use xjob_tests::{TestCluster, wait_until};

const APP: &str = "lost-app";

async fn online_addresses(cluster: &TestCluster, app_name: &str) -> Vec<String> {
    let request = pb::ListExecutorsRequest {
        app_name: app_name.to_string(),
    };
    match cluster.client().list_executors(request).await {
        Ok(response) => response
            .into_inner()
            .executors
            .into_iter()
            .map(|executor| executor.address)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Starts the `test-executor` process for `APP` against the cluster's admin.
fn spawn_test_executor(cluster: &TestCluster) -> anyhow::Result<tokio::process::Child> {
    let log_dir = cluster.data_dir().join("test-executor-logs");
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_test-executor"))
        .args([&cluster.admin_url(), APP, "127.0.0.1:0"])
        .arg(&log_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    Ok(child)
}

#[tokio::test]
async fn the_test_executor_process_finishes_its_run_and_deregisters_on_sigterm()
-> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group(APP).await?;
    let mut process = spawn_test_executor(&cluster)?;
    wait_until(
        Duration::from_secs(10),
        "the process to register",
        || async { (!online_addresses(&cluster, APP).await.is_empty()).then_some(()) },
    )
    .await?;
    let job = cluster
        .create_job(pb::Job {
            params: "300".into(),
            ..TestCluster::job(group_id, "sleep", pb::ScheduleType::None, "")
        })
        .await?;
    let log_id = cluster.trigger(job.id, None).await?;
    let pid = process
        .id()
        .ok_or_else(|| anyhow::anyhow!("the process has no pid"))?;
    xjob_testkit::signal(pid, xjob_testkit::Signal::SIGTERM)?;
    let exit = tokio::time::timeout(Duration::from_secs(10), process.wait()).await??;
    assert!(exit.success(), "a graceful exit: {exit:?}");
    // The running handler was allowed to finish and its result was delivered before exit.
    let log = cluster
        .wait_log_final(log_id, Duration::from_secs(1))
        .await?;
    assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
    wait_until(Duration::from_secs(1), "the executor to leave", || async {
        online_addresses(&cluster, APP)
            .await
            .is_empty()
            .then_some(())
    })
    .await?;
    cluster.shutdown().await;
    Ok(())
}

/// The in-process stand-in for the crashed executor: same handler name, returns at once.
async fn quick_sleep(ctx: JobContext) -> JobResult {
    Ok(JobOutput::message(format!(
        "did not sleep {} ms",
        ctx.params()
    )))
}

#[tokio::test]
async fn an_executor_killed_with_sigkill_mid_run_turns_its_run_lost_and_the_retry_runs_on_another()
-> anyhow::Result<()> {
    let mut cluster = TestCluster::builder()
        .configure(|config| {
            config.heartbeat_interval = Duration::from_millis(200);
            config.executor_lease = Duration::from_millis(1_500);
            config.followup_interval = Duration::from_millis(50);
        })
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let mut process = spawn_test_executor(&cluster)?;
    let process_address = wait_until(
        Duration::from_secs(10),
        "the process to register",
        || async { online_addresses(&cluster, APP).await.into_iter().next() },
    )
    .await?;

    let job = cluster
        .create_job(pb::Job {
            params: "60000".into(),
            fail_retry_count: 1,
            ..TestCluster::job(group_id, "sleep", pb::ScheduleType::None, "")
        })
        .await?;
    let log_id = cluster.trigger(job.id, None).await?;
    // The handler is running once its first log line is readable through the admin.
    wait_until(
        Duration::from_secs(5),
        "the handler to start sleeping",
        || async {
            let request = pb::ReadRunLogRequest {
                log_id,
                from_line: 1,
            };
            let chunk = cluster
                .client()
                .read_run_log(request)
                .await
                .ok()?
                .into_inner();
            chunk.content.contains("sleeping 60000 ms").then_some(())
        },
    )
    .await?;
    let standby = cluster.executor(APP).handler("sleep", quick_sleep);
    let standby_address = cluster.start_executor(standby).await?;
    assert_ne!(standby_address, process_address);

    process.start_kill()?;
    let exit = tokio::time::timeout(Duration::from_secs(5), process.wait()).await??;
    assert!(!exit.success(), "killed, not exited: {exit:?}");

    let lost = cluster
        .wait_log_final(log_id, Duration::from_secs(10))
        .await?;
    assert_eq!(lost.status, pb::RunStatus::Lost as i32, "{lost:?}");
    assert_eq!(lost.handle_code, 500);
    assert_eq!(lost.executor_address, process_address);
    assert!(
        lost.handle_msg.contains(&process_address),
        "the reason names the executor: {}",
        lost.handle_msg
    );
    let retry = wait_until(Duration::from_secs(10), "the retry to succeed", || async {
        let logs = cluster.logs(job.id).await.ok()?;
        logs.into_iter()
            .find(|log| log.attempt == 1 && log.status == pb::RunStatus::Success as i32)
    })
    .await?;
    assert_eq!(retry.trigger_type, pb::TriggerType::Retry as i32);
    assert_eq!(retry.executor_address, standby_address);
    assert_eq!(retry.params, "60000");
    assert_eq!(cluster.logs(job.id).await?.len(), 2);
    cluster.shutdown().await;
    Ok(())
}

/// Params of the runs the counting handler was called with, one entry per call.
type Calls = Arc<Mutex<Vec<String>>>;

/// Heartbeats that arrive late are no evidence of a lost run. The executor reaches the admin
/// through a proxy that delivers everything it sends 1.5 s late, three heartbeat intervals:
/// when a run is dispatched, the heartbeats the admin receives for the next 1.5 s were sent
/// before the run got there and do not list it, a full interval and more apart. Every run must
/// still end SUCCESS, none LOST, and none run twice (a LOST run would be retried).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_delayed_past_the_interval_lose_no_run_and_run_none_twice() -> anyhow::Result<()>
{
    let mut cluster = TestCluster::builder()
        .configure(|config| {
            config.heartbeat_interval = Duration::from_millis(500);
            config.executor_lease = Duration::from_secs(5);
            config.followup_interval = Duration::from_millis(50);
        })
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let admin_addr: std::net::SocketAddr =
        cluster.admin_url().trim_start_matches("http://").parse()?;
    let late = xjob_testkit::LatencyProxy::start(admin_addr, Duration::from_millis(1_500)).await?;
    let calls: Calls = Arc::default();
    let recorded = Arc::clone(&calls);
    let executor =
        cluster
            .executor(APP)
            .admin_addrs([late.url()])
            .handler("count", move |ctx: JobContext| {
                let recorded = Arc::clone(&recorded);
                async move {
                    if let Ok(mut calls) = recorded.lock() {
                        calls.push(ctx.params().to_string());
                    }
                    // Long enough to span a heartbeat or two, so runs are listed while they run.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Ok(JobOutput::message("counted"))
                }
            });
    cluster.start_executor(executor).await?;
    let job = cluster
        .create_job(pb::Job {
            fail_retry_count: 1,
            ..TestCluster::job(group_id, "count", pb::ScheduleType::None, "")
        })
        .await?;

    // The executor sees its registration answered at once, while the admin got it 1.5 s after
    // it was sent; so do the heartbeats: runs dispatched now would be listed by the very first
    // heartbeats to arrive. Once heartbeats have been arriving for a second, there are always
    // some on the way that were sent before any dispatch.
    wait_until(
        Duration::from_secs(10),
        "heartbeats to arrive for a second",
        || async {
            let request = pb::ListExecutorsRequest {
                app_name: APP.to_string(),
            };
            let executors = cluster.client().list_executors(request).await.ok()?;
            executors
                .into_inner()
                .executors
                .iter()
                .any(|executor| executor.last_heartbeat_ms - executor.registered_ms >= 1_500)
                .then_some(())
        },
    )
    .await?;
    const RUNS: usize = 6;
    let mut log_ids = Vec::with_capacity(RUNS);
    for run in 0..RUNS {
        log_ids.push(cluster.trigger(job.id, Some(&format!("run-{run}"))).await?);
    }
    for log_id in &log_ids {
        let log = cluster
            .wait_log_final(*log_id, Duration::from_secs(20))
            .await?;
        assert_eq!(log.status, pb::RunStatus::Success as i32, "{log:?}");
    }
    let logs = cluster.logs(job.id).await?;
    assert_eq!(logs.len(), RUNS, "no retry was made: {logs:?}");
    let mut called = calls.lock().map(|calls| calls.clone()).unwrap_or_default();
    called.sort();
    let expected: Vec<String> = (0..RUNS).map(|run| format!("run-{run}")).collect();
    assert_eq!(called, expected, "each run's handler ran exactly once");
    cluster.shutdown().await;
    Ok(())
}

/// Log ids and attempts of the Run calls a `FakeExecutor` received.
type Received = Arc<Mutex<Vec<(i64, i32)>>>;

/// An executor that never answers a first attempt's Run (the admin's call times out after
/// sending: "maybe delivered") and accepts retries, reporting them successful at once.
struct FakeExecutor {
    received: Received,
    callbacks_tx: mpsc::UnboundedSender<i64>,
}

#[tonic::async_trait]
impl ExecutorService for FakeExecutor {
    async fn beat(
        &self,
        _request: tonic::Request<pb::BeatRequest>,
    ) -> Result<tonic::Response<pb::BeatResponse>, tonic::Status> {
        Ok(tonic::Response::new(pb::BeatResponse {}))
    }

    async fn idle_beat(
        &self,
        _request: tonic::Request<pb::IdleBeatRequest>,
    ) -> Result<tonic::Response<pb::IdleBeatResponse>, tonic::Status> {
        Ok(tonic::Response::new(pb::IdleBeatResponse {
            idle: true,
            reason: String::new(),
        }))
    }

    async fn run(
        &self,
        request: tonic::Request<pb::RunRequest>,
    ) -> Result<tonic::Response<pb::RunResponse>, tonic::Status> {
        let run = request.into_inner();
        if let Ok(mut received) = self.received.lock() {
            received.push((run.log_id, run.attempt));
        }
        if run.attempt == 0 {
            // Longer than the admin's deadline: it gives up after sending.
            tokio::time::sleep(Duration::from_secs(30)).await;
        } else {
            let _ = self.callbacks_tx.send(run.log_id);
        }
        Ok(tonic::Response::new(pb::RunResponse {
            accepted: true,
            message: String::new(),
            ..Default::default()
        }))
    }

    /// Like an executor written before batching existed: the admin falls back to `Run`.
    async fn run_batch(
        &self,
        _request: tonic::Request<pb::RunBatchRequest>,
    ) -> Result<tonic::Response<pb::RunBatchResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("RunBatch is not implemented"))
    }

    async fn kill(
        &self,
        _request: tonic::Request<pb::KillRequest>,
    ) -> Result<tonic::Response<pb::KillResponse>, tonic::Status> {
        Ok(tonic::Response::new(pb::KillResponse {
            killed: false,
            message: "fake executor".into(),
        }))
    }

    async fn read_log(
        &self,
        request: tonic::Request<pb::ReadLogRequest>,
    ) -> Result<tonic::Response<pb::ReadLogResponse>, tonic::Status> {
        let from_line = request.into_inner().from_line;
        Ok(tonic::Response::new(pb::ReadLogResponse {
            from_line,
            to_line: from_line - 1,
            content: String::new(),
            is_end: true,
            fenced: false,
        }))
    }
}

/// A fake executor's server and session, with the log ids its heartbeats list.
struct FakeSession {
    address: String,
    received: Received,
    listed: Arc<Mutex<Vec<i64>>>,
    /// Heartbeats sent, per log id listed: how many listed it.
    listing_heartbeats: Arc<Mutex<HashMap<i64, usize>>>,
    stop_server: Option<oneshot::Sender<()>>,
    session_tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl FakeSession {
    async fn start(admin_url: &str) -> anyhow::Result<FakeSession> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = format!("http://{}", listener.local_addr()?);
        let received: Received = Arc::default();
        let (callbacks_tx, callbacks_rx) = mpsc::unbounded_channel();
        let service = FakeExecutor {
            received: Arc::clone(&received),
            callbacks_tx,
        };
        let (stop_server, stopped) = oneshot::channel::<()>();
        let server = tonic::transport::Server::builder()
            .add_service(ExecutorServiceServer::new(service))
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                let _ = stopped.await;
            });
        let mut session_tasks = vec![tokio::spawn(async move {
            let _ = server.await;
        })];

        let mut registry = RegistryClient::connect(admin_url.to_string()).await?;
        let (outbound_tx, outbound_rx) = mpsc::channel(16);
        outbound_tx
            .send(executor_message(pb::executor_message::Kind::Register(
                pb::Register {
                    app_name: FAKE_APP.to_string(),
                    address: address.clone(),
                    handlers: vec!["fake".to_string()],
                    protocol_version: xjob_proto::PROTOCOL_VERSION,
                    ..Default::default()
                },
            )))
            .await?;
        let mut inbound = registry
            .session(ReceiverStream::new(outbound_rx))
            .await?
            .into_inner();
        let interval_ms = match inbound.message().await?.and_then(|message| message.kind) {
            Some(pb::admin_message::Kind::Registered(registered)) => {
                registered.heartbeat_interval_ms
            }
            other => anyhow::bail!("expected Registered, got {other:?}"),
        };
        let listed: Arc<Mutex<Vec<i64>>> = Arc::default();
        let listing_heartbeats: Arc<Mutex<HashMap<i64, usize>>> = Arc::default();
        session_tasks.push(tokio::spawn(send_heartbeats(
            outbound_tx,
            Duration::from_millis(interval_ms.max(10) as u64),
            Arc::clone(&listed),
            Arc::clone(&listing_heartbeats),
        )));
        session_tasks.push(tokio::spawn(report_successes(registry, callbacks_rx)));
        Ok(FakeSession {
            address,
            received,
            listed,
            listing_heartbeats,
            stop_server: Some(stop_server),
            session_tasks,
        })
    }

    fn runs_received(&self, log_id: i64) -> usize {
        self.received
            .lock()
            .map(|received| received.iter().filter(|(id, _)| *id == log_id).count())
            .unwrap_or(0)
    }

    fn list(&self, log_id: i64) {
        if let Ok(mut listed) = self.listed.lock() {
            listed.push(log_id);
        }
    }

    fn heartbeats_listing(&self, log_id: i64) -> usize {
        self.listing_heartbeats
            .lock()
            .map(|counts| counts.get(&log_id).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    fn stop(mut self) {
        if let Some(stop_server) = self.stop_server.take() {
            let _ = stop_server.send(());
        }
        for task in self.session_tasks.drain(..) {
            task.abort();
        }
    }
}

const FAKE_APP: &str = "fake-app";

fn executor_message(kind: pb::executor_message::Kind) -> pb::ExecutorMessage {
    pb::ExecutorMessage { kind: Some(kind) }
}

async fn send_heartbeats(
    outbound_tx: mpsc::Sender<pb::ExecutorMessage>,
    interval: Duration,
    listed: Arc<Mutex<Vec<i64>>>,
    listing_heartbeats: Arc<Mutex<HashMap<i64, usize>>>,
) {
    let mut ticker = tokio::time::interval(interval);
    loop {
        ticker.tick().await;
        let running = listed.lock().map(|ids| ids.clone()).unwrap_or_default();
        let heartbeat = pb::Heartbeat {
            running_log_ids: running.clone(),
            queued: 0,
        };
        let message = executor_message(pb::executor_message::Kind::Heartbeat(heartbeat));
        if outbound_tx.send(message).await.is_err() {
            return;
        }
        if let Ok(mut counts) = listing_heartbeats.lock() {
            for log_id in running {
                *counts.entry(log_id).or_default() += 1;
            }
        }
    }
}

/// Reports each accepted retry successful, as a real executor's callback would.
async fn report_successes(
    mut registry: RegistryClient<tonic::transport::Channel>,
    mut callbacks_rx: mpsc::UnboundedReceiver<i64>,
) {
    while let Some(log_id) = callbacks_rx.recv().await {
        let result = pb::RunResult {
            log_id,
            status: pb::RunStatus::Success as i32,
            code: 200,
            message: "fake success".into(),
            finished_at_ms: xjob_admin::model::now_ms(),
            ..Default::default()
        };
        let request = pb::CallbackRequest {
            results: vec![result],
        };
        let _ = registry.callback(request).await;
    }
}

#[tokio::test]
async fn a_maybe_delivered_run_is_resolved_not_resent() -> anyhow::Result<()> {
    let cluster = TestCluster::builder()
        .configure(|config| {
            config.heartbeat_interval = Duration::from_millis(200);
            config.executor_lease = Duration::from_secs(2);
            config.executor_timeout = Duration::from_millis(300);
            config.followup_interval = Duration::from_millis(50);
        })
        .start()
        .await?;
    let group_id = cluster.create_group(FAKE_APP).await?;
    let fake = FakeSession::start(&cluster.admin_url()).await?;
    let job = cluster
        .create_job(pb::Job {
            fail_retry_count: 1,
            ..TestCluster::job(group_id, "fake", pb::ScheduleType::None, "")
        })
        .await?;

    // 1. The executor lists the run in its heartbeats: it is running, whatever the dispatch
    //    said; the executor's callback resolves it.
    let listed_run = cluster.trigger(job.id, None).await?;
    let log = cluster.get_log(listed_run).await?;
    assert_eq!(log.status, pb::RunStatus::Running as i32);
    assert_eq!(
        log.trigger_code, 0,
        "dispatch outcome unknown: {}",
        log.trigger_msg
    );
    assert_eq!(log.executor_address, fake.address);
    fake.list(listed_run);
    // Eight heartbeats (1.6 s) cover the dispatch deadline and several lost-run checks.
    wait_until(
        Duration::from_secs(10),
        "8 heartbeats listing the run",
        || async { (fake.heartbeats_listing(listed_run) >= 8).then_some(()) },
    )
    .await?;
    let log = cluster.get_log(listed_run).await?;
    assert_eq!(
        log.status,
        pb::RunStatus::Running as i32,
        "a listed run is not lost"
    );
    let mut registry = RegistryClient::connect(cluster.admin_url()).await?;
    let result = pb::RunResult {
        log_id: listed_run,
        status: pb::RunStatus::Success as i32,
        code: 200,
        message: "finished after all".into(),
        finished_at_ms: xjob_admin::model::now_ms(),
        ..Default::default()
    };
    registry
        .callback(pb::CallbackRequest {
            results: vec![result],
        })
        .await?;
    let resolved = cluster
        .wait_log_final(listed_run, Duration::from_secs(5))
        .await?;
    assert_eq!(resolved.status, pb::RunStatus::Success as i32);
    assert_eq!(fake.runs_received(listed_run), 1, "never re-sent");

    // 2. The executor does not list it: LOST once the deadline and a heartbeat interval have
    //    passed, then retried as a new attempt with its own log id.
    let unlisted_run = cluster.trigger(job.id, None).await?;
    let lost = cluster
        .wait_log_final(unlisted_run, Duration::from_secs(10))
        .await?;
    assert_eq!(lost.status, pb::RunStatus::Lost as i32, "{lost:?}");
    assert!(
        lost.handle_msg.contains("no longer lists"),
        "{}",
        lost.handle_msg
    );
    let retry = wait_until(Duration::from_secs(10), "the retry to succeed", || async {
        let logs = cluster.logs(job.id).await.ok()?;
        logs.into_iter()
            .find(|log| log.attempt == 1 && log.status == pb::RunStatus::Success as i32)
    })
    .await?;
    assert_ne!(retry.id, unlisted_run);
    assert_eq!(
        fake.runs_received(unlisted_run),
        1,
        "the lost run was never re-sent"
    );
    assert_eq!(fake.runs_received(retry.id), 1);
    assert_eq!(cluster.logs(job.id).await?.len(), 3);

    fake.stop();
    cluster.shutdown().await;
    Ok(())
}
