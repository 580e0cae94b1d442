//! Applies run results reported by executors: persist first, then acknowledge, then start the
//! children of successful runs. Idempotent per log id: a repeated or late result for a finished
//! run changes nothing and is still acknowledged.

use std::sync::Arc;

use xjob_proto::pb;

use crate::api::convert::run_status_from_pb;
use crate::context::AdminContext;
use crate::error::Error;
use crate::model::{RunLog, RunStatus, TriggerType, now_ms};
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
    for run in &finished {
        tracing::info!(log_id = run.id, job_id = run.job_id, status = %run.status,
            executor = %run.executor_address, "run finished");
    }
    start_children(ctx, finished);
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

/// Triggers each child job of every successful run (trigger type PARENT).
fn start_children(ctx: &Arc<AdminContext>, finished: Vec<RunLog>) {
    let successes: Vec<RunLog> = finished
        .into_iter()
        .filter(|run| run.status == RunStatus::Success)
        .collect();
    if successes.is_empty() {
        return;
    }
    let ctx = Arc::clone(ctx);
    tokio::spawn(async move {
        for run in successes {
            let Ok(Some(parent)) = ctx.store.get_job(run.job_id).await else {
                continue;
            };
            for child_id in &parent.child_job_ids {
                match ctx.store.get_job(*child_id).await {
                    Ok(Some(child)) => {
                        if let Err(error) = ctx
                            .trigger
                            .trigger_job(&child, TriggerType::Parent, None, vec![])
                            .await
                        {
                            tracing::warn!(%error, parent = parent.id, child = child_id, "child trigger failed");
                        }
                    }
                    _ => {
                        tracing::warn!(parent = parent.id, child = child_id, "child job not found")
                    }
                }
            }
        }
    });
}
