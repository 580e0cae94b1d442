//! The tracing scenario: a real Jaeger (v2, in-memory storage, OTLP/gRPC receiver and query
//! API on free loopback ports), an admin exporting to it (`otlp_endpoint`) and the executor
//! under test exporting to it through the standard `OTEL_EXPORTER_OTLP_ENDPOINT`. A run that
//! succeeds and one that fails are each one trace holding the same span names in every
//! language, chained fire → dispatch → run → handler → callback → complete, with no span whose
//! parent is missing from the trace, and the failed run's executor spans in ERROR.
//!
//! Jaeger comes from `XJOB_JAEGER_BIN` (built by `.ci/jaeger.sh`). Without it the scenario says
//! so and passes, except in CI (`CI` set), where it fails.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use xjob_proto::pb;
use xjob_testkit::process::ChildProcess;

use super::admin::{AdminProcess, free_port};
use super::world::{REGISTER_BOUND, RUN_BOUND, TOKEN, World, expect_status};
use crate::wait_until;

/// Every run's trace holds these spans, in this parent → child order; the executor makes
/// `run`, `handler` and `callback`, the admin the rest.
const CHAIN: [(&str, bool); 6] = [
    ("fire", false),
    ("dispatch", false),
    ("run", true),
    ("handler", true),
    ("callback", true),
    ("complete", false),
];

/// How long spans may take to reach Jaeger: the SDKs' and the admin's batch exporters send
/// every few seconds.
const EXPORT_BOUND: Duration = Duration::from_secs(40);

pub async fn tracing(world: &mut World) -> anyhow::Result<()> {
    let binary = match std::env::var("XJOB_JAEGER_BIN") {
        Ok(path) if Path::new(&path).is_file() => PathBuf::from(path),
        _ if std::env::var_os("CI").is_some() => {
            anyhow::bail!("XJOB_JAEGER_BIN is not a Jaeger binary (build one with .ci/jaeger.sh)")
        }
        _ => {
            eprintln!(
                "tracing: XJOB_JAEGER_BIN is not set; skipped (build Jaeger with .ci/jaeger.sh)"
            );
            return Ok(());
        }
    };
    let name = world.app_name("trace-files");
    let dir = world.work_dir.join(name);
    std::fs::create_dir_all(&dir)?;
    let (otlp_port, query_port) = (free_port()?, free_port()?);
    let _jaeger = start_jaeger(&binary, &dir, otlp_port, query_port)?;
    wait_until(Duration::from_secs(30), "Jaeger's query API", || {
        http_get(query_port, "/api/services")
    })
    .await?;
    let otlp = format!("http://127.0.0.1:{otlp_port}");
    let admin = AdminProcess::start_with_config(
        world.admin.binary(),
        &dir.join("admin"),
        free_port()?,
        None,
        &format!("otlp_endpoint = {otlp:?}\n"),
    )
    .await?;
    let client = admin.client().await?;
    // The world's helpers drive the traced admin for this scenario; the plain one comes back
    // after (the traced admin is SIGKILLed when dropped).
    let plain_admin = std::mem::replace(&mut world.admin, admin);
    let plain_client = std::mem::replace(&mut world.client, client);
    let outcome = traced_runs(world, &otlp, query_port).await;
    world.stop_executors().await;
    world.admin = plain_admin;
    world.client = plain_client;
    outcome
}

