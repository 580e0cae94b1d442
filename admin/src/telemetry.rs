//! Traces over OTLP: off unless an endpoint is configured, then one trace per run (see
//! docs/observability.md). The admin's spans are made with the OpenTelemetry API on one
//! process-wide tracer, reached through [`tracer`]; code that traces asks for it and does
//! nothing when it is `None`, so an admin without an endpoint builds no spans at all.
//!
//! The exporter and the SDK read the standard variables themselves: `OTEL_EXPORTER_OTLP_ENDPOINT`
//! / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (unless `otlp_endpoint` is set in the config),
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and `_ARG`.

use std::sync::OnceLock;
use std::time::SystemTime;

use opentelemetry::KeyValue;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, TraceFlags, TraceId, TraceState, Tracer as _, TracerProvider,
};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracer, SdkTracerProvider};
use xjob_proto::traceparent::Traceparent;

mod planned_ids;

/// The service name when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one.
pub const DEFAULT_SERVICE_NAME: &str = "xjob-admin";

static TRACER: OnceLock<SdkTracer> = OnceLock::new();
/// A tracer with the admin's sampler and ids that exports nothing: asked for a sampling
/// decision ahead of a span that may never exist ([`WorkflowRunTrace::plan`]).
static PROBE: OnceLock<SdkTracer> = OnceLock::new();

/// The admin's tracer, when traces are exported.
pub fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

fn probe_tracer() -> Option<&'static SdkTracer> {
    PROBE.get()
}

/// The exporting half of tracing, kept by `main` to flush spans at shutdown.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Starts exporting when `config_endpoint` (the config's `otlp_endpoint`) or an
    /// `OTEL_EXPORTER_OTLP_*ENDPOINT` variable is set; otherwise tracing stays off. Call once,
    /// inside the Tokio runtime (the gRPC exporter lives on it).
    pub fn start(config_endpoint: &str) -> anyhow::Result<Telemetry> {
        let env = |key: &str| std::env::var(key).ok().filter(|value| !value.is_empty());
        let Some(provider) = provider(config_endpoint, DEFAULT_SERVICE_NAME, env)? else {
            return Ok(Telemetry { provider: None });
        };
        let tracer = provider.tracer("xjob-admin");
        if TRACER.set(tracer).is_err() {
            anyhow::bail!("tracing was started twice");
        }
        // No processor: its spans go nowhere. The sampler comes from the same variables.
        let probe = SdkTracerProvider::builder()
            .with_id_generator(RootSpanIds::default())
            .build();
        let _ = PROBE.set(probe.tracer("xjob-admin-probe"));
        Ok(Telemetry {
            provider: Some(provider),
        })
    }

    /// Tracing off, whatever the environment says (`xjob migrate`).
    pub fn off() -> Telemetry {
        Telemetry { provider: None }
    }

    /// The `tracing` layer that exports the admin's `tracing` spans into the same traces.
    pub fn layer<S>(&self) -> Option<tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        let provider = self.provider.as_ref()?;
        Some(tracing_opentelemetry::layer().with_tracer(provider.tracer("xjob-admin")))
    }

    /// Sends the spans still buffered and stops the exporter (graceful shutdown).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown()
        {
            tracing::warn!(%error, "flushing traces at shutdown failed");
        }
    }
}

/// A batch-exporting provider when an endpoint is configured; `None` when tracing is off.
/// `default_service` names the service unless the standard variables do.
pub fn provider(
    config_endpoint: &str,
    default_service: &str,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<SdkTracerProvider>> {
    let env_endpoint = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .is_some();
    if config_endpoint.is_empty() && !env_endpoint {
        return Ok(None);
    }
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    if !config_endpoint.is_empty() {
        exporter = exporter.with_endpoint(config_endpoint);
    }
    let exporter = exporter
        .build()
        .map_err(|error| anyhow::anyhow!("OTLP trace exporter: {error}"))?;
    let named_by_env = env("OTEL_SERVICE_NAME").is_some()
        || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| {
            attributes
                .split(',')
                .any(|pair| pair.trim_start().starts_with("service.name="))
        });
    let mut resource = Resource::builder();
    if !named_by_env {
        resource = resource.with_service_name(default_service.to_string());
    }
    // The sampler comes from OTEL_TRACES_SAMPLER/_ARG (the SDK's default config reads them).
    Ok(Some(
        SdkTracerProvider::builder()
            .with_resource(resource.build())
            .with_id_generator(RootSpanIds::default())
            .with_batch_exporter(exporter)
            .build(),
    ))
}

