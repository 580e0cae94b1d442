//! Applies run results reported by executors: persist first, then acknowledge. Idempotent per
//! log id: a repeated or late result for a finished run changes nothing and is still
//! acknowledged. What follows a finished run (retry, alarm, child jobs, FIX_DELAY's next fire)
//! is the follow-up's work (`monitor::followup`): it reads the persisted result, so nothing is
//! lost if this admin stops right after answering.

use crate::error::Error;
use crate::model::{LogId, RunStatus};
use crate::store::{RunCompletion, Store};

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
}

/// What a batch of results came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedResults {
    /// Every reported log id: durable now, or ignored as unknown; the executor may forget them.
    pub accepted: Vec<LogId>,
    /// The reported log ids that name no run: nothing was written for them.
    pub unknown: Vec<LogId>,
}

/// Persists a batch of results; says which log ids are durable and which name no run.
pub async fn apply_results(
    store: &Store,
    now_ms: i64,
    results: &[ReportedResult],
) -> Result<AppliedResults, Error> {
    let completions: Vec<RunCompletion> = results
        .iter()
        .map(|result| completion_of(result, now_ms))
        .collect();
    crate::metrics::callbacks().inc_by(results.len() as u64);
    let finished = store.complete_runs(&completions).await?;
    // Per-run lines would cost more than the write at thousands of runs per second.
    tracing::debug!(reported = completions.len(), finished = finished.len(), ids = ?finished,
        "run results recorded");
    // Only results that finished nothing can name no run (usually repeats of finished runs), so
    // the common batch costs no extra read.
    let finished: std::collections::HashSet<i64> = finished.into_iter().collect();
    count_outcomes(&completions, &finished);
    let not_finished: Vec<i64> = completions
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
        unknown: unknown.into_iter().map(LogId).collect(),
    })
}

/// Counts the runs these results finished (a repeated result finished nothing and is not
/// counted again).
fn count_outcomes(completions: &[RunCompletion], finished: &std::collections::HashSet<i64>) {
    use crate::metrics::{FireOutcome, fires};
    for completion in completions {
        if !finished.contains(&completion.log_id) {
            continue;
        }
        let outcome = match completion.status {
            RunStatus::Success => FireOutcome::Success,
            RunStatus::Timeout => FireOutcome::Timeout,
            RunStatus::Killed => FireOutcome::Killed,
            _ => FireOutcome::Failed,
        };
        fires(outcome).inc();
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
        log_id: result.log_id.0,
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
