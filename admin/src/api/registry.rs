//! The `Registry` gRPC service: executor sessions and result callbacks.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use xjob_proto::pb;

use crate::context::AdminContext;

/// Serves `xjob.v1.Registry`.
pub struct RegistryService {
    ctx: Arc<AdminContext>,
    cancel: CancellationToken,
}

impl RegistryService {
    pub fn new(ctx: Arc<AdminContext>, cancel: CancellationToken) -> RegistryService {
        RegistryService { ctx, cancel }
    }
}

/// The token of an `authorization: Bearer <token>` header, if present.
pub fn bearer_token<T>(request: &Request<T>) -> Option<String> {
    request
        .metadata()
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_string)
}

#[tonic::async_trait]
impl pb::registry_server::Registry for RegistryService {
    type SessionStream = ReceiverStream<Result<pb::AdminMessage, Status>>;

    async fn session(
        &self,
        request: Request<Streaming<pb::ExecutorMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let token = bearer_token(&request);
        let inbound = request.into_inner();
        let (outbound_tx, outbound_rx) = mpsc::channel(8);
        let ctx = Arc::clone(&self.ctx);
        let cancel = self.cancel.child_token();
        tokio::spawn(crate::registry::stream::serve_session(
            ctx,
            inbound,
            outbound_tx,
            token,
            cancel,
        ));
        Ok(Response::new(ReceiverStream::new(outbound_rx)))
    }

    async fn callback(
        &self,
        request: Request<pb::CallbackRequest>,
    ) -> Result<Response<pb::CallbackResponse>, Status> {
        let results = request.into_inner().results;
        let accepted_log_ids = crate::callback::apply_results(&self.ctx, results).await?;
        Ok(Response::new(pb::CallbackResponse { accepted_log_ids }))
    }
}
