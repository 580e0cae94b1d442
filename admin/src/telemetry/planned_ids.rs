//! Ids handed to the next root span started on this thread: how a span is built with ids
//! drawn earlier (`WorkflowRunTrace`). The SDK draws a span's ids from the provider's generator
//! and offers no other way to give them; `RootSpanIds` asks here first.

use std::cell::Cell;

use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::SdkTracer;

thread_local! {
    /// The ids the next root span started on this thread takes (see `RootSpanIds`).
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

/// Starts a root span with the ids `ids` on `tracer`: the generator hands out these once.
/// Nothing between setting and starting can yield, so no other span takes them.
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
