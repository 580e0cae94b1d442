//! Conditional updates of run rows that several admins may race for: claims (PENDING →
//! RUNNING for the owner), skips, and the end of a follow-up claim.
//!
//! The condition is the fence (status, owner node, epoch): a node that stalled past its lease
//! and lost its rows to another node changes nothing. Where several admins write, the rows are
//! locked in id order first, so two admins never deadlock, and a row another transaction is
//! changing is waited for and then re-checked, never silently passed by. `update_logs` is that
//! pattern in each dialect's words. The one exception is the claim of a second's fires, one
//! per job, on PostgreSQL ([`Lock::AsUpdated`], [`claim_run_ids`]).

use sqlx::Connection;

use super::raw_ids;
use super::rows::{LOG_COLUMNS, run_from_row};
use crate::model::{AlarmStatus, JobId, LogId, NodeIdentity, RunLog};
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql, map_error};

/// Builds a part of a statement (the `SET` list, or the condition) into a statement.
pub type Part<'f, 'q, DB> = &'f (dyn Fn(&mut Sql<'q, DB>) + Send + Sync);

/// `UPDATE xjob_log SET <set>` on the rows `filter` selects; returns how many it changed and,
/// when `returning` names columns, those columns of the changed rows by id.
/// - SQLite (one writer): one `UPDATE … WHERE <filter> RETURNING …`.
/// - PostgreSQL: one `UPDATE … WHERE id IN (SELECT id … ORDER BY id FOR UPDATE) RETURNING …`,
///   which it runs before the update and re-checks on the newest row version after any wait;
///   with [`Lock::AsUpdated`], the plain `UPDATE … WHERE <filter> RETURNING …`.
/// - MySQL (no `UPDATE … RETURNING`, and no subquery on the updated table): a locking read of
///   the ids in id order, the update of exactly those, and the read-back, in one transaction;
///   a locking read sees the newest committed row after any wait.
pub async fn update_logs<'q, DB: Dialect>(
    conn: &mut DB::Connection,
    set: Part<'_, 'q, DB>,
    filter: Part<'_, 'q, DB>,
    lock: Lock,
    returning: Option<&str>,
) -> StoreResult<(u64, Vec<DB::Row>)> {
    if DB::SINGLE_WRITER || DB::INSERT_RETURNING {
        let lock_as_updated = lock == Lock::AsUpdated;
        let lock = lock.clause::<DB>();
        let mut update = Sql::<DB>::new("UPDATE xjob_log SET ");
        set(&mut update);
        if DB::SINGLE_WRITER || lock_as_updated {
            update.push_mut(" WHERE ");
            filter(&mut update);
        } else {
            update.push_mut(" WHERE id IN (SELECT id FROM xjob_log WHERE ");
            filter(&mut update);
            update.push_mut(" ORDER BY id");
            update.push_mut(lock);
            update.push_mut(")");
        }
        return match returning {
            Some(columns) => {
                let rows = update
                    .push(" RETURNING ")
                    .push(columns)
                    .fetch_all(conn)
                    .await?;
                Ok((rows.len() as u64, sorted_by_id::<DB>(rows)?))
            }
            None => Ok((update.affected(conn).await?, Vec::new())),
        };
    }
    let (ids, rows) = lock_then_update::<DB>(conn, set, filter, lock, returning).await?;
    Ok((ids.len() as u64, rows))
}

/// [`update_logs`] returning the ids of the rows it changed, in id order. On MySQL those are
/// the ids its locking read took, so no read-back follows the update.
pub async fn update_log_ids<'q, DB: Dialect>(
    conn: &mut DB::Connection,
    set: Part<'_, 'q, DB>,
    filter: Part<'_, 'q, DB>,
    lock: Lock,
) -> StoreResult<Vec<i64>> {
    if DB::SINGLE_WRITER || DB::INSERT_RETURNING {
        let (_, rows) = update_logs::<DB>(conn, set, filter, lock, Some("id")).await?;
        return rows
            .iter()
            .map(|row| Cols::<DB>(row).get::<i64>("id"))
            .collect();
    }
    let (ids, _) = lock_then_update::<DB>(conn, set, filter, lock, None).await?;
    Ok(ids)
}

