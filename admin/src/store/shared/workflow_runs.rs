//! Workflow runs and their nodes. A node starts through `start_workflow_node` alone, whose
//! insert of the (run, node) key is what makes the start happen once: a second start of the
//! same node (another admin, a follow-up redone after a crash) hits the key and writes nothing.

use super::inserts::insert_all;
use super::logs::new_run_insert;
use super::workflows::{graph_from_json, graph_json};
use crate::model::workflow_reopen::Reopen;
use crate::model::workflow_run::{
    NewWorkflowRun, NodeState, WorkflowRun, WorkflowRunNode, WorkflowRunStatus,
};
use crate::model::{GroupId, LogId, NewRun, TriggerType, Workflow, WorkflowId};
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql, commit, map_error};
use crate::store::{StoreError, StoreResult};

/// Writes a RUNNING workflow run (no node started yet) and returns its id.
pub async fn insert_workflow_run<DB: Dialect>(
    db: Pools<'_, DB>,
    run: &NewWorkflowRun,
) -> StoreResult<i64> {
    let insert = run_insert::<DB>(run, None)?;
    super::insert_returning_id(&mut *db.write().await?, insert).await
}

/// The insert of a new RUNNING workflow run, or with `held` (a status and its reason) of a
/// SKIPPED one (ended as it is written) or a WAITING one; a scheduled one carries its
/// occurrence, whose unique key with the workflow refuses a second run of it
/// (`StoreError::Conflict`).
pub(super) fn run_insert<'q, DB: Dialect>(
    run: &'q NewWorkflowRun,
    held: Option<(WorkflowRunStatus, &'q str)>,
) -> StoreResult<Sql<'q, DB>> {
    let (status, reason) = held.unwrap_or((WorkflowRunStatus::Running, ""));
    let finished_ms = match status {
        WorkflowRunStatus::Skipped => run.created_ms,
        _ => 0,
    };
    let insert = Sql::<DB>::new(
        "INSERT INTO xjob_workflow_run (workflow_id, group_id, status, params, graph, \
         created_ms, finished_ms, reason, traceparent, trigger_type, scheduled_at_ms) VALUES (",
    )
    .bind(run.graph.id.0)
    .push(", ")
    .bind(run.graph.group_id.0)
    .push(", ")
    .bind(status.as_str())
    .push(", ")
    .bind(run.params.as_str())
    .push(", ")
    .bind(graph_json(&run.graph)?)
    .push(", ")
    .bind(run.created_ms)
    .push(", ")
    .bind(finished_ms)
    .push(", ")
    .bind(reason)
    .push(", ")
    .bind(run.traceparent.as_str())
    .push(", ")
    .bind(run.trigger_type.as_str())
    .push(", ");
    // No occurrence is NULL, not 0: NULLs never collide in the unique key.
    let insert = if run.scheduled_at_ms > 0 {
        insert.bind(run.scheduled_at_ms)
    } else {
        insert.push("NULL")
    };
    Ok(insert.push(")"))
}

/// Starts node `key` of run `run_id` with `new_run`, once: the node's row (RUNNING) and its run
/// are written together, or nothing when the node has a row already, or when the run is no
/// longer RUNNING at `generation` (a user retried or skipped a node since it was read) (`None`).
pub async fn start_workflow_node<DB: Dialect>(
    db: Pools<'_, DB>,
    run_id: i64,
    generation: i64,
    key: &str,
    new_run: &NewRun,
    now_ms: i64,
) -> StoreResult<Option<LogId>> {
    let mut tx = db.begin().await?;
    if !lock_running_at::<DB>(&mut tx, run_id, generation).await? {
        tx.rollback().await.map_err(map_error)?;
        return Ok(None);
    }
    let claimed = insert_node::<DB>(&mut tx, run_id, key, NodeState::Running, now_ms).await;
    match claimed {
        Ok(()) => {}
        // Started before (or at once, by another admin): its start stands.
        Err(StoreError::Conflict(_)) => {
            tx.rollback().await.map_err(map_error)?;
            return Ok(None);
        }
        Err(error) => return Err(error),
    }
    let runs = std::slice::from_ref(new_run);
    let ids = insert_all::<DB>(&mut tx, runs, new_run_insert::<DB>, 0).await?;
    let log_id = ids
        .first()
        .copied()
        .ok_or_else(|| StoreError::Corrupt("the node's run insert returned no id".into()))?;
    Sql::<DB>::new("UPDATE xjob_workflow_node SET log_id = ")
        .bind(log_id.0)
        .push(" WHERE run_id = ")
        .bind(run_id)
        .push(" AND node_key = ")
        .bind(key)
        .execute(&mut tx)
        .await?;
    commit(tx).await?;
    Ok(Some(log_id))
}

