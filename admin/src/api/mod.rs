//! The admin's gRPC surface: `JobAdmin`, `Registry`, gRPC health, and server reflection (v1 and
//! v1alpha, so both current grpcurl and older clients can list services). Services are thin:
//! protobuf → domain (`convert.rs`), call, domain → protobuf.
//!
//! Health (`grpc.health.v1.Health`) follows the database: while it fails, the overall status
//! (`""`) and `xjob.v1.JobAdmin` are NOT_SERVING (a load balancer or orchestrator sends API
//! calls elsewhere; the admin itself stays up and resumes on its own), and SERVING again once it
//! answers. `xjob.v1.Registry` stays SERVING: open executor sessions keep working on their
//! in-memory state. Health and reflection carry no auth, so they stay reachable.

pub mod convert;
pub mod glue;
pub mod job_admin;
pub mod registry;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use xjob_proto::pb;

use crate::config::TlsClientAuth;
use crate::context::AdminContext;
use crate::registry::refresh::DatabaseHealth;

type JobAdminServer = pb::job_admin_server::JobAdminServer<job_admin::JobAdminService>;

/// Builds every service the admin serves on its one port; the health reporter goes to
/// [`run_health`].
pub async fn routes(
    ctx: Arc<AdminContext>,
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
    let job_admin = pb::job_admin_server::JobAdminServer::new(job_admin::JobAdminService::new(
        Arc::clone(&ctx),
    ))
    .max_decoding_message_size(max_request_bytes);
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

/// Mirrors the database's health into the gRPC health service until cancelled.
pub async fn run_health(
    reporter: HealthReporter,
    mut database: DatabaseHealth,
    cancel: CancellationToken,
) {
    loop {
        let database_ok = *database.borrow_and_update();
        let status = serving_status(database_ok);
        reporter.set_service_status("", status).await;
        reporter
            .set_service_status(
                <JobAdminServer as tonic::server::NamedService>::NAME,
                status,
            )
            .await;
        tracing::info!(?status, "health updated");
        tokio::select! {
            _ = cancel.cancelled() => break,
            changed = database.changed() => if changed.is_err() { break },
        }
    }
}

fn serving_status(database_ok: bool) -> ServingStatus {
    if database_ok {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}