/// MySQL's form of [`update_logs`]: the locking read of the ids in id order, the update of
/// exactly those, and, when `read_back` names columns, their read-back, in one transaction.
/// Every id the read locked is changed: the read saw the newest committed row, which the lock
/// then keeps as it is until the update.
async fn lock_then_update<'q, DB: Dialect>(
    conn: &mut DB::Connection,
    set: Part<'_, 'q, DB>,
    filter: Part<'_, 'q, DB>,
    lock: Lock,
    read_back: Option<&str>,
) -> StoreResult<(Vec<i64>, Vec<DB::Row>)> {
    let mut tx = conn.begin().await.map_err(map_error)?;
    let mut select = Sql::<DB>::new("SELECT id FROM xjob_log WHERE ");
    filter(&mut select);
    select.push_mut(" ORDER BY id");
    select.push_mut(lock.clause::<DB>());
    let ids = select.fetch_column::<i64>(&mut tx).await?;
    let mut rows = Vec::new();
    for chunk in ids.chunks(DB::IDS_PER_STATEMENT) {
        let mut update = Sql::<DB>::new("UPDATE xjob_log SET ");
        set(&mut update);
        update.push_mut(" WHERE id");
        DB::push_id_list(&mut update, chunk);
        update.execute(&mut tx).await?;
        if let Some(columns) = read_back {
            let mut read = Sql::<DB>::new(format!("SELECT {columns} FROM xjob_log WHERE id"));
            DB::push_id_list(&mut read, chunk);
            rows.extend(read.push(" ORDER BY id").fetch_all(&mut tx).await?);
        }
    }
    tx.commit().await.map_err(map_error)?;
    Ok((ids, rows))
}

/// How `update_logs` treats a row another transaction holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Wait for it, then re-check the condition (claims and fences: never pass a row by).
    Wait,
    /// Leave it to that transaction (work queues and adoptions: if that write does not
    /// happen, the next sweep finds the row again).
    SkipLocked,
    /// As `Wait`, but on PostgreSQL without the pass that locks the rows in id order first:
    /// the update locks each row as its plan meets it (and re-checks the condition on the
    /// newest version after any wait), a third less of the statement's time and one WAL
    /// record less per row. Only for a set of rows no other writer waits on two of: then no
    /// cycle of waits can pass through it, in whatever order it locks them. MySQL takes its
    /// locking read in id order all the same; SQLite has one writer.
    AsUpdated,
}

impl Lock {
    /// The row-lock clause of the `SELECT` that picks the rows.
    fn clause<DB: Dialect>(self) -> &'static str {
        match self {
            Lock::Wait | Lock::AsUpdated => DB::FOR_UPDATE,
            Lock::SkipLocked => DB::FOR_UPDATE_SKIP_LOCKED,
        }
    }
}

/// Rows ordered by their `id` column (RETURNING has no order of its own).
fn sorted_by_id<DB: Dialect>(rows: Vec<DB::Row>) -> StoreResult<Vec<DB::Row>> {
    let mut keyed = rows
        .into_iter()
        .map(|row| Ok((Cols::<DB>(&row).get::<i64>("id")?, row)))
        .collect::<StoreResult<Vec<(i64, DB::Row)>>>()?;
    keyed.sort_by_key(|(id, _)| *id);
    Ok(keyed.into_iter().map(|(_, row)| row).collect())
}

/// `+column` on SQLite: keeps its planner off an index on that column, so it looks the rows of
/// an id list up by primary key instead of walking every row the index holds (see
/// `sqlite/plans.rs`); the column itself elsewhere.
pub fn unindexed<DB: Dialect>(column: &str) -> String {
    if DB::SINGLE_WRITER {
        format!("+{column}")
    } else {
        column.to_string()
    }
}

/// The condition of a claim: PENDING rows among `ids` owned by this node and epoch.
fn claim_filter<'q, DB: Dialect>(sql: &mut Sql<'q, DB>, ids: &[i64], node_id: &'q str, epoch: i64) {
    sql.push_mut("id");
    DB::push_id_list(sql, ids);
    sql.push_mut(&format!(
        " AND {} = 'PENDING' AND ",
        unindexed::<DB>("status")
    ));
    sql.push_mut(&unindexed::<DB>("owner_node"));
    sql.push_mut(" = ");
    sql.bind_mut(node_id);
    sql.push_mut(&format!(" AND {} = ", unindexed::<DB>("epoch")));
    sql.bind_mut(epoch);
}

/// What a claim writes: RUNNING, trigger time `now_ms` (when the runs leave).
fn claim_set<'q, DB: Dialect>(now_ms: i64) -> impl Fn(&mut Sql<'q, DB>) + Send + Sync {
    move |sql: &mut Sql<'q, DB>| {
        sql.push_mut("status = 'RUNNING', trigger_time_ms = ");
        sql.bind_mut(now_ms);
    }
}

/// The claim's statement text for SQLite's plan test.
#[cfg(test)]
pub fn claim_sql_for_plans(columns: &str) -> String {
    let mut update =
        Sql::<sqlx::Sqlite>::new("UPDATE xjob_log SET status = 'RUNNING', trigger_time_ms = ");
    update.bind_mut(0_i64);
    update.push_mut(" WHERE ");
    claim_filter(&mut update, &[1, 2], "n1", 1);
    update.push(" RETURNING ").push(columns).text().to_string()
}

