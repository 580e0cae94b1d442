//! The web console: server-rendered pages over `JobAdmin`, served on `http_listen`.
//!
//! Every page and form calls the `JobAdmin` service itself (the same instance gRPC serves),
//! with the caller resolved from the console session attached to the request
//! ([`crate::auth::ResolvedCaller`]). So authorization, validation, audit and error messages
//! are the API's own: the console never decides what a user may do, it only hides controls
//! the API would refuse.
//!
//! - `guard.rs`: which requests reach a page at all (`Host` names the console, posts come
//!   from its own pages).
//! - `session.rs`: login sessions (cookie → caller), the open console.
//! - `throttle.rs`: failed logins per name, per client address and in all.
//! - `csrf.rs`: the token every form posts back.
//! - `form.rs`: numbers typed into forms (timeouts with units, counts, id lists), read strictly.
//! - `html.rs`: escaping as a type (`Markup`, made only by the escaper, `markup!` templates and
//!   the widgets), the bare document, times and durations, form widgets.
//! - `frame.rs`: the signed-in page frame (navigation by role, the CSRF field).
//! - `errors.rs`: error pages (no session needed).
//! - `pages/`: one module per page family.
//! - `assets/`: the stylesheet and the small script (progressive enhancement: local times,
//!   schedule preview, live log tail, confirmations), compiled into the binary.
//! - `zone.rs`: the zone times are shown in (UTC, the browser's, the job's) and typed times
//!   are read in; `assets/live.js` shows times in it and refreshes live pages.
//!
//! Served by hyper (HTTP/1.1) over the admin's accept loops, with TLS when the admin has a
//! certificate; cookies are then `Secure` and answers carry `Strict-Transport-Security`.

mod cookies;
mod csrf;
mod errors;
mod form;
mod frame;
mod guard;
mod html;
mod i18n;
mod pages;
mod session;
mod shared;
mod throttle;
mod zone;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_stream::StreamExt;

use crate::error::Error;
use crate::lifecycle::Tasks;

pub use session::Viewer;
pub use shared::Console;
use shared::Shared;

/// Binds the console's listener (at start, so a taken port fails startup).
pub async fn bind(address: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(address).await.map_err(|error| {
        Error::unavailable(
            format!("cannot listen on {address} (http_listen): {error}"),
            error,
        )
    })
}

fn router(console: Shared) -> Router {
    Router::new()
        .route("/", get(pages::dashboard::page))
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .route("/assets/live.js", get(live_js))
        .route("/assets/editor.js", get(editor_js))
        .route("/login", get(pages::login::form).post(pages::login::submit))
        .route("/logout", post(pages::login::logout))
        .route("/jobs", get(pages::jobs::list::list))
        .route("/jobs/bulk", post(pages::jobs::actions::bulk))
        .route(
            "/jobs/new",
            get(pages::jobs::editor::new_form).post(pages::jobs::actions::create),
        )
        .route(
            "/jobs/{id}",
            get(pages::jobs::editor::edit_form).post(pages::jobs::actions::update),
        )
        .route("/jobs/{id}/copy", get(pages::jobs::editor::copy_form))
        .route("/jobs/{id}/delete", post(pages::jobs::actions::delete))
        .route("/jobs/{id}/start", post(pages::jobs::actions::start))
        .route("/jobs/{id}/stop", post(pages::jobs::actions::stop))
        .route("/jobs/{id}/trigger", post(pages::jobs::actions::trigger))
        .route("/jobs/{id}/backfill", post(pages::jobs::backfill::start))
        .route(
            "/backfills/{id}/cancel",
            post(pages::jobs::backfill::cancel),
        )
        .route("/jobs/{id}/glue", post(pages::jobs::actions::save_glue))
        .route("/preview", get(pages::jobs::editor::preview))
        .route("/runs", get(pages::runs::list))
        .route("/runs/clear", post(pages::runs::clear))
        .route("/runs/{id}", get(pages::runs::detail))
        .route("/runs/{id}/log", get(pages::runs::log_chunk))
        .route("/runs/{id}/kill", post(pages::runs::kill))
        .route("/runs/{id}/retry", post(pages::runs::retry))
        .route("/executors", get(pages::groups::list))
        .route(
            "/groups/new",
            get(pages::groups::new_form).post(pages::groups::create),
        )
        .route(
            "/groups/{id}",
            get(pages::groups::edit_form).post(pages::groups::update),
        )
        .route("/workflows", get(pages::workflows::list))
        .route("/workflows/{id}", get(pages::workflows::detail))
        .route(
            "/workflows/{id}/start",
            post(pages::workflow_actions::start),
        )
        .route(
            "/workflow-runs/{id}/cancel",
            post(pages::workflow_actions::cancel),
        )
        .route(
            "/workflow-runs/{id}/nodes/{key}/retry",
            post(pages::workflow_actions::retry_node),
        )
        .route(
            "/workflow-runs/{id}/nodes/{key}/skip",
            post(pages::workflow_actions::skip_node),
        )
        .route(
            "/workflows/{id}/schedule",
            get(pages::workflow_schedule::edit_form).post(pages::workflow_schedule::update),
        )
        .route("/calendars", get(pages::calendars::list))
        .route(
            "/calendars/new",
            get(pages::calendars::new_form).post(pages::calendars::create),
        )
        .route(
            "/calendars/{name}",
            get(pages::calendars::edit_form).post(pages::calendars::update),
        )
        .route("/calendars/{name}/delete", post(pages::calendars::delete))
        .route("/users", get(pages::users::list).post(pages::users::create))
        .route("/users/{id}/delete", post(pages::users::delete))
        .route("/groups/{id}/delete", post(pages::groups::delete))
        .route("/users/{id}/role", post(pages::users::set_role))
        .route(
            "/users/{id}/password",
            get(pages::users::password_form).post(pages::users::reset_password),
        )
        .route("/language", get(pages::account::language))
        .route("/account", get(pages::account::page))
        .route("/account/password", post(pages::account::change_password))
        .route("/users/{id}/grant", post(pages::users::grant))
        .route("/users/{id}/revoke", post(pages::users::revoke))
        .route(
            "/users/{id}/tokens",
            get(pages::users::tokens).post(pages::users::create_token),
        )
        .route(
            "/users/{id}/tokens/{token}/revoke",
            post(pages::users::revoke_token),
        )
        .route("/audit", get(pages::users::audit))
        .fallback(not_found)
        .with_state(console)
}

