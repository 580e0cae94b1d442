//! The admin's gRPC surface: `JobAdmin`, `Registry`, gRPC health, and server reflection (v1 and
//! v1alpha, so both current grpcurl and older clients can list services). Services are thin:
//! protobuf → domain (`convert.rs`), call, domain → protobuf.
//!
//! Health (`grpc.health.v1.Health`) follows the database and the schedule's progress: while the
//! database fails, or a loop on the fire path (scan, claim, recorder) has failed for a few
//! seconds (`crate::health`; e.g. a full disk, where reads still work), the overall status
//! (`""`) and `xjob.v1.JobAdmin` are NOT_SERVING (a load balancer or orchestrator sends API
//! calls elsewhere; the admin itself stays up and resumes on its own), and SERVING again once it
//! answers. `xjob.v1.Registry` stays SERVING: open executor sessions keep working on their
//! in-memory state. Health and reflection carry no auth, so they stay reachable.

pub mod calendar_convert;
pub mod convert;
pub mod glue;
pub mod job_admin;
pub mod policy_convert;
pub mod registry;
pub mod workflow_convert;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use xjob_proto::pb;

use crate::config::TlsClientAuth;
use crate::context::AdminContext;
use crate::health::Health;
use crate::registry::refresh::DatabaseHealth;

type JobAdminServer = pb::job_admin_server::JobAdminServer<job_admin::JobAdminService>;

/// Builds every service the admin serves on its one port; the health reporter goes to
/// [`run_health`].
pub async fn routes(
    ctx: Arc<AdminContext>,
    job_admin: Arc<job_admin::JobAdminService>,
    cancel: CancellationToken,
) -> Result<(Routes, HealthReporter), tonic_reflection::server::Error> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter.set_serving::<JobAdminServer>().await;
    health_reporter
        .set_serving::<pb::registry_server::RegistryServer<registry::RegistryService>>()
        .await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(xjob_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(xjob_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let max_request_bytes = ctx.config.max_request_bytes;
    let executors_need_certs = ctx.config.tls_client_auth != TlsClientAuth::None;
    // The same service instance the web console calls (one set of job-edit locks, one token cache).
    let job_admin = ApiFirst(
        pb::job_admin_server::JobAdminServer::from_arc(job_admin)
            .max_decoding_message_size(max_request_bytes),
    );
    let registry =
        pb::registry_server::RegistryServer::new(registry::RegistryService::new(ctx, cancel))
            .max_decoding_message_size(max_request_bytes);
    // With mTLS for executors, only a caller whose certificate the TLS layer verified against
    // `tls_ca` may open a session or report results.
    let registry = tonic::service::interceptor::InterceptedService::new(
        registry,
        move |request: tonic::Request<()>| {
            if executors_need_certs && !xjob_tls::peer_has_verified_cert(&request) {
                return Err(tonic::Status::unauthenticated(
                    "a client certificate signed by the admin's tls_ca is required for Registry calls",
                ));
            }
            Ok(request)
        },
    );
    let mut builder = Routes::builder();
    builder
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(job_admin)
        .add_service(registry);
    Ok((builder.routes(), health_reporter))
}

/// A JobAdmin call goes ahead of the admin's background work on the database: its reads and
/// writes (`store::writer_gate::api_call`). A user waits for it; the loops can wait.
#[derive(Clone)]
struct ApiFirst<S>(S);

impl<S, Request> tower_service::Service<Request> for ApiFirst<S>
where
    S: tower_service::Service<Request>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        Box::pin(crate::store::writer_gate::api_call(self.0.call(request)))
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for ApiFirst<S> {
    const NAME: &'static str = S::NAME;
}

/// How often the loops' progress is re-judged for gRPC health (a stall shows within this of
/// [`crate::health::STALL_MS`]).
const HEALTH_PERIOD: std::time::Duration = std::time::Duration::from_millis(500);

/// Mirrors the database's health and the schedule loops' progress into the gRPC health service
/// until cancelled; logs each change of status once, with its reason.
pub async fn run_health(
    reporter: HealthReporter,
    mut database: DatabaseHealth,
    loops: Arc<Health>,
    cancel: CancellationToken,
) {
    let mut reported: Option<ServingStatus> = None;
    loop {
        let database_ok = *database.borrow_and_update();
        let verdict = loops.verdict();
        let status = serving_status(database_ok && verdict.serving);
        if reported != Some(status) {
            reporter.set_service_status("", status).await;
            reporter
                .set_service_status(
                    <JobAdminServer as tonic::server::NamedService>::NAME,
                    status,
                )
                .await;
            let reason = if !database_ok {
                "the database does not answer".to_string()
            } else {
                verdict.reason
            };
            // The names grpc_health_probe and grpcurl print, not Rust's.
            if status == ServingStatus::Serving {
                tracing::info!(status = "SERVING", %reason, "health updated");
            } else {
                tracing::warn!(status = "NOT_SERVING", %reason, "health updated");
            }
            reported = Some(status);
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            changed = database.changed() => if changed.is_err() { break },
            _ = tokio::time::sleep(HEALTH_PERIOD) => {}
        }
    }
}

fn serving_status(ok: bool) -> ServingStatus {
    if ok {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}
