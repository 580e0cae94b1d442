//! The `GET /metrics` endpoint, written once for the admin and the executor SDK: each keeps its
//! own Prometheus registry and hands [`serve`] the function that renders it.
//!
//! HTTP/1.1 only, one path, no TLS: a scraper on the operator's network is the only client.
//! hyper is already built for tonic, so this costs no new crates.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, body::Incoming, header};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The content type of the text exposition format `render` returns.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Serves `GET /metrics` (HTTP/1.1) on `listener` until `cancel`, answering with `render()`;
/// other paths get 404. Open connections are dropped on `cancel` too.
pub async fn serve(listener: TcpListener, cancel: CancellationToken, render: fn() -> String) {
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
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| answer(request, render));
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                _ = cancel.cancelled() => {}
            }
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    render: fn() -> String,
) -> Result<Response<Full<Bytes>>, Infallible> {
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
    Ok(response.unwrap_or_default())
}
