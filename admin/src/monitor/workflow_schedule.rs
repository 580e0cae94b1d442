//! Workflow schedules: each second, every admin starts the workflow runs of the occurrences
//! that are due.
//!
//! ```text
//! every second: store.due_workflows(now)
//!   for each: model::workflow_schedule::due_occurrence ─▶ (occurrence to start?, next time)
//!     ─▶ store.claim_workflow_occurrence (move next time + write the run, one transaction)
//!        (the overlap policy decided inside: start it, write it SKIPPED or WAITING, or cancel
//!        the runs going and start it)
//!     ─▶ a run written: wake the workflow advance, which starts its roots
//!   then: store.start_waiting_workflow_runs (a WAITING run whose predecessors ended starts)
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
use crate::model::RunStatus;
use crate::model::Workflow;
use crate::model::workflow_run::{NewWorkflowRun, NodeState};
use crate::model::workflow_schedule::{OccurrenceClaim, due_occurrence};

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
    // Occurrences their overlap policy held back (BUFFER_ONE, BUFFER_ALL) start once the runs
    // before them ended. Looked at here, on every admin each second, rather than where a run
    // ends: an admin that dies between ending a run and starting the next leaves nothing stuck.
    for run_id in ctx.store.start_waiting_workflow_runs(BATCH).await? {
        tracing::info!(run_id, "started a waiting scheduled workflow run");
        started += 1;
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
    let Some(claimed) = claimed else {
        // Another admin (or an earlier round) had it.
        return Ok(false);
    };
    let workflow_id = workflow.id.0;
    let at = due.start.map(|(at, _)| at).unwrap_or_default();
    match claimed {
        OccurrenceClaim::Started { run_id, cancelled } => {
            if let Some(trace) = trace {
                trace.record(run_id);
            }
            tracing::info!(
                workflow_id,
                run_id,
                scheduled_at_ms = at,
                "started a scheduled workflow run"
            );
            for earlier in cancelled {
                tracing::info!(
                    workflow_id,
                    run_id = earlier,
                    by = run_id,
                    "overlap policy CANCEL_OTHER: cancelled the earlier scheduled run"
                );
                kill_node_runs(ctx, earlier).await;
            }
            Ok(true)
        }
        OccurrenceClaim::Waiting { run_id, behind } => {
            if let Some(trace) = trace {
                trace.record(run_id);
            }
            tracing::info!(
                workflow_id,
                run_id,
                behind,
                scheduled_at_ms = at,
                "overlap policy BUFFER: the occurrence waits for the runs before it"
            );
            Ok(false)
        }
        OccurrenceClaim::Skipped { run_id, running } => {
            if let Some(trace) = trace {
                trace.record(run_id);
            }
            tracing::info!(
                workflow_id,
                run_id,
                running,
                scheduled_at_ms = at,
                "overlap policy SKIP: the occurrence was recorded as a skipped run"
            );
            Ok(false)
        }
        OccurrenceClaim::Dropped => {
            tracing::info!(
                workflow_id,
                missed_ms = workflow.schedule.next_fire_ms,
                "a workflow occurrence was missed while no admin ran; dropped (DO_NOTHING)"
            );
            Ok(false)
        }
    }
}

/// Kills the running node runs of a workflow run the claim ended CANCELLED, as
/// CancelWorkflowRun does. Best effort: a node run not sent yet, or whose kill fails, ends on
/// its own, and its end changes nothing in the cancelled run. Should this admin die before,
/// the node runs also just end on their own.
async fn kill_node_runs(ctx: &AdminContext, run_id: i64) {
    let run = match ctx.store.get_workflow_run(run_id).await {
        Ok(Some(run)) => run,
        Ok(None) => return,
        Err(error) => {
            tracing::warn!(run_id, %error, "reading a cancelled workflow run failed");
            return;
        }
    };
    let token = match ctx.store.get_group(run.graph.group_id).await {
        Ok(group) => group.map(|group| group.access_token).unwrap_or_default(),
        Err(_) => String::new(),
    };
    let running = (run.nodes.iter()).filter(|node| node.state == NodeState::Running);
    for node in running {
        let Ok(Some(log)) = ctx.store.get_log(node.log_id).await else {
            continue;
        };
        if log.status != RunStatus::Running || log.executor_address.is_empty() {
            continue;
        }
        let kill = ctx
            .executors
            .kill(&log.executor_address, &token, log.job_id, log.id);
        match kill.await {
            Ok((killed, message)) => tracing::info!(run_id, log_id = log.id.0, killed, %message,
                "overlap policy CANCEL_OTHER: killed a node run of the cancelled run"),
            Err(error) => tracing::warn!(run_id, log_id = log.id.0, %error,
                "overlap policy CANCEL_OTHER: killing a node run failed"),
        }
    }
}
