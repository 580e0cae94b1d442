//! Backfills (`xjob_backfill`) and the link from each occurrence to its run
//! (`xjob_backfill_run`, primary key backfill + occurrence, so no occurrence gets two runs).
//!
//! The runner's writes are fenced like a claim: only the owner (node and epoch) of a RUNNING
//! backfill creates its runs, and only from the `created` count it read, so two admins (or
//! an admin and its own restarted self) never create the same occurrence twice. The runs, the
//! links and the cursor are written in one transaction: an admin dying between two steps
//! leaves either all of them or none.

use std::collections::HashMap;

use crate::model::{
    Backfill, BackfillProgress, BackfillState, JobId, LogId, NewRun, NodeIdentity, RunStatus,
};
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql, commit};

const SELECT_BACKFILL: &str = "SELECT id, job_id, from_ms, to_ms, max_concurrent, state, \
     total, created, cursor_ms, owner_node, epoch, created_by, created_ms, updated_ms \
     FROM xjob_backfill";

/// Most backfills `ListBackfills` returns (newest first).
const LIST_LIMIT: i64 = 200;

fn backfill_from_row<DB: Dialect>(row: &DB::Row) -> StoreResult<Backfill> {
    let row = Cols::<DB>(row);
    let max_concurrent: i64 = row.get("max_concurrent")?;
    Ok(Backfill {
        id: row.get("id")?,
        job_id: row.get("job_id")?,
        from_ms: row.get("from_ms")?,
        to_ms: row.get("to_ms")?,
        max_concurrent: i32::try_from(max_concurrent).unwrap_or(i32::MAX),
        state: row.parse("state", BackfillState::parse)?,
        total: row.get("total")?,
        created: row.get("created")?,
        cursor_ms: row.get("cursor_ms")?,
        owner_node: row.get("owner_node")?,
        epoch: row.get("epoch")?,
        created_by: row.get("created_by")?,
        created_ms: row.get("created_ms")?,
        updated_ms: row.get("updated_ms")?,
    })
}

/// Writes a new backfill (its id is ignored) and returns it with its id.
pub async fn insert_backfill<DB: Dialect>(
    db: Pools<'_, DB>,
    backfill: &Backfill,
) -> StoreResult<Backfill> {
    let mut insert = Sql::<DB>::new(
        "INSERT INTO xjob_backfill (job_id, from_ms, to_ms, max_concurrent, state, total, \
         created, cursor_ms, owner_node, epoch, created_by, created_ms, updated_ms) VALUES (",
    );
    insert.bind_mut(backfill.job_id.0);
    for number in [
        backfill.from_ms,
        backfill.to_ms,
        i64::from(backfill.max_concurrent),
    ] {
        insert.push_mut(", ");
        insert.bind_mut(number);
    }
    insert.push_mut(", ");
    insert.bind_mut(backfill.state.as_str());
    for number in [backfill.total, backfill.created, backfill.cursor_ms] {
        insert.push_mut(", ");
        insert.bind_mut(number);
    }
    insert.push_mut(", ");
    insert.bind_mut(backfill.owner_node.as_str());
    insert.push_mut(", ");
    insert.bind_mut(backfill.epoch);
    insert.push_mut(", ");
    insert.bind_mut(backfill.created_by.as_str());
    for number in [backfill.created_ms, backfill.updated_ms] {
        insert.push_mut(", ");
        insert.bind_mut(number);
    }
    insert.push_mut(")");
    let id = super::insert_returning_id(&mut *db.write().await?, insert).await?;
    Ok(Backfill {
        id,
        ..backfill.clone()
    })
}

pub async fn get_backfill<DB: Dialect>(
    db: Pools<'_, DB>,
    id: i64,
) -> StoreResult<Option<Backfill>> {
    let row = Sql::<DB>::new(format!("{SELECT_BACKFILL} WHERE id = "))
        .bind(id)
        .fetch_optional(&mut *db.read().await?)
        .await?;
    row.as_ref().map(backfill_from_row::<DB>).transpose()
}

