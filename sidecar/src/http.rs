//! The `http` handler: each run is one HTTP/1.1 request to the app next to the sidecar.
//!
//! ```text
//! run ─expand placeholders (body, header values)─▶ connect (new connection per run)
//!     ─▶ request ─▶ status + body ─▶ body lines into the run log
//! 2xx ─▶ success "HTTP 200 OK" · other ─▶ failure "HTTP 500 Internal Server Error: <excerpt>"
//! kill / job timeout / handler timeout ─▶ the request future is dropped and the connection
//!     closed at once, so the app sees the client go away
//! ```
//!
//! Plain `http://` only: the sidecar talks to an app on the same host or pod; TLS would add a
//! certificate setup for no gain there. One connection per run keeps cancellation exact (closing
//! it is the cancel) and costs little next to a job.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HOST, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use xjob_executor::{JobContext, JobError, JobOutput, JobResult};

/// The W3C trace context header sent with each request of a traced run.
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// Placeholders expanded in the body and header values, each written `{name}`.
pub const PLACEHOLDERS: [&str; 9] = [
    "params",
    "params_json",
    "job_id",
    "log_id",
    "shard_index",
    "shard_total",
    "scheduled_at_ms",
    "attempt",
    "trigger_type",
];

/// Most response bytes written to the run log; the rest is not read.
const MAX_LOGGED_BODY: usize = 256 * 1024;
/// Most characters of the response body quoted in a failure message.
const MAX_EXCERPT_CHARS: usize = 512;

/// Where and how a handler sends its request, checked at startup.
#[derive(Debug, Clone)]
pub struct HttpTarget {
    method: Method,
    uri: Uri,
    host: String,
    port: u16,
}

impl HttpTarget {
    /// Checks the method and resolves the URL (a path is joined to `app_url`); errors name the
    /// field (`method` or `url`).
    pub fn parse(
        method: &str,
        app_url: &str,
        url: &str,
    ) -> Result<HttpTarget, (&'static str, String)> {
        let method = match method.to_ascii_uppercase().as_str() {
            "GET" => Method::GET,
            "POST" => Method::POST,
            "PUT" => Method::PUT,
            "PATCH" => Method::PATCH,
            "DELETE" => Method::DELETE,
            other => {
                return Err((
                    "method",
                    format!("{other:?} is not one of GET, POST, PUT, PATCH, DELETE"),
                ));
            }
        };
        let full = if url.starts_with('/') {
            if app_url.is_empty() {
                return Err((
                    "url",
                    format!("{url:?} is a path: set app_url (or XJOB_APP_URL) or give a full URL"),
                ));
            }
            format!("{}{url}", app_url.trim_end_matches('/'))
        } else {
            url.to_owned()
        };
        let uri: Uri = full
            .parse()
            .map_err(|error| ("url", format!("{full:?} is not a URL: {error}")))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err((
                    "url",
                    format!(
                        "{full:?}: https is not supported, the sidecar calls the app next to it \
                         over plain http"
                    ),
                ));
            }
            _ => return Err(("url", format!("{full:?} must start with http://"))),
        }
        let host = uri
            .host()
            .ok_or_else(|| ("url", format!("{full:?} has no host")))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(80);
        Ok(HttpTarget {
            method,
            uri,
            host,
            port,
        })
    }
}

/// One configured `http` handler.
#[derive(Debug)]
pub struct HttpHandler {
    target: HttpTarget,
    headers: Vec<(HeaderName, String)>,
    body: String,
    timeout_opt: Option<Duration>,
}

impl HttpHandler {
    /// Builds a handler; header names are checked here (errors name the header).
    pub fn new(
        target: HttpTarget,
        headers: &std::collections::BTreeMap<String, String>,
        body: String,
        timeout_opt: Option<Duration>,
    ) -> Result<HttpHandler, String> {
        let headers = headers
            .iter()
            .map(|(name, value)| {
                HeaderName::from_bytes(name.as_bytes())
                    .map(|name| (name, value.clone()))
                    .map_err(|_| format!("headers: {name:?} is not a header name"))
            })
            .collect::<Result<_, _>>()?;
        Ok(HttpHandler {
            target,
            headers,
            body,
            timeout_opt,
        })
    }

    /// Runs one request for `context`, until answered, stopped or timed out.
    pub async fn call(self: Arc<Self>, context: JobContext) -> JobResult {
        let target = &self.target;
        context.log(format!("{} {}", target.method, target.uri));
        let exchange = self.exchange(&context);
        let timeout = async {
            match self.timeout_opt {
                Some(timeout) => tokio::time::sleep(timeout).await,
                None => std::future::pending().await,
            }
        };
        // Dropping `exchange` drops the connection: the app sees the request cancelled.
        tokio::select! {
            result = exchange => result,
            () = context.cancelled() => {
                context.log("run stopped: request cancelled, connection closed");
                Err(JobError::new("http request cancelled"))
            }
            () = timeout => {
                let timeout = self.timeout_opt.unwrap_or_default();
                context.log(format!("no answer after {timeout:?}: request cancelled, connection closed"));
                Err(JobError::new(format!("http request timed out after {timeout:?} (handler timeout)")))
            }
        }
    }

