//! The `Registry` gRPC service: executor sessions and result callbacks.
//!
//! Both calls are checked against the access token of the group concerned (DESIGN §3.4), sent
//! as `authorization: Bearer <token>`; a group without a token accepts any caller:
//! - `Session`: the token of the group of the registering app (checked in `registry::stream`);
//! - `Callback`: every result's run must belong to a group whose token was presented. One
//!   mismatch refuses the whole batch with `UNAUTHENTICATED` before anything is persisted, so
//!   an executor of one app cannot finish the runs of another. A result is also left
//!   unaccepted when its run was never dispatched, or was dispatched to a live session of this
//!   admin opened from another peer IP (see `check_callback`); malformed results are
//!   `INVALID_ARGUMENT`.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use xjob_proto::pb;

use super::convert::reported_result;
use crate::context::AdminContext;
use crate::error::Error;
use crate::model::{LogId, RunStatus};
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
        let caller = crate::registry::stream::SessionCaller {
            token: bearer_token(&request),
            peer_ip: request
                .remote_addr()
                .map(|address| address.ip().to_canonical()),
            cert: xjob_tls::peer_leaf_cert(&request),
        };
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
        self.ctx.tasks.spawn(crate::registry::stream::serve_session(
            sessions,
            inbound,
            outbound_tx,
            caller,
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
        let caller = CallbackCaller {
            presented: presented.as_deref(),
            peer_ip: request
                .remote_addr()
                .map(|address| address.ip().to_canonical()),
            tokenless_allowed: self.ctx.config.tokenless_executors_allowed(),
            cert: Some(xjob_tls::peer_leaf_cert(&request)),
        };
        let results = request.get_ref().results.as_slice();
        check_results(results)?;
        let log_ids: Vec<LogId> = results.iter().map(|result| LogId(result.log_id)).collect();
        let refused = check_callback(&self.ctx, &log_ids, &caller).await?;
        let results: Vec<_> = results
            .iter()
            .filter(|result| !refused.contains(&LogId(result.log_id)))
            .map(reported_result)
            .collect();
        let now_ms = self.ctx.clock.now_ms();
        let applied =
            crate::callback::apply_results(&self.ctx.store, &self.ctx.trigger, now_ms, &results)
                .await?;
        Ok(Response::new(pb::CallbackResponse {
            accepted_log_ids: applied.accepted.into_iter().map(|id| id.0).collect(),
            unknown_log_ids: applied.unknown.into_iter().map(|id| id.0).collect(),
        }))
    }
}

/// Refuses a malformed batch (`INVALID_ARGUMENT`, naming the result): a status (if given) must
/// be final, and a result without status must carry a handle code. (A log id that names no run
/// is not malformed: it is acknowledged as unknown, so the executor forgets it.)
fn check_results(results: &[pb::RunResult]) -> Result<(), Status> {
    for (index, result) in results.iter().enumerate() {
        let status = pb::RunStatus::try_from(result.status).ok();
        let final_or_unset = matches!(
            status,
            Some(
                pb::RunStatus::Unspecified
                    | pb::RunStatus::Success
                    | pb::RunStatus::Failed
                    | pb::RunStatus::Timeout
                    | pb::RunStatus::Killed
            )
        );
        if !final_or_unset {
            return Err(Status::invalid_argument(format!(
                "results[{index}].status: {} is not a final status (SUCCESS, FAILED, TIMEOUT, \
                 KILLED)",
                result.status
            )));
        }
        if status == Some(pb::RunStatus::Unspecified) && result.code == 0 {
            return Err(Status::invalid_argument(format!(
                "results[{index}]: a status or a handle code is required"
            )));
        }
        if !(0..=999).contains(&result.code) {
            return Err(Status::invalid_argument(format!(
                "results[{index}].code: must be 0 (unset) or a handle code up to 999, got {}",
                result.code
            )));
        }
    }
    Ok(())
}

