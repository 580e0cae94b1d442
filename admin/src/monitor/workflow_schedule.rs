//! Workflow schedules: each second, every admin starts the workflow runs of the occurrences
//! that are due.
//!
//! ```text
//! every second: store.due_workflows(now)
//!   for each: model::workflow_schedule::due_occurrence ─▶ (occurrence to start?, next time)
//!     ─▶ store.claim_workflow_occurrence (move next time + write the run, one transaction)
//!     ─▶ a run written: wake the workflow advance, which starts its roots
//! ```
//!
//! Why a loop on every admin, and not the job scan: workflows are few and fire at most once a
//! second each, so reading the due ones each second costs one indexed query, and the scan's
//! partitions, ring and pre-read (built for many jobs and sub-second dispatch) would add
//! nothing but coupling. Every admin running it means no election and no hand-over: when one
//! dies, the others' next tick finds the occurrence. Exactly once comes from the store, not
//! from who runs the loop: the claim moves the workflow's next time with a compare-and-set and
//! writes the run under the unique key (workflow, occurrence), in one transaction, so two
//! admins (or one redoing a round after a crash) start an occurrence once. A run written and
//! not yet advanced when its admin dies is a RUNNING workflow run like any other: every
//! admin's periodic advance starts its roots.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::context::AdminContext;
use crate::error::Error;
use crate::model::Workflow;
use crate::model::workflow_run::NewWorkflowRun;
use crate::model::workflow_schedule::due_occurrence;

/// How often the loop looks for due occurrences.
const TICK: Duration = Duration::from_secs(1);
/// Most workflows one tick starts (the rest are due on the next tick).
const BATCH: i64 = 200;

/// Runs until `cancel`.
pub async fn run_workflow_schedules(ctx: Arc<AdminContext>, cancel: CancellationToken) {
    loop {
        if let Err(error) = tick(&ctx).await {
            tracing::warn!(%error, "workflow schedule round failed; retrying next tick");
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(TICK) => {}
        }
    }
}

/// One look: starts (or drops, when missed) each due occurrence; returns how many runs this
/// admin started.
pub async fn tick(ctx: &AdminContext) -> Result<usize, Error> {
    let now = ctx.clock.now_ms();
    let mut started = 0;
    for workflow in ctx.store.due_workflows(now, BATCH).await? {
        if fire(ctx, &workflow, now).await? {
            started += 1;
        }
    }
    if started > 0 {
        ctx.workflow_wake.notify_one();
    }
    Ok(started)
}

/// Claims the workflow's due occurrence; true when this admin started a run for it.
async fn fire(ctx: &AdminContext, workflow: &Workflow, now: i64) -> Result<bool, Error> {
    let default_zone = ctx.config.default_time_zone();
    let threshold_ms = i64::try_from(ctx.config.misfire_threshold.as_millis()).unwrap_or(i64::MAX);
    let Some(due) = due_occurrence(&workflow.schedule, default_zone, threshold_ms, now) else {
        return Ok(false);
    };
    // A scheduled run is traced like a started one: one span its nodes' runs hang under. Only
    // planned here: the span exists once this admin's claim wrote the run (every admin tries).
    let trace = due
        .start
        .and_then(|_| crate::telemetry::WorkflowRunTrace::plan(workflow.id.0, &workflow.name));
    let run = due.start.map(|(at, trigger_type)| NewWorkflowRun {
        graph: workflow.clone(),
        params: workflow.params.clone(),
        created_ms: now,
        traceparent: crate::telemetry::traceparent_of(trace.as_ref()),
        trigger_type,
        scheduled_at_ms: at,
    });
    let claimed = ctx
        .store
        .claim_workflow_occurrence(
            workflow.id.0,
            workflow.schedule.next_fire_ms,
            due.next_fire_ms,
            run.as_ref(),
        )
        .await?;
    match (claimed, due.start) {
        (Some(run_id), Some((at, trigger_type))) => {
            if let Some(trace) = trace {
                trace.record(run_id);
            }
            tracing::info!(workflow_id = workflow.id.0, run_id, scheduled_at_ms = at,
                trigger = %trigger_type, "started a scheduled workflow run");
            Ok(true)
        }
        (Some(_), None) => {
            tracing::info!(
                workflow_id = workflow.id.0,
                missed_ms = workflow.schedule.next_fire_ms,
                "a workflow occurrence was missed while no admin ran; dropped (DO_NOTHING)"
            );
            Ok(false)
        }
        // Another admin (or an earlier round) had it.
        (None, _) => Ok(false),
    }
}
