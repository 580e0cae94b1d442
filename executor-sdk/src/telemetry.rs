//! The executor's half of a run's trace, exported over OTLP when an endpoint is configured
//! (the builder's `otlp_endpoint`, or the standard `OTEL_EXPORTER_OTLP_*` variables):
//!
//! ```text
//! (admin) dispatch ─▶ run (server span; parent = RunRequest.traceparent)
//!                      └─▶ handler (user code nests its spans here: JobContext::trace_context)
//!                            └─▶ callback (client span, open until an admin accepts the
//!                                 result; RunResult.traceparent, so the admin's `complete`
//!                                 span continues it)
//! ```
//! Each executor has its own tracer provider, named after its app, so an executor embedded in
//! another process (the admin's demo) still shows as its own service. With tracing off,
//! [`RunTraces`] holds no tracer and every method returns at once.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer, TracerProvider,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use xjob_proto::pb;
use xjob_proto::traceparent::Traceparent;

/// The open spans of this executor's runs, by log id.
#[derive(Default)]
pub(crate) struct RunTraces {
    exporter: Option<(SdkTracerProvider, SdkTracer)>,
    runs: Mutex<HashMap<i64, OpenRun>>,
    callbacks: Mutex<HashMap<i64, Context>>,
}

impl std::fmt::Debug for RunTraces {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RunTraces")
            .field("on", &self.exporter.is_some())
            .finish()
    }
}

/// A run's spans while it is queued or running.
struct OpenRun {
    run: Context,
    handler: Option<Context>,
}