/// The job's backfills, newest first (at most 200).
pub async fn list_backfills<DB: Dialect>(
    db: Pools<'_, DB>,
    job_id: JobId,
) -> StoreResult<Vec<Backfill>> {
    let rows = Sql::<DB>::new(format!("{SELECT_BACKFILL} WHERE job_id = "))
        .bind(job_id.0)
        .push(&format!(" ORDER BY id DESC LIMIT {LIST_LIMIT}"))
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(backfill_from_row::<DB>).collect()
}

/// How the backfill's created runs stand, counted from their rows (a run deleted by
/// retention counts nowhere).
pub async fn backfill_progress<DB: Dialect>(
    db: Pools<'_, DB>,
    id: i64,
) -> StoreResult<BackfillProgress> {
    let mut all = backfills_progress::<DB>(db, &[id]).await?;
    Ok(all.remove(&id).unwrap_or_default())
}

/// Progress of many backfills, by id (a job's list).
pub async fn backfills_progress<DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[i64],
) -> StoreResult<HashMap<i64, BackfillProgress>> {
    let mut out: HashMap<i64, BackfillProgress> = HashMap::with_capacity(ids.len());
    let mut conn = db.read().await?;
    for chunk in ids.chunks(DB::IDS_PER_STATEMENT) {
        let mut select = Sql::<DB>::new(
            "SELECT r.backfill_id AS backfill_id, l.status AS status, COUNT(*) AS n \
             FROM xjob_backfill_run r JOIN xjob_log l ON l.id = r.log_id WHERE r.backfill_id",
        );
        DB::push_id_list(&mut select, chunk);
        select.push_mut(" GROUP BY r.backfill_id, l.status");
        for row in &select.fetch_all(&mut conn).await? {
            let row = Cols::<DB>(row);
            let count: i64 = row.get("n")?;
            let progress = out.entry(row.get("backfill_id")?).or_default();
            match row.parse("status", RunStatus::parse)? {
                RunStatus::Success => progress.succeeded += count,
                RunStatus::Pending | RunStatus::Running => progress.running += count,
                _ => progress.failed += count,
            }
        }
    }
    Ok(out)
}

/// Cancels a RUNNING backfill; false when there is none by that id or it already ended.
pub async fn cancel_backfill<DB: Dialect>(
    db: Pools<'_, DB>,
    id: i64,
    now_ms: i64,
) -> StoreResult<bool> {
    let updated = Sql::<DB>::new("UPDATE xjob_backfill SET state = 'CANCELLED', updated_ms = ")
        .bind(now_ms)
        .push(" WHERE state = 'RUNNING' AND id = ")
        .bind(id)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(updated == 1)
}

/// Takes over the RUNNING backfills of admins that are gone (this node's earlier epochs, and
/// nodes whose lease lapsed before `now_ms`); returns how many.
pub async fn adopt_backfills<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
    now_ms: i64,
) -> StoreResult<u64> {
    let mut conn = db.write().await?;
    let gone = Sql::<DB>::new("SELECT node_id FROM xjob_node WHERE lease_until_ms < ")
        .bind(now_ms)
        .push(" AND node_id <> ")
        .bind(node.node_id.as_str())
        .fetch_column::<String>(&mut conn)
        .await?;
    let mut update = Sql::<DB>::new("UPDATE xjob_backfill SET owner_node = ")
        .bind(node.node_id.as_str())
        .push(", epoch = ")
        .bind(node.epoch)
        .push(", updated_ms = ")
        .bind(now_ms)
        .push(" WHERE state = 'RUNNING' AND ((owner_node = ")
        .bind(node.node_id.as_str())
        .push(" AND epoch < ")
        .bind(node.epoch)
        .push(")");
    if !gone.is_empty() {
        update.push_mut(" OR owner_node IN (");
        for (index, name) in gone.iter().enumerate() {
            if index > 0 {
                update.push_mut(", ");
            }
            update.bind_mut(name.as_str());
        }
        update.push_mut(")");
    }
    update.push_mut(")");
    update.affected(&mut conn).await
}