/// Checks who may finish each run: the whole batch is refused (`UNAUTHENTICATED`) when a run
/// belongs to a group whose token was not presented; single results are left unaccepted (the
/// executor keeps them; nothing is written) when their run was never dispatched (PENDING) or
/// when its address is held by a live session of this admin from another peer IP than the
/// callback's (a forged result for someone else's run). Returns those left unaccepted.
///
/// `tokenless_allowed` is decided by the listener the callback arrived on (a loopback listener,
/// or `insecure_open_registry`), exactly as for registrations on that listener.
///
/// A log id that names no run is answered to a caller who holds no executor secret (no group's
/// access token, not `executor_token`) exactly like a run of a group whose token it lacks: else
/// an outsider could tell which log ids exist by which ones are refused.
pub(crate) async fn check_callback(
    ctx: &AdminContext,
    log_ids: &[LogId],
    caller: &CallbackCaller<'_>,
) -> Result<std::collections::HashSet<LogId>, Status> {
    let CallbackCaller {
        presented,
        peer_ip,
        tokenless_allowed,
        ..
    } = *caller;
    let mut refused = std::collections::HashSet::new();
    if log_ids.is_empty() {
        return Ok(refused);
    }
    let targets = ctx
        .store
        .callback_targets(log_ids)
        .await
        .map_err(Error::from)?;
    let known: std::collections::HashSet<LogId> =
        targets.iter().map(|target| target.log_id).collect();
    if let Some(unknown) = log_ids.iter().find(|id| !known.contains(id))
        && !holds_executor_secret(ctx, presented, tokenless_allowed).await?
    {
        tracing::warn!(
            log_id = unknown.0,
            "callback refused: unknown log id, no executor secret"
        );
        return Err(wrong_token(*unknown));
    }
    for target in targets {
        let log_id = target.log_id;
        let expected = ctx.config.executor_token_for(&target.access_token);
        if expected.is_empty() && !tokenless_allowed {
            if !holds_executor_secret(ctx, presented, false).await? {
                // Naming the app would tell an outsider where the run belongs.
                return Err(wrong_token(log_id));
            }
            return Err(Status::unauthenticated(
                crate::registry::stream::tokenless_refusal(&target.app_name),
            ));
        }
        if !expected.is_empty()
            && !presented.is_some_and(|presented| tokens_match(presented, expected))
        {
            tracing::warn!(
                log_id = log_id.0,
                "callback refused: wrong or missing access token"
            );
            return Err(wrong_token(log_id));
        }
        // After the token: a caller without the group's token learns nothing more here.
        if let Some(cert) = &caller.cert {
            let what = format!("log {log_id}");
            crate::registry::cert_binding::check(
                &ctx.config,
                cert.as_ref(),
                &target.app_name,
                &what,
            )?;
        }
        if target.status == RunStatus::Pending {
            tracing::warn!(
                log_id = log_id.0,
                ?peer_ip,
                "callback result refused: the run was never dispatched"
            );
            refused.insert(log_id);
            continue;
        }
        if ctx.config.executor_peer_check
            && target.status == RunStatus::Running
            && !target.executor_address.is_empty()
            && let Some(holder_ip) = crate::registry::stream::session_peer(
                &ctx.sessions,
                &target.app_name,
                &target.executor_address,
            )
            && holder_ip != peer_ip
        {
            tracing::warn!(
                log_id = log_id.0,
                ?peer_ip,
                ?holder_ip,
                "callback result refused: the run was dispatched to a session of another peer"
            );
            refused.insert(log_id);
        }
    }
    Ok(refused)
}

/// Who sent a callback, as the listener it arrived on judges it.
pub(crate) struct CallbackCaller<'a> {
    /// The executor token presented, if any.
    pub presented: Option<&'a str>,
    pub peer_ip: Option<std::net::IpAddr>,
    /// Whether groups without an access token are open on this listener (a loopback listener,
    /// or `insecure_open_registry`; never a browser context on the XXL-JOB listener).
    pub tokenless_allowed: bool,
    /// `Some` on the gRPC listener: the connection's client certificate, checked against
    /// `executor_cert_names`. `None` where certificates do not apply (the XXL-JOB listener).
    pub cert: Option<Option<xjob_tls::CertificateDer<'static>>>,
}

/// The one refusal an unauthenticated callback gets, whether its log id exists or not.
fn wrong_token(log_id: LogId) -> Status {
    Status::unauthenticated(format!(
        "wrong or missing access token for the group of log {log_id}"
    ))
}

/// Whether the caller proved it is some group's executor: it presented `executor_token` or a
/// group's access token. When the admin holds no such secret at all and token-less executors
/// are allowed on this listener (the laptop setup), every caller counts: there is nothing to
/// tell apart.
async fn holds_executor_secret(
    ctx: &AdminContext,
    presented: Option<&str>,
    tokenless_allowed: bool,
) -> Result<bool, Status> {
    let cluster = ctx.config.executor_token.as_str();
    let presented = presented.filter(|presented| !presented.is_empty());
    if let Some(presented) = presented
        && !cluster.is_empty()
        && tokens_match(presented, cluster)
    {
        return Ok(true);
    }
    let group_tokens = ctx.store.group_access_tokens().await.map_err(Error::from)?;
    if tokenless_allowed && cluster.is_empty() && group_tokens.is_empty() {
        return Ok(true);
    }
    Ok(presented.is_some_and(|presented| {
        group_tokens
            .iter()
            .any(|token| tokens_match(presented, token))
    }))
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
