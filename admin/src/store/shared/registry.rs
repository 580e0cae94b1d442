//! Registry rows: one per live executor session, owned by the admin node holding the stream.
//! Every admin reads the live rows of all admins (it routes over its own sessions plus the
//! other admins' rows) and deletes rows whose owner stopped refreshing them (an admin that died
//! while holding executor sessions).

use super::raw_ids;
use super::rows::executor_from_row;
use crate::model::{ExecutorInfo, LogId};
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Pools, Sql};

const SELECT_REGISTRY: &str = "SELECT executor_id, app_name, address, handlers, owner_node, \
     registered_ms, heartbeat_ms, protocol FROM xjob_registry";

pub async fn upsert_registry<DB: Dialect>(
    db: Pools<'_, DB>,
    executor: &ExecutorInfo,
) -> StoreResult<()> {
    Sql::<DB>::new(
        "INSERT INTO xjob_registry (executor_id, app_name, address, handlers, owner_node, \
         registered_ms, heartbeat_ms, protocol) VALUES (",
    )
    .bind(executor.executor_id.as_str())
    .push(", ")
    .bind(executor.app_name.as_str())
    .push(", ")
    .bind(executor.address.as_str())
    .push(", ")
    .bind(executor.handlers.join(","))
    .push(", ")
    .bind(executor.admin_node.as_str())
    .push(", ")
    .bind(executor.registered_ms)
    .push(", ")
    .bind(executor.last_heartbeat_ms)
    .push(", ")
    .bind(executor.protocol.as_str())
    .push(") ")
    .push(&DB::upsert("executor_id", &["heartbeat_ms", "owner_node"]))
    .execute(&mut *db.write().await?)
    .await?;
    Ok(())
}

pub async fn delete_registry<DB: Dialect>(db: Pools<'_, DB>, executor_id: &str) -> StoreResult<()> {
    Sql::<DB>::new("DELETE FROM xjob_registry WHERE executor_id = ")
        .bind(executor_id)
        .execute(&mut *db.write().await?)
        .await?;
    Ok(())
}

pub async fn list_registry_of_node<DB: Dialect>(
    db: Pools<'_, DB>,
    node_id: &str,
) -> StoreResult<Vec<ExecutorInfo>> {
    let order = DB::BYTE_ORDER;
    let rows = Sql::<DB>::new(SELECT_REGISTRY)
        .push(" WHERE owner_node = ")
        .bind(node_id)
        .push(&format!(" ORDER BY app_name{order}, address{order}"))
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(executor_from_row::<DB>).collect()
}

pub async fn list_live_registry<DB: Dialect>(
    db: Pools<'_, DB>,
    heartbeat_after_ms: i64,
) -> StoreResult<Vec<ExecutorInfo>> {
    let order = DB::BYTE_ORDER;
    let rows = Sql::<DB>::new(SELECT_REGISTRY)
        .push(" WHERE heartbeat_ms > ")
        .bind(heartbeat_after_ms)
        .push(&format!(
            " ORDER BY app_name{order}, address{order}, executor_id{order}"
        ))
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(executor_from_row::<DB>).collect()
}

pub async fn delete_stale_registry<DB: Dialect>(
    db: Pools<'_, DB>,
    heartbeat_before_ms: i64,
) -> StoreResult<u64> {
    Sql::<DB>::new("DELETE FROM xjob_registry WHERE heartbeat_ms < ")
        .bind(heartbeat_before_ms)
        .affected(&mut *db.write().await?)
        .await
}

/// `(log id, access token)` for each run whose group has a token, for checking
/// `Registry.Callback`.
pub async fn log_group_tokens<DB: Dialect>(
    db: Pools<'_, DB>,
    log_ids: &[LogId],
) -> StoreResult<Vec<(LogId, String)>> {
    let log_ids = raw_ids(log_ids);
    let mut conn = db.read().await?;
    let mut tokens = Vec::new();
    for chunk in log_ids.chunks(DB::IDS_PER_STATEMENT) {
        let mut select = Sql::<DB>::new(
            "SELECT l.id, g.access_token FROM xjob_log l JOIN xjob_group g ON g.id = l.group_id \
             WHERE g.access_token <> '' AND l.id",
        );
        DB::push_id_list(&mut select, chunk);
        for row in select.push(" ORDER BY l.id").fetch_all(&mut conn).await? {
            let row = crate::store::sql::Cols::<DB>(&row);
            tokens.push((row.get("id")?, row.get("access_token")?));
        }
    }
    Ok(tokens)
}

/// Who a `Registry.Callback` may finish each of `log_ids` for: `(log id, status, executor
/// address, app name, group access token)` of the runs that exist.
pub async fn callback_targets<DB: Dialect>(
    db: Pools<'_, DB>,
    log_ids: &[LogId],
) -> StoreResult<Vec<crate::store::CallbackTarget>> {
    let log_ids = raw_ids(log_ids);
    let mut conn = db.read().await?;
    let mut targets = Vec::new();
    for chunk in log_ids.chunks(DB::IDS_PER_STATEMENT) {
        let mut select = Sql::<DB>::new(
            "SELECT l.id, l.status, l.executor_address, g.app_name, g.access_token FROM xjob_log l \
             JOIN xjob_group g ON g.id = l.group_id WHERE l.id",
        );
        DB::push_id_list(&mut select, chunk);
        for row in select.push(" ORDER BY l.id").fetch_all(&mut conn).await? {
            let row = crate::store::sql::Cols::<DB>(&row);
            targets.push(crate::store::CallbackTarget {
                log_id: row.get("id")?,
                status: row.parse("status", crate::model::RunStatus::parse)?,
                executor_address: row.get("executor_address")?,
                app_name: row.get("app_name")?,
                access_token: row.get("access_token")?,
            });
        }
    }
    Ok(targets)
}
