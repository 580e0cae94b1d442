//! The schedule round under the lock, node leases, and the claim/adopt steps that make every
//! scheduled fire run exactly once.
//!
//! The round is one transaction that first locks the `schedule_lock` row (`FOR UPDATE`), so
//! rounds of all admins run one after the other and each reads the job times the previous one
//! wrote. Claims and adoptions need no lock: each is a conditional update on the run's
//! status/owner/epoch, which PostgreSQL re-checks on the newest row version after waiting for a
//! concurrent writer, so of a stalled owner's claim and another node's adoption only one wins.
//! Multi-row updates lock their rows in id order first, so two admins never deadlock.

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{PgStore, map_error};
use crate::model::RunLog;
use crate::store::StoreResult;

impl PgStore {
    pub async fn adopt_orphan_runs(
        &self,
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        // SKIP LOCKED: a row another admin is adopting or claiming right now is left to it; if
        // that admin's write does not happen, the next sweep finds the row again.
        let rows = sqlx::query(&format!(
            "UPDATE xjob_log SET owner_node = $1, epoch = $2 WHERE id IN ( \
               SELECT id FROM xjob_log WHERE status = 'PENDING' AND ( \
                 (owner_node = $1 AND epoch < $2) OR owner_node IN ( \
                   SELECT node_id FROM xjob_node WHERE lease_until_ms < $3 AND node_id <> $1)) \
               ORDER BY id FOR UPDATE SKIP LOCKED) \
             RETURNING {LOG_COLUMNS}"
        ))
        .bind(node_id)
        .bind(epoch)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(map_error)?;
        runs_by_id(&rows)
    }

    pub async fn claim_runs(
        &self,
        ids: &[i64],
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let rows = self.claim(ids, node_id, epoch, now_ms, LOG_COLUMNS).await?;
        runs_by_id(&rows)
    }

    pub async fn claim_run_ids(
        &self,
        ids: &[i64],
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<i64>> {
        let rows = self.claim(ids, node_id, epoch, now_ms, "id").await?;
        rows.iter()
            .map(|row| row.try_get::<i64, _>(0).map_err(map_error))
            .collect()
    }

    /// The claim, returning `columns` of the rows claimed.
    async fn claim(
        &self,
        ids: &[i64],
        node_id: &str,
        epoch: i64,
        now_ms: i64,
        columns: &str,
    ) -> StoreResult<Vec<PgRow>> {
        // The owner/epoch condition is the fence: a node that stalled past its lease and lost
        // its fires to another node claims nothing here. FOR UPDATE (not SKIP LOCKED): a row
        // being adopted right now is waited for and then re-checked, never silently passed by.
        sqlx::query(&format!(
            "UPDATE xjob_log SET status = 'RUNNING', trigger_time_ms = $1 WHERE id IN ( \
               SELECT id FROM xjob_log WHERE id = ANY($4) AND status = 'PENDING' \
               AND owner_node = $2 AND epoch = $3 ORDER BY id FOR UPDATE) \
             RETURNING {columns}"
        ))
        .bind(now_ms)
        .bind(node_id)
        .bind(epoch)
        .bind(ids)
        .fetch_all(&self.pool)
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
            "UPDATE xjob_log SET status = 'SKIPPED', trigger_msg = $1, trigger_time_ms = $2 \
             WHERE id IN (SELECT id FROM xjob_log WHERE job_id = $3 AND status = 'PENDING' \
               AND fire_key IS NOT NULL ORDER BY id FOR UPDATE)",
        )
        .bind(reason)
        .bind(now_ms)
        .bind(job_id)
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected())
    }

    pub async fn skip_runs(&self, ids: &[i64], reason: &str, now_ms: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE xjob_log SET status = 'SKIPPED', trigger_msg = $1, trigger_time_ms = $2 \
             WHERE id IN (SELECT id FROM xjob_log WHERE id = ANY($3) AND status = 'PENDING' \
               ORDER BY id FOR UPDATE)",
        )
        .bind(reason)
        .bind(now_ms)
        .bind(ids)
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(())
    }
}

/// Decodes returned runs, ordered by id (RETURNING has no order of its own).
pub(super) fn runs_by_id(rows: &[sqlx::postgres::PgRow]) -> StoreResult<Vec<RunLog>> {
    let mut runs = rows
        .iter()
        .map(run_from_row)
        .collect::<StoreResult<Vec<RunLog>>>()?;
    runs.sort_by_key(|run| run.id);
    Ok(runs)
}
