//! Applies run results reported by executors: persist first, then acknowledge. Idempotent per
//! log id: a repeated or late result for a finished run changes nothing and is still
//! acknowledged. What follows a finished run (retry, alarm, child jobs, FIX_DELAY's next fire)
//! is the follow-up's work (`monitor::followup`): it reads the persisted result, so nothing is
//! lost if this admin stops right after answering.

use std::sync::Arc;

use xjob_proto::pb;

use crate::api::convert::run_status_from_pb;
use crate::context::AdminContext;
use crate::error::Error;
use crate::model::{RunStatus, now_ms};
use crate::store::RunCompletion;

/// Longest handle message kept (XXL-JOB truncates too).
const MAX_MESSAGE_CHARS: usize = 15_000;

/// Persists a batch of results; returns the log ids now durable.
pub async fn apply_results(
    ctx: &Arc<AdminContext>,
    results: Vec<pb::RunResult>,
) -> Result<Vec<i64>, Error> {
    let completions: Vec<RunCompletion> = results.iter().map(completion_of).collect();
    let finished = ctx.store.complete_runs(&completions).await?;
    // Per-run lines would cost more than the write at thousands of runs per second.
    tracing::debug!(reported = completions.len(), finished = finished.len(), ids = ?finished,
        "run results recorded");
    Ok(results.iter().map(|result| result.log_id).collect())
}

fn completion_of(result: &pb::RunResult) -> RunCompletion {
    // An executor that leaves the status unset is read by its XXL-JOB handle code.
    let status = match run_status_from_pb(result.status) {
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
            now_ms()
        },
    }
}