/// Marks waiting node `key` SKIPPED; false when it has a row already, or when the run is no
/// longer RUNNING at `generation`.
pub async fn skip_workflow_node<DB: Dialect>(
    db: Pools<'_, DB>,
    run_id: i64,
    generation: i64,
    key: &str,
    now_ms: i64,
) -> StoreResult<bool> {
    let mut tx = db.begin().await?;
    if !lock_running_at::<DB>(&mut tx, run_id, generation).await? {
        tx.rollback().await.map_err(map_error)?;
        return Ok(false);
    }
    match insert_node::<DB>(&mut tx, run_id, key, NodeState::Skipped, now_ms).await {
        Ok(()) => {
            commit(tx).await?;
            Ok(true)
        }
        Err(StoreError::Conflict(_)) => {
            tx.rollback().await.map_err(map_error)?;
            Ok(false)
        }
        Err(error) => Err(error),
    }
}

/// Locks run `run_id`'s row (SQLite: its single writer does) and tells whether it is RUNNING
/// at `generation`. Retries and skips take the same lock, so an advance that read the run
/// before one of them writes nothing after it.
async fn lock_running_at<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: i64,
    generation: i64,
) -> StoreResult<bool> {
    let row = Sql::<DB>::new("SELECT status, generation FROM xjob_workflow_run WHERE id = ")
        .bind(run_id)
        .push(DB::FOR_UPDATE)
        .fetch_optional(conn)
        .await?;
    let Some(row) = row else {
        return Ok(false);
    };
    let row = Cols::<DB>(&row);
    let status = row.parse("status", WorkflowRunStatus::parse)?;
    let current: i64 = row.get("generation")?;
    Ok(status == WorkflowRunStatus::Running && current == generation)
}

async fn insert_node<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: i64,
    key: &str,
    state: NodeState,
    now_ms: i64,
) -> StoreResult<()> {
    Sql::<DB>::new("INSERT INTO xjob_workflow_node (run_id, node_key, state, updated_ms) VALUES (")
        .bind(run_id)
        .push(", ")
        .bind(key)
        .push(", ")
        .bind(state.as_str())
        .push(", ")
        .bind(now_ms)
        .push(")")
        .execute(conn)
        .await
        .map(drop)
}

/// Records the end of the RUNNING node whose current run is `log_id`; false when it is not
/// running that run any more (ended before: a repeated follow-up changes nothing).
pub async fn finish_workflow_node<DB: Dialect>(
    db: Pools<'_, DB>,
    run_id: i64,
    log_id: LogId,
    state: NodeState,
    now_ms: i64,
) -> StoreResult<bool> {
    let updated = Sql::<DB>::new("UPDATE xjob_workflow_node SET state = ")
        .bind(state.as_str())
        .push(", updated_ms = ")
        .bind(now_ms)
        .push(" WHERE run_id = ")
        .bind(run_id)
        .push(" AND log_id = ")
        .bind(log_id.0)
        .push(" AND state = ")
        .bind(NodeState::Running.as_str())
        .affected(&mut *db.write().await?)
        .await?;
    Ok(updated == 1)
}

/// Ends a RUNNING workflow run with `status` (CANCELLED also a WAITING one); false when it
/// ended before, or, given a
/// `generation` (the advance's), when a user retried or skipped a node since it was read.
pub async fn finish_workflow_run<DB: Dialect>(
    db: Pools<'_, DB>,
    run_id: i64,
    status: WorkflowRunStatus,
    generation: Option<i64>,
    now_ms: i64,
) -> StoreResult<bool> {
    let mut update = Sql::<DB>::new("UPDATE xjob_workflow_run SET status = ")
        .bind(status.as_str())
        .push(", finished_ms = ")
        .bind(now_ms)
        .push(" WHERE id = ")
        .bind(run_id)
        .push(" AND status IN (")
        .bind(WorkflowRunStatus::Running.as_str())
        .push(", ");
    // A run still waiting for its turn (overlap policy BUFFER_*) can be cancelled, nothing else.
    update = match status {
        WorkflowRunStatus::Cancelled => update.bind(WorkflowRunStatus::Waiting.as_str()),
        _ => update.bind(WorkflowRunStatus::Running.as_str()),
    }
    .push(")");
    if let Some(generation) = generation {
        update = update.push(" AND generation = ").bind(generation);
    }
    let updated = update.affected(&mut *db.write().await?).await?;
    Ok(updated == 1)
}

