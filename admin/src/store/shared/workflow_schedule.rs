//! Workflow schedules: the workflows whose next occurrence is due, and the claim that starts
//! one occurrence once. The claim moves the workflow's `next_fire_ms` on (compare-and-set on
//! the value read) and writes the run keyed by (workflow, occurrence) in one transaction, so of
//! two admins (or one redoing its round after a crash) only one starts the occurrence: the
//! second finds the time moved, and should an edit of the workflow put an occurrence already
//! started back in front of it, the unique key refuses a second run of it.

use super::workflow_runs::run_insert;
use super::workflows::{SELECT_WORKFLOW, workflow_from_row};
use crate::model::Workflow;
use crate::model::workflow_run::NewWorkflowRun;
use crate::store::dialect::Dialect;
use crate::store::sql::{Pools, Sql, commit, map_error};
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
/// (the next occurrence is not `due_ms` any more, or the occurrence has its run); else the new
/// run's id (0 when `run` is `None`: the occurrence was dropped).
pub async fn claim_workflow_occurrence<DB: Dialect>(
    db: Pools<'_, DB>,
    workflow_id: i64,
    due_ms: i64,
    next_ms: i64,
    run: Option<&NewWorkflowRun>,
) -> StoreResult<Option<i64>> {
    let mut tx = db.begin().await?;
    if !move_next::<DB>(&mut *tx, workflow_id, due_ms, next_ms).await? {
        tx.rollback().await.map_err(map_error)?;
        return Ok(None);
    }
    let run_id = match run {
        None => 0,
        Some(run) => match super::insert_returning_id(&mut *tx, run_insert::<DB>(run)?).await {
            Ok(id) => id,
            Err(StoreError::Conflict(_)) => {
                // The occurrence was started before (an edit put it back in front): it keeps
                // its one run, and the schedule still moves past it.
                tx.rollback().await.map_err(map_error)?;
                move_next::<DB>(&mut *db.write().await?, workflow_id, due_ms, next_ms).await?;
                return Ok(None);
            }
            Err(error) => return Err(error),
        },
    };
    commit(tx).await?;
    Ok(Some(run_id))
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