async fn traced_runs(world: &mut World, otlp: &str, query_port: u16) -> anyhow::Result<()> {
    let app = world.app_name("traced");
    let group = world.create_group(&app).await?;
    let env = vec![("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), otlp.to_string())];
    let admin_url = world.admin.url();
    let index = world.spawn_executor_env(&app, TOKEN, free_port()?, &admin_url, env)?;
    let address = world.executors[index].address();
    world.wait_listed(&app, &address, REGISTER_BOUND).await?;
    let succeed = world.create_job(World::job(group, "succeed")).await?;
    let fail = world.create_job(World::job(group, "fail")).await?;
    let ok_log = world.trigger_one(succeed, "traced").await?;
    let failed_log = world.trigger_one(fail, "traced").await?;
    let ok = world.wait_final(ok_log, RUN_BOUND).await?;
    expect_status(&ok, pb::RunStatus::Success, 200)?;
    let failed = world.wait_final(failed_log, RUN_BOUND).await?;
    expect_status(&failed, pb::RunStatus::Failed, 500)?;
    anyhow::ensure!(
        ok.trace_id != failed.trace_id,
        "two runs share trace {}",
        ok.trace_id
    );
    for (log, errored) in [(&ok, false), (&failed, true)] {
        let spans = complete_trace(query_port, &log.trace_id).await?;
        check_trace(&spans, &app, log.id, errored).map_err(|error| {
            anyhow::anyhow!("trace {} of log {}: {error:#}", log.trace_id, log.id)
        })?;
        one_trace_per_run(query_port, &app, log.id, &log.trace_id).await?;
    }
    Ok(())
}

/// One span as Jaeger's query API returns it.
#[derive(Debug, Clone)]
struct JaegerSpan {
    trace_id: String,
    span_id: String,
    name: String,
    service: String,
    /// `CHILD_OF` span id.
    parent: Option<String>,
    tags: HashMap<String, serde_json::Value>,
}

impl JaegerSpan {
    fn log_id(&self) -> Option<i64> {
        self.tags
            .get("xjob.log_id")
            .and_then(serde_json::Value::as_i64)
    }

    /// Whether the span ended with an ERROR status (Jaeger's `error` tag).
    fn errored(&self) -> bool {
        self.tags.get("error").and_then(serde_json::Value::as_bool) == Some(true)
            || self
                .tags
                .get("otel.status_code")
                .and_then(serde_json::Value::as_str)
                == Some("ERROR")
    }
}

/// The spans of trace `trace_id` once every name of the chain is in it.
async fn complete_trace(query_port: u16, trace_id: &str) -> anyhow::Result<Vec<JaegerSpan>> {
    anyhow::ensure!(!trace_id.is_empty(), "the run has no trace id");
    let path = format!("/api/traces/{trace_id}");
    let waited = wait_until(EXPORT_BOUND, "the whole trace in Jaeger", || async {
        let body = http_get(query_port, &path).await?;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        let spans = spans_of(&json["data"][0]);
        CHAIN
            .iter()
            .all(|(name, _)| spans.iter().any(|span| span.name == *name))
            .then_some(spans)
    })
    .await;
    match waited {
        Ok(spans) => Ok(spans),
        Err(error) => {
            let body = http_get(query_port, &path).await.unwrap_or_default();
            let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let names: Vec<String> = spans_of(&json["data"][0])
                .iter()
                .map(|span| format!("{} ({})", span.name, span.service))
                .collect();
            anyhow::bail!("{error:#}; spans there: {names:?}")
        }
    }
}

/// The chain, each link a child of the one before, the executor's spans from its service, no
/// span with a parent outside the trace, and the run's and handler's status.
fn check_trace(spans: &[JaegerSpan], app: &str, log_id: i64, errored: bool) -> anyhow::Result<()> {
    let one = |name: &str| -> anyhow::Result<&JaegerSpan> {
        let found: Vec<&JaegerSpan> = spans.iter().filter(|span| span.name == name).collect();
        match found.as_slice() {
            [span] => Ok(*span),
            _ => anyhow::bail!("{} `{name}` spans, one expected", found.len()),
        }
    };
    for window in CHAIN.windows(2) {
        let (parent, child) = (one(window[0].0)?, one(window[1].0)?);
        anyhow::ensure!(
            child.parent.as_deref() == Some(parent.span_id.as_str()),
            "`{}` is not a child of `{}` (its parent: {:?})",
            child.name,
            parent.name,
            child.parent
        );
    }
    for (name, on_executor) in CHAIN {
        let span = one(name)?;
        if on_executor {
            anyhow::ensure!(
                span.service == app,
                "`{name}` comes from service {}",
                span.service
            );
        }
    }
    anyhow::ensure!(
        one("run")?.log_id() == Some(log_id),
        "the run span names another log"
    );
    let ids: Vec<&str> = spans.iter().map(|span| span.span_id.as_str()).collect();
    for span in spans {
        if let Some(parent) = &span.parent {
            anyhow::ensure!(
                ids.contains(&parent.as_str()),
                "`{}` has a parent {parent} that is not in the trace",
                span.name
            );
        }
    }
    let roots: Vec<&str> = spans
        .iter()
        .filter(|span| span.parent.is_none())
        .map(|span| span.name.as_str())
        .collect();
    anyhow::ensure!(
        roots == ["fire"],
        "roots of the trace: {roots:?}, only `fire` expected"
    );
    for name in ["run", "handler"] {
        anyhow::ensure!(
            one(name)?.errored() == errored,
            "`{name}` of a {} run: error status {}",
            if errored { "failed" } else { "successful" },
            one(name)?.errored()
        );
    }
    Ok(())
}

/// No `run` span of this log outside its trace (a run is one trace, not one per side).
async fn one_trace_per_run(
    query_port: u16,
    app: &str,
    log_id: i64,
    trace_id: &str,
) -> anyhow::Result<()> {
    let body = http_get(
        query_port,
        &format!("/api/traces?service={app}&operation=run&limit=100&lookback=1h"),
    )
    .await
    .ok_or_else(|| anyhow::anyhow!("Jaeger's trace search did not answer"))?;
    let json: serde_json::Value = serde_json::from_str(&body)?;
    let traces = json["data"].as_array().cloned().unwrap_or_default();
    for span in traces.iter().flat_map(spans_of) {
        if span.name == "run" && span.log_id() == Some(log_id) {
            anyhow::ensure!(
                same_id(&span.trace_id, trace_id),
                "log {log_id} has a run span in trace {} besides its own {trace_id}",
                span.trace_id
            );
        }
    }
    Ok(())
}

/// Jaeger ids compared without leading zeros (its JSON may drop them).
fn same_id(left: &str, right: &str) -> bool {
    left.trim_start_matches('0')
        .eq_ignore_ascii_case(right.trim_start_matches('0'))
}

fn spans_of(trace: &serde_json::Value) -> Vec<JaegerSpan> {
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
            JaegerSpan {
                trace_id: text(&span["traceID"]),
                span_id: text(&span["spanID"]),
                name: text(&span["operationName"]),
                service: services
                    .get(span["processID"].as_str().unwrap_or_default())
                    .cloned()
                    .unwrap_or_default(),
                parent: references
                    .iter()
                    .find(|reference| reference["refType"] == "CHILD_OF")
                    .map(|reference| text(&reference["spanID"])),
                tags: span["tags"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(|tag| (text(&tag["key"]), tag["value"].clone()))
                    .collect(),
            }
        })
        .collect()
}

/// Jaeger v2 with in-memory storage, OTLP/gRPC on `otlp_port` and the query API on
/// `query_port`, all on loopback; its own log goes to `dir/jaeger.log`.
fn start_jaeger(
    binary: &Path,
    dir: &Path,
    otlp_port: u16,
    query_port: u16,
) -> anyhow::Result<ChildProcess> {
    let query_grpc_port = free_port()?;
    let config = format!(
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
    );
    let config_file = dir.join("jaeger.yaml");
    std::fs::write(&config_file, config)?;
    let log = std::fs::File::create(dir.join("jaeger.log"))?;
    let mut command = Command::new(binary);
    command.arg("--config").arg(&config_file).stderr(log);
    ChildProcess::spawn("jaeger", &mut command)
}

/// `GET path` on Jaeger's query API; the body when the status is 200.
async fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    // HTTP/1.0: the server closes the connection after the body and never chunks it.
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response))
        .await
        .ok()?
        .ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    (head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200")).then(|| body.to_string())
}
