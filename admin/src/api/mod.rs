//! The admin's gRPC surface: `JobAdmin`, `Registry`, gRPC health, and server reflection (v1 and
//! v1alpha, so both current grpcurl and older clients can list services). Services are thin:
//! protobuf → domain (`convert.rs`), call, domain → protobuf.

pub mod convert;
pub mod jobs;
pub mod registry;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use xjob_proto::pb;

use crate::context::AdminContext;

/// Builds every service the admin serves on its one port.
pub async fn routes(
    ctx: Arc<AdminContext>,
    cancel: CancellationToken,
) -> Result<Routes, tonic_reflection::server::Error> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<pb::job_admin_server::JobAdminServer<jobs::JobAdminService>>()
        .await;
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
    let job_admin =
        pb::job_admin_server::JobAdminServer::new(jobs::JobAdminService::new(Arc::clone(&ctx)));
    let registry =
        pb::registry_server::RegistryServer::new(registry::RegistryService::new(ctx, cancel));
    let mut builder = Routes::builder();
    builder
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(job_admin)
        .add_service(registry);
    Ok(builder.routes())
}
