//! A real Jaeger for the trace tests: Jaeger v2 with in-memory storage, its OTLP/gRPC receiver
//! and query API on free loopback ports, and the spans read back from its query API.
//!
//! Jaeger is built by `.ci/jaeger.sh` and found through `XJOB_JAEGER_BIN`; [`binary`] says why
//! it cannot be used, so each test decides whether that skips it (a developer's machine) or
//! fails it (CI).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::net::free_port;
use crate::process::ChildProcess;
use crate::wait_until;

/// How long Jaeger may take to answer its query API after it was started.
const STARTUP_BOUND: Duration = Duration::from_secs(30);

/// The Jaeger binary named by `XJOB_JAEGER_BIN`, or why there is none.
pub fn binary() -> Result<PathBuf, String> {
    match std::env::var("XJOB_JAEGER_BIN") {
        Ok(path) if Path::new(&path).is_file() => Ok(PathBuf::from(path)),
        Ok(path) => Err(format!("XJOB_JAEGER_BIN={path} is not a file")),
        Err(_) => Err("XJOB_JAEGER_BIN is not set (build Jaeger with .ci/jaeger.sh)".into()),
    }
}

/// A running Jaeger, killed when dropped.
pub struct Jaeger {
    /// Where OTLP/gRPC exporters send (`http://127.0.0.1:PORT`).
    pub otlp_endpoint: String,
    /// The port of the HTTP query API (`/api/traces/…`).
    pub query_port: u16,
    _process: ChildProcess,
}

impl Jaeger {
    /// Starts Jaeger with its configuration and log (`jaeger.yaml`, `jaeger.log`) in `dir`,
    /// and waits until its query API answers.
    pub async fn start(binary: &Path, dir: &Path) -> anyhow::Result<Jaeger> {
        let (otlp_port, query_port, query_grpc_port) = (free_port()?, free_port()?, free_port()?);
        let config_file = dir.join("jaeger.yaml");
        std::fs::write(&config_file, config(otlp_port, query_port, query_grpc_port))?;
        let log = std::fs::File::create(dir.join("jaeger.log"))?;
        let mut command = Command::new(binary);
        command.arg("--config").arg(&config_file).stderr(log);
        let process = ChildProcess::spawn("jaeger", &mut command)?;
        wait_until(STARTUP_BOUND, "Jaeger's query API", || async {
            get(query_port, "/api/services").await.ok()
        })
        .await?;
        Ok(Jaeger {
            otlp_endpoint: format!("http://127.0.0.1:{otlp_port}"),
            query_port,
            _process: process,
        })
    }

    /// `GET path` on the query API: the body when the status is 200.
    pub async fn get(&self, path: &str) -> anyhow::Result<String> {
        get(self.query_port, path).await
    }

    /// The spans of trace `trace_id` (empty when Jaeger does not know it yet).
    pub async fn trace(&self, trace_id: &str) -> anyhow::Result<Vec<Span>> {
        let body = self.get(&format!("/api/traces/{trace_id}")).await?;
        let json: serde_json::Value = serde_json::from_str(&body)?;
        Ok(spans_of(&json["data"][0]))
    }

    /// The spans of every trace a search (`/api/traces?service=…`) answers.
    pub async fn search(&self, query: &str) -> anyhow::Result<Vec<Span>> {
        let body = self.get(&format!("/api/traces?{query}")).await?;
        let json: serde_json::Value = serde_json::from_str(&body)?;
        let traces = json["data"].as_array().cloned().unwrap_or_default();
        Ok(traces.iter().flat_map(spans_of).collect())
    }
}

/// Jaeger v2's configuration: in-memory storage, no telemetry ports of its own, everything on
/// loopback.
fn config(otlp_port: u16, query_port: u16, query_grpc_port: u16) -> String {
    format!(
        "service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query_port}
    grpc:
      endpoint: 127.0.0.1:{query_grpc_port}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{otlp_port}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"
    )
}

/// `GET path` on the query API at `port`: the body when the status is 200.
async fn get(port: u16, path: &str) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    // HTTP/1.0: the server closes the connection after the body and never chunks it.
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response)).await??;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP header in {response:.200}"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        anyhow::bail!("GET {path}: {}", head.lines().next().unwrap_or_default());
    }
    Ok(body.to_string())
}

