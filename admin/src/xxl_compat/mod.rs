//! XXL-JOB's executor-facing API on an HTTP/1.1 address of its own (`xxl_job_compat_listen`),
//! so unmodified `xxl-job-core` executors (2.4.x, 3.x) register with this admin and run its
//! jobs (docs/xxl-job-compat.md).
//!
//! ```text
//! POST …/api/registry        ─▶ token of the app's group ─▶ Registry (protocol xxl-job-http)
//! POST …/api/registryRemove  ─▶ out of routing at once
//! POST …/api/callback        ─▶ same token check as Registry.Callback ─▶ callback::apply_results
//! ```
//!
//! Web pages must not be able to use a loopback listener on a developer's machine (a page can
//! post to `127.0.0.1` without reading the answer): a request must say
//! `Content-Type: application/json` (a page cannot send that cross-site without a CORS
//! preflight, which this listener never answers), an `Origin` other than the listener itself is
//! refused, and a request from a browser context (`Origin` or `Sec-Fetch-*` headers) is never
//! accepted for a group without an access token. Whether token-less groups are open at all is
//! decided by this listener's own address (loopback) for registrations and callbacks alike.
//! Only the end of the path counts, so an executor configured with the old admin's context
//! path (`http://host:port/xxl-job-admin`) needs only a new host and port.
//!
//! A registered XXL-JOB executor is an ordinary member of its group's routing view: every
//! route strategy, broadcast, `ListExecutors` and the online counts see it. The executor client
//! sends its runs, kills, log reads and probes over XXL-JOB's HTTP API (`executor::xxl`). Each
//! registry call is its heartbeat; it leaves routing after `xxl_job_compat_lease` (90 s)
//! without one.
//!
//! The admin it registers with mirrors it into `xjob_registry` (protocol `xxl-job-http`), so
//! the other admins of a cluster route to it too. Its registry calls come every 30 s, longer
//! than the `executor_lease` after which other admins count a row as dead, so this admin
//! rewrites the rows of the XXL-JOB executors it holds every third of a lease while their
//! registrations are live ([`run_row_refresh`]).

mod browser_guard;
mod wire;

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::registry::CallbackCaller;
use crate::callback::ReportedResult;
use crate::context::AdminContext;
use crate::error::Error;
use crate::executor::xxl::TOKEN_HEADER;
use crate::model::{ExecutorInfo, ExecutorProtocol, LogId, RunStatus};
use wire::{Answer, CallbackBody, RegistryParam};

/// Largest request body read (a callback batch of long messages is the big one).
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// XXL-JOB's registry group of executors.
const EXECUTOR_GROUP: &str = "EXECUTOR";

/// Binds the compatibility listener.
pub async fn bind(address: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(address).await.map_err(|error| {
        Error::unavailable(
            format!("cannot listen on {address} for XXL-JOB executors: {error}"),
            error,
        )
    })
}

/// Serves XXL-JOB's executor-facing API on `listener` until `cancel`. Connections come through
/// the same bounded accept loop as the gRPC port (`Config::listen_options`): over the bound per
/// client address or in total they are reset at accept and counted, and one that sends nothing
/// is closed at the handshake deadline instead of holding a task forever.
pub async fn serve(listener: TcpListener, ctx: Arc<AdminContext>, cancel: CancellationToken) {
    let Ok(local) = listener.local_addr() else {
        tracing::error!("XXL-JOB compatibility listener has no local address; not serving");
        return;
    };
    let options = ctx
        .config
        .listen_options(crate::metrics::xxl_connection_refused);
    let mut incoming = std::pin::pin!(xjob_tls::plain_incoming(listener, options));
    loop {
        let stream = tokio::select! {
            _ = cancel.cancelled() => break,
            next = tokio_stream::StreamExt::next(&mut incoming) => match next {
                Some(Ok(stream)) => stream,
                Some(Err(error)) => {
                    tracing::warn!(%error, "XXL-JOB compatibility listener accept failed");
                    continue;
                }
                None => break,
            },
        };
        let Ok(peer) = stream.get_ref().peer_addr() else {
            continue;
        };
        let ctx = Arc::clone(&ctx);
        let cancel = cancel.clone();
        ctx.tasks.clone().spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let ctx = Arc::clone(&ctx);
                async move {
                    let answer = answer(&ctx, request, peer.ip(), local).await;
                    Ok::<_, Infallible>(json_response(&answer))
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                _ = cancel.cancelled() => {}
            }
        });
    }
}

/// XXL-JOB answers every call with HTTP 200 and the outcome in the JSON `code`.
fn json_response(answer: &Answer) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec(answer).unwrap_or_else(|_| b"{\"code\":500}".to_vec());
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json;charset=UTF-8"),
    );
    response
}

/// The calls this listener knows, by the end of their path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Registry,
    RegistryRemove,
    Callback,
}

fn call_of(path: &str) -> Option<Call> {
    let path = path.trim_end_matches('/');
    if path.ends_with("/api/registry") {
        Some(Call::Registry)
    } else if path.ends_with("/api/registryRemove") {
        Some(Call::RegistryRemove)
    } else if path.ends_with("/api/callback") {
        Some(Call::Callback)
    } else {
        None
    }
}

