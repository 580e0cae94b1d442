//! The monitors' reads and the lost-run mark that every dialect writes alike. (Follow-up claims,
//! adoptions and writes lock rows differently per dialect and stay in each backend's
//! `monitor.rs`.)

use super::rows::{LOG_COLUMNS, run_from_row};
use crate::model::{LogId, NodeIdentity, RunLog};
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Pools, Sql};

/// PENDING runs of this node/epoch whose `dispatch_at_ms` (> 0) has come, through the partial
/// index of delayed PENDING rows (see `sqlite/plans.rs`).
pub fn due_delayed_runs_query<'q, DB: Dialect>(
    node_id: &'q str,
    epoch: i64,
    now_ms: i64,
    limit: i64,
) -> Sql<'q, DB> {
    Sql::<DB>::new(
        "SELECT id FROM xjob_log WHERE status = 'PENDING' AND dispatch_at_ms > 0 \
         AND dispatch_at_ms <= ",
    )
    .bind(now_ms)
    .push(" AND owner_node = ")
    .bind(node_id)
    .push(" AND epoch = ")
    .bind(epoch)
    .push(" ORDER BY dispatch_at_ms LIMIT ")
    .bind(limit.max(0))
}

pub async fn due_delayed_runs<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
    now_ms: i64,
    limit: i64,
) -> StoreResult<Vec<LogId>> {
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    due_delayed_runs_query::<DB>(node_id, epoch, now_ms, limit)
        .fetch_column::<LogId>(&mut *db.read().await?)
        .await
}

/// Runs delivered to an executor (an address is recorded) and not finished, oldest first.
pub fn running_runs_query<'q, DB: Dialect>(limit: i64) -> Sql<'q, DB> {
    Sql::<DB>::new(format!(
        "SELECT {LOG_COLUMNS} FROM xjob_log WHERE status = 'RUNNING' \
         AND executor_address <> '' ORDER BY id LIMIT "
    ))
    .bind(limit.max(0))
}

/// Read row by row: the lost-run check reads up to 10 000 of them every few seconds, and as
/// one `fetch_all` on SQLite they were the admin's largest transient heap at 3 000 fires/s
/// (docs/benchmarks.md, *Huge pages off*).
pub async fn running_runs<DB: Dialect>(db: Pools<'_, DB>, limit: i64) -> StoreResult<Vec<RunLog>> {
    running_runs_query::<DB>(limit)
        .fetch_map(&mut *db.read().await?, run_from_row::<DB>)
        .await
}

/// Conditional on RUNNING: a result that landed meanwhile wins (the servers re-check the
/// condition after waiting for a concurrent callback's update of the row).
pub async fn mark_lost<DB: Dialect>(
    db: Pools<'_, DB>,
    log_id: LogId,
    message: &str,
    now_ms: i64,
) -> StoreResult<bool> {
    let marked =
        Sql::<DB>::new("UPDATE xjob_log SET status = 'LOST', handle_code = 500, handle_msg = ")
            .bind(message)
            .push(", handle_time_ms = ")
            .bind(now_ms)
            .push(" WHERE id = ")
            .bind(log_id.0)
            .push(" AND status = 'RUNNING'")
            .affected(&mut *db.write().await?)
            .await?;
    Ok(marked == 1)
}

pub async fn live_addresses_of_other_nodes<DB: Dialect>(
    db: Pools<'_, DB>,
    node_id: &str,
    heartbeat_after_ms: i64,
) -> StoreResult<Vec<String>> {
    Sql::<DB>::new(format!(
        "SELECT DISTINCT address{} AS address FROM xjob_registry WHERE owner_node <> ",
        DB::BYTE_ORDER
    ))
    .bind(node_id)
    .push(" AND heartbeat_ms > ")
    .bind(heartbeat_after_ms)
    .push(" ORDER BY 1")
    .fetch_column::<String>(&mut *db.read().await?)
    .await
}
