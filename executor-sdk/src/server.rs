//! The executor's gRPC server: `ExecutorService` (Beat, IdleBeat, Run, RunBatch, Kill, ReadLog), thin over
//! the runner and the run logs, behind the bearer-token interceptor. It serves an already bound
//! listener, so the executor is reachable before it registers anywhere.
//!
//! gRPC health (`grpc.health.v1.Health`, no auth, so a Kubernetes probe can call it) answers
//! SERVING for `""` and `xjob.v1.ExecutorService` while the executor runs; NOT_SERVING while the
//! admin refuses its registration (a wrong token: the admin will send it no runs, so it must not
//! look ready) and from the start of a graceful shutdown. An admin that is merely unreachable
//! leaves it SERVING: an admin outage is no reason to take the app next to it out of service.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Server;
use tonic::{Request, Response, Status};
use xjob_proto::pb;
use xjob_proto::pb::executor_service_server::{ExecutorService, ExecutorServiceServer};

use crate::auth::ServerAuth;
use crate::joblog::JobLogStore;
use crate::runner::Runner;
use crate::session_state::SessionState;

/// The `ExecutorService` implementation.
#[derive(Clone)]
pub(crate) struct ExecutorServer {
    runner: Runner,
    joblog: JobLogStore,
    /// Set by `crash`: calls still in flight on open connections answer UNAVAILABLE.
    crashed: Arc<AtomicBool>,
}

impl ExecutorServer {
    pub(crate) fn new(runner: Runner, joblog: JobLogStore, crashed: Arc<AtomicBool>) -> Self {
        Self {
            runner,
            joblog,
            crashed,
        }
    }

    /// Enqueues one run (or says why not); `Run` and `RunBatch` answer with this.
    fn submit(&self, run: pb::RunRequest) -> pb::RunResponse {
        let (job_id, log_id) = (run.job_id, run.log_id);
        match self.runner.submit(run) {
            Ok(()) => {
                tracing::debug!(job_id, log_id, "run accepted");
                pb::RunResponse {
                    accepted: true,
                    message: String::new(),
                    fenced: false,
                }
            }
            Err(refusal) => {
                tracing::info!(job_id, log_id, reason = %refusal, "run refused");
                pb::RunResponse {
                    accepted: false,
                    message: refusal.to_string(),
                    fenced: matches!(refusal, crate::runner::Refusal::Fenced { .. }),
                }
            }
        }
    }

