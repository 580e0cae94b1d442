//! One executor session: handshake, heartbeats, clean or abrupt end.
//!
//! Status codes the stream can end with:
//! - `DEADLINE_EXCEEDED`: no `Register` within the handshake timeout;
//! - `INVALID_ARGUMENT`: the first message is not `Register`, a field is missing or malformed,
//!   or a second `Register` arrives;
//! - `FAILED_PRECONDITION`: the executor speaks another protocol version;
//! - `UNAUTHENTICATED`: the app's group has an access token and the session did not present it;
//! - `RESOURCE_EXHAUSTED`: too many handlers announced, or more messages per second than
//!   `session_message_rate` (sessions over `max_sessions` / `max_sessions_per_peer` are refused
//!   before the stream opens, with the same code);
//! - `UNAVAILABLE`: the admin is shutting down (the executor moves to another admin);
//! - `ALREADY_EXISTS`: the address is held by a live session of this admin opened from another
//!   peer IP: a second process cannot take over an executor's address while it is connected
//!   (the same IP, as after a reconnect or restart, replaces the old session);
//! - `ABORTED`: a newer session registered the same app and address (the executor reconnected;
//!   this stream is stale), or the group's access token changed (the executor reconnects with
//!   the current token, or is refused).
//!
//! However it ends, the executor leaves routing and its registry row is deleted at once.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::{Status, Streaming};
use xjob_proto::pb;
use xjob_proto::pb::executor_message::Kind;

use super::RegistryContext;
use super::session_calls::SessionLine;
use crate::error::Error;
use crate::model::validate::{validate_app_name, validate_executor_address};
use crate::model::{ExecutorInfo, ExecutorProtocol};

type Outbound = mpsc::Sender<Result<pb::AdminMessage, Status>>;

static SESSION_COUNTER: AtomicU64 = AtomicU64::new(1);

/// Longest a heartbeat waits for its registry row to be written.
const ROW_WRITE_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

/// Who opened a session: what the admin checks it by.
pub struct SessionCaller {
    /// The bearer token presented, if any.
    pub token: Option<String>,
    pub peer_ip: Option<IpAddr>,
    /// The client certificate of the connection (mTLS), for `executor_cert_names`.
    pub cert: Option<xjob_tls::CertificateDer<'static>>,
}