/// Claims the PENDING runs among `ids` that `node` owns (RUNNING, trigger time `now_ms`);
/// returns them as they now read.
pub async fn claim_runs<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[LogId],
    node: &'q NodeIdentity,
    now_ms: i64,
) -> StoreResult<Vec<RunLog>> {
    let ids = raw_ids(ids);
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let mut conn = db.write().await?;
    let mut claimed = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(DB::IDS_PER_STATEMENT) {
        let set = claim_set::<DB>(now_ms);
        let filter = |sql: &mut Sql<'q, DB>| claim_filter(sql, chunk, node_id, epoch);
        let returning = Some(LOG_COLUMNS);
        let (_, rows) = update_logs::<DB>(&mut conn, &set, &filter, Lock::Wait, returning).await?;
        for row in &rows {
            claimed.push(run_from_row::<DB>(row)?);
        }
    }
    Ok(claimed)
}

/// [`claim_runs`] of the runs named with their jobs, returning only the ids claimed (on MySQL
/// without reading the rows back): the claim of the scan's own fires, a second's at a time.
///
/// The first run of each job is claimed with [`Lock::AsUpdated`], the others (a broadcast's
/// further shards) after them with the pass in id order. Who else waits on this node's
/// PENDING rows waits on one job's: a stop or an edit skipping that job's planned fires, a
/// job's deletion. Adoptions skip locked rows, and this node's own skips of PENDING rows
/// (fires refused by admission, misfires after a failed claim) name rows apart from the
/// claim's. So none waits on two rows of the first claim, and no cycle of waits passes
/// through it. Two claims never wait on each other: a row is one owner's at a time, and a
/// claim locks only rows whose newest version still carries its fence.
pub async fn claim_run_ids<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    runs: &[(LogId, JobId)],
    node: &'q NodeIdentity,
    now_ms: i64,
) -> StoreResult<Vec<LogId>> {
    let (firsts, repeats) = first_run_of_each_job(runs);
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let mut conn = db.write().await?;
    let mut claimed = Vec::with_capacity(runs.len());
    for (ids, lock) in [(firsts, Lock::AsUpdated), (repeats, Lock::Wait)] {
        for chunk in ids.chunks(DB::IDS_PER_STATEMENT) {
            let set = claim_set::<DB>(now_ms);
            let filter = |sql: &mut Sql<'q, DB>| claim_filter(sql, chunk, node_id, epoch);
            let changed = update_log_ids::<DB>(&mut conn, &set, &filter, lock).await?;
            claimed.extend(changed.into_iter().map(LogId));
        }
    }
    Ok(claimed)
}

/// The ids of `runs` split into the first run of each job and the rest.
fn first_run_of_each_job(runs: &[(LogId, JobId)]) -> (Vec<i64>, Vec<i64>) {
    let mut jobs = std::collections::HashSet::with_capacity(runs.len());
    let (mut firsts, mut repeats) = (Vec::with_capacity(runs.len()), Vec::new());
    for (log_id, job_id) in runs {
        if jobs.insert(*job_id) {
            firsts.push(log_id.0);
        } else {
            repeats.push(log_id.0);
        }
    }
    (firsts, repeats)
}

/// Most rows one statement of [`skip_runs`] marks. Each statement commits on its own, and the
/// writer is handed back between them: at twice an admin's capacity a second's refused fires
/// are close to 20 000 rows, and an API write waiting for the single SQLite writer should wait
/// for one such statement, not for all of them.
const SKIPS_PER_STATEMENT: usize = 2000;

/// Marks PENDING runs skipped with a reason (misfire at recovery, fires refused by admission).
pub async fn skip_runs<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[LogId],
    reason: &'q str,
    now_ms: i64,
) -> StoreResult<()> {
    let ids = raw_ids(ids);
    for chunk in ids.chunks(DB::IDS_PER_STATEMENT.min(SKIPS_PER_STATEMENT)) {
        let mut conn = db.write().await?;
        let set = |sql: &mut Sql<'q, DB>| skipped(sql, reason, now_ms);
        let filter = |sql: &mut Sql<'q, DB>| {
            sql.push_mut("id");
            DB::push_id_list(sql, chunk);
            sql.push_mut(&format!(" AND {} = 'PENDING'", unindexed::<DB>("status")));
        };
        update_logs::<DB>(&mut conn, &set, &filter, Lock::Wait, None).await?;
    }
    Ok(())
}

