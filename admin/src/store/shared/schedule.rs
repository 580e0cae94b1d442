//! The schedule round under the lock, and node leases. (The claim and adoption statements,
//! whose locking differs per dialect, are still in each backend's `schedule.rs`.)
//!
//! The round is one transaction that first takes the schedule lock, so rounds of all admins
//! run one after the other and each reads the job times the previous one wrote: on SQLite
//! `BEGIN IMMEDIATE` (its write lock, taken up front), on the servers `SELECT … FOR UPDATE` on
//! the `schedule_lock` row. At READ COMMITTED the next statement's snapshot is taken after the
//! lock was granted, so it sees the next fire times the previous holder committed.

use sqlx::Transaction;

use super::inserts::insert_keyed;
use super::logs::new_run_insert;
use super::rows::{JOB_COLUMNS, job_from_row};
use crate::model::{Job, LogId, NodeIdentity};
use crate::store::dialect::Dialect;
use crate::store::error::{StoreError, StoreResult};
use crate::store::round::RoundPlan;
use crate::store::sql::{Pools, Sql, commit};

/// The database's clock, epoch milliseconds (`Dialect::NOW_MS`). Node leases are written and
/// judged by it: an admin whose own clock is stepped or drifts can then neither take over a
/// live admin's runs (its clock says the lease lapsed) nor keep a dead one's (it says not).
pub async fn database_now_ms<DB: Dialect>(db: Pools<'_, DB>) -> StoreResult<i64> {
    Sql::<DB>::new(format!("SELECT {}", DB::NOW_MS))
        .fetch_scalar(&mut *db.read().await?)
        .await
}

/// Creates or re-registers an admin node; returns its new epoch.
pub async fn register_node<DB: Dialect>(
    db: Pools<'_, DB>,
    node_id: &str,
    now_ms: i64,
    lease_ms: i64,
) -> StoreResult<i64> {
    let mut tx = db.begin().await?;
    let upsert = Sql::<DB>::new(
        "INSERT INTO xjob_node (node_id, epoch, lease_until_ms, started_ms) VALUES (",
    )
    .bind(node_id)
    .push(", 1, ")
    .bind(now_ms + lease_ms)
    .push(", ")
    .bind(now_ms)
    .push(") ")
    .push(&DB::upsert("node_id", &["lease_until_ms", "started_ms"]))
    .push(", epoch = xjob_node.epoch + 1");
    let epoch = if DB::INSERT_RETURNING {
        upsert
            .push(" RETURNING epoch")
            .fetch_scalar(&mut tx)
            .await?
    } else {
        upsert.execute(&mut tx).await?;
        // The row stays locked by the upsert until commit: this reads this start's epoch.
        Sql::<DB>::new("SELECT epoch FROM xjob_node WHERE node_id = ")
            .bind(node_id)
            .fetch_scalar(&mut tx)
            .await?
    };
    commit(tx).await?;
    Ok(epoch)
}

/// Extends a node's lease; false when another start took its epoch.
pub async fn renew_node<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
    lease_until_ms: i64,
) -> StoreResult<bool> {
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let renewed = Sql::<DB>::new("UPDATE xjob_node SET lease_until_ms = ")
        .bind(lease_until_ms)
        .push(" WHERE node_id = ")
        .bind(node_id)
        .push(" AND epoch = ")
        .bind(epoch)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(renewed == 1)
}

/// The other nodes whose lease has not lapsed at `now_ms`, with their current epoch: those
/// whose liveness lock the watch checks (a lapsed one is adopted by the recovery sweep anyway).
pub async fn live_peers<DB: Dialect>(
    db: Pools<'_, DB>,
    node_id: &str,
    now_ms: i64,
) -> StoreResult<Vec<(String, i64)>> {
    let rows = Sql::<DB>::new("SELECT node_id, epoch FROM xjob_node WHERE node_id <> ")
        .bind(node_id)
        .push(" AND lease_until_ms >= ")
        .bind(now_ms)
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter()
        .map(|row| {
            let cols = crate::store::sql::Cols::<DB>(row);
            Ok((cols.get::<String>("node_id")?, cols.get::<i64>("epoch")?))
        })
        .collect()
}

