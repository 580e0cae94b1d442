//! The `workflow_run` span: the root of a workflow run's trace and the parent of every node's
//! `fire` span (the run row keeps its `traceparent`, so a node started by any admin joins it).
//!
//! Its context must be in the run row, and the row is written by the claim that decides whether
//! this admin starts the run at all: with a schedule, every admin tries each occurrence and one
//! wins. Opening the span before the claim would leave every losing admin an empty span to
//! export. So the trace is *planned* first — ids drawn, sampling decided, `traceparent` made —
//! and the span is built with exactly those ids only once the run row exists
//! ([`WorkflowRunTrace::record`]); a lost claim drops the plan and exports nothing.

use std::cell::Cell;
use std::time::SystemTime;

use opentelemetry::KeyValue;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry_sdk::trace::{IdGenerator as _, RandomIdGenerator, SdkTracer};

thread_local! {
    /// The ids the next root span started on this thread takes (see [`RootSpanIds`]).
    static NEXT_ROOT: Cell<Option<(SpanId, TraceId)>> = const { Cell::new(None) };
}

/// The span id set for the next root span on this thread, if any (read by the id generator,
/// which the SDK asks for a root's span id first).
pub(super) fn next_root_span_id() -> Option<SpanId> {
    NEXT_ROOT.with(|next| next.get().map(|(span, _)| span))
}

/// The trace id set for the next root span on this thread, consumed (the SDK asks for it
/// after the span id).
pub(super) fn take_next_root_trace_id() -> Option<TraceId> {
    NEXT_ROOT.with(|next| next.take().map(|(_, trace)| trace))
}

/// Starts a root span with the ids `ids` on `tracer`. The SDK draws a span's ids from the
/// provider's generator and offers no other way to give them; the generator hands out these
/// once. Nothing between setting and starting can yield, so no other span takes them.
pub(super) fn start_root_with(
    tracer: &SdkTracer,
    ids: (SpanId, TraceId),
    builder: opentelemetry::trace::SpanBuilder,
) -> opentelemetry_sdk::trace::Span {
    NEXT_ROOT.with(|next| next.set(Some(ids)));
    let span = builder.start_with_context(tracer, &opentelemetry::Context::new());
    NEXT_ROOT.with(|next| next.set(None));
    span
}

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
        let tracer = super::tracer()?;
        let random = RandomIdGenerator::default();
        let span_id = random.new_span_id();
        let mut bytes = random.new_trace_id().to_bytes();
        bytes[8..].copy_from_slice(&span_id.to_bytes());
        let ids = (span_id, TraceId::from_bytes(bytes));
        // The sampler decides on the trace id (every sampler the standard variables name
        // does): asking it now, through a tracer that exports nothing, gives the decision the
        // real span gets later with the same ids.
        let probe = super::probe_tracer().unwrap_or(tracer);
        let sampled = start_root_with(probe, ids, span_builder(tracer, workflow_id, name))
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
            traceparent: super::traceparent(&context),
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
        let Some(tracer) = super::tracer() else {
            return;
        };
        let builder =
            span_builder(tracer, self.workflow_id, &self.name).with_start_time(self.planned_at);
        let mut span = start_root_with(tracer, self.ids, builder);
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
