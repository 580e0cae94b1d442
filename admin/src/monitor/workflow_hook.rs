//! Where workflow runs meet the follow-up loop: a finished run that is a workflow node's
//! current run ends the node (when no retry follows) and advances its workflow run; and a
//! periodic pass advances every RUNNING workflow run, for a start cut short by a crash.
//!
//! Both only call `workflow_step`, whose writes happen once whoever calls and however often
//! (the `(run, node)` key, final states that never change), so two admins, or an adopted
//! follow-up redone after a crash, start no node twice.

use std::collections::HashMap;
use std::sync::Arc;

use super::{policy, workflow_step};
use crate::context::AdminContext;
use crate::model::workflow_run::NodeState;
use crate::model::{Job, JobId, RunLog, RunStatus};
use crate::store::StoreError;

/// How often each admin advances every RUNNING workflow run.
pub const READVANCE_EVERY_MS: i64 = 5_000;
/// Most runs one periodic pass advances (the newest first: a run just started comes first).
const READVANCE_BATCH: i64 = 1_000;

/// A node's state from its run's final status; `None` while it is not final.
fn node_state(status: RunStatus) -> Option<NodeState> {
    match status {
        RunStatus::Success => Some(NodeState::Succeeded),
        RunStatus::Failed | RunStatus::Timeout | RunStatus::Killed | RunStatus::Lost => {
            Some(NodeState::Failed)
        }
        // Not run (its job's overlap policy skipped it): neither branch happened.
        RunStatus::Skipped => Some(NodeState::Skipped),
        RunStatus::Pending | RunStatus::Running | RunStatus::Waiting => None,
    }
}

/// Ends the workflow nodes among `runs` (claimed, final) and advances their workflow runs. A
/// failed run that its job retries is not the node's outcome: the node follows the retry
/// (moved in the follow-up's transaction) and ends with it.
pub async fn end_nodes(
    ctx: &AdminContext,
    runs: &[RunLog],
    jobs: &HashMap<JobId, Arc<Job>>,
) -> Result<(), StoreError> {
    let log_ids: Vec<_> = runs.iter().map(|run| run.id).collect();
    let nodes = ctx.store.running_workflow_nodes(&log_ids).await?;
    for (log_id, run_id, key) in nodes {
        let Some(run) = runs.iter().find(|run| run.id == log_id) else {
            continue;
        };
        let now = ctx.clock.now_ms();
        let job = jobs.get(&run.job_id).map(Arc::as_ref);
        if policy::decide(run, job, now, &ctx.node).retry.is_some() {
            continue;
        }
        let Some(state) = node_state(run.status) else {
            continue;
        };
        let advanced =
            workflow_step::node_ended(&ctx.store, run_id, log_id, state, &ctx.node, now).await?;
        tracing::info!(workflow_run_id = run_id, node = %key, state = state.as_str(),
            started = ?advanced.started, skipped = ?advanced.skipped,
            finished = ?advanced.finished.map(|status| status.as_str()), "workflow node ended");
    }
    Ok(())
}

/// Advances every RUNNING workflow run (see `READVANCE_EVERY_MS`).
pub async fn readvance(ctx: &AdminContext, now_ms: i64) -> Result<(), StoreError> {
    let started =
        workflow_step::readvance_running(&ctx.store, &ctx.node, now_ms, READVANCE_BATCH).await?;
    if started > 0 {
        tracing::info!(
            started,
            "workflow nodes started by the periodic advance (a start cut short?)"
        );
    }
    Ok(())
}
