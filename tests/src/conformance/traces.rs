//! The tracing scenario: a real Jaeger (v2, in-memory storage, OTLP/gRPC receiver and query
//! API on free loopback ports), an admin exporting to it (`otlp_endpoint`) and the executor
//! under test exporting to it through the standard `OTEL_EXPORTER_OTLP_ENDPOINT`. A run that
//! succeeds and one that fails are each one trace holding the same span names in every
//! language, chained fire → dispatch → run → handler → callback → complete, with no span whose
//! parent is missing from the trace, and the failed run's executor spans in ERROR.
//!
//! Jaeger comes from `XJOB_JAEGER_BIN` (built by `.ci/jaeger.sh`). Without it the scenario says
//! so and passes, except in CI (`CI` set), where it fails.

use std::time::Duration;

use xjob_proto::pb;
use xjob_testkit::jaeger::{self, Jaeger, Span as JaegerSpan, same_id};

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
    let binary = match jaeger::binary() {
        Ok(binary) => binary,
        Err(reason) if std::env::var_os("CI").is_some() => anyhow::bail!("{reason}"),
        Err(reason) => {
            eprintln!("tracing: {reason}; skipped");
            return Ok(());
        }
    };
    let name = world.app_name("trace-files");
    let dir = world.work_dir.join(name);
    std::fs::create_dir_all(&dir)?;
    let jaeger = Jaeger::start(&binary, &dir).await?;
    let otlp = jaeger.otlp_endpoint.clone();
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
    let outcome = traced_runs(world, &otlp, &jaeger).await;
    world.stop_executors().await;
    world.admin = plain_admin;
    world.client = plain_client;
    outcome
}

async fn traced_runs(world: &mut World, otlp: &str, jaeger: &Jaeger) -> anyhow::Result<()> {
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
        let spans = complete_trace(jaeger, &log.trace_id).await?;
        check_trace(&spans, &app, log.id, errored).map_err(|error| {
            anyhow::anyhow!("trace {} of log {}: {error:#}", log.trace_id, log.id)
        })?;
        one_trace_per_run(jaeger, &app, log.id, &log.trace_id).await?;
    }
    Ok(())
}

/// The spans of trace `trace_id` once every name of the chain is in it.
async fn complete_trace(jaeger: &Jaeger, trace_id: &str) -> anyhow::Result<Vec<JaegerSpan>> {
    anyhow::ensure!(!trace_id.is_empty(), "the run has no trace id");
    let waited = wait_until(EXPORT_BOUND, "the whole trace in Jaeger", || async {
        let spans = jaeger.trace(trace_id).await.ok()?;
        CHAIN
            .iter()
            .all(|(name, _)| spans.iter().any(|span| span.name == *name))
            .then_some(spans)
    })
    .await;
    match waited {
        Ok(spans) => Ok(spans),
        Err(error) => {
            let names: Vec<String> = jaeger
                .trace(trace_id)
                .await
                .unwrap_or_default()
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
    jaeger: &Jaeger,
    app: &str,
    log_id: i64,
    trace_id: &str,
) -> anyhow::Result<()> {
    let spans = jaeger
        .search(&format!(
            "service={app}&operation=run&limit=100&lookback=1h"
        ))
        .await
        .map_err(|error| anyhow::anyhow!("Jaeger's trace search: {error:#}"))?;
    for span in spans {
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
