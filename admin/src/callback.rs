//! Applies run results reported by executors: persist first, then acknowledge. Idempotent per
//! log id: a repeated or late result for a finished run changes nothing and is still
//! acknowledged. What follows a finished run (retry, alarm, child jobs, FIX_DELAY's next fire)
//! is the follow-up's work (`monitor::followup`): it reads the persisted result, so nothing is
//! lost if this admin stops right after answering.

use crate::error::Error;
use crate::model::{LogId, RunStatus};
use crate::store::{RunCompletion, Store};
use crate::trigger::Trigger;

/// Longest handle message kept (XXL-JOB truncates too).
const MAX_MESSAGE_CHARS: usize = 15_000;

/// A run's result as an executor reported it (`api` reads it off the wire).
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedResult {
    pub log_id: LogId,
    /// The final status the executor named; `None` when it left it unset (older executors):
    /// the handle code decides then.
    pub status: Option<RunStatus>,
    /// XXL-JOB's handle code (200 success, 502 timeout, else failure); 0 = not given.
    pub code: i32,
    pub message: String,
    /// When the run finished on the executor; 0 = not given (now is used).
    pub finished_at_ms: i64,
    /// W3C trace context of the executor's callback span; the `complete` span continues it.
    pub traceparent: String,
}

/// What a batch of results came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedResults {
    /// Every reported log id: durable now, or ignored as unknown; the executor may forget them.
    pub accepted: Vec<LogId>,
    /// The reported log ids that name no run: nothing was written for them.
    pub unknown: Vec<LogId>,
}

/// Persists a batch of results; says which log ids are durable and which name no run. The
/// dispatch outcomes the trigger's recorder still holds for these runs are written in the same
/// row updates (`trigger::recorder`); those of runs this write does not finish go back to it.
pub async fn apply_results(
    store: &Store,
    trigger: &Trigger,
    now_ms: i64,
    results: &[ReportedResult],
) -> Result<AppliedResults, Error> {
    let completions: Vec<RunCompletion> = results
        .iter()
        .map(|result| completion_of(result, now_ms))
        .collect();
    crate::metrics::callbacks().inc_by(results.len() as u64);
    let spans = complete_spans(results);
    let folded = trigger.take_held_outcomes(completions.iter().map(|c| c.log_id));
    let writing = crate::metrics::result_write();
    let finished = store.complete_runs_folding(&completions, &folded).await;
    drop(writing);
    end_complete_spans(spans, &finished);
    let finished = match finished {
        Ok(finished) => finished,
        Err(error) => {
            trigger.unfolded(folded);
            return Err(error.into());
        }
    };
    if !folded.is_empty() {
        let written: std::collections::HashSet<LogId> = finished.iter().copied().collect();
        trigger.unfolded(
            folded
                .into_iter()
                .filter(|record| !written.contains(&record.log_id))
                .collect(),
        );
    }
    // Per-run lines would cost more than the write at thousands of runs per second.
    tracing::debug!(reported = completions.len(), finished = finished.len(), ids = ?finished,
        "run results recorded");
    // Only results that finished nothing can name no run (usually repeats of finished runs), so
    // the common batch costs no extra read.
    let finished: std::collections::HashSet<LogId> = finished.into_iter().collect();
    count_outcomes(&completions, &finished);
    let not_finished: Vec<LogId> = completions
        .iter()
        .map(|completion| completion.log_id)
        .filter(|id| !finished.contains(id))
        .collect();
    let unknown = if not_finished.is_empty() {
        Vec::new()
    } else {
        store.missing_log_ids(&not_finished).await?
    };
    if !unknown.is_empty() {
        tracing::warn!(ids = ?unknown, "results for log ids that name no run were ignored");
    }
    Ok(AppliedResults {
        accepted: results.iter().map(|result| result.log_id).collect(),
        unknown,
    })
}

/// One `complete` span per traced result (tracing on and a `traceparent` sent), open while the
/// batch is persisted.
fn complete_spans(results: &[ReportedResult]) -> Vec<(LogId, opentelemetry_sdk::trace::Span)> {
    use opentelemetry::trace::{SpanKind, TraceContextExt, Tracer};
    let Some(tracer) = crate::telemetry::tracer() else {
        return Vec::new();
    };
    results
        .iter()
        .filter_map(|result| {
            let parent = crate::telemetry::parse_traceparent(&result.traceparent)?;
            let span = tracer
                .span_builder("complete")
                .with_kind(SpanKind::Server)
                .with_attributes(vec![
                    opentelemetry::KeyValue::new("xjob.log_id", result.log_id.0),
                    opentelemetry::KeyValue::new("xjob.handle_code", i64::from(result.code)),
                ])
                .start_with_context(
                    tracer,
                    &opentelemetry::Context::new().with_remote_span_context(parent),
                );
            Some((result.log_id, span))
        })
        .collect()
}

/// Ends the `complete` spans: whether the result finished its run (a repeat or a late result
/// for a run already final changes nothing), or the error that kept it from being written.
fn end_complete_spans(
    spans: Vec<(LogId, opentelemetry_sdk::trace::Span)>,
    finished: &Result<Vec<LogId>, crate::store::StoreError>,
) {
    use opentelemetry::trace::{Span, Status};
    for (log_id, mut span) in spans {
        match finished {
            Ok(finished) => {
                let applied = finished.contains(&log_id);
                span.set_attribute(opentelemetry::KeyValue::new("xjob.applied", applied));
            }
            Err(error) => span.set_status(Status::error(error.to_string())),
        }
        span.end();
    }
}

/// Counts the runs these results finished (a repeated result finished nothing and is not
/// counted again).
fn count_outcomes(completions: &[RunCompletion], finished: &std::collections::HashSet<LogId>) {
    use crate::metrics::{RunEnd, finished as count};
    for completion in completions {
        if !finished.contains(&completion.log_id) {
            continue;
        }
        let outcome = match completion.status {
            RunStatus::Success => RunEnd::Success,
            RunStatus::Timeout => RunEnd::Timeout,
            RunStatus::Killed => RunEnd::Killed,
            _ => RunEnd::Failed,
        };
        count(outcome);
    }
}

fn completion_of(result: &ReportedResult, now_ms: i64) -> RunCompletion {
    // An executor that leaves the status unset is read by its XXL-JOB handle code.
    let status = match result.status {
        Some(
            status @ (RunStatus::Success
            | RunStatus::Failed
            | RunStatus::Timeout
            | RunStatus::Killed),
        ) => status,
        _ => match result.code {
            200 => RunStatus::Success,
            502 => RunStatus::Timeout,
            _ => RunStatus::Failed,
        },
    };
    let handle_code = match (result.code, status) {
        (0, RunStatus::Success) => 200,
        (0, RunStatus::Timeout) => 502,
        (0, _) => 500,
        (code, _) => code,
    };
    RunCompletion {
        log_id: result.log_id,
        status,
        handle_code,
        handle_msg: result.message.chars().take(MAX_MESSAGE_CHARS).collect(),
        finished_ms: if result.finished_at_ms > 0 {
            result.finished_at_ms
        } else {
            now_ms
        },
    }
}