/// Writes a retry or a skip of a node (`model::workflow_reopen`) in one transaction under the
/// run's lock: only while the run is RUNNING or FAILED and the node still stands at
/// `reopen.expected`; false (nothing written) otherwise, e.g. for the second of two racing
/// retries. The run becomes RUNNING at the next generation.
pub async fn reopen_workflow_node<DB: Dialect>(
    db: Pools<'_, DB>,
    reopen: &Reopen,
) -> StoreResult<bool> {
    let mut tx = db.begin().await?;
    let written = reopen_in::<DB>(&mut tx, reopen).await?;
    if written {
        commit(tx).await?;
    } else {
        tx.rollback().await.map_err(map_error)?;
    }
    Ok(written)
}

async fn reopen_in<DB: Dialect>(conn: &mut DB::Connection, reopen: &Reopen) -> StoreResult<bool> {
    let run_id = reopen.run_id;
    let run = Sql::<DB>::new("SELECT status FROM xjob_workflow_run WHERE id = ")
        .bind(run_id)
        .push(DB::FOR_UPDATE)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(run) = run else {
        return Ok(false);
    };
    let status = Cols::<DB>(&run).parse("status", WorkflowRunStatus::parse)?;
    if !matches!(
        status,
        WorkflowRunStatus::Running | WorkflowRunStatus::Failed
    ) {
        return Ok(false);
    }
    let node_changed = match (reopen.expected, reopen.becomes) {
        (None, Some(state)) => {
            match insert_node::<DB>(conn, run_id, &reopen.key, state, reopen.now_ms).await {
                Ok(()) => true,
                Err(StoreError::Conflict(_)) => false,
                Err(error) => return Err(error),
            }
        }
        (Some(expected), None) => {
            let deleted = Sql::<DB>::new("DELETE FROM xjob_workflow_node WHERE run_id = ")
                .bind(run_id)
                .push(" AND node_key = ")
                .bind(reopen.key.as_str())
                .push(" AND state = ")
                .bind(expected.as_str())
                .affected(&mut *conn)
                .await?;
            deleted == 1
        }
        (Some(expected), Some(state)) => {
            let updated = Sql::<DB>::new("UPDATE xjob_workflow_node SET state = ")
                .bind(state.as_str())
                .push(", updated_ms = ")
                .bind(reopen.now_ms)
                .push(" WHERE run_id = ")
                .bind(run_id)
                .push(" AND node_key = ")
                .bind(reopen.key.as_str())
                .push(" AND state = ")
                .bind(expected.as_str())
                .affected(&mut *conn)
                .await?;
            updated == 1
        }
        (None, None) => false,
    };
    if !node_changed {
        return Ok(false);
    }
    if reopen.becomes.is_some() {
        Sql::<DB>::new("UPDATE xjob_workflow_node SET skipped_by = ")
            .bind(reopen.by.as_str())
            .push(" WHERE run_id = ")
            .bind(run_id)
            .push(" AND node_key = ")
            .bind(reopen.key.as_str())
            .execute(&mut *conn)
            .await?;
    }
    for key in &reopen.reset {
        Sql::<DB>::new("DELETE FROM xjob_workflow_node WHERE run_id = ")
            .bind(run_id)
            .push(" AND node_key = ")
            .bind(key.as_str())
            .push(" AND state = ")
            .bind(NodeState::Skipped.as_str())
            .execute(&mut *conn)
            .await?;
    }
    Sql::<DB>::new("UPDATE xjob_workflow_run SET status = ")
        .bind(WorkflowRunStatus::Running.as_str())
        .push(", finished_ms = 0, generation = generation + 1 WHERE id = ")
        .bind(run_id)
        .execute(&mut *conn)
        .await?;
    Ok(true)
}

