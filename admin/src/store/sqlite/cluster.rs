//! The shared registry as every admin reads it: the live rows of all admins (each admin routes
//! over its own sessions plus the other admins' rows) and the clean-up of rows whose owner
//! stopped refreshing them (an admin that died while holding executor sessions). Covered by the
//! conformance suite (`every_admin_sees_the_live_registry_rows_of_all_admins`).

use super::rows::executor_from_row;
use super::{SqliteStore, map_error};
use crate::model::ExecutorInfo;
use crate::store::StoreResult;

impl SqliteStore {
    pub async fn list_live_registry(
        &self,
        heartbeat_after_ms: i64,
    ) -> StoreResult<Vec<ExecutorInfo>> {
        let rows = sqlx::query(
            "SELECT executor_id, app_name, address, handlers, owner_node, registered_ms, \
             heartbeat_ms FROM xjob_registry WHERE heartbeat_ms > ? \
             ORDER BY app_name, address, executor_id",
        )
        .bind(heartbeat_after_ms)
        .fetch_all(&self.reader)
        .await
        .map_err(map_error)?;
        rows.iter().map(executor_from_row).collect()
    }

    pub async fn delete_stale_registry(&self, heartbeat_before_ms: i64) -> StoreResult<u64> {
        let result = sqlx::query("DELETE FROM xjob_registry WHERE heartbeat_ms < ?")
            .bind(heartbeat_before_ms)
            .execute(&self.writer)
            .await
            .map_err(map_error)?;
        Ok(result.rows_affected())
    }
}
