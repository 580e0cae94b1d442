//! The executor's gRPC server: `ExecutorService` (Beat, IdleBeat, Run, RunBatch, Kill, ReadLog), thin over
//! the runner and the run logs, behind the bearer-token interceptor. It serves an already bound
//! listener, so the executor is reachable before it registers anywhere.
//!
//! gRPC health (`grpc.health.v1.Health`, no auth, so a Kubernetes probe can call it) answers
//! SERVING for `""` and `xjob.v1.ExecutorService` while the executor runs, NOT_SERVING from the
//! start of a graceful shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::TcpListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tonic::{Request, Response, Status};
use xjob_proto::pb;
use xjob_proto::pb::executor_service_server::{ExecutorService, ExecutorServiceServer};

use crate::auth::ServerAuth;
use crate::joblog::JobLogStore;
use crate::runner::Runner;

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
                }
            }
            Err(refusal) => {
                tracing::info!(job_id, log_id, reason = %refusal, "run refused");
                pb::RunResponse {
                    accepted: false,
                    message: refusal.to_string(),
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
        let pb::KillRequest { job_id, log_id } = request.into_inner();
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
        } = request.into_inner();
        // Asked before reading: a run that is over has written its last line already.
        let run_active = self.runner.is_log_active(log_id);
        let joblog = self.joblog.clone();
        let response = tokio::task::spawn_blocking(move || {
            joblog.read(log_id, log_date_ms, from_line, run_active)
        })
        .await
        .map_err(|error| {
            tracing::error!(log_id, %error, "log read task failed");
            Status::internal("log read failed")
        })?;
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
    reporter
        .set_not_serving::<ExecutorServiceServer<ExecutorServer>>()
        .await;
    reporter
        .set_service_status("", tonic_health::ServingStatus::NotServing)
        .await;
}

/// Serves the executor on an already bound listener until `shutdown` fires.
pub(crate) async fn serve(
    listener: TcpListener,
    server: ExecutorServer,
    auth: ServerAuth,
    health: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health,
    >,
    shutdown: CancellationToken,
) {
    let incoming = TcpListenerStream::new(listener).map(|accepted| {
        accepted.inspect(|stream| {
            // Small unary calls: do not let Nagle's algorithm hold them back.
            let _ = stream.set_nodelay(true);
        })
    });
    let served = Server::builder()
        .add_service(health)
        .add_service(ExecutorServiceServer::with_interceptor(server, auth))
        .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
        .await;
    if let Err(error) = served {
        tracing::error!(%error, "executor server failed");
    }
}
