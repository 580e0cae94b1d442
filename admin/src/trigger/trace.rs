//! The admin's half of a run's trace: the `fire` span (one per run, the trace's root unless a
//! `TriggerJob` caller sent its own `traceparent`) and its `dispatch` client span, whose context
//! travels to the executor in `RunRequest.traceparent`. Built only when tracing is on
//! (`telemetry::tracer`); every function here is a no-op otherwise.

use opentelemetry::trace::{Link, Span, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};

use crate::model::{Fire, TriggerType};
use crate::store::{DispatchOutcome, DispatchRecord};
use crate::telemetry;

/// A run's open `fire` span.
pub(super) struct FireTrace {
    context: Context,
}

impl FireTrace {
    /// Opens the `fire` span of a claimed run; `None` when tracing is off. A fire that follows
    /// another run (a retry, a child job: the row holds that run's trace id) links to its trace;
    /// one that carries a caller's `traceparent` (TriggerJob) is part of the caller's trace,
    /// and a workflow node's run (every attempt) hangs under its workflow run's span.
    pub(super) fn start(fire: &Fire) -> Option<FireTrace> {
        let tracer = telemetry::tracer()?;
        let mut attributes = vec![
            KeyValue::new("xjob.job_id", fire.job.id.0),
            KeyValue::new("xjob.log_id", fire.log_id.0),
            KeyValue::new("xjob.scheduled_at_ms", fire.scheduled_at_ms),
            KeyValue::new("xjob.trigger_type", fire.trigger_type.as_str()),
            KeyValue::new("xjob.route_strategy", fire.job.route_strategy.to_string()),
            KeyValue::new("xjob.attempt", i64::from(fire.attempt)),
            KeyValue::new("xjob.shard_index", i64::from(fire.shard.index)),
            KeyValue::new("xjob.shard_total", i64::from(fire.shard.total)),
        ];
        if let Some(key) = fire.fire_key() {
            attributes.push(KeyValue::new("xjob.fire_key", key));
        }
        let mut builder = tracer
            .span_builder("fire")
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes);
        // A workflow node's retry: its failed attempt was in the workflow run's trace, whose root
        // is the `workflow_run` span; every attempt of a node hangs under it.
        let workflow_root = (fire.trigger_type == TriggerType::Workflow)
            .then(|| telemetry::trace_of_row(&fire.trace_from))
            .flatten();
        let parent = match (
            telemetry::parse_traceparent(&fire.trace_from),
            workflow_root,
        ) {
            (Some(caller), _) => Context::new().with_remote_span_context(caller),
            (None, Some(root)) => Context::new().with_remote_span_context(root),
            (None, None) => {
                if let Some(earlier) = telemetry::trace_of_row(&fire.trace_from) {
                    let relation = match fire.trigger_type {
                        TriggerType::Retry => "previous attempt",
                        TriggerType::Parent => "parent run",
                        _ => "earlier run",
                    };
                    builder = builder.with_links(vec![Link::new(
                        earlier,
                        vec![KeyValue::new("xjob.link", relation)],
                        0,
                    )]);
                }
                Context::new()
            }
        };
        let span = builder.start_with_context(tracer, &parent);
        Some(FireTrace {
            context: Context::new().with_span(span),
        })
    }

    /// The run's trace id (32 hex digits), for its log lines.
    pub(super) fn trace_id(&self) -> String {
        format!("{:032x}", self.context.span().span_context().trace_id())
    }

    /// Opens the `dispatch` client span of the `Run` call to `address`; its context is what
    /// the executor continues. Records the run's lateness at this instant on the `fire` span.
    pub(super) fn dispatch(
        &self,
        address: &str,
        pool: &str,
        batched: bool,
        lateness_ms: i64,
    ) -> Option<DispatchTrace> {
        let tracer = telemetry::tracer()?;
        self.context
            .span()
            .set_attribute(KeyValue::new("xjob.lateness_ms", lateness_ms));
        let span = tracer
            .span_builder("dispatch")
            .with_kind(SpanKind::Client)
            .with_attributes(vec![
                KeyValue::new("server.address", address.to_string()),
                KeyValue::new("xjob.pool", pool.to_string()),
                KeyValue::new("xjob.batched", batched),
            ])
            .start_with_context(tracer, &self.context);
        Some(DispatchTrace { span })
    }

    /// Ends the `fire` span with the run's dispatch outcome and writes the trace id into the
    /// record (only for a sampled trace: an id Jaeger never received would mislead).
    pub(super) fn end(self, record: &mut DispatchRecord) {
        let span = self.context.span();
        let (outcome, status) = outcome_of(record);
        span.set_attribute(KeyValue::new("xjob.outcome", outcome));
        span.set_status(status);
        let span_context = span.span_context();
        if span_context.is_sampled() {
            record.trace_id = format!("{:032x}", span_context.trace_id());
        }
        span.end();
    }
}