impl RunTraces {
    /// Traces exported for `app_name` when `endpoint` or a standard variable names a collector;
    /// off otherwise. Must be called inside the Tokio runtime (the gRPC exporter lives on it).
    pub(crate) fn start(app_name: &str, endpoint: &str) -> Result<RunTraces, String> {
        let env = |key: &str| std::env::var(key).ok().filter(|value| !value.is_empty());
        let env_endpoint = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .is_some();
        if endpoint.is_empty() && !env_endpoint {
            return Ok(RunTraces::default());
        }
        let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
        if !endpoint.is_empty() {
            exporter = exporter.with_endpoint(endpoint);
        }
        let exporter = exporter
            .build()
            .map_err(|error| format!("OTLP trace exporter: {error}"))?;
        let named_by_env = env("OTEL_SERVICE_NAME").is_some()
            || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| {
                attributes
                    .split(',')
                    .any(|pair| pair.trim_start().starts_with("service.name="))
            });
        let mut resource = Resource::builder();
        if !named_by_env {
            resource = resource.with_service_name(app_name.to_owned());
        }
        // The sampler comes from OTEL_TRACES_SAMPLER/_ARG (the SDK's default config reads them).
        let provider = SdkTracerProvider::builder()
            .with_resource(resource.build())
            .with_batch_exporter(exporter)
            .build();
        let tracer = provider.tracer("xjob-executor");
        Ok(RunTraces {
            exporter: Some((provider, tracer)),
            ..RunTraces::default()
        })
    }

    fn tracer(&self) -> Option<&SdkTracer> {
        self.exporter.as_ref().map(|(_, tracer)| tracer)
    }

    /// Opens the `run` span of a run the admin sent, continuing the admin's trace.
    pub(crate) fn run_span(&self, request: &pb::RunRequest) -> Option<Context> {
        let tracer = self.tracer()?;
        let parent = match parse_traceparent(&request.traceparent) {
            Some(remote) => Context::new().with_remote_span_context(remote),
            None => Context::new(),
        };
        let span = tracer
            .span_builder("run")
            .with_kind(SpanKind::Server)
            .with_attributes(vec![
                KeyValue::new("xjob.job_id", request.job_id),
                KeyValue::new("xjob.log_id", request.log_id),
                KeyValue::new(
                    "xjob.handler",
                    crate::glue::languages::run_handler_name(request),
                ),
                KeyValue::new("xjob.attempt", i64::from(request.attempt)),
                KeyValue::new("xjob.shard_index", i64::from(request.shard_index)),
                KeyValue::new("xjob.shard_total", i64::from(request.shard_total)),
            ])
            .start_with_context(tracer, &parent);
        Some(Context::new().with_span(span))
    }

    /// Keeps the `run` span of an accepted run open until its result.
    pub(crate) fn accepted(&self, log_id: i64, run: Option<Context>) {
        if let Some(run) = run {
            lock(&self.runs).insert(log_id, OpenRun { run, handler: None });
        }
    }

    /// Ends the `run` span of a refused run with the reason as its error.
    pub(crate) fn refused(&self, run: Option<Context>, reason: &str) {
        if let Some(run) = run {
            let span = run.span();
            span.set_status(Status::error(reason.to_owned()));
            span.end();
        }
    }

    /// Opens the `handler` span of a run about to call its handler; the context is what the
    /// handler's `JobContext` hands to user code.
    pub(crate) fn handler_span(&self, log_id: i64) -> Option<Context> {
        let tracer = self.tracer()?;
        let mut runs = lock(&self.runs);
        let open = runs.get_mut(&log_id)?;
        let span = tracer
            .span_builder("handler")
            .with_kind(SpanKind::Internal)
            .start_with_context(tracer, &open.run);
        let handler = open.run.with_span(span);
        open.handler = Some(handler.clone());
        Some(handler)
    }

    /// Ends the run's `handler` and `run` spans with its result (an error status unless it
    /// succeeded), opens its `callback` span and writes that span's context into the result.
    pub(crate) fn finished(&self, result: &mut pb::RunResult) {
        let Some(tracer) = self.tracer() else {
            return;
        };
        let Some(open) = lock(&self.runs).remove(&result.log_id) else {
            return;
        };
        let status = match pb::RunStatus::try_from(result.status) {
            Ok(pb::RunStatus::Success) => Status::Ok,
            Ok(status) => Status::error(format!("{}: {}", status.as_str_name(), result.message)),
            Err(_) => Status::error(result.message.clone()),
        };
        let parent = open.handler.as_ref().unwrap_or(&open.run);
        let callback = tracer
            .span_builder("callback")
            .with_kind(SpanKind::Client)
            .with_attributes(vec![KeyValue::new("xjob.log_id", result.log_id)])
            .start_with_context(tracer, parent);
        let callback = Context::new().with_span(callback);
        result.traceparent = traceparent(callback.span().span_context());
        lock(&self.callbacks).insert(result.log_id, callback);
        for context in open.handler.iter().chain([&open.run]) {
            let span = context.span();
            span.set_attribute(KeyValue::new(
                "xjob.status",
                pb::RunStatus::try_from(result.status)
                    .map_or("RUN_STATUS_UNKNOWN", |status| status.as_str_name()),
            ));
            span.set_status(status.clone());
            span.end();
        }
    }

    /// Ends the `callback` spans of results an admin accepted.
    pub(crate) fn accepted_results(&self, log_ids: &[i64]) {
        if self.exporter.is_none() {
            return;
        }
        let mut callbacks = lock(&self.callbacks);
        for log_id in log_ids {
            if let Some(callback) = callbacks.remove(log_id) {
                callback.span().end();
            }
        }
    }

    /// Ends what is still open and sends the buffered spans (graceful shutdown).
    pub(crate) fn shutdown(&self) {
        let Some((provider, _)) = &self.exporter else {
            return;
        };
        for (_, callback) in lock(&self.callbacks).drain() {
            let span = callback.span();
            span.set_status(Status::error(
                "executor stopped before an admin accepted the result",
            ));
            span.end();
        }
        for (_, open) in lock(&self.runs).drain() {
            let span = open.run.span();
            span.set_status(Status::error("executor stopped while the run was open"));
            span.end();
        }
        if let Err(error) = provider.shutdown() {
            tracing::warn!(%error, "flushing traces at shutdown failed");
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// W3C `traceparent` of a span (written by `xjob_proto::traceparent`); empty for none.
pub(crate) fn traceparent(context: &SpanContext) -> String {
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
pub(crate) fn parse_traceparent(text: &str) -> Option<SpanContext> {
    let header = Traceparent::parse(text)?;
    Some(SpanContext::new(
        TraceId::from(header.trace_id),
        SpanId::from(header.span_id),
        TraceFlags::new(header.flags),
        true,
        TraceState::default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_junk_is_ignored() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(text).expect("valid");
        assert_eq!(traceparent(&context), text);
        assert!(parse_traceparent("00-abc-def-01").is_none());
        assert!(parse_traceparent("").is_none());
    }

    #[test]
    fn off_means_no_spans_and_no_bookkeeping() {
        let traces = RunTraces::default();
        let request = pb::RunRequest {
            log_id: 7,
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            ..Default::default()
        };
        let run = traces.run_span(&request);
        assert!(run.is_none());
        traces.accepted(7, run);
        assert!(traces.handler_span(7).is_none());
        let mut result = pb::RunResult {
            log_id: 7,
            ..Default::default()
        };
        traces.finished(&mut result);
        assert!(result.traceparent.is_empty());
    }
}