/// Marks a job's planned (PENDING, scheduled) fires skipped: the job was stopped or
/// rescheduled. Returns the skipped runs (their traces name them).
pub async fn skip_planned_fires<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    job_id: JobId,
    reason: &'q str,
    now_ms: i64,
) -> StoreResult<Vec<RunLog>> {
    let set = |sql: &mut Sql<'q, DB>| skipped(sql, reason, now_ms);
    let filter = |sql: &mut Sql<'q, DB>| {
        sql.push_mut("job_id = ");
        sql.bind_mut(job_id.0);
        sql.push_mut(" AND status = 'PENDING' AND fire_key IS NOT NULL");
    };
    let (_, rows) = update_logs::<DB>(
        &mut *db.write().await?,
        &set,
        &filter,
        Lock::Wait,
        Some(LOG_COLUMNS),
    )
    .await?;
    rows.iter().map(run_from_row::<DB>).collect()
}

fn skipped<'q, DB: Dialect>(sql: &mut Sql<'q, DB>, reason: &'q str, now_ms: i64) {
    sql.push_mut("status = 'SKIPPED', trigger_msg = ");
    sql.bind_mut(reason);
    sql.push_mut(", trigger_time_ms = ");
    sql.bind_mut(now_ms);
}

/// Ends the follow-up of claimed runs that need nothing written but their `alarm_status`, only
/// of those still claimed by this node/epoch (a row an adoption changed while this waited for
/// it is re-checked); returns how many it ended.
pub async fn finish_followups<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    node: &'q NodeIdentity,
    log_ids: &[LogId],
    alarm_status: AlarmStatus,
) -> StoreResult<u64> {
    let log_ids = raw_ids(log_ids);
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let mut conn = db.write().await?;
    let mut finished = 0;
    for chunk in log_ids.chunks(DB::IDS_PER_STATEMENT) {
        let set = |sql: &mut Sql<'q, DB>| {
            sql.push_mut("alarm_status = ");
            sql.bind_mut(alarm_status.code());
        };
        let filter = |sql: &mut Sql<'q, DB>| {
            sql.push_mut("id");
            DB::push_id_list(sql, chunk);
            sql.push_mut(" AND alarm_status = -1 AND owner_node = ");
            sql.bind_mut(node_id);
            sql.push_mut(" AND epoch = ");
            sql.bind_mut(epoch);
        };
        finished += update_logs::<DB>(&mut conn, &set, &filter, Lock::Wait, None)
            .await?
            .0;
    }
    Ok(finished)
}

/// Puts runs among `ids` that this node/epoch claimed but never sent (RUNNING, no address, no
/// result) back to PENDING, for claims whose answer was lost; returns how many. Only rows
/// whose trigger time is one those claims wrote (`claim_times_ms`) are the lost claims': a run
/// this node made its own since by another way (released from WAITING, taken over as
/// stranded) has its own trigger time, and may be on its way to an executor already, its
/// address not yet recorded.
pub async fn unclaim_unsent_runs<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[LogId],
    node: &'q NodeIdentity,
    claim_times_ms: &[i64],
) -> StoreResult<u64> {
    if claim_times_ms.is_empty() {
        return Ok(0);
    }
    let ids = raw_ids(ids);
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let mut conn = db.write().await?;
    let mut unclaimed = 0;
    for chunk in ids.chunks(DB::IDS_PER_STATEMENT) {
        let set = |sql: &mut Sql<'q, DB>| sql.push_mut("status = 'PENDING'");
        let filter = |sql: &mut Sql<'q, DB>| {
            sql.push_mut("id");
            DB::push_id_list(sql, chunk);
            sql.push_mut(&format!(
                " AND {} = 'RUNNING' AND executor_address = '' AND handle_code = 0 \
                 AND owner_node = ",
                unindexed::<DB>("status")
            ));
            sql.bind_mut(node_id);
            sql.push_mut(" AND epoch = ");
            sql.bind_mut(epoch);
            sql.push_mut(&format!(" AND {}", unindexed::<DB>("trigger_time_ms")));
            DB::push_id_list(sql, claim_times_ms);
        };
        let (count, _) = update_logs::<DB>(&mut conn, &set, &filter, Lock::Wait, None).await?;
        unclaimed += count;
    }
    Ok(unclaimed)
}

/// Ids among `ids` still RUNNING, unsent (no address) and owned by this node/epoch: the runs a
/// node whose lease lapsed may still send (another admin may have taken the others over).
pub async fn owned_unsent_runs<DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[LogId],
    node: &NodeIdentity,
) -> StoreResult<Vec<LogId>> {
    let ids = raw_ids(ids);
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let mut conn = db.read().await?;
    let mut owned = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(DB::IDS_PER_STATEMENT) {
        let mut select = Sql::<DB>::new("SELECT id FROM xjob_log WHERE id");
        DB::push_id_list(&mut select, chunk);
        select.push_mut(&format!(
            " AND {} = 'RUNNING' AND executor_address = '' AND owner_node = ",
            unindexed::<DB>("status")
        ));
        select.bind_mut(node_id);
        select.push_mut(" AND epoch = ");
        select.bind_mut(epoch);
        owned.extend(select.fetch_column::<LogId>(&mut conn).await?);
    }
    Ok(owned)
}