/// Serves one `Registry.Session` stream until it ends.
pub async fn serve_session(
    ctx: Arc<RegistryContext>,
    mut inbound: Streaming<pb::ExecutorMessage>,
    outbound: Outbound,
    caller: SessionCaller,
    cancel: CancellationToken,
    // Held until the session ends: its place in `max_sessions` / `max_sessions_per_peer`.
    _permit: super::limits::SessionPermit,
) {
    let register = match handshake(&ctx, &mut inbound).await {
        Ok(register) => register,
        Err(status) => {
            tracing::warn!(code = ?status.code(), message = status.message(), "session handshake refused");
            let _ = outbound.send(Err(status)).await;
            return;
        }
    };
    let SessionCaller {
        token: presented_token,
        peer_ip,
        cert,
    } = caller;
    if let Err(status) = check_token(&ctx, &register.app_name, presented_token.as_deref()).await {
        let _ = outbound.send(Err(status)).await;
        return;
    }
    let app = format!("app '{}'", register.app_name);
    if let Err(status) =
        super::cert_binding::check(&ctx.config, cert.as_ref(), &register.app_name, &app)
    {
        tracing::warn!(app = %register.app_name, ?peer_ip,
            "session refused: its client certificate is not bound to the app");
        let _ = outbound.send(Err(status)).await;
        return;
    }
    let dispatch_mode = session_dispatch_mode(&register);
    let can_hold_runs = register.can_hold_runs;
    let info = executor_info(&ctx, register);
    if let Err(status) = check_address_owner(&ctx, &info, peer_ip) {
        let peer = peer_ip.map_or_else(|| "unknown".to_string(), |ip| ip.to_string());
        tracing::warn!(app = %info.app_name, address = %info.address, %peer,
            "session refused: its address is held by a live session from another peer");
        let _ = outbound.send(Err(status)).await;
        return;
    }
    let executor_id = info.executor_id.clone();
    let superseded = CancellationToken::new();
    lock_superseded(&ctx).insert(executor_id.clone(), superseded.clone());
    lock_peers(&ctx).insert(executor_id.clone(), peer_ip);
    lock_tokens(&ctx).insert(executor_id.clone(), presented_token);
    // In session dispatch the executor's calls go down this stream: its line opens before
    // routing can see it, so the first run finds it.
    let line_opt = (info.protocol == ExecutorProtocol::GrpcSession).then(|| {
        let line = Arc::new(SessionLine::new(outbound.clone()));
        ctx.registry
            .session_lines
            .open(&info.address, Arc::clone(&line));
        line
    });
    open(&ctx, info.clone()).await;
    let registered = pb::AdminMessage {
        kind: Some(pb::admin_message::Kind::Registered(pb::Registered {
            executor_id: executor_id.clone(),
            heartbeat_interval_ms: ctx.config.heartbeat_interval.as_millis() as i64,
            lease_ms: ctx.config.executor_lease.as_millis() as i64,
            dispatch_mode: dispatch_mode as i32,
        })),
    };
    if outbound.send(Ok(registered)).await.is_ok() {
        if can_hold_runs {
            ctx.registry.clocks.open(&info.address, &executor_id);
            send_clock_probe(&ctx, &outbound);
        }
        let line_ref = line_opt.as_deref();
        let session = Session {
            info: &info,
            line_opt: line_ref,
            can_hold_runs,
        };
        tokio::select! {
            _ = session_loop(&ctx, &mut inbound, &outbound, session, &cancel) => {}
            _ = superseded.cancelled() => {
                tracing::info!(app = %info.app_name, address = %info.address,
                    executor_id = %info.executor_id,
                    "session replaced by a newer one, or its group's token changed; closing it");
                let status = Status::aborted(
                    "this session is closed: a newer session registered the same app and \
                     address, or the group's access token changed (reconnect with the current \
                     token)",
                );
                let _ = outbound.send(Err(status)).await;
            }
        }
    }
    if let Some(line) = &line_opt {
        ctx.registry.session_lines.close(&info.address, line);
        line.end();
    }
    ctx.registry.clocks.close(&info.address, &executor_id);
    lock_superseded(&ctx).remove(&executor_id);
    lock_peers(&ctx).remove(&executor_id);
    lock_tokens(&ctx).remove(&executor_id);
    close(&ctx, &info).await;
}

/// Refuses a registration whose address is held by a live session of this admin opened from
/// another peer IP (a rogue process taking over a real executor's address and its runs).
fn check_address_owner(
    ctx: &RegistryContext,
    info: &ExecutorInfo,
    peer_ip: Option<IpAddr>,
) -> Result<(), Status> {
    if !ctx.config.executor_peer_check {
        return Ok(());
    }
    let Some(holder) = ctx.registry.session_at(&info.app_name, &info.address) else {
        return Ok(());
    };
    let peers = lock_peers(ctx);
    match peers.get(&holder) {
        Some(holder_ip) if *holder_ip != peer_ip => Err(Status::already_exists(format!(
            "address '{}' of app '{}' is held by a live session from another peer; a second \
             process cannot take it over while that session is connected",
            info.address, info.app_name
        ))),
        _ => Ok(()),
    }
}