async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    )
}

async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    )
}

async fn live_js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/live.js"),
    )
}

/// The script editor (line numbers, syntax highlighting), apart from console.js: only pages
/// with a script load it.
async fn editor_js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/editor.js"),
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

async fn not_found(headers: axum::http::HeaderMap) -> Response {
    errors::not_found_page(i18n::Lang::of_request(&headers))
}

/// Headers every answer carries: no framing (clickjacking), no sniffing, no referrer leaking
/// ids, a script policy that allows only the console's own files; under TLS, HSTS (browsers
/// then never try the console over plain HTTP, where a network attacker could answer).
fn harden(response: &mut Response, hsts: bool) {
    let headers = response.headers_mut();
    if hsts {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             frame-ancestors 'none'; form-action 'self'",
        ),
    );
}

/// Serves the console until its stage (`tasks`) is told to stop: one hyper HTTP/1.1 connection
/// per accepted stream, from the admin's own accept loops (TCP keepalive, handshake deadline,
/// TLS with reloads). The connections and the session pruning are tasks of that stage.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<xjob_tls::ServerTls>>,
    console: Shared,
    tasks: Tasks,
) {
    match listener.local_addr() {
        Ok(address) => tracing::info!(%address, tls = tls.is_some(), "web console listening"),
        Err(error) => tracing::info!(tls = tls.is_some(), %error, "web console listening"),
    }
    tasks.spawn(session::prune_loop(
        Arc::clone(&console),
        tasks.stopping().clone(),
    ));
    // Validated at start; a failure here falls back to the console's own address only.
    let hosts = console.ctx.config.allowed_hosts().unwrap_or_default();
    let guard = Arc::new(guard::Guard::new(hosts, tls.is_some()));
    let options = console
        .ctx
        .config
        .listen_options(crate::metrics::console_connection_refused);
    let app = router(console);
    match tls {
        Some(tls) => {
            let incoming = xjob_tls::tls_incoming(listener, tls, options);
            accept_loop(incoming, app, guard, &tasks).await;
        }
        None => {
            let incoming = xjob_tls::plain_incoming(listener, options);
            accept_loop(incoming, app, guard, &tasks).await;
        }
    }
}

async fn accept_loop<S, I>(incoming: S, app: Router, guard: Arc<guard::Guard>, tasks: &Tasks)
where
    S: tokio_stream::Stream<Item = std::io::Result<I>> + Unpin,
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + guard::Addresses + Unpin + Send + 'static,
{
    let cancel = tasks.stopping();
    let mut incoming = incoming;
    loop {
        let stream = tokio::select! {
            _ = cancel.cancelled() => return,
            next = incoming.next() => match next {
                Some(Ok(stream)) => stream,
                Some(Err(_)) => continue,
                None => return,
            },
        };
        let Some((local, peer)) = stream.addresses() else {
            continue;
        };
        let app = app.clone();
        let guard = Arc::clone(&guard);
        let cancel = cancel.clone();
        tasks.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let mut app = app.clone();
                let guard = Arc::clone(&guard);
                async move {
                    let mut request: axum::http::Request<hyper::body::Incoming> = request;
                    let hsts = guard.hsts(&request);
                    let mut response = match guard.refusal(&request, local) {
                        Some(refusal) => refusal,
                        None => {
                            let client = guard::ClientAddress(peer.ip().to_canonical());
                            request.extensions_mut().insert(client);
                            tower_service::Service::call(&mut app, request).await?
                        }
                    };
                    harden(&mut response, hsts);
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = cancel.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_secs(5),
                        connection,
                    )
                    .await;
                }
            }
        });
    }
}
