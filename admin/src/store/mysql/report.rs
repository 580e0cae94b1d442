//! Operations data: the daily report rows (`xjob_log_report`) and the batched deletion of log
//! rows behind `ClearLogs` and the retention clean-up.
//!
//! Every statement here is idempotent, so several admins may run the same refresh or clean-up
//! at the same time: a report row is recomputed from the log rows and replaced, and deleting a
//! row twice deletes it once.

use sqlx::{MySql, QueryBuilder};

use super::{MySqlStore, map_error};
use crate::store::{DayCounts, LogCleanup, StoreResult};

/// Status filter every deletion carries: a run still pending or running is never deleted.
const FINAL_ONLY: &str = " AND status NOT IN ('PENDING', 'RUNNING')";

impl MySqlStore {
    pub async fn refresh_log_report(
        &self,
        day_start_ms: i64,
        day_end_ms: i64,
        now_ms: i64,
    ) -> StoreResult<DayCounts> {
        // Counted, then upserted: a concurrent refresh by another admin can only replace the
        // row with counts just as fresh. COUNT yields BIGINT (SUM would yield DECIMAL).
        let (running, success, failed): (i64, i64, i64) = sqlx::query_as(
            "SELECT \
               COUNT(CASE WHEN status IN ('PENDING', 'RUNNING') THEN 1 END), \
               COUNT(CASE WHEN status = 'SUCCESS' THEN 1 END), \
               COUNT(CASE WHEN status NOT IN ('PENDING', 'RUNNING', 'SUCCESS', 'SKIPPED') \
                 THEN 1 END) \
             FROM xjob_log WHERE trigger_time_ms >= ? AND trigger_time_ms < ?",
        )
        .bind(day_start_ms)
        .bind(day_end_ms)
        .fetch_one(&self.pool)
        .await
        .map_err(map_error)?;
        sqlx::query(
            "INSERT INTO xjob_log_report (day_ms, running, success, failed, updated_ms) \
             VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE running = VALUES(running), \
             success = VALUES(success), failed = VALUES(failed), \
             updated_ms = VALUES(updated_ms)",
        )
        .bind(day_start_ms)
        .bind(running)
        .bind(success)
        .bind(failed)
        .bind(now_ms)
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(DayCounts {
            day_ms: day_start_ms,
            running,
            success,
            failed,
        })
    }

    pub async fn list_log_report(
        &self,
        from_day_ms: i64,
        to_day_ms: i64,
    ) -> StoreResult<Vec<DayCounts>> {
        let rows: Vec<(i64, i64, i64, i64)> = sqlx::query_as(
            "SELECT day_ms, running, success, failed FROM xjob_log_report \
             WHERE day_ms >= ? AND day_ms <= ? ORDER BY day_ms",
        )
        .bind(from_day_ms)
        .bind(to_day_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(rows
            .into_iter()
            .map(|(day_ms, running, success, failed)| DayCounts {
                day_ms,
                running,
                success,
                failed,
            })
            .collect())
    }

    pub async fn nth_newest_log_id(
        &self,
        group_id: Option<i64>,
        job_id: Option<i64>,
        n: i64,
    ) -> StoreResult<Option<i64>> {
        let mut query = QueryBuilder::new("SELECT id FROM xjob_log WHERE 1 = 1");
        push_owner_filters(&mut query, group_id, job_id);
        query.push(" ORDER BY id DESC LIMIT 1 OFFSET ");
        query.push_bind(n.saturating_sub(1).max(0));
        query
            .build_query_scalar::<i64>()
            .fetch_optional(&self.pool)
            .await
            .map_err(map_error)
    }

    pub async fn delete_logs_batch(&self, cleanup: &LogCleanup, limit: i64) -> StoreResult<u64> {
        // One bounded statement per batch (MySQL's single-table DELETE takes ORDER BY/LIMIT
        // itself; a LIMIT inside an IN subquery is not allowed): row locks are held for one
        // batch only, so the schedule round and callbacks interleave with a long clean-up.
        let mut query = QueryBuilder::new("DELETE FROM xjob_log WHERE 1 = 1");
        query.push(FINAL_ONLY);
        push_owner_filters(&mut query, cleanup.group_id, cleanup.job_id);
        if let Some(below_id) = cleanup.below_id {
            query.push(" AND id < ").push_bind(below_id);
        }
        if let Some(cutoff_ms) = cleanup.older_than_ms {
            push_older_than(&mut query, cutoff_ms);
        }
        query.push(" ORDER BY id LIMIT ").push_bind(limit.max(0));
        let result = query.build().execute(&self.pool).await.map_err(map_error)?;
        Ok(result.rows_affected())
    }
}

/// Keeps runs aged before `cutoff_ms`. A run is aged by its trigger time; one never dispatched
/// by its scheduled time, or (a manual run that never left the admin) by the time it was
/// recorded as finished. Written so the `trigger_time_ms` index serves both branches.
fn push_older_than(query: &mut QueryBuilder<'_, MySql>, cutoff_ms: i64) {
    query.push(" AND ((trigger_time_ms > 0 AND trigger_time_ms < ");
    query.push_bind(cutoff_ms);
    query.push(") OR (trigger_time_ms = 0 AND (CASE WHEN scheduled_at_ms > 0 ");
    query.push("THEN scheduled_at_ms ELSE handle_time_ms END) < ");
    query.push_bind(cutoff_ms);
    query.push("))");
}

fn push_owner_filters(
    query: &mut QueryBuilder<'_, MySql>,
    group_id: Option<i64>,
    job_id: Option<i64>,
) {
    if let Some(group_id) = group_id {
        query.push(" AND group_id = ").push_bind(group_id);
    }
    if let Some(job_id) = job_id {
        query.push(" AND job_id = ").push_bind(job_id);
    }
}
