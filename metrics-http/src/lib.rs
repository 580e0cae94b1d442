//! The `GET /metrics` endpoint, written once for the admin and the executor SDK: each keeps its
//! own Prometheus registry and hands [`serve`] the function that renders it.
//!
//! HTTP/1.1 only, one path, no TLS: a scraper on the operator's network is the only client.
//! hyper is already built for tonic, so this costs no new crates. A request whose `Host` does
//! not name the listener is refused ([`host`]), so a page on another site cannot read the
//! metrics through DNS rebinding.

pub mod histogram;
pub mod host;
pub mod process;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, body::Incoming, header};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use histogram::AtomicHistogram;
pub use host::AllowedHosts;

/// `registry` and the process metrics ([`process`]) in the text exposition format
/// (OpenMetrics), ended by one `# EOF`.
pub fn render(registry: &prometheus_client::registry::Registry) -> String {
    use prometheus_client::encoding::text::{encode_eof, encode_registry};
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = encode_registry(&mut text, registry);
    let _ = encode_registry(&mut text, process::registry());
    let _ = encode_eof(&mut text);
    text
}

/// The content type of the text exposition format `render` returns.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Serves `GET /metrics` (HTTP/1.1) on `listener` until `cancel`, answering with `render()`;
/// other paths get 404, a `Host` that `hosts` does not allow 421. Open connections are dropped
/// on `cancel` too.
pub async fn serve(
    listener: TcpListener,
    cancel: CancellationToken,
    render: fn() -> String,
    hosts: AllowedHosts,
) {
    let hosts = std::sync::Arc::new(hosts);
    loop {
        let stream = tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors and the like: try again shortly.
                    tracing::warn!(%error, "metrics listener accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(local) = stream.local_addr() else {
            continue;
        };
        let cancel = cancel.clone();
        let hosts = std::sync::Arc::clone(&hosts);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let response = if names_listener(&request, &hosts, local) {
                    answer(&request, render)
                } else {
                    misdirected()
                };
                async move { Ok::<_, Infallible>(response) }
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

/// Whether the request's `Host` names this listener. A request without one is not a
/// browser's (browsers always send it) and is answered.
fn names_listener(request: &Request<Incoming>, hosts: &AllowedHosts, local: SocketAddr) -> bool {
    match request.headers().get(header::HOST) {
        None => true,
        Some(value) => value
            .to_str()
            .is_ok_and(|host| hosts.allows(host, local, 80)),
    }
}

fn misdirected() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(
        b"this listener answers only requests naming its own address\n",
    )));
    *response.status_mut() = StatusCode::MISDIRECTED_REQUEST;
    response
}

fn answer(request: &Request<Incoming>, render: fn() -> String) -> Response<Full<Bytes>> {
    let response = if request.uri().path() == "/metrics" {
        Response::builder()
            .header(header::CONTENT_TYPE, OPENMETRICS)
            .body(Full::new(Bytes::from(render())))
    } else {
        Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Full::new(Bytes::from_static(
                b"only /metrics is served here\n",
            )))
    };
    // The builder only fails on invalid header values, and these are constants.
    response.unwrap_or_default()
}
