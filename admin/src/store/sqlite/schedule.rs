//! The schedule round under the lock, node leases, and the claim/adopt steps that make every
//! scheduled fire run exactly once.

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{SqliteStore, map_error};
use crate::model::RunLog;
use crate::store::StoreResult;

/// Takes over the PENDING runs of dead nodes and of this node's older epochs (through the
/// partial index of PENDING rows, see `super::plans`).
pub(super) fn adopt_orphan_runs_sql() -> String {
    format!(
        "UPDATE xjob_log SET owner_node = ?, epoch = ? WHERE status = 'PENDING' AND ( \
           (owner_node = ? AND epoch < ?) OR owner_node IN ( \
             SELECT node_id FROM xjob_node WHERE lease_until_ms < ? AND node_id <> ?)) \
         RETURNING {LOG_COLUMNS}"
    )
}

impl SqliteStore {
    pub async fn adopt_orphan_runs(
        &self,
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        self.adopt_rows(&adopt_orphan_runs_sql(), node_id, epoch, now_ms)
            .await
    }

    /// Runs one of the adoption statements (orphan fires, stale follow-ups): both take over the
    /// rows of dead nodes and of this node's older epochs, with the same parameters.
    pub(super) async fn adopt_rows(
        &self,
        sql: &str,
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let rows = sqlx::query(sql)
            .bind(node_id)
            .bind(epoch)
            .bind(node_id)
            .bind(epoch)
            .bind(now_ms)
            .bind(node_id)
            .fetch_all(&self.writer)
            .await
            .map_err(map_error)?;
        rows.iter().map(run_from_row).collect()
    }
}