/// One span as Jaeger's query API returns it.
#[derive(Debug, Clone)]
pub struct Span {
    pub trace_id: String,
    pub span_id: String,
    pub name: String,
    /// The service (`service.name`) of the process that made it.
    pub service: String,
    /// `CHILD_OF` span id.
    pub parent: Option<String>,
    /// `(trace id, span id)` of `FOLLOWS_FROM` references (links).
    pub links: Vec<(String, String)>,
    pub tags: HashMap<String, serde_json::Value>,
    pub duration_us: i64,
}

impl Span {
    /// The run the span belongs to (its `xjob.log_id` attribute).
    pub fn log_id(&self) -> Option<i64> {
        self.tags
            .get("xjob.log_id")
            .and_then(serde_json::Value::as_i64)
    }

    /// Whether the span ended with an ERROR status (Jaeger's `error` tag).
    pub fn errored(&self) -> bool {
        self.tags.get("error").and_then(serde_json::Value::as_bool) == Some(true)
            || self
                .tags
                .get("otel.status_code")
                .and_then(serde_json::Value::as_str)
                == Some("ERROR")
    }
}

/// Jaeger ids compared without leading zeros (its JSON may drop them).
pub fn same_id(left: &str, right: &str) -> bool {
    left.trim_start_matches('0')
        .eq_ignore_ascii_case(right.trim_start_matches('0'))
}

/// The spans of one trace of a query answer (`data[i]`).
pub fn spans_of(trace: &serde_json::Value) -> Vec<Span> {
    let text = |value: &serde_json::Value| value.as_str().unwrap_or_default().to_string();
    let services: HashMap<String, String> = trace["processes"]
        .as_object()
        .map(|processes| {
            processes
                .iter()
                .map(|(id, process)| (id.clone(), text(&process["serviceName"])))
                .collect()
        })
        .unwrap_or_default();
    let spans = trace["spans"].as_array().cloned().unwrap_or_default();
    spans
        .iter()
        .map(|span| {
            let references = span["references"].as_array().cloned().unwrap_or_default();
            let reference_of = |kind: &'static str| {
                references
                    .iter()
                    .filter(move |reference| reference["refType"] == kind)
            };
            Span {
                trace_id: text(&span["traceID"]),
                span_id: text(&span["spanID"]),
                name: text(&span["operationName"]),
                service: services
                    .get(span["processID"].as_str().unwrap_or_default())
                    .cloned()
                    .unwrap_or_default(),
                parent: reference_of("CHILD_OF")
                    .next()
                    .map(|reference| text(&reference["spanID"])),
                links: reference_of("FOLLOWS_FROM")
                    .map(|reference| (text(&reference["traceID"]), text(&reference["spanID"])))
                    .collect(),
                tags: span["tags"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(|tag| (text(&tag["key"]), tag["value"].clone()))
                    .collect(),
                duration_us: span["duration"].as_i64().unwrap_or_default(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_answer_becomes_spans_with_services_parents_links_and_tags() {
        let answer = serde_json::json!({
            "processes": {"p1": {"serviceName": "xjob-admin"}, "p2": {"serviceName": "app"}},
            "spans": [
                {"traceID": "0abc", "spanID": "01", "operationName": "fire", "processID": "p1",
                 "references": [{"refType": "FOLLOWS_FROM", "traceID": "0def", "spanID": "09"}],
                 "tags": [{"key": "xjob.log_id", "value": 7}], "duration": 12},
                {"traceID": "0abc", "spanID": "02", "operationName": "handler", "processID": "p2",
                 "references": [{"refType": "CHILD_OF", "traceID": "0abc", "spanID": "01"}],
                 "tags": [{"key": "otel.status_code", "value": "ERROR"}], "duration": 3}
            ]
        });
        let spans = spans_of(&answer);
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].service, "xjob-admin");
        assert_eq!(spans[0].log_id(), Some(7));
        assert_eq!(spans[0].links, vec![("0def".to_string(), "09".to_string())]);
        assert!(!spans[0].errored());
        assert_eq!(spans[1].parent.as_deref(), Some("01"));
        assert!(spans[1].errored());
        assert!(same_id("0abc", "ABC"));
        assert!(!same_id("abc", "abd"));
    }
}