/// The RUNNING backfills this node (at its epoch) owns, oldest first.
pub async fn owned_backfills<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
) -> StoreResult<Vec<Backfill>> {
    let rows = Sql::<DB>::new(format!(
        "{SELECT_BACKFILL} WHERE state = 'RUNNING' AND owner_node = "
    ))
    .bind(node.node_id.as_str())
    .push(" AND epoch = ")
    .bind(node.epoch)
    .push(" ORDER BY id")
    .fetch_all(&mut *db.read().await?)
    .await?;
    rows.iter().map(backfill_from_row::<DB>).collect()
}

/// Writes the runs of the backfill's next occurrences (`runs`, in order, each PENDING and
/// owned by `node`), links each to its occurrence and moves the cursor to the last one, in
/// one transaction. Fenced: nothing is written unless the backfill is still RUNNING, owned by
/// `node` at its epoch, and has exactly `created` runs (what the caller read). Returns the new
/// runs' ids, or `None` when the fence held.
pub async fn create_backfill_runs<DB: Dialect>(
    db: Pools<'_, DB>,
    backfill: &Backfill,
    node: &NodeIdentity,
    runs: &[NewRun],
    now_ms: i64,
) -> StoreResult<Option<Vec<LogId>>> {
    let Some(last) = runs.last() else {
        return Ok(Some(Vec::new()));
    };
    let mut tx = db.begin().await?;
    let fenced = Sql::<DB>::new("UPDATE xjob_backfill SET created = created + ")
        .bind(runs.len() as i64)
        .push(", cursor_ms = ")
        .bind(last.scheduled_at_ms)
        .push(", updated_ms = ")
        .bind(now_ms)
        .push(" WHERE id = ")
        .bind(backfill.id)
        .push(" AND state = 'RUNNING' AND owner_node = ")
        .bind(node.node_id.as_str())
        .push(" AND epoch = ")
        .bind(node.epoch)
        .push(" AND created = ")
        .bind(backfill.created)
        .affected(&mut tx)
        .await?;
    if fenced != 1 {
        tx.rollback().await.map_err(crate::store::sql::map_error)?;
        return Ok(None);
    }
    let ids = super::inserts::insert_all::<DB>(&mut tx, runs, super::logs::new_run_insert::<DB>, 0)
        .await?;
    let mut links = Sql::<DB>::new(
        "INSERT INTO xjob_backfill_run (backfill_id, scheduled_at_ms, log_id) VALUES ",
    );
    for (index, (run, id)) in runs.iter().zip(&ids).enumerate() {
        links.push_mut(if index == 0 { "(" } else { ", (" });
        links.bind_mut(backfill.id);
        links.push_mut(", ");
        links.bind_mut(run.scheduled_at_ms);
        links.push_mut(", ");
        links.bind_mut(id.0);
        links.push_mut(")");
    }
    links.execute(&mut tx).await?;
    commit(tx).await?;
    Ok(Some(ids))
}

/// Marks the owned backfill DONE (the runner calls it once no occurrence is left to create
/// and none is unfinished); true when it did.
pub async fn finish_backfill<DB: Dialect>(
    db: Pools<'_, DB>,
    id: i64,
    node: &NodeIdentity,
    now_ms: i64,
) -> StoreResult<bool> {
    let updated = Sql::<DB>::new("UPDATE xjob_backfill SET state = 'DONE', updated_ms = ")
        .bind(now_ms)
        .push(" WHERE id = ")
        .bind(id)
        .push(" AND state = 'RUNNING' AND owner_node = ")
        .bind(node.node_id.as_str())
        .push(" AND epoch = ")
        .bind(node.epoch)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(updated == 1)
}

/// The log ids of the backfill's runs by occurrence, in occurrence order (tests and the
/// console read which run stands for which time).
pub async fn backfill_runs<DB: Dialect>(
    db: Pools<'_, DB>,
    id: i64,
) -> StoreResult<Vec<(i64, LogId)>> {
    let rows = Sql::<DB>::new(
        "SELECT scheduled_at_ms, log_id FROM xjob_backfill_run WHERE backfill_id = ",
    )
    .bind(id)
    .push(" ORDER BY scheduled_at_ms")
    .fetch_all(&mut *db.read().await?)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let row = Cols::<DB>(row);
        out.push((row.get("scheduled_at_ms")?, row.get("log_id")?));
    }
    Ok(out)
}