async fn answer(
    ctx: &AdminContext,
    request: Request<Incoming>,
    peer_ip: IpAddr,
    local: SocketAddr,
) -> Answer {
    if request.method() != Method::POST {
        return Answer::fail("invalid request, HttpMethod not support.");
    }
    let Some(call) = call_of(request.uri().path()) else {
        let path = short(request.uri().path());
        return Answer::fail(format!("invalid request, uri-mapping({path}) not found."));
    };
    if let Err(message) = browser_guard::check(request.headers(), local) {
        tracing::warn!(?call, %peer_ip, reason = %message, "XXL-JOB executor call refused");
        return Answer::fail(message);
    }
    // Token-less groups: open only on a loopback listener (or with insecure_open_registry),
    // and never to a browser context, for registrations and callbacks alike.
    let tokenless_allowed = !browser_guard::from_browser(request.headers())
        && (local.ip().is_loopback() || ctx.config.insecure_open_registry);
    let presented = request
        .headers()
        .get(TOKEN_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let body = match Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return Answer::fail(format!(
                "request body unreadable or over {MAX_BODY_BYTES} bytes"
            ));
        }
    };
    let outcome = match call {
        Call::Registry | Call::RegistryRemove => match serde_json::from_slice(&body) {
            Ok(param) => {
                registry_call(ctx, call, param, presented.as_deref(), tokenless_allowed).await
            }
            Err(error) => Err(format!(
                "registry body is not a RegistryParam: {}",
                short(&error.to_string())
            )),
        },
        Call::Callback => match serde_json::from_slice::<CallbackBody>(&body) {
            Ok(callback) => {
                let caller = CallbackCaller {
                    presented: presented.as_deref(),
                    peer_ip: Some(peer_ip.to_canonical()),
                    tokenless_allowed,
                    cert: None,
                };
                callback_call(ctx, callback, caller).await
            }
            Err(error) => Err(format!(
                "callback body is not a list of results: {}",
                short(&error.to_string())
            )),
        },
    };
    match outcome {
        Ok(()) => Answer::success(),
        Err(message) => {
            tracing::warn!(?call, %peer_ip, reason = %message, "XXL-JOB executor call refused");
            Answer::fail(message)
        }
    }
}

/// `api/registry` (register or renew) and `api/registryRemove`.
async fn registry_call(
    ctx: &AdminContext,
    call: Call,
    param: RegistryParam,
    presented: Option<&str>,
    tokenless_allowed: bool,
) -> Result<(), String> {
    let app_name = param.registry_key.trim();
    let address = param.registry_value.trim();
    if param.registry_group.trim().is_empty() || app_name.is_empty() || address.is_empty() {
        return Err("Illegal Argument.".to_string());
    }
    if !param.registry_group.eq_ignore_ascii_case(EXECUTOR_GROUP) {
        // XXL-JOB's only other registry group (ADMIN) is unused.
        return Ok(());
    }
    crate::model::validate::validate_app_name(app_name, "registryKey")
        .map_err(|refusal| refusal.to_string())?;
    crate::model::validate::validate_executor_address(address, "registryValue")
        .map_err(|refusal| refusal.to_string())?;
    if !address.starts_with("http://") {
        // The admin calls XXL-JOB executors over plain HTTP, as XXL-JOB's admin does.
        return Err(format!(
            "registryValue '{}' must be an http:// address",
            short(address)
        ));
    }
    let address = address.trim_end_matches('/');
    check_token(ctx, app_name, presented, tokenless_allowed).await?;
    let executor_id = format!("xxl-job:{app_name}:{address}");
    if call == Call::RegistryRemove {
        crate::registry::stream::forget_xxl_token(&ctx.sessions, &executor_id);
        if ctx.registry.remove(&executor_id).is_some() {
            tracing::info!(app = %app_name, %address, "XXL-JOB executor deregistered");
        }
        if let Err(error) = ctx.store.delete_registry(&executor_id).await {
            tracing::warn!(%error, %executor_id, "deleting an XXL-JOB executor's row failed");
        }
        return Ok(());
    }
    // The token it holds now: a later change of the group's token drops it from routing.
    crate::registry::stream::remember_xxl_token(&ctx.sessions, &executor_id, presented);
    let now = ctx.clock.now_ms();
    if ctx.registry.heartbeat(&executor_id, Vec::new(), now) {
        return Ok(());
    }
    let taken = ctx
        .registry
        .list(app_name)
        .into_iter()
        .any(|held| held.app_name == app_name && held.address == address);
    if taken {
        return Err(format!(
            "address '{address}' of app '{app_name}' is held by an xjob executor's session"
        ));
    }
    let executor = ExecutorInfo {
        executor_id,
        app_name: app_name.to_string(),
        address: address.to_string(),
        handlers: Vec::new(),
        registered_ms: now,
        last_heartbeat_ms: now,
        admin_node: ctx.node.node_id.clone(),
        running_log_ids: Vec::new(),
        protocol: ExecutorProtocol::XxlJobHttp,
    };
    ctx.registry.register(executor.clone());
    tracing::info!(app = %app_name, %address, "XXL-JOB executor registered");
    // Routable here already; the row tells the other admins (rewritten by the row refresh).
    if let Err(error) = ctx.store.upsert_registry(&executor).await {
        tracing::warn!(%error, executor_id = %executor.executor_id,
            "writing an XXL-JOB executor's registry row failed");
    }
    Ok(())
}

