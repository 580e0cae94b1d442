//! Registry rows: one per live executor session, owned by the admin node holding the stream.

use super::rows::executor_from_row;
use super::{SqliteStore, map_error};
use crate::model::ExecutorInfo;
use crate::store::StoreResult;

impl SqliteStore {
    pub async fn upsert_registry(&self, executor: &ExecutorInfo) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO xjob_registry (executor_id, app_name, address, handlers, owner_node, \
             registered_ms, heartbeat_ms) VALUES (?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (executor_id) DO UPDATE SET heartbeat_ms = excluded.heartbeat_ms, \
             owner_node = excluded.owner_node",
        )
        .bind(&executor.executor_id)
        .bind(&executor.app_name)
        .bind(&executor.address)
        .bind(executor.handlers.join(","))
        .bind(&executor.admin_node)
        .bind(executor.registered_ms)
        .bind(executor.last_heartbeat_ms)
        .execute(&self.writer)
        .await
        .map_err(map_error)?;
        Ok(())
    }

    pub async fn delete_registry(&self, executor_id: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM xjob_registry WHERE executor_id = ?")
            .bind(executor_id)
            .execute(&self.writer)
            .await
            .map_err(map_error)?;
        Ok(())
    }

    pub async fn list_registry_of_node(&self, node_id: &str) -> StoreResult<Vec<ExecutorInfo>> {
        let rows = sqlx::query(
            "SELECT executor_id, app_name, address, handlers, owner_node, registered_ms, \
             heartbeat_ms FROM xjob_registry WHERE owner_node = ? ORDER BY app_name, address",
        )
        .bind(node_id)
        .fetch_all(&self.reader)
        .await
        .map_err(map_error)?;
        rows.iter().map(executor_from_row).collect()
    }
}
