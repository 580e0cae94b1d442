//! The `Registry` gRPC service: executor sessions and result callbacks.
//!
//! Both calls are checked against the access token of the group concerned (DESIGN §3.4), sent
//! as `authorization: Bearer <token>`; a group without a token accepts any caller:
//! - `Session`: the token of the group of the registering app (checked in `registry::stream`);
//! - `Callback`: every result's run must belong to a group whose token was presented. One
//!   mismatch refuses the whole batch with `UNAUTHENTICATED` before anything is persisted, so
//!   an executor of one app cannot finish the runs of another.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use xjob_proto::pb;

use super::convert::reported_result;
use crate::context::AdminContext;
use crate::error::Error;
use crate::registry::stream::tokens_match;

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
        let config = &self.ctx.config;
        let permit = self.ctx.sessions.session_counts.acquire(
            request.remote_addr().map(|address| address.ip()),
            config.max_sessions,
            config.max_sessions_per_peer,
        )?;
        let inbound = request.into_inner();
        let (outbound_tx, outbound_rx) = mpsc::channel(8);
        let sessions = Arc::clone(&self.ctx.sessions);
        let cancel = self.cancel.child_token();
        self.ctx
            .tracker
            .spawn(crate::registry::stream::serve_session(
                sessions,
                inbound,
                outbound_tx,
                token,
                cancel,
                permit,
            ));
        Ok(Response::new(ReceiverStream::new(outbound_rx)))
    }

    async fn callback(
        &self,
        request: Request<pb::CallbackRequest>,
    ) -> Result<Response<pb::CallbackResponse>, Status> {
        let presented = bearer_token(&request);
        let results = request.into_inner().results;
        let log_ids: Vec<i64> = results.iter().map(|result| result.log_id).collect();
        check_callback_token(&self.ctx, &log_ids, presented.as_deref()).await?;
        let results: Vec<_> = results.iter().map(reported_result).collect();
        let now_ms = self.ctx.clock.now_ms();
        let applied = crate::callback::apply_results(&self.ctx.store, now_ms, &results).await?;
        Ok(Response::new(pb::CallbackResponse {
            accepted_log_ids: applied.accepted.into_iter().map(|id| id.0).collect(),
            unknown_log_ids: applied.unknown.into_iter().map(|id| id.0).collect(),
        }))
    }
}

/// Refuses a callback when a run it reports belongs to a group whose token was not presented.
async fn check_callback_token(
    ctx: &AdminContext,
    log_ids: &[i64],
    presented: Option<&str>,
) -> Result<(), Status> {
    if log_ids.is_empty() {
        return Ok(());
    }
    let expected = ctx
        .store
        .log_group_tokens(log_ids)
        .await
        .map_err(Error::from)?;
    for (log_id, token) in expected {
        if !presented.is_some_and(|presented| tokens_match(presented, &token)) {
            tracing::warn!(log_id, "callback refused: wrong or missing access token");
            return Err(Status::unauthenticated(format!(
                "wrong or missing access token for the group of log {log_id}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_and_compared_exactly() {
        let mut request = Request::new(());
        assert_eq!(bearer_token(&request), None);
        let header = tonic::metadata::MetadataValue::from_static("Bearer s3cret");
        request.metadata_mut().insert("authorization", header);
        assert_eq!(bearer_token(&request).as_deref(), Some("s3cret"));
        // The comparison itself: `registry::stream::tokens_match` (constant time, tested there).
        assert!(tokens_match("s3cret", "s3cret"));
        assert!(!tokens_match("s3cre", "s3cret"));
        assert!(!tokens_match("s3creT", "s3cret"));
    }
}