/// Ids whose every root span (a run's `fire` span, unless a caller's trace holds it) has the
/// trace id's low 8 bytes as its span id. A run row keeps only its trace id; a retry or child
/// job links to the earlier run by that id, and this makes the link name a span its trace
/// holds (the `fire` span) instead of one nobody has.
///
/// The SDK draws a root span's span id, then its trace id, one after the other on one thread
/// (`a_root_spans_id_is_the_low_half_of_its_trace_id` holds it to that): the trace id takes the
/// span id drawn last on this thread as its low half, and a fresh random high half.
#[derive(Debug, Default)]
struct RootSpanIds {
    random: RandomIdGenerator,
}

thread_local! {
    static LAST_SPAN_ID: std::cell::Cell<[u8; 8]> = const { std::cell::Cell::new([0; 8]) };
}

impl IdGenerator for RootSpanIds {
    fn new_trace_id(&self) -> TraceId {
        if let Some(planned) = planned_ids::take_next_root_trace_id() {
            return planned;
        }
        let high = self.random.new_trace_id().to_bytes();
        let low = LAST_SPAN_ID.with(std::cell::Cell::get);
        if low == [0; 8] {
            return TraceId::from_bytes(high);
        }
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&high[..8]);
        bytes[8..].copy_from_slice(&low);
        TraceId::from_bytes(bytes)
    }

    fn new_span_id(&self) -> SpanId {
        let span_id = planned_ids::next_root_span_id().unwrap_or_else(|| self.random.new_span_id());
        LAST_SPAN_ID.with(|last| last.set(span_id.to_bytes()));
        span_id
    }
}

/// The span a run row's trace id names: its root, whose span id is the trace id's low half
/// ([`RootSpanIds`]). For a run that joined a caller's trace (TriggerJob with a `traceparent`)
/// that is the caller's root, which holds such an id only when an xjob admin began that trace.
fn root_span_of(trace_id: &str) -> Option<SpanId> {
    SpanId::from_hex(trace_id.get(16..)?).ok()
}

/// W3C `traceparent` of a span (written by `xjob_proto::traceparent`); empty for none.
pub fn traceparent(context: &SpanContext) -> String {
    if !context.is_valid() {
        return String::new();
    }
    Traceparent {
        trace_id: u128::from_be_bytes(context.trace_id().to_bytes()),
        span_id: u64::from_be_bytes(context.span_id().to_bytes()),
        flags: context.trace_flags().to_u8(),
    }
    .to_string()
}

/// The remote span a W3C `traceparent` names; `None` for anything else (a bad header is
/// ignored, never an error: tracing must not refuse work).
pub fn parse_traceparent(text: &str) -> Option<SpanContext> {
    let header = Traceparent::parse(text)?;
    Some(SpanContext::new(
        TraceId::from(header.trace_id),
        SpanId::from(header.span_id),
        TraceFlags::new(header.flags),
        true,
        TraceState::default(),
    ))
}