/// Rewrites the registry rows of the XXL-JOB executors this admin holds, every third of
/// `executor_lease`, with the current time as their heartbeat: this admin vouches for them
/// while their registrations (renewed every 30 s) are live, so the other admins keep routing
/// to them. Expired ones are gone from the registry and their rows deleted by the reaper.
pub async fn run_row_refresh(ctx: Arc<AdminContext>, cancel: CancellationToken) {
    let period = (ctx.config.executor_lease / 3).max(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(period) => {}
        }
        let now = ctx.clock.now_ms();
        let held = ctx
            .registry
            .list("")
            .into_iter()
            .filter(|executor| executor.protocol == ExecutorProtocol::XxlJobHttp);
        for executor in held {
            let row = ExecutorInfo {
                last_heartbeat_ms: now,
                ..executor
            };
            if let Err(error) = ctx.store.upsert_registry(&row).await {
                tracing::debug!(%error, executor_id = %row.executor_id,
                    "rewriting an XXL-JOB executor's registry row failed");
            }
        }
    }
}

/// The registering executor must present its group's access token (or `executor_token`). A
/// group with neither is open only when `tokenless_allowed` (a loopback listener or
/// `insecure_open_registry`, and not a browser context).
async fn check_token(
    ctx: &AdminContext,
    app_name: &str,
    presented: Option<&str>,
    tokenless_allowed: bool,
) -> Result<(), String> {
    let group = ctx
        .store
        .get_group_by_app(app_name)
        .await
        .map_err(|_| "database unavailable".to_string())?;
    let group_token = group.map(|group| group.access_token).unwrap_or_default();
    let expected = ctx.config.executor_token_for(&group_token);
    if expected.is_empty() {
        if tokenless_allowed {
            return Ok(());
        }
        return Err(crate::registry::stream::tokenless_refusal(app_name));
    }
    let presented = presented.filter(|presented| !presented.is_empty());
    if presented.is_some_and(|presented| crate::registry::stream::tokens_match(presented, expected))
    {
        Ok(())
    } else {
        Err(format!(
            "The access token is wrong or missing for app '{}'.",
            short(app_name)
        ))
    }
}

/// `api/callback`: the results go through the same checks and persistence as
/// `Registry.Callback`, so retries, alarms and child jobs follow as for any run.
async fn callback_call(
    ctx: &AdminContext,
    body: CallbackBody,
    caller: CallbackCaller<'_>,
) -> Result<(), String> {
    let items = body.items();
    if items.is_empty() {
        return Ok(());
    }
    if let Some(bad) = items
        .iter()
        .find(|item| !(0..=999).contains(&item.handle_code))
    {
        return Err(format!(
            "handleCode of log {} must be a handle code up to 999",
            bad.log_id
        ));
    }
    let log_ids: Vec<LogId> = items.iter().map(|item| LogId(item.log_id)).collect();
    let refused = crate::api::registry::check_callback(ctx, &log_ids, &caller)
        .await
        .map_err(|status| status.message().to_string())?;
    let results: Vec<ReportedResult> = items
        .into_iter()
        .filter(|item| !refused.contains(&LogId(item.log_id)))
        .map(|item| {
            let message = item.handle_msg.unwrap_or_default();
            let killed = item.handle_code != 200 && wire::reports_a_kill(&message);
            ReportedResult {
                log_id: LogId(item.log_id),
                status: killed.then_some(RunStatus::Killed),
                // XXL-JOB's 0 never means "not given" in a result: treat it as a failure.
                code: if item.handle_code == 0 {
                    500
                } else {
                    item.handle_code
                },
                message,
                finished_at_ms: 0,
                traceparent: String::new(),
            }
        })
        .collect();
    crate::callback::apply_results(&ctx.store, &ctx.trigger, ctx.clock.now_ms(), &results)
        .await
        .map(|_| ())
        // Not acknowledged: the executor keeps the results and sends them again.
        .map_err(|error| format!("results not recorded, send them again: {error}"))
}

/// A short prefix of a value from outside, for messages.
fn short(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_known_by_the_end_of_their_path() {
        assert_eq!(call_of("/api/registry"), Some(Call::Registry));
        assert_eq!(
            call_of("/xxl-job-admin/api/registryRemove"),
            Some(Call::RegistryRemove)
        );
        assert_eq!(call_of("//api/callback"), Some(Call::Callback));
        assert_eq!(call_of("/api/other"), None);
        assert_eq!(call_of("/registry"), None);
    }
}
