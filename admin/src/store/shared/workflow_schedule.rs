//! Workflow schedules: the workflows whose next occurrence is due, and the claim that starts
//! one occurrence once. The claim moves the workflow's `next_fire_ms` on (compare-and-set on
//! the value read) and writes the run keyed by (workflow, occurrence) in one transaction, so of
//! two admins (or one redoing its round after a crash) only one starts the occurrence: the
//! second finds the time moved, and should an edit of the workflow put an occurrence already
//! started back in front of it, the unique key refuses a second run of it.

use super::workflow_runs::run_insert;
use super::workflows::{SELECT_WORKFLOW, workflow_from_row};
use crate::model::workflow_run::{NewWorkflowRun, WorkflowRunStatus};
use crate::model::workflow_schedule::{OccurrenceClaim, cancel_reason, skip_reason};
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
/// runs RUNNING when the claim holds the workflow's row (the compare-and-set locks it, so two
/// claims of one workflow decide one after the other): SKIP writes the run SKIPPED with the
/// running one in its reason, CANCEL_OTHER ends the running ones CANCELLED and starts it.
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
    let policy = run.graph.schedule.overlap;
    let running = match policy {
        OverlapPolicy::AllowAll => Vec::new(),
        _ => running_scheduled::<DB>(&mut *tx, workflow_id).await?,
    };
    let skipped = match (policy, running.first()) {
        (OverlapPolicy::Skip, Some(&earlier)) => Some(skip_reason(earlier)),
        _ => None,
    };
    let run_id = match super::insert_returning_id(
        &mut *tx,
        run_insert::<DB>(run, skipped.as_deref())?,
    )
    .await
    {
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
    let claim = match (skipped, running.first()) {
        (Some(_), Some(&earlier)) => OccurrenceClaim::Skipped {
            run_id,
            running: earlier,
        },
        _ if policy == OverlapPolicy::CancelOther => {
            let reason = cancel_reason(run_id, run.scheduled_at_ms);
            let mut cancelled = Vec::with_capacity(running.len());
            for earlier in running {
                if cancel_run::<DB>(&mut *tx, earlier, &reason, run.created_ms).await? {
                    cancelled.push(earlier);
                }
            }
            OccurrenceClaim::Started { run_id, cancelled }
        }
        _ => OccurrenceClaim::Started {
            run_id,
            cancelled: Vec::new(),
        },
    };
    commit(tx).await?;
    Ok(Some(claim))
}

/// The workflow's scheduled runs still RUNNING, oldest first (StartWorkflow runs are not the
/// schedule's: they neither count nor get cancelled).
async fn running_scheduled<DB: Dialect>(
    conn: &mut DB::Connection,
    workflow_id: i64,
) -> StoreResult<Vec<i64>> {
    let rows = Sql::<DB>::new("SELECT id FROM xjob_workflow_run WHERE workflow_id = ")
        .bind(workflow_id)
        .push(" AND status = ")
        .bind(WorkflowRunStatus::Running.as_str())
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
