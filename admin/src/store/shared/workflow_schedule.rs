//! Workflow schedules: the workflows whose next occurrence is due, and the claim that starts
//! one occurrence once. The claim moves the workflow's `next_fire_ms` on (compare-and-set on
//! the value read) and writes the run keyed by (workflow, occurrence) in one transaction, so of
//! two admins (or one redoing its round after a crash) only one starts the occurrence: the
//! second finds the time moved, and should an edit of the workflow put an occurrence already
//! started back in front of it, the unique key refuses a second run of it.

use super::workflow_runs::run_insert;
use super::workflows::{SELECT_WORKFLOW, workflow_from_row};
use crate::model::workflow_run::{NewWorkflowRun, WorkflowRunStatus};
use crate::model::workflow_schedule::{
    OccurrenceClaim, buffer_full_reason, cancel_reason, skip_reason,
};
use crate::model::{OverlapPolicy, Workflow};
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql, commit, map_error};
use crate::store::{StoreError, StoreResult};

/// Workflows with a schedule whose next occurrence is at or before `now_ms`, soonest first, at
/// most `limit`.
pub async fn due_workflows<DB: Dialect>(
    db: Pools<'_, DB>,
    now_ms: i64,
    limit: i64,
) -> StoreResult<Vec<Workflow>> {
    let rows = Sql::<DB>::new(SELECT_WORKFLOW)
        .push(" WHERE next_fire_ms > 0 AND next_fire_ms <= ")
        .bind(now_ms)
        .push(" AND schedule_type <> 'NONE' ORDER BY next_fire_ms, id LIMIT ")
        .bind(limit)
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(workflow_from_row::<DB>).collect()
}

/// Moves workflow `workflow_id`'s next occurrence from `due_ms` to `next_ms` and, with `run`,
/// writes the run of the occurrence, all or nothing. `Ok(None)` when another claim came first
/// (the next occurrence is not `due_ms` any more, or the occurrence has its run).
///
/// The run's overlap policy (`run.graph.schedule.overlap`) is decided here, on the scheduled
/// runs RUNNING and WAITING when the claim holds the workflow's row (the compare-and-set locks
/// it, so two claims of one workflow decide one after the other): SKIP writes the run SKIPPED
/// with the running one in its reason, CANCEL_OTHER ends the running ones CANCELLED and starts
/// it, BUFFER_ONE writes it WAITING (SKIPPED when one waits already), BUFFER_ALL WAITING.
/// A WAITING run is started by [`start_waiting_workflow_runs`] once the runs before it end.
pub async fn claim_workflow_occurrence<DB: Dialect>(
    db: Pools<'_, DB>,
    workflow_id: i64,
    due_ms: i64,
    next_ms: i64,
    run: Option<&NewWorkflowRun>,
) -> StoreResult<Option<OccurrenceClaim>> {
    let mut tx = db.begin().await?;
    if !move_next::<DB>(&mut *tx, workflow_id, due_ms, next_ms).await? {
        tx.rollback().await.map_err(map_error)?;
        return Ok(None);
    }
    let Some(run) = run else {
        commit(tx).await?;
        return Ok(Some(OccurrenceClaim::Dropped));
    };
    let (decision, reason) =
        decide::<DB>(&mut *tx, workflow_id, run.graph.schedule.overlap).await?;
    let held = match decision {
        Decision::Skip(_) => Some((WorkflowRunStatus::Skipped, reason.as_str())),
        Decision::Wait(_) => Some((WorkflowRunStatus::Waiting, reason.as_str())),
        Decision::Start(_) => None,
    };
    let run_id = match super::insert_returning_id(&mut *tx, run_insert::<DB>(run, held)?).await {
        Ok(id) => id,
        Err(StoreError::Conflict(_)) => {
            // The occurrence was started before (an edit put it back in front): it keeps
            // its one run, and the schedule still moves past it.
            tx.rollback().await.map_err(map_error)?;
            move_next::<DB>(&mut *db.write().await?, workflow_id, due_ms, next_ms).await?;
            return Ok(None);
        }
        Err(error) => return Err(error),
    };
    let claim = match decision {
        Decision::Skip(running) => OccurrenceClaim::Skipped { run_id, running },
        Decision::Wait(behind) => OccurrenceClaim::Waiting { run_id, behind },
        Decision::Start(running) => {
            let reason = cancel_reason(run_id, run.scheduled_at_ms);
            let mut cancelled = Vec::with_capacity(running.len());
            for earlier in running {
                if cancel_run::<DB>(&mut *tx, earlier, &reason, run.created_ms).await? {
                    cancelled.push(earlier);
                }
            }
            OccurrenceClaim::Started { run_id, cancelled }
        }
    };
    commit(tx).await?;
    Ok(Some(claim))
}

/// What the overlap policy makes of an occurrence, with the reason its run records.
enum Decision {
    /// Start it, cancelling these runs first (CANCEL_OTHER; empty otherwise).
    Start(Vec<i64>),
    /// Write it SKIPPED; the run named in the reason.
    Skip(i64),
    /// Write it WAITING behind this run.
    Wait(i64),
}