/// Closes every session of `app_name` on this admin (its group's access token changed: a
/// session opened with the old token, or none, must not keep receiving runs). Executors that
/// hold the current token reconnect; the others are refused. XXL-JOB executors, which cannot
/// reconnect at once (they register every 30 s), leave routing only when the token they
/// registered with is not `group_token`'s.
pub async fn close_app_sessions(ctx: &RegistryContext, app_name: &str, group_token: &str) -> usize {
    let (xxl, sessions): (Vec<ExecutorInfo>, Vec<ExecutorInfo>) = ctx
        .registry
        .list(app_name)
        .into_iter()
        .filter(|executor| executor.app_name == app_name)
        .partition(|executor| executor.protocol == ExecutorProtocol::XxlJobHttp);
    let sessions: Vec<String> = sessions.into_iter().map(|s| s.executor_id).collect();
    let stale_xxl: Vec<String> = {
        let tokens = lock_tokens(ctx);
        xxl.into_iter()
            .map(|executor| executor.executor_id)
            .filter(|id| {
                let presented = tokens.get(id).cloned().flatten();
                !token_accepted(ctx, group_token, presented.as_deref())
            })
            .collect()
    };
    let dropped = drop_xxl_executors(ctx, &stale_xxl).await;
    let superseded = lock_superseded(ctx);
    let mut closed = 0;
    for executor_id in &sessions {
        if let Some(token) = superseded.get(executor_id) {
            token.cancel();
            closed += 1;
        }
    }
    tracing::info!(
        app = app_name,
        closed,
        xxl_job_executors_dropped = dropped,
        "group access token changed: sessions closed"
    );
    closed + dropped
}

/// The peer IP of the live session of this admin holding `app_name` at `address`; `None` when
/// no session of this admin holds it (the inner `None`: the peer IP was unknown).
pub fn session_peer(
    ctx: &RegistryContext,
    app_name: &str,
    address: &str,
) -> Option<Option<IpAddr>> {
    let holder = ctx.registry.session_at(app_name, address)?;
    lock_peers(ctx).get(&holder).copied()
}