    fn check_alive(&self) -> Result<(), Status> {
        if self.crashed.load(Ordering::SeqCst) {
            return Err(Status::unavailable("executor stopped"));
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl ExecutorService for ExecutorServer {
    async fn beat(
        &self,
        _request: Request<pb::BeatRequest>,
    ) -> Result<Response<pb::BeatResponse>, Status> {
        self.check_alive()?;
        Ok(Response::new(pb::BeatResponse {}))
    }

    async fn idle_beat(
        &self,
        request: Request<pb::IdleBeatRequest>,
    ) -> Result<Response<pb::IdleBeatResponse>, Status> {
        self.check_alive()?;
        let job_id = request.into_inner().job_id;
        let response = if self.runner.is_job_busy(job_id) {
            pb::IdleBeatResponse {
                idle: false,
                reason: format!("job {job_id} is running or has queued runs"),
            }
        } else {
            pb::IdleBeatResponse {
                idle: true,
                reason: String::new(),
            }
        };
        Ok(Response::new(response))
    }

    async fn run(
        &self,
        request: Request<pb::RunRequest>,
    ) -> Result<Response<pb::RunResponse>, Status> {
        self.check_alive()?;
        Ok(Response::new(self.submit(request.into_inner())))
    }

    async fn run_batch(
        &self,
        request: Request<pb::RunBatchRequest>,
    ) -> Result<Response<pb::RunBatchResponse>, Status> {
        self.check_alive()?;
        let runs = request.into_inner().runs;
        let results = runs.into_iter().map(|run| self.submit(run)).collect();
        Ok(Response::new(pb::RunBatchResponse { results }))
    }

    async fn kill(
        &self,
        request: Request<pb::KillRequest>,
    ) -> Result<Response<pb::KillResponse>, Status> {
        self.check_alive()?;
        let pb::KillRequest {
            job_id,
            log_id,
            held_only,
        } = request.into_inner();
        if held_only {
            let killed = self.runner.cancel_held(job_id, log_id);
            if killed {
                tracing::info!(job_id, log_id, "held run cancelled by admin");
            }
            let message = if killed {
                String::new()
            } else {
                format!("log {log_id} is not held here")
            };
            return Ok(Response::new(pb::KillResponse { killed, message }));
        }
        let response = if self.runner.kill_job(job_id) {
            tracing::info!(job_id, log_id, "job killed by admin");
            pb::KillResponse {
                killed: true,
                message: String::new(),
            }
        } else {
            pb::KillResponse {
                killed: false,
                message: format!("job {job_id} has no running or queued run"),
            }
        };
        Ok(Response::new(response))
    }

    async fn read_log(
        &self,
        request: Request<pb::ReadLogRequest>,
    ) -> Result<Response<pb::ReadLogResponse>, Status> {
        self.check_alive()?;
        let pb::ReadLogRequest {
            log_id,
            log_date_ms,
            from_line,
            fence_node,
            fence_epoch,
        } = request.into_inner();
        // Fenced before the log is read: a run that arrives after the fence is refused, one
        // that arrived before shows in the read.
        let fenced = !fence_node.is_empty() && self.runner.fence(log_id, &fence_node, fence_epoch);
        // Asked before reading: a run that is over has written its last line already.
        let run_active = self.runner.is_log_active(log_id);
        let joblog = self.joblog.clone();
        let mut response = tokio::task::spawn_blocking(move || {
            joblog.read(log_id, log_date_ms, from_line, run_active)
        })
        .await
        .map_err(|error| {
            tracing::error!(log_id, %error, "log read task failed");
            Status::internal("log read failed")
        })?;
        if fenced {
            tracing::info!(
                log_id,
                fence_node,
                fence_epoch,
                "fenced a run another admin takes over from its sender"
            );
        }
        response.fenced = fenced;
        Ok(Response::new(response))
    }
}

/// The health service and its reporter, SERVING from the start.
pub(crate) async fn health() -> (
    tonic_health::server::HealthReporter,
    tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
) {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<ExecutorServiceServer<ExecutorServer>>()
        .await;
    (reporter, service)
}

/// Marks the executor NOT_SERVING (graceful shutdown began).
pub(crate) async fn report_stopping(reporter: &tonic_health::server::HealthReporter) {
    set_status(reporter, tonic_health::ServingStatus::NotServing).await;
}

/// Keeps the health status in step with the admin session until the session watch closes:
/// NOT_SERVING while the admin refuses the registration, SERVING otherwise. Shutdown aborts
/// this task before it reports NOT_SERVING for good.
pub(crate) async fn follow_session(
    reporter: tonic_health::server::HealthReporter,
    mut session_rx: watch::Receiver<SessionState>,
) {
    loop {
        let refused = matches!(
            *session_rx.borrow_and_update(),
            SessionState::Refused { .. }
        );
        let status = if refused {
            tonic_health::ServingStatus::NotServing
        } else {
            tonic_health::ServingStatus::Serving
        };
        set_status(&reporter, status).await;
        if session_rx.changed().await.is_err() {
            return;
        }
    }
}

/// Sets the status of both names a probe may ask for: `""` and `xjob.v1.ExecutorService`.
async fn set_status(
    reporter: &tonic_health::server::HealthReporter,
    status: tonic_health::ServingStatus,
) {
    match status {
        tonic_health::ServingStatus::Serving => {
            reporter
                .set_serving::<ExecutorServiceServer<ExecutorServer>>()
                .await;
        }
        _ => {
            reporter
                .set_not_serving::<ExecutorServiceServer<ExecutorServer>>()
                .await;
        }
    }
    reporter.set_service_status("", status).await;
}

/// Serves the executor on an already bound listener until `shutdown` fires, over TLS when
/// `tls_opt` is set. TCP keepalive and a first-bytes deadline close dead and silent connections;
/// HTTP/2 keepalive closes connections to a frozen peer.
pub(crate) async fn serve(
    listener: TcpListener,
    tls_opt: Option<Arc<xjob_tls::ServerTls>>,
    server: ExecutorServer,
    auth: ServerAuth,
    health: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health,
    >,
    shutdown: CancellationToken,
) {
    let options = xjob_tls::ListenOptions::default();
    let router = Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .timeout(REQUEST_TIMEOUT)
        .max_connection_age(MAX_CONNECTION_AGE)
        .add_service(health)
        .add_service(InterceptedService::new(
            ExecutorServiceServer::new(server).max_decoding_message_size(MAX_REQUEST_BYTES),
            auth,
        ));
    let served = match tls_opt {
        Some(tls) => {
            let incoming = xjob_tls::tls_incoming(listener, tls, options);
            router
                .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
                .await
        }
        None => {
            let incoming = xjob_tls::plain_incoming(listener, options);
            router
                .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
                .await
        }
    };
    if let Err(error) = served {
        tracing::error!(%error, "executor server failed");
    }
}

/// Server limits: the admin's calls are small and few at a time; these bound what anyone else
/// can make the executor hold.
const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);
const KEEPALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
const MAX_CONCURRENT_STREAMS: u32 = 256;
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
const MAX_CONNECTION_AGE: std::time::Duration = std::time::Duration::from_secs(600);
/// A `RunBatch` of many runs with large params stays far below this.
const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;