/// A run with its nodes (by key).
pub async fn get_workflow_run<DB: Dialect>(
    db: Pools<'_, DB>,
    run_id: i64,
) -> StoreResult<Option<WorkflowRun>> {
    let mut conn = db.read().await?;
    let row = Sql::<DB>::new(
        "SELECT id, workflow_id, group_id, status, params, graph, created_ms, finished_ms, \
         generation, traceparent, trigger_type, COALESCE(scheduled_at_ms, 0) AS scheduled_at_ms, \
         reason FROM xjob_workflow_run WHERE id = ",
    )
    .bind(run_id)
    .fetch_optional(&mut conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let row = Cols::<DB>(&row);
    let graph: String = row.get("graph")?;
    let (nodes, edges) = graph_from_json(&graph)?;
    let graph = Workflow {
        id: WorkflowId(row.get("workflow_id")?),
        group_id: row.get::<GroupId>("group_id")?,
        name: String::new(),
        nodes,
        edges,
        updated_ms: 0,
        schedule: Default::default(),
        params: String::new(),
    };
    let node_rows = Sql::<DB>::new(
        "SELECT node_key, state, log_id, updated_ms, skipped_by FROM xjob_workflow_node \
         WHERE run_id = ",
    )
    .bind(run_id)
    .push(" ORDER BY node_key")
    .fetch_all(&mut conn)
    .await?;
    let mut run_nodes = Vec::with_capacity(node_rows.len());
    for node_row in &node_rows {
        let node_row = Cols::<DB>(node_row);
        run_nodes.push(WorkflowRunNode {
            key: node_row.get("node_key")?,
            state: node_row.parse("state", NodeState::parse)?,
            log_id: node_row.get("log_id")?,
            updated_ms: node_row.get("updated_ms")?,
            skipped_by: node_row.get("skipped_by")?,
        });
    }
    Ok(Some(WorkflowRun {
        id: row.get("id")?,
        status: row.parse("status", WorkflowRunStatus::parse)?,
        graph,
        params: row.get("params")?,
        created_ms: row.get("created_ms")?,
        finished_ms: row.get("finished_ms")?,
        generation: row.get("generation")?,
        traceparent: row.get("traceparent")?,
        nodes: run_nodes,
        trigger_type: row.parse("trigger_type", TriggerType::parse)?,
        scheduled_at_ms: row.get("scheduled_at_ms")?,
        reason: row.get("reason")?,
    }))
}

/// The runs of workflow `workflow_id`, newest first, a page at a time, with their nodes.
pub async fn list_workflow_runs<DB: Dialect>(
    db: Pools<'_, DB>,
    workflow_id: WorkflowId,
    offset: i64,
    limit: i64,
) -> StoreResult<Vec<WorkflowRun>> {
    let rows = Sql::<DB>::new("SELECT id FROM xjob_workflow_run WHERE workflow_id = ")
        .bind(workflow_id.0)
        .push(" ORDER BY id DESC LIMIT ")
        .bind(limit)
        .push(" OFFSET ")
        .bind(offset)
        .fetch_all(&mut *db.read().await?)
        .await?;
    let mut runs = Vec::with_capacity(rows.len());
    for row in &rows {
        let id: i64 = Cols::<DB>(row).get("id")?;
        // Deleted between the two reads (by the clean-up): left out.
        if let Some(run) = get_workflow_run(db, id).await? {
            runs.push(run);
        }
    }
    Ok(runs)
}

/// Ids of the RUNNING workflow runs, newest first (a run just started, whose roots are to
/// start, comes before long-running ones), at most `limit`.
pub async fn running_workflow_runs<DB: Dialect>(
    db: Pools<'_, DB>,
    limit: i64,
) -> StoreResult<Vec<i64>> {
    let rows = Sql::<DB>::new("SELECT id FROM xjob_workflow_run WHERE status = ")
        .bind(WorkflowRunStatus::Running.as_str())
        .push(" ORDER BY id DESC LIMIT ")
        .bind(limit)
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(|row| Cols::<DB>(row).get("id")).collect()
}

/// `(log id, workflow run id, node key)` of the RUNNING workflow nodes whose current run is
/// one of `log_ids`: which of a batch of finished runs are workflow nodes.
pub async fn running_workflow_nodes<DB: Dialect>(
    db: Pools<'_, DB>,
    log_ids: &[LogId],
) -> StoreResult<Vec<(LogId, i64, String)>> {
    if log_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut select =
        Sql::<DB>::new("SELECT log_id, run_id, node_key FROM xjob_workflow_node WHERE log_id");
    DB::push_id_list(&mut select, &super::distinct_raw_ids(log_ids));
    let rows = select
        .push(" AND state = ")
        .bind(NodeState::Running.as_str())
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter()
        .map(|row| {
            let row = Cols::<DB>(row);
            Ok((row.get("log_id")?, row.get("run_id")?, row.get("node_key")?))
        })
        .collect()
}

/// Points the RUNNING node whose run is `failed` at `retry`, its next attempt, in the
/// transaction that writes the retry: the node's outcome is its last attempt's.
pub async fn move_workflow_node_to_retry<DB: Dialect>(
    conn: &mut DB::Connection,
    failed: LogId,
    retry: LogId,
) -> StoreResult<()> {
    Sql::<DB>::new("UPDATE xjob_workflow_node SET log_id = ")
        .bind(retry.0)
        .push(" WHERE log_id = ")
        .bind(failed.0)
        .push(" AND state = ")
        .bind(NodeState::Running.as_str())
        .execute(conn)
        .await
        .map(drop)
}