fn lock_peers(
    ctx: &RegistryContext,
) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Option<IpAddr>>> {
    ctx.session_peers
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock_tokens(
    ctx: &RegistryContext,
) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Option<String>>> {
    ctx.session_tokens
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Closes this admin's sessions whose token its group no longer accepts: the token was changed
/// through another admin (a change through this one closes them at once). One group read per
/// app; a database error leaves the sessions to the next round.
pub async fn close_sessions_with_stale_tokens(ctx: &RegistryContext) {
    let mut by_app: std::collections::BTreeMap<String, Vec<ExecutorInfo>> = Default::default();
    for session in ctx.registry.list("") {
        by_app
            .entry(session.app_name.clone())
            .or_default()
            .push(session);
    }
    for (app_name, executors) in by_app {
        let Ok(group) = ctx.store.get_group_by_app(&app_name).await else {
            return;
        };
        let group_token = group.map(|group| group.access_token).unwrap_or_default();
        let (xxl, sessions): (Vec<ExecutorInfo>, Vec<ExecutorInfo>) = {
            let tokens = lock_tokens(ctx);
            executors
                .into_iter()
                .filter(|executor| {
                    let presented = tokens.get(&executor.executor_id).cloned().flatten();
                    !token_accepted(ctx, &group_token, presented.as_deref())
                })
                .partition(|executor| executor.protocol == ExecutorProtocol::XxlJobHttp)
        };
        // gRPC sessions end through their cancel token; XXL-JOB executors have no session to
        // end, they leave routing here.
        let closed = {
            let superseded = lock_superseded(ctx);
            sessions
                .iter()
                .filter_map(|session| superseded.get(&session.executor_id))
                .map(CancellationToken::cancel)
                .count()
        };
        let xxl: Vec<String> = xxl.into_iter().map(|x| x.executor_id).collect();
        let dropped = drop_xxl_executors(ctx, &xxl).await;
        if closed + dropped > 0 {
            tracing::info!(app = %app_name, closed, xxl_job_executors_dropped = dropped,
                "group access token changed elsewhere: executors without it left routing");
        }
    }
}

/// Records the token an XXL-JOB executor presented with its registration, so a change of its
/// group's token drops it from routing as it closes the sessions of gRPC executors.
pub fn remember_xxl_token(ctx: &RegistryContext, executor_id: &str, presented: Option<&str>) {
    lock_tokens(ctx).insert(executor_id.to_string(), presented.map(str::to_string));
}

/// Forgets an XXL-JOB executor's token (it deregistered).
pub fn forget_xxl_token(ctx: &RegistryContext, executor_id: &str) {
    lock_tokens(ctx).remove(executor_id);
}

/// Takes XXL-JOB executors out of routing at once, here and (their rows) for the other admins;
/// their runs in flight are judged as a closed session's are (`monitor::lost`). Returns how
/// many left.
async fn drop_xxl_executors(ctx: &RegistryContext, executor_ids: &[String]) -> usize {
    let mut dropped = 0;
    for executor_id in executor_ids {
        forget_xxl_token(ctx, executor_id);
        if let Some(info) = ctx.registry.remove(executor_id) {
            dropped += 1;
            tracing::info!(app = %info.app_name, address = %info.address,
                "XXL-JOB executor left routing: its group's access token changed");
        }
        if let Err(error) = ctx.store.delete_registry(executor_id).await {
            tracing::warn!(%error, %executor_id, "deleting an XXL-JOB executor's row failed");
        }
    }
    dropped
}

fn lock_superseded(
    ctx: &RegistryContext,
) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, CancellationToken>> {
    ctx.superseded
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits for the first message, which must be a valid `Register`.
async fn handshake(
    ctx: &RegistryContext,
    inbound: &mut Streaming<pb::ExecutorMessage>,
) -> Result<pb::Register, Status> {
    let timeout = ctx.config.handshake_timeout;
    let first = tokio::time::timeout(timeout, inbound.message())
        .await
        .map_err(|_| Status::deadline_exceeded(format!("no Register within {timeout:?}")))??;
    let Some(pb::ExecutorMessage {
        kind: Some(Kind::Register(register)),
    }) = first
    else {
        return Err(Status::invalid_argument(
            "the first message of a session must be Register",
        ));
    };
    if register.protocol_version != xjob_proto::PROTOCOL_VERSION {
        return Err(Status::failed_precondition(format!(
            "register.protocol_version: {} is not supported; this admin speaks {}",
            register.protocol_version,
            xjob_proto::PROTOCOL_VERSION
        )));
    }
    if register.app_name.trim().is_empty() {
        return Err(Status::invalid_argument("register.app_name: required"));
    }
    let max_handlers = ctx.config.max_handlers_per_registration;
    if register.handlers.len() > max_handlers {
        return Err(Status::resource_exhausted(format!(
            "register.handlers: {} handlers exceed the limit of {max_handlers} (max_handlers_per_registration)",
            register.handlers.len()
        )));
    }
    // As strict as CreateGroup: a session is routed to, so a name no group can have or an
    // address nobody can dial would only make every run sent there fail.
    validate_app_name(&register.app_name, "register.app_name").map_err(Error::from)?;
    match session_dispatch_mode(&register) {
        pb::DispatchMode::Session => validate_session_address(&register.address)?,
        _ => {
            validate_executor_address(&register.address, "register.address").map_err(Error::from)?
        }
    }
    Ok(register)
}

/// The dispatch mode a registration asks for: session dispatch when it says so, else the admin
/// dials the executor as it always did (older executors send nothing). The executor chooses:
/// only it knows whether the admin can reach it.
fn session_dispatch_mode(register: &pb::Register) -> pb::DispatchMode {
    match pb::DispatchMode::try_from(register.dispatch_mode) {
        Ok(pb::DispatchMode::Session) => pb::DispatchMode::Session,
        _ => pb::DispatchMode::Dial,
    }
}

/// Longest name of an executor in session dispatch (`session://NAME`).
const MAX_SESSION_NAME_CHARS: usize = 200;

/// A session-dispatch address is `session://NAME`: letters, digits, `.`, `-`, `_`, `:` only,
/// so it reads well in logs and the console and never parses as a dialable URL.
fn validate_session_address(address: &str) -> Result<(), Status> {
    let Some(name) = address.strip_prefix(super::session_calls::SESSION_SCHEME) else {
        return Err(Status::invalid_argument(
            "register.address: with dispatch_mode SESSION the address must be session://NAME",
        ));
    };
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':');
    if name.is_empty()
        || name.chars().count() > MAX_SESSION_NAME_CHARS
        || !name.chars().all(allowed)
    {
        return Err(Status::invalid_argument(format!(
            "register.address: the name of session://NAME must be 1-{MAX_SESSION_NAME_CHARS} \
             letters, digits, '.', '-', '_' or ':'"
        )));
    }
    Ok(())
}

/// Refuses the session when the app's group has a token the executor did not present, or, on
/// a non-loopback listener, when the app has no group with a token.
async fn check_token(
    ctx: &RegistryContext,
    app_name: &str,
    presented: Option<&str>,
) -> Result<(), Status> {
    let group = ctx
        .store
        .get_group_by_app(app_name)
        .await
        .map_err(|_| Status::unavailable("database unavailable"))?;
    // The group's token, else the cluster-wide executor token (an app with no group yet has
    // only the latter).
    let group_token = group.map(|group| group.access_token).unwrap_or_default();
    if token_accepted(ctx, &group_token, presented) {
        return Ok(());
    }
    if ctx.config.executor_token_for(&group_token).is_empty() {
        return Err(Status::unauthenticated(tokenless_refusal(app_name)));
    }
    Err(Status::unauthenticated(format!(
        "wrong or missing access token for app '{app_name}'"
    )))
}

/// Whether a session presenting `presented` may serve a group whose token is `group_token`.
fn token_accepted(ctx: &RegistryContext, group_token: &str, presented: Option<&str>) -> bool {
    let expected = ctx.config.executor_token_for(group_token);
    if expected.is_empty() {
        // Off loopback, no token would let anyone on the network register under the app name
        // and receive its runs (params included).
        return ctx.config.tokenless_executors_allowed();
    }
    presented.is_some_and(|presented| tokens_match(presented, expected))
}

/// Why an executor of a group without a token is refused on a non-loopback listener.
pub(crate) fn tokenless_refusal(app_name: &str) -> String {
    format!(
        "app '{app_name}' has no group access token and this admin listens on a network: set \
         the group's access_token or executor_token (and the executor's), or \
         insecure_open_registry"
    )
}

/// Whether a presented access token equals the expected one, in constant time: every byte of
/// `presented` is compared (past the end of `expected`, against its bytes again) and the XORs are
/// OR-folded together with the length difference, with no early exit. The time taken depends on
/// the presented length only, so it reveals neither a matching prefix nor the token's length.
/// Used for session (`check_token`) and callback (`api::registry`) tokens alike.
pub(crate) fn tokens_match(presented: &str, expected: &str) -> bool {
    let (presented, expected) = (presented.as_bytes(), expected.as_bytes());
    let mut difference = presented.len() ^ expected.len();
    for (index, byte) in presented.iter().enumerate() {
        let other = expected
            .get(index % expected.len().max(1))
            .copied()
            .unwrap_or(0);
        difference |= usize::from(byte ^ other);
    }
    // Keeps the optimizer from turning the fold into an early exit.
    std::hint::black_box(difference) == 0
}

fn executor_info(ctx: &RegistryContext, register: pb::Register) -> ExecutorInfo {
    let now = ctx.clock.now_ms();
    let protocol = match session_dispatch_mode(&register) {
        pb::DispatchMode::Session => ExecutorProtocol::GrpcSession,
        _ => ExecutorProtocol::Grpc,
    };
    let mut handlers = register.handlers;
    handlers.sort();
    ExecutorInfo {
        executor_id: format!(
            "{}-{}-{}",
            ctx.node.node_id,
            ctx.node.epoch,
            SESSION_COUNTER.fetch_add(1, Ordering::Relaxed)
        ),
        app_name: register.app_name,
        address: register.address.trim_end_matches('/').to_string(),
        handlers,
        registered_ms: now,
        last_heartbeat_ms: now,
        admin_node: ctx.node.node_id.clone(),
        running_log_ids: Vec::new(),
        protocol,
    }
}

async fn open(ctx: &RegistryContext, info: ExecutorInfo) {
    tracing::info!(app = %info.app_name, address = %info.address, executor_id = %info.executor_id, "executor registered");
    if let Some(replaced) = ctx.registry.register(info.clone()) {
        // The replaced session's stream is stale (the executor reconnected) or belongs to a
        // second process claiming the same address: end it, so the two never alternate.
        if let Some(token) = lock_superseded(ctx).remove(&replaced.executor_id) {
            token.cancel();
        }
        let _ = ctx.store.delete_registry(&replaced.executor_id).await;
    }
    if let Err(error) = ctx.store.upsert_registry(&info).await {
        tracing::warn!(%error, "writing registry row failed");
    }
}

async fn close(ctx: &RegistryContext, info: &ExecutorInfo) {
    if ctx.registry.remove(&info.executor_id).is_some() {
        tracing::info!(app = %info.app_name, address = %info.address, "executor left");
    }
    if let Err(error) = ctx.store.delete_registry(&info.executor_id).await {
        tracing::warn!(%error, "deleting registry row failed");
    }
}

/// What the session loop knows of its executor.
struct Session<'a> {
    info: &'a ExecutorInfo,
    line_opt: Option<&'a SessionLine>,
    /// It declared it can hold runs sent ahead: its clock is probed.
    can_hold_runs: bool,
}

async fn session_loop(
    ctx: &RegistryContext,
    inbound: &mut Streaming<pb::ExecutorMessage>,
    outbound: &Outbound,
    session: Session<'_>,
    cancel: &CancellationToken,
) {
    let Session {
        info,
        line_opt,
        can_hold_runs,
    } = session;
    let per_second = ctx.config.session_message_rate;
    let mut rate = super::limits::MessageRate::new(per_second);
    loop {
        let message = tokio::select! {
            _ = cancel.cancelled() => {
                let _ = outbound.send(Err(Status::unavailable("admin is shutting down"))).await;
                return;
            }
            message = inbound.message() => message,
        };
        let kind = match message {
            Ok(Some(pb::ExecutorMessage { kind })) => kind,
            Ok(None) | Err(_) => return,
        };
        // A reply to a call of this admin is not the executor's own traffic: the admin chose
        // how many calls it sends. Only a reply nothing waits for counts against the rate.
        let kind = match kind {
            Some(Kind::Reply(reply)) => {
                let call_id = reply.call_id;
                if line_opt.is_some_and(|line| line.deliver(reply)) {
                    continue;
                }
                Some(Kind::Reply(pb::SessionReply {
                    call_id,
                    response: None,
                }))
            }
            other => other,
        };
        if !rate.admit(std::time::Instant::now()) {
            tracing::warn!(app = %info.app_name, address = %info.address, per_second,
                "session closed: message rate exceeded");
            let _ = outbound
                .send(Err(super::limits::rate_exceeded(per_second)))
                .await;
            return;
        }
        match kind {
            Some(Kind::Heartbeat(heartbeat)) => {
                heartbeat_received(ctx, info, heartbeat).await;
                // The offset is refreshed with every heartbeat.
                if can_hold_runs {
                    send_clock_probe(ctx, outbound);
                }
            }
            Some(Kind::ClockEcho(echo)) => {
                if can_hold_runs && clock_echo_received(ctx, info, &echo) {
                    send_clock_probe(ctx, outbound);
                }
            }
            Some(Kind::Deregister(_)) => {
                let reply = pb::admin_message::Kind::Deregistered(pb::Deregistered {});
                let _ = outbound
                    .send(Ok(pb::AdminMessage { kind: Some(reply) }))
                    .await;
                return;
            }
            Some(Kind::Reply(reply)) => {
                // Late (its call timed out) or from an executor not in session dispatch.
                tracing::debug!(app = %info.app_name, address = %info.address,
                    call_id = reply.call_id, "session reply with no waiting call dropped");
            }
            Some(Kind::Register(_)) => {
                let status = Status::invalid_argument("Register may only be the first message");
                let _ = outbound.send(Err(status)).await;
                return;
            }
            None => {
                let _ = outbound
                    .send(Err(Status::invalid_argument("empty session message")))
                    .await;
                return;
            }
        }
    }
}

/// Sends a clock probe; never waits: a probe that finds the stream's buffer full is skipped
/// (the next heartbeat sends another).
fn send_clock_probe(ctx: &RegistryContext, outbound: &Outbound) {
    let probe = pb::ClockProbe {
        admin_sent_ms: ctx.clock.now_ms(),
    };
    let message = pb::AdminMessage {
        kind: Some(pb::admin_message::Kind::ClockProbe(probe)),
    };
    let _ = outbound.try_send(Ok(message));
}

/// Adds the echo's sample to the executor's offset estimate; returns whether the estimate
/// wants another sample at once (just registered, or its clock moved).
fn clock_echo_received(ctx: &RegistryContext, info: &ExecutorInfo, echo: &pb::ClockEcho) -> bool {
    let sample = super::clock_offset::ClockSample::from_times(
        echo.admin_sent_ms,
        echo.executor_received_ms,
        echo.executor_sent_ms,
        ctx.clock.now_ms(),
    );
    let Some(sample) = sample else {
        tracing::debug!(app = %info.app_name, address = %info.address,
            "clock echo with impossible times dropped");
        return false;
    };
    ctx.registry
        .clocks
        .add(&info.address, &info.executor_id, sample)
}

async fn heartbeat_received(ctx: &RegistryContext, info: &ExecutorInfo, heartbeat: pb::Heartbeat) {
    let now = ctx.clock.now_ms();
    if !ctx
        .registry
        .heartbeat(&info.executor_id, heartbeat.running_log_ids.clone(), now)
        // A superseded session is on its way out: it must not push its successor out again.
        && lock_superseded(ctx).contains_key(&info.executor_id)
    {
        // The reaper expired it while heartbeats were late; the stream is alive, so re-add it.
        let revived = ExecutorInfo {
            last_heartbeat_ms: now,
            running_log_ids: heartbeat.running_log_ids,
            ..info.clone()
        };
        ctx.registry.register(revived);
    }
    let refreshed = ExecutorInfo {
        last_heartbeat_ms: now,
        ..info.clone()
    };
    // Bounded, so a database that does not answer never holds up this session's messages (the
    // in-memory heartbeat above is what keeps the executor routable here); the registry
    // refresh rewrites the row once the database is back.
    let bound = ctx.config.heartbeat_interval.min(ROW_WRITE_BOUND);
    match tokio::time::timeout(bound, ctx.store.upsert_registry(&refreshed)).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "refreshing registry row failed"),
        Err(_) => tracing::debug!(?bound, "refreshing registry row timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::tokens_match;

    #[test]
    fn tokens_match_exactly_whatever_the_lengths() {
        assert!(tokens_match("s3cret", "s3cret"));
        assert!(tokens_match("", ""));
        assert!(tokens_match("tökén", "tökén"));
        for wrong in [
            "",
            "s",
            "s3cre",
            "S3cret",
            "s3creT",
            "s3cres",
            "s3cret!",
            "s3crets",
            "s3crets3cret",
            "x3cret",
            "tökén",
        ] {
            assert!(!tokens_match(wrong, "s3cret"), "{wrong:?}");
        }
        assert!(!tokens_match("s3cret", ""));
    }
}