/// Decides on the scheduled runs RUNNING and WAITING as the claim's transaction sees them.
async fn decide<DB: Dialect>(
    conn: &mut DB::Connection,
    workflow_id: i64,
    policy: OverlapPolicy,
) -> StoreResult<(Decision, String)> {
    if policy == OverlapPolicy::AllowAll {
        return Ok((Decision::Start(Vec::new()), String::new()));
    }
    let running = scheduled_in::<DB>(conn, workflow_id, WorkflowRunStatus::Running).await?;
    let waiting = scheduled_in::<DB>(conn, workflow_id, WorkflowRunStatus::Waiting).await?;
    let last_running = running.last().copied();
    Ok(match (policy, waiting.last().copied(), last_running) {
        (OverlapPolicy::Skip, _, Some(going)) => (Decision::Skip(going), skip_reason(going)),
        (OverlapPolicy::BufferOne, Some(waits), _) => {
            (Decision::Skip(waits), buffer_full_reason(waits))
        }
        (OverlapPolicy::BufferOne | OverlapPolicy::BufferAll, None, Some(going)) => {
            (Decision::Wait(going), String::new())
        }
        (OverlapPolicy::BufferAll, Some(waits), _) => (Decision::Wait(waits), String::new()),
        (OverlapPolicy::CancelOther, _, _) => (Decision::Start(running), String::new()),
        _ => (Decision::Start(Vec::new()), String::new()),
    })
}

/// Starts the oldest WAITING scheduled run of each workflow that has no scheduled run RUNNING
/// (at most `limit` workflows); the ids started. Each start locks the workflow's row as a claim
/// does (a no-op update), so a claim and this, or two admins doing this, decide one after the
/// other: the waiting run starts once, and in order.
pub async fn start_waiting_workflow_runs<DB: Dialect>(
    db: Pools<'_, DB>,
    limit: i64,
) -> StoreResult<Vec<i64>> {
    let rows = Sql::<DB>::new("SELECT DISTINCT workflow_id FROM xjob_workflow_run WHERE status = ")
        .bind(WorkflowRunStatus::Waiting.as_str())
        .push(" ORDER BY workflow_id LIMIT ")
        .bind(limit)
        .fetch_all(&mut *db.read().await?)
        .await?;
    let mut started = Vec::new();
    for row in &rows {
        let workflow_id: i64 = Cols::<DB>(row).get("workflow_id")?;
        let mut tx = db.begin().await?;
        Sql::<DB>::new("UPDATE xjob_workflow SET next_fire_ms = next_fire_ms WHERE id = ")
            .bind(workflow_id)
            .execute(&mut *tx)
            .await?;
        let running = scheduled_in::<DB>(&mut *tx, workflow_id, WorkflowRunStatus::Running).await?;
        let waiting = scheduled_in::<DB>(&mut *tx, workflow_id, WorkflowRunStatus::Waiting).await?;
        let next = waiting.first().copied().filter(|_| running.is_empty());
        let Some(next) = next else {
            tx.rollback().await.map_err(map_error)?;
            continue;
        };
        let moved = Sql::<DB>::new("UPDATE xjob_workflow_run SET status = ")
            .bind(WorkflowRunStatus::Running.as_str())
            .push(" WHERE id = ")
            .bind(next)
            .push(" AND status = ")
            .bind(WorkflowRunStatus::Waiting.as_str())
            .affected(&mut *tx)
            .await?;
        commit(tx).await?;
        if moved == 1 {
            started.push(next);
        }
    }
    Ok(started)
}

/// The workflow's scheduled runs in `status`, oldest first (StartWorkflow runs are not the
/// schedule's: they neither count nor get cancelled).
async fn scheduled_in<DB: Dialect>(
    conn: &mut DB::Connection,
    workflow_id: i64,
    status: WorkflowRunStatus,
) -> StoreResult<Vec<i64>> {
    let rows = Sql::<DB>::new("SELECT id FROM xjob_workflow_run WHERE workflow_id = ")
        .bind(workflow_id)
        .push(" AND status = ")
        .bind(status.as_str())
        .push(" AND scheduled_at_ms IS NOT NULL ORDER BY id")
        .fetch_all(conn)
        .await?;
    rows.iter().map(|row| Cols::<DB>(row).get("id")).collect()
}

/// Ends a RUNNING run CANCELLED with `reason`; false when it had ended meanwhile.
async fn cancel_run<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: i64,
    reason: &str,
    now_ms: i64,
) -> StoreResult<bool> {
    let updated = Sql::<DB>::new("UPDATE xjob_workflow_run SET status = ")
        .bind(WorkflowRunStatus::Cancelled.as_str())
        .push(", finished_ms = ")
        .bind(now_ms)
        .push(", reason = ")
        .bind(reason)
        .push(" WHERE id = ")
        .bind(run_id)
        .push(" AND status = ")
        .bind(WorkflowRunStatus::Running.as_str())
        .affected(conn)
        .await?;
    Ok(updated == 1)
}

/// Compare-and-set of a workflow's next occurrence; false when it is not `due_ms` any more.
async fn move_next<DB: Dialect>(
    conn: &mut DB::Connection,
    workflow_id: i64,
    due_ms: i64,
    next_ms: i64,
) -> StoreResult<bool> {
    // MySQL counts matched rows (CLIENT_FOUND_ROWS); the WHERE holds the old value, so a match
    // is a move.
    let moved = Sql::<DB>::new("UPDATE xjob_workflow SET next_fire_ms = ")
        .bind(next_ms)
        .push(" WHERE id = ")
        .bind(workflow_id)
        .push(" AND next_fire_ms = ")
        .bind(due_ms)
        .affected(conn)
        .await?;
    Ok(moved == 1)
}
