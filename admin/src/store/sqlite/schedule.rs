//! The schedule round under the lock, node leases, and the claim/adopt steps that make every
//! scheduled fire run exactly once.

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{SqliteStore, map_error, placeholders};
use crate::model::RunLog;
use crate::store::{StoreResult, batch_json};

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

/// Claims PENDING rows by id for this node and epoch, returning `columns`. The owner/epoch
/// condition is the fence: a node that stalled past its lease and lost its fires to another node
/// claims nothing here. The ids come as one JSON array, and the `+` marks keep SQLite off the
/// index of PENDING rows, which would walk all of this node's pending fires (five seconds of
/// them) instead of looking each id up (see `super::plans`).
pub(super) fn claim_sql(columns: &str) -> String {
    format!(
        "UPDATE xjob_log SET status = 'RUNNING', trigger_time_ms = ? \
         WHERE id IN (SELECT value FROM json_each(?)) AND +status = 'PENDING' \
         AND +owner_node = ? AND +epoch = ? RETURNING {columns}"
    )
}

/// Ids per claim statement.
const CLAIM_CHUNK: usize = 10_000;

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

    pub async fn claim_runs(
        &self,
        ids: &[i64],
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let mut claimed = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CLAIM_CHUNK) {
            let rows = self
                .claim_chunk(chunk, node_id, epoch, now_ms, LOG_COLUMNS)
                .await?;
            for row in &rows {
                claimed.push(run_from_row(row)?);
            }
        }
        Ok(claimed)
    }

    pub async fn claim_run_ids(
        &self,
        ids: &[i64],
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<i64>> {
        let mut claimed = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CLAIM_CHUNK) {
            let rows = self
                .claim_chunk(chunk, node_id, epoch, now_ms, "id")
                .await?;
            for row in &rows {
                claimed.push(row.try_get::<i64, _>(0).map_err(map_error)?);
            }
        }
        Ok(claimed)
    }

    /// The claim of one chunk of ids, returning `columns` of the rows claimed.
    async fn claim_chunk(
        &self,
        ids: &[i64],
        node_id: &str,
        epoch: i64,
        now_ms: i64,
        columns: &str,
    ) -> StoreResult<Vec<SqliteRow>> {
        sqlx::query(&claim_sql(columns))
            .bind(now_ms)
            .bind(batch_json::ids(ids))
            .bind(node_id)
            .bind(epoch)
            .fetch_all(&self.writer)
            .await
            .map_err(map_error)
    }

    pub async fn skip_planned_fires(
        &self,
        job_id: i64,
        reason: &str,
        now_ms: i64,
    ) -> StoreResult<u64> {
        let result = sqlx::query(
            "UPDATE xjob_log SET status = 'SKIPPED', trigger_msg = ?, trigger_time_ms = ? \
             WHERE job_id = ? AND status = 'PENDING' AND fire_key IS NOT NULL",
        )
        .bind(reason)
        .bind(now_ms)
        .bind(job_id)
        .execute(&self.writer)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected())
    }

    pub async fn skip_runs(&self, ids: &[i64], reason: &str, now_ms: i64) -> StoreResult<()> {
        for chunk in ids.chunks(super::MAX_BIND_PARAMS - 4) {
            let sql = format!(
                "UPDATE xjob_log SET status = 'SKIPPED', trigger_msg = ?, trigger_time_ms = ? \
                 WHERE +status = 'PENDING' AND id IN ({})",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query(&sql).bind(reason).bind(now_ms);
            for id in chunk {
                query = query.bind(id);
            }
            query.execute(&self.writer).await.map_err(map_error)?;
        }
        Ok(())
    }
}