/// The trace id a log row names (32 hex digits), as the context of its root span to link to
/// or hang a span under: the run's `fire` span ([`RootSpanIds`]).
pub fn trace_of_row(trace_id: &str) -> Option<SpanContext> {
    if trace_id.len() != 32 {
        return None;
    }
    let trace = TraceId::from_hex(trace_id).ok()?;
    let span = root_span_of(trace_id)?;
    let context = SpanContext::new(
        trace,
        span,
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

/// The `tracing` target of [`run_span`]: the log output shows it, trace export leaves it out
/// (the run's trace has its own spans; this one only labels log lines).
pub const RUN_SPAN_TARGET: &str = "xjob_admin::run";

/// A `tracing` span whose fields label every log line written inside it with the run: its
/// `log_id`, `job_id` and, when the run is traced, `trace_id` (32 hex digits, the id Jaeger
/// finds its trace by), so a log line leads to the trace and back.
pub fn run_span(log_id: i64, job_id: i64, trace_id: &str) -> tracing::Span {
    // At ERROR level, so any filter that lets one of the run's log lines through (a warning
    // with `RUST_LOG=warn`) keeps its labels: a span's level only decides whether it exists.
    let span = tracing::error_span!(
        target: RUN_SPAN_TARGET,
        "run",
        log_id,
        job_id,
        trace_id = tracing::field::Empty
    );
    // A row not dispatched yet holds what its trace is to continue, not a trace id.
    if trace_id.len() == 32 && trace_id.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        span.record("trace_id", tracing::field::display(trace_id));
    }
    span
}

/// A `lost` span with an error status in the trace of a run the lost-run monitor gave up on
/// (its executor's spans never end), under the run's `fire` span (the root a row's trace id
/// names, [`trace_of_row`]). A run whose own trace is
/// unknown (`trace_id` empty: a stranded run, whose dispatch was never recorded) gets a trace of
/// its own. Nothing when tracing is off.
pub fn record_lost(trace_id: &str, log_id: crate::model::LogId, reason: &str) {
    use opentelemetry::trace::{Span, Status, TraceContextExt, Tracer};
    let Some(tracer) = tracer() else {
        return;
    };
    let parent = match trace_of_row(trace_id) {
        Some(run) => opentelemetry::Context::new().with_remote_span_context(run),
        None => opentelemetry::Context::new(),
    };
    let mut span = tracer
        .span_builder("lost")
        .with_attributes(vec![opentelemetry::KeyValue::new("xjob.log_id", log_id.0)])
        .start_with_context(tracer, &parent);
    span.set_status(Status::error(reason.to_string()));
    span.end();
}

// ---- the `workflow_run` span
//
// The root of a workflow run's trace and the parent of every node's `fire` span (the run row
// keeps its `traceparent`, so a node started by any admin joins it).
//
// Its context must be in the run row, and the row is written by the claim that decides whether
// this admin starts the run at all: with a schedule, every admin tries each occurrence and one
// wins. Opening the span before the claim would leave every losing admin an empty span to
// export. So the trace is *planned* first (ids drawn, sampling decided, `traceparent` made) and
// the span is built with exactly those ids only once the run row exists
// ([`WorkflowRunTrace::record`]); a lost claim drops the plan and exports nothing.

/// A workflow run's trace, planned before its run row is written.
#[derive(Debug)]
pub struct WorkflowRunTrace {
    ids: (SpanId, TraceId),
    planned_at: SystemTime,
    traceparent: String,
    workflow_id: i64,
    name: String,
}

impl WorkflowRunTrace {
    /// Plans the trace of a run of workflow `workflow_id` about to be written; `None` when
    /// tracing is off. The span id is the trace id's low half, like every root span's
    /// (`RootSpanIds`): a node's retry finds its workflow run's span from the trace id alone.
    pub fn plan(workflow_id: i64, name: &str) -> Option<WorkflowRunTrace> {
        let tracer = tracer()?;
        let random = RandomIdGenerator::default();
        let span_id = random.new_span_id();
        let mut bytes = random.new_trace_id().to_bytes();
        bytes[8..].copy_from_slice(&span_id.to_bytes());
        let ids = (span_id, TraceId::from_bytes(bytes));
        // The sampler decides on the trace id (every sampler the standard variables name
        // does): asking it now, through a tracer that exports nothing, gives the decision the
        // real span gets later with the same ids.
        let probe = probe_tracer().unwrap_or(tracer);
        let sampled =
            planned_ids::start_root_with(probe, ids, span_builder(tracer, workflow_id, name))
                .span_context()
                .is_sampled();
        let flags = if sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        let context = SpanContext::new(ids.1, ids.0, flags, false, TraceState::default());
        Some(WorkflowRunTrace {
            ids,
            planned_at: SystemTime::now(),
            traceparent: traceparent(&context),
            workflow_id,
            name: name.to_string(),
        })
    }

    /// The W3C `traceparent` the run row keeps.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The run was written as run `run_id`: its `workflow_run` span, from the plan to now,
    /// with the planned ids.
    pub fn record(self, run_id: i64) {
        let Some(tracer) = tracer() else {
            return;
        };
        let builder =
            span_builder(tracer, self.workflow_id, &self.name).with_start_time(self.planned_at);
        let mut span = planned_ids::start_root_with(tracer, self.ids, builder);
        span.set_attribute(KeyValue::new("xjob.workflow_run_id", run_id));
        span.end();
    }
}

/// The `traceparent` of a planned trace, empty without one (tracing off).
pub fn traceparent_of(trace: Option<&WorkflowRunTrace>) -> String {
    trace
        .map(|trace| trace.traceparent.clone())
        .unwrap_or_default()
}

fn span_builder(
    tracer: &SdkTracer,
    workflow_id: i64,
    name: &str,
) -> opentelemetry::trace::SpanBuilder {
    tracer.span_builder("workflow_run").with_attributes(vec![
        KeyValue::new("xjob.workflow_id", workflow_id),
        KeyValue::new("xjob.workflow_name", name.to_string()),
    ])
}

/// A run that ended before any dispatch, as its `fire` span names it.
#[derive(Debug, Clone, Copy)]
pub struct UnsentRun {
    pub job_id: crate::model::JobId,
    pub log_id: crate::model::LogId,
    pub scheduled_at_ms: i64,
    pub trigger_type: crate::model::TriggerType,
    pub attempt: i32,
}

impl From<&crate::model::Fire> for UnsentRun {
    fn from(fire: &crate::model::Fire) -> UnsentRun {
        UnsentRun {
            job_id: fire.job.id,
            log_id: fire.log_id,
            scheduled_at_ms: fire.scheduled_at_ms,
            trigger_type: fire.trigger_type,
            attempt: fire.attempt,
        }
    }
}

impl From<&crate::model::RunLog> for UnsentRun {
    fn from(run: &crate::model::RunLog) -> UnsentRun {
        UnsentRun {
            job_id: run.job_id,
            log_id: run.id,
            scheduled_at_ms: run.scheduled_at_ms,
            trigger_type: run.trigger_type,
            attempt: run.attempt,
        }
    }
}

/// The `fire` span of a run that ends before it reaches the trigger's dispatch (a misfire
/// skipped by DO_NOTHING, a fire skipped by admission control as `overloaded`, the planned fires
/// of a job stopped or rescheduled, a run whose job was deleted): opened and ended at once,
/// with `xjob.outcome` and an error status carrying `reason`, the message its row records. Each
/// is a trace of its own, found in Jaeger by `xjob.log_id` (the row keeps no trace id: it was
/// written before the span existed). Nothing when tracing is off.
pub fn record_unsent(run: UnsentRun, outcome: &'static str, reason: &str) {
    use opentelemetry::KeyValue;
    use opentelemetry::trace::{Span, Status, Tracer};
    let Some(tracer) = tracer() else {
        return;
    };
    let mut span = tracer
        .span_builder("fire")
        .with_attributes(vec![
            KeyValue::new("xjob.job_id", run.job_id.0),
            KeyValue::new("xjob.log_id", run.log_id.0),
            KeyValue::new("xjob.scheduled_at_ms", run.scheduled_at_ms),
            KeyValue::new("xjob.trigger_type", run.trigger_type.as_str()),
            KeyValue::new("xjob.attempt", i64::from(run.attempt)),
            KeyValue::new("xjob.outcome", outcome),
        ])
        .start(tracer);
    span.set_status(Status::error(reason.to_string()));
    span.end();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_junk() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(text).expect("valid");
        assert!(context.is_remote() && context.is_sampled());
        assert_eq!(traceparent(&context), text);
        for junk in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-xyz-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(junk).is_none(), "{junk}");
        }
    }

    #[test]
    fn a_row_trace_id_becomes_a_link_target() {
        let context = trace_of_row("4bf92f3577b34da6a3ce929d0e0e4736").expect("valid");
        assert_eq!(
            format!("{:032x}", context.trace_id()),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(trace_of_row("").is_none());
        assert!(trace_of_row("00-4bf9").is_none());
    }

    #[test]
    fn a_root_spans_id_is_the_low_half_of_its_trace_id() {
        use opentelemetry::trace::{Span, TraceContextExt, Tracer};
        let provider = SdkTracerProvider::builder()
            .with_id_generator(RootSpanIds::default())
            .build();
        let tracer = provider.tracer("test");
        for _ in 0..100 {
            let root = tracer.start("fire");
            let context = root.span_context().clone();
            let hex = format!("{:032x}", context.trace_id());
            assert_eq!(root_span_of(&hex), Some(context.span_id()), "{hex}");
            // A child keeps the trace and draws an id of its own.
            let parent = opentelemetry::Context::new().with_remote_span_context(context.clone());
            let child = tracer.start_with_context("dispatch", &parent);
            assert_eq!(child.span_context().trace_id(), context.trace_id());
            assert_ne!(child.span_context().span_id(), context.span_id());
        }
    }

    #[test]
    fn a_planned_root_span_takes_the_planned_ids_once() {
        use opentelemetry::trace::{Span, Tracer};
        let provider = SdkTracerProvider::builder()
            .with_id_generator(RootSpanIds::default())
            .build();
        let tracer = provider.tracer("test");
        let ids = (
            SpanId::from_hex("00f067aa0ba902b7").expect("hex"),
            TraceId::from_hex("4bf92f3577b34da600f067aa0ba902b7").expect("hex"),
        );
        let span = planned_ids::start_root_with(&tracer, ids, tracer.span_builder("workflow_run"));
        assert_eq!(span.span_context().span_id(), ids.0);
        assert_eq!(span.span_context().trace_id(), ids.1);
        // The next span draws its own again.
        let next = tracer.start("fire");
        assert_ne!(next.span_context().trace_id(), ids.1);
        assert_ne!(next.span_context().span_id(), ids.0);
    }

    #[test]
    fn no_endpoint_means_no_provider() {
        let provider = provider("", "x", |_| None).expect("no error");
        assert!(provider.is_none());
    }
}