/// Locks, reads jobs due before `window_end_ms`, applies `plan`, writes, commits. Returns the
/// jobs read and the id of each planned run, aligned with `RoundPlan::new_runs` (`None` where
/// its `fire_key` existed: the fire was written before, by this admin or another).
pub async fn run_schedule_round<DB: Dialect>(
    db: Pools<'_, DB>,
    window_end_ms: i64,
    limit: i64,
    plan: &mut (dyn FnMut(Vec<Job>) -> RoundPlan + Send),
) -> StoreResult<(usize, Vec<Option<LogId>>)> {
    let waiting = std::time::Instant::now();
    let mut tx = lock_schedule(db).await?;
    crate::metrics::observe_lock_wait(waiting.elapsed());
    // Held until the round's transaction commits or rolls back at the end of this function.
    let _held = crate::metrics::schedule_lock_held();
    let rows = Sql::<DB>::new(format!(
        "SELECT {JOB_COLUMNS} FROM xjob_job WHERE trigger_status = 1 AND trigger_next_ms <= "
    ))
    .bind(window_end_ms)
    .push(" ORDER BY trigger_next_ms LIMIT ")
    .bind(limit)
    .fetch_all(&mut tx)
    .await?;
    let jobs = rows
        .iter()
        .map(job_from_row::<DB>)
        .collect::<StoreResult<Vec<Job>>>()?;
    plan_write_commit::<DB>(tx, jobs, plan).await
}

/// The end of every schedule round, global or over partitions: plan the jobs read, write the
/// planned runs and the jobs' next fire times in the round's transaction, commit. Returns the
/// jobs read and the id of each planned run (`None` where its `fire_key` existed).
pub(super) async fn plan_write_commit<DB: Dialect>(
    mut tx: Transaction<'static, DB>,
    jobs: Vec<Job>,
    plan: &mut (dyn FnMut(Vec<Job>) -> RoundPlan + Send),
) -> StoreResult<(usize, Vec<Option<LogId>>)> {
    let job_count = jobs.len();
    let decided = plan(jobs);
    let inserted = insert_keyed::<DB>(&mut tx, &decided.new_runs, new_run_insert::<DB>, 0).await?;
    DB::write_schedule_updates(&mut tx, &decided.job_updates).await?;
    commit(tx).await?;
    Ok((job_count, inserted))
}

/// A transaction holding the schedule lock; a missing lock row is a schema error, never a
/// round without mutual exclusion.
async fn lock_schedule<DB: Dialect>(db: Pools<'_, DB>) -> StoreResult<Transaction<'static, DB>> {
    if DB::SINGLE_WRITER {
        // SQLite serializes writers: its write lock, taken up front, is the schedule lock. The
        // round is a background write: it enters the writer's queue through the gate, so an API
        // write or a claim waiting for the writer goes ahead of it (`writer_gate`).
        return db.begin_with("BEGIN IMMEDIATE").await;
    }
    let mut tx = db.begin().await?;
    let locked = Sql::<DB>::new(
        "SELECT lock_name FROM xjob_lock WHERE lock_name = 'schedule_lock' FOR UPDATE",
    )
    .fetch_optional(&mut tx)
    .await?;
    match locked {
        Some(_) => Ok(tx),
        None => Err(missing_lock_row()),
    }
}

/// The error of a database whose `schedule_lock` row is gone.
pub fn missing_lock_row() -> StoreError {
    StoreError::Schema(
        "row 'schedule_lock' missing from xjob_lock: admins would not exclude each other; \
         insert it (INSERT INTO xjob_lock (lock_name) VALUES ('schedule_lock')) and restart"
            .to_string(),
    )
}