/// The span that labels a traced dispatch's log lines with its trace id
/// (`telemetry::run_span`); none for an untraced one, so the hot path builds no span (its lines
/// name the log id themselves).
pub(super) fn log_span(trace: Option<&FireTrace>, fire: &Fire) -> tracing::Span {
    trace.map_or_else(tracing::Span::none, |trace| {
        telemetry::run_span(fire.log_id.0, fire.job.id.0, &trace.trace_id())
    })
}

/// The open `dispatch` span of one `Run` call.
pub(super) struct DispatchTrace {
    span: opentelemetry_sdk::trace::Span,
}

impl DispatchTrace {
    /// The `traceparent` the executor's `run` span continues.
    pub(super) fn traceparent(&self) -> String {
        telemetry::traceparent(self.span.span_context())
    }

    /// Ends the span with the call's outcome.
    pub(super) fn end(mut self, record: &DispatchRecord) {
        let (outcome, status) = outcome_of(record);
        self.span
            .set_attribute(KeyValue::new("xjob.outcome", outcome));
        self.span.set_attribute(KeyValue::new(
            "xjob.trigger_code",
            i64::from(record.trigger_code),
        ));
        self.span.set_status(status);
        self.span.end();
    }
}

/// The dispatch outcome's name and the span status it gives: a run that was not delivered,
/// was refused, skipped or overloaded is an error with its trigger message as the reason.
fn outcome_of(record: &DispatchRecord) -> (&'static str, Status) {
    let error = || Status::error(record.trigger_msg.clone());
    match record.outcome {
        DispatchOutcome::Accepted if record.trigger_code == super::codes::TRIGGER_UNKNOWN => {
            ("maybe delivered", Status::Unset)
        }
        DispatchOutcome::Accepted => ("accepted", Status::Ok),
        DispatchOutcome::Skipped => ("skipped", error()),
        DispatchOutcome::Failed if record.trigger_msg.starts_with("overloaded") => {
            ("overloaded", error())
        }
        DispatchOutcome::Failed if record.trigger_msg.contains("refused") => ("refused", error()),
        DispatchOutcome::Failed => ("failed", error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LogId;

    fn record(outcome: DispatchOutcome, code: i32, message: &str) -> DispatchRecord {
        DispatchRecord {
            log_id: LogId(1),
            outcome,
            trigger_code: code,
            trigger_msg: message.into(),
            executor_address: String::new(),
            finished_ms: 0,
            trace_id: String::new(),
        }
    }

    #[test]
    fn every_outcome_but_delivery_is_an_error_with_its_reason() {
        let cases = [
            (
                record(DispatchOutcome::Accepted, 200, "ok"),
                "accepted",
                false,
            ),
            (
                record(DispatchOutcome::Accepted, 0, "deadline"),
                "maybe delivered",
                false,
            ),
            (
                record(
                    DispatchOutcome::Failed,
                    500,
                    "overloaded: fast trigger pool",
                ),
                "overloaded",
                true,
            ),
            (
                record(
                    DispatchOutcome::Failed,
                    500,
                    "route FIRST: executor x refused the run: busy",
                ),
                "refused",
                true,
            ),
            (
                record(DispatchOutcome::Failed, 500, "no online executor"),
                "failed",
                true,
            ),
            (
                record(DispatchOutcome::Skipped, 500, "job 1 was stopped"),
                "skipped",
                true,
            ),
        ];
        for (record, name, is_error) in cases {
            let (outcome, status) = outcome_of(&record);
            assert_eq!(outcome, name);
            match status {
                Status::Error { description } => {
                    assert!(is_error, "{name}");
                    assert_eq!(description, record.trigger_msg);
                }
                _ => assert!(!is_error, "{name}"),
            }
        }
    }
}