    async fn exchange(&self, context: &JobContext) -> JobResult {
        let target = &self.target;
        let stream = TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|error| {
                JobError::new(format!(
                    "cannot connect to {}:{}: {error}",
                    target.host, target.port
                ))
            })?;
        let _ = stream.set_nodelay(true);
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| JobError::new(format!("http handshake failed: {error}")))?;
        // Aborted when this future is dropped (kill, timeout): that closes the socket.
        let connection = AbortOnDrop(tokio::spawn(connection));
        let response = sender
            .send_request(self.request(context)?)
            .await
            .map_err(|error| JobError::new(format!("http request failed: {error}")))?;
        let outcome = read_response(response, context).await;
        drop(connection);
        outcome
    }

    fn request(&self, context: &JobContext) -> Result<Request<Full<Bytes>>, JobError> {
        let target = &self.target;
        let path = target
            .uri
            .path_and_query()
            .map_or("/", |path| path.as_str())
            .to_owned();
        let mut builder = Request::builder().method(target.method.clone()).uri(path);
        if let Some(authority) = target.uri.authority() {
            let host = HeaderValue::from_str(authority.as_str())
                .map_err(|_| JobError::new("url authority is not a valid Host header"))?;
            builder = builder.header(HOST, host);
        }
        // The run's trace context, so the application's spans join the run's trace (a
        // `traceparent` the config sets itself wins).
        let traceparent = context.traceparent();
        let configured = self.headers.iter().any(|(name, _)| name == TRACEPARENT);
        if !traceparent.is_empty() && !configured {
            let value = HeaderValue::from_str(&traceparent)
                .map_err(|_| JobError::new("the run's traceparent is not a valid header value"))?;
            builder = builder.header(TRACEPARENT, value);
        }
        for (name, template) in &self.headers {
            let value = HeaderValue::from_str(&expand(template, context)).map_err(|_| {
                JobError::new(format!(
                    "header {name} is not a valid header value after expansion"
                ))
            })?;
            builder = builder.header(name, value);
        }
        let body = Bytes::from(expand(&self.body, context));
        builder
            .body(Full::new(body))
            .map_err(|error| JobError::new(format!("cannot build the request: {error}")))
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Logs the status and (up to [`MAX_LOGGED_BODY`]) the body; 2xx is success.
async fn read_response(response: Response<Incoming>, context: &JobContext) -> JobResult {
    let status = response.status();
    let reason = status.canonical_reason().unwrap_or("");
    context.log(format!("HTTP {} {reason}", status.as_u16()));
    let mut body = response.into_body();
    let mut received: Vec<u8> = Vec::new();
    let mut truncated = false;
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|error| JobError::new(format!("reading the response failed: {error}")))?;
        if let Ok(data) = frame.into_data() {
            let room = MAX_LOGGED_BODY - received.len();
            received.extend_from_slice(&data[..data.len().min(room)]);
            if data.len() > room {
                truncated = true;
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&received);
    for line in text.lines() {
        context.log(line);
    }
    if truncated {
        context.log(format!(
            "(response body longer than {MAX_LOGGED_BODY} bytes: the rest was not read)"
        ));
    }
    let summary = format!("HTTP {} {reason}", status.as_u16());
    if status.is_success() {
        Ok(JobOutput::message(summary))
    } else {
        Err(JobError::new(format!(
            "{summary}: {}",
            excerpt(&text, MAX_EXCERPT_CHARS)
        )))
    }
}

fn excerpt(text: &str, max_chars: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Replaces each `{placeholder}` of [`PLACEHOLDERS`] with the run's value; other braces stay.
pub fn expand(template: &str, context: &JobContext) -> String {
    let mut expanded = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        expanded.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let value_opt = after
            .find('}')
            .and_then(|close| value_of(&after[..close], context).map(|value| (close, value)));
        match value_opt {
            Some((close, value)) => {
                expanded.push_str(&value);
                rest = &after[close + 1..];
            }
            None => {
                expanded.push('{');
                rest = after;
            }
        }
    }
    expanded.push_str(rest);
    expanded
}

fn value_of(name: &str, context: &JobContext) -> Option<String> {
    Some(match name {
        "params" => context.params().to_owned(),
        "params_json" => json_string(context.params()),
        "job_id" => context.job_id().to_string(),
        "log_id" => context.log_id().to_string(),
        "shard_index" => context.shard_index().to_string(),
        "shard_total" => context.shard_total().to_string(),
        "scheduled_at_ms" => context.scheduled_at_ms().to_string(),
        "attempt" => context.attempt().to_string(),
        "trigger_type" => {
            let name = context.trigger_type().as_str_name();
            name.strip_prefix("TRIGGER_TYPE_")
                .unwrap_or(name)
                .to_owned()
        }
        _ => return None,
    })
}

/// `text` as a JSON string literal, quotes included.
fn json_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            c if u32::from(c) < 0x20 => quoted.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_and_controls() {
        assert_eq!(json_string(r#"a "b" \ c"#), r#""a \"b\" \\ c""#);
        assert_eq!(json_string("x\ny\u{1}"), "\"x\\ny\\u0001\"");
    }

    #[test]
    fn targets_join_paths_to_the_app_url() {
        let target =
            HttpTarget::parse("post", "http://127.0.0.1:8000/", "/jobs/run?x=1").expect("target");
        assert_eq!(target.uri.to_string(), "http://127.0.0.1:8000/jobs/run?x=1");
        assert_eq!((target.host.as_str(), target.port), ("127.0.0.1", 8000));
        let target = HttpTarget::parse("GET", "", "http://app/health").expect("target");
        assert_eq!(target.port, 80);
    }

    #[test]
    fn excerpts_are_bounded_in_characters() {
        assert_eq!(excerpt("  short  ", 10), "short");
        assert_eq!(excerpt("ééééé", 2), "éé…");
    }
}
