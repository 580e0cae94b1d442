//! Operations data: the daily report rows (`xjob_log_report`) and the batched deletion of log
//! rows behind `ClearLogs` and the retention clean-up.
//!
//! Every statement here is idempotent, so several admins may run the same refresh or clean-up
//! at the same time: a report row is recomputed from the log rows and upserted, and deleting a
//! row twice deletes it once. A deletion batch waits for rows another transaction holds (a
//! follow-up claim) rather than skipping them: callers stop at the first batch smaller than the
//! limit, so a batch must delete `limit` rows whenever that many qualify.

use sqlx::{Postgres, QueryBuilder};

use super::{PgStore, map_error};
use crate::store::{DayCounts, LogCleanup, StoreResult};

/// Status filter every deletion carries: a run still pending or running is never deleted.
const FINAL_ONLY: &str = " AND status NOT IN ('PENDING', 'RUNNING')";

impl PgStore {
    pub async fn refresh_log_report(
        &self,
        day_start_ms: i64,
        day_end_ms: i64,
        now_ms: i64,
    ) -> StoreResult<DayCounts> {
        // One statement counts and upserts, so a concurrent refresh by another admin can only
        // replace the row with counts just as fresh.
        let row: (i64, i64, i64, i64) = sqlx::query_as(
            "INSERT INTO xjob_log_report (day_ms, running, success, failed, updated_ms) \
             SELECT $1, \
               COUNT(*) FILTER (WHERE status IN ('PENDING', 'RUNNING')), \
               COUNT(*) FILTER (WHERE status = 'SUCCESS'), \
               COUNT(*) FILTER (WHERE status NOT IN ('PENDING', 'RUNNING', 'SUCCESS', \
                 'SKIPPED')), \
               $3 \
             FROM xjob_log WHERE trigger_time_ms >= $1 AND trigger_time_ms < $2 \
             ON CONFLICT (day_ms) DO UPDATE SET running = excluded.running, \
               success = excluded.success, failed = excluded.failed, \
               updated_ms = excluded.updated_ms \
             RETURNING day_ms, running, success, failed",
        )
        .bind(day_start_ms)
        .bind(day_end_ms)
        .bind(now_ms)
        .fetch_one(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(day_counts(row))
    }

    pub async fn list_log_report(
        &self,
        from_day_ms: i64,
        to_day_ms: i64,
    ) -> StoreResult<Vec<DayCounts>> {
        let rows: Vec<(i64, i64, i64, i64)> = sqlx::query_as(
            "SELECT day_ms, running, success, failed FROM xjob_log_report \
             WHERE day_ms >= $1 AND day_ms <= $2 ORDER BY day_ms",
        )
        .bind(from_day_ms)
        .bind(to_day_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(rows.into_iter().map(day_counts).collect())
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
        // One bounded statement per batch, so the schedule round and callbacks interleave with
        // a long clean-up; rows are locked in id order, as every multi-row write here locks.
        let mut query = QueryBuilder::new(
            "DELETE FROM xjob_log WHERE id IN (SELECT id FROM xjob_log WHERE 1 = 1",
        );
        query.push(FINAL_ONLY);
        push_owner_filters(&mut query, cleanup.group_id, cleanup.job_id);
        if let Some(below_id) = cleanup.below_id {
            query.push(" AND id < ").push_bind(below_id);
        }
        if let Some(cutoff_ms) = cleanup.older_than_ms {
            push_older_than(&mut query, cutoff_ms);
        }
        query
            .push(" ORDER BY id LIMIT ")
            .push_bind(limit)
            .push(" FOR UPDATE)");
        query.push(FINAL_ONLY);
        let result = query.build().execute(&self.pool).await.map_err(map_error)?;
        Ok(result.rows_affected())
    }
}

fn day_counts((day_ms, running, success, failed): (i64, i64, i64, i64)) -> DayCounts {
    DayCounts {
        day_ms,
        running,
        success,
        failed,
    }
}

/// Keeps runs aged before `cutoff_ms`. A run is aged by its trigger time; one never dispatched
/// by its scheduled time, or (a manual run that never left the admin) by the time it was
/// recorded as finished.
fn push_older_than(query: &mut QueryBuilder<'_, Postgres>, cutoff_ms: i64) {
    query.push(" AND ((trigger_time_ms > 0 AND trigger_time_ms < ");
    query.push_bind(cutoff_ms);
    query.push(") OR (trigger_time_ms = 0 AND (CASE WHEN scheduled_at_ms > 0 ");
    query.push("THEN scheduled_at_ms ELSE handle_time_ms END) < ");
    query.push_bind(cutoff_ms);
    query.push("))");
}

fn push_owner_filters(
    query: &mut QueryBuilder<'_, Postgres>,
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
