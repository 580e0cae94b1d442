//! Operations data: the daily report rows (`xjob_log_report`) and the batched deletion of log
//! rows behind `ClearLogs` and the retention clean-up.
//!
//! Every statement here is idempotent, so several admins may run the same refresh or clean-up
//! at the same time: a report row is recomputed from the log rows and replaced, and deleting a
//! row twice deletes it once.

use sqlx::{QueryBuilder, Sqlite};

use super::{SqliteStore, map_error};
use crate::store::{DayCounts, LogCleanup, StoreResult};

/// Status filter every deletion carries: a run still pending or running is never deleted.
const FINAL_ONLY: &str = " AND status NOT IN ('PENDING', 'RUNNING')";

impl SqliteStore {
    pub async fn refresh_log_report(
        &self,
        day_start_ms: i64,
        day_end_ms: i64,
        now_ms: i64,
    ) -> StoreResult<DayCounts> {
        // Counted through a read connection: the count walks a whole day of log rows, and on
        // the single writer connection it would hold every dispatch write back meanwhile. Two
        // admins refreshing at once store counts a moment apart; the next refresh evens it out.
        let (running, success, failed): (i64, i64, i64) = sqlx::query_as(
            "SELECT COALESCE(SUM(status IN ('PENDING', 'RUNNING')), 0), \
               COALESCE(SUM(status = 'SUCCESS'), 0), \
               COALESCE(SUM(status NOT IN ('PENDING', 'RUNNING', 'SUCCESS', 'SKIPPED')), 0) \
             FROM xjob_log WHERE trigger_time_ms >= ? AND trigger_time_ms < ?",
        )
        .bind(day_start_ms)
        .bind(day_end_ms)
        .fetch_one(&self.reader)
        .await
        .map_err(map_error)?;
        let row: (i64, i64, i64, i64) = sqlx::query_as(
            "INSERT INTO xjob_log_report (day_ms, running, success, failed, updated_ms) \
             VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT (day_ms) DO UPDATE SET running = excluded.running, \
               success = excluded.success, failed = excluded.failed, \
               updated_ms = excluded.updated_ms \
             RETURNING day_ms, running, success, failed",
        )
        .bind(day_start_ms)
        .bind(running)
        .bind(success)
        .bind(failed)
        .bind(now_ms)
        .fetch_one(&self.writer)
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
             WHERE day_ms >= ? AND day_ms <= ? ORDER BY day_ms",
        )
        .bind(from_day_ms)
        .bind(to_day_ms)
        .fetch_all(&self.reader)
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
            .fetch_optional(&self.reader)
            .await
            .map_err(map_error)
    }

    pub async fn delete_logs_batch(&self, cleanup: &LogCleanup, limit: i64) -> StoreResult<u64> {
        // One bounded statement per batch: the write lock is held for one batch only, so the
        // schedule round and callbacks interleave with a long clean-up.
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
        query.push(" LIMIT ").push_bind(limit).push(")");
        query.push(FINAL_ONLY);
        let result = query
            .build()
            .execute(&self.writer)
            .await
            .map_err(map_error)?;
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
/// recorded as finished. Written so the `trigger_time_ms` index serves both branches.
fn push_older_than(query: &mut QueryBuilder<'_, Sqlite>, cutoff_ms: i64) {
    query.push(" AND ((trigger_time_ms > 0 AND trigger_time_ms < ");
    query.push_bind(cutoff_ms);
    query.push(") OR (trigger_time_ms = 0 AND (CASE WHEN scheduled_at_ms > 0 ");
    query.push("THEN scheduled_at_ms ELSE handle_time_ms END) < ");
    query.push_bind(cutoff_ms);
    query.push("))");
}

fn push_owner_filters(
    query: &mut QueryBuilder<'_, Sqlite>,
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

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_START: i64 = 1_716_163_200_000;
    const DAY_END: i64 = DAY_START + 86_400_000;

    async fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("report.db").display());
        let store = SqliteStore::connect(&url).await.expect("store opens");
        (dir, store)
    }

    /// Inserts a run of job `job_id` (group 1) and returns its id.
    async fn insert_run(
        store: &SqliteStore,
        job_id: i64,
        status: &str,
        trigger_ms: i64,
        scheduled_ms: i64,
    ) -> i64 {
        sqlx::query_scalar(
            "INSERT INTO xjob_log (job_id, group_id, status, trigger_type, trigger_time_ms, \
             scheduled_at_ms) VALUES (?, 1, ?, 'MANUAL', ?, ?) RETURNING id",
        )
        .bind(job_id)
        .bind(status)
        .bind(trigger_ms)
        .bind(scheduled_ms)
        .fetch_one(&store.writer)
        .await
        .expect("run inserted")
    }

    async fn remaining_ids(store: &SqliteStore) -> Vec<i64> {
        sqlx::query_scalar("SELECT id FROM xjob_log ORDER BY id")
            .fetch_all(&store.writer)
            .await
            .expect("ids read")
    }

    #[tokio::test]
    async fn report_counts_by_trigger_day_and_leaves_skipped_out() {
        let (_dir, store) = store().await;
        let inside = DAY_START + 1000;
        for status in [
            "PENDING", "RUNNING", "SUCCESS", "SUCCESS", "FAILED", "TIMEOUT", "KILLED", "LOST",
            "SKIPPED",
        ] {
            insert_run(&store, 1, status, inside, 0).await;
        }
        insert_run(&store, 1, "SUCCESS", DAY_START - 1, 0).await;
        insert_run(&store, 1, "SUCCESS", DAY_END, 0).await;
        let counts = store
            .refresh_log_report(DAY_START, DAY_END, 5)
            .await
            .expect("refresh");
        assert_eq!((counts.running, counts.success, counts.failed), (2, 2, 4));

        insert_run(&store, 1, "FAILED", DAY_END - 1, 0).await;
        store
            .refresh_log_report(DAY_START, DAY_END, 6)
            .await
            .expect("refresh again");
        let rows = store
            .list_log_report(DAY_START, DAY_START)
            .await
            .expect("rows");
        assert_eq!(
            rows,
            vec![DayCounts {
                day_ms: DAY_START,
                running: 2,
                success: 2,
                failed: 5
            }]
        );

        let empty = store
            .refresh_log_report(DAY_END + 86_400_000, DAY_END + 2 * 86_400_000, 7)
            .await;
        assert_eq!(
            empty.map(|c| (c.running, c.success, c.failed)).ok(),
            Some((0, 0, 0))
        );
    }

    #[tokio::test]
    async fn deletion_spares_active_runs_and_ages_undispatched_runs_by_schedule() {
        let (_dir, store) = store().await;
        let old = DAY_START - 1;
        let young = DAY_START + 1;
        let old_final = insert_run(&store, 1, "SUCCESS", old, 0).await;
        let old_pending = insert_run(&store, 1, "PENDING", 0, old).await;
        let old_running = insert_run(&store, 1, "RUNNING", old, old).await;
        let old_undispatched = insert_run(&store, 1, "SKIPPED", 0, old).await;
        let young_final = insert_run(&store, 1, "FAILED", young, old).await;
        let young_undispatched = insert_run(&store, 1, "SKIPPED", 0, young).await;
        let other_job_old = insert_run(&store, 2, "FAILED", old, 0).await;
        let cleanup = LogCleanup {
            job_id: Some(1),
            older_than_ms: Some(DAY_START),
            ..LogCleanup::default()
        };
        assert_eq!(store.delete_logs_batch(&cleanup, 1000).await.ok(), Some(2));
        assert_eq!(
            remaining_ids(&store).await,
            vec![
                old_pending,
                old_running,
                young_final,
                young_undispatched,
                other_job_old
            ]
        );
        assert!(!remaining_ids(&store).await.contains(&old_final));
        assert!(!remaining_ids(&store).await.contains(&old_undispatched));

        let everything = LogCleanup::default();
        assert_eq!(
            store.delete_logs_batch(&everything, 1000).await.ok(),
            Some(3)
        );
        assert_eq!(remaining_ids(&store).await, vec![old_pending, old_running]);
    }

    #[tokio::test]
    async fn batches_are_bounded_and_keep_latest_counts_from_the_newest() {
        let (_dir, store) = store().await;
        let mut ids = Vec::new();
        for _ in 0..25 {
            ids.push(insert_run(&store, 1, "SUCCESS", DAY_START, 0).await);
        }
        insert_run(&store, 2, "SUCCESS", DAY_START, 0).await;
        let tenth_newest = store
            .nth_newest_log_id(None, Some(1), 10)
            .await
            .expect("query");
        assert_eq!(tenth_newest, Some(ids[15]));
        assert_eq!(
            store.nth_newest_log_id(None, Some(1), 26).await.ok(),
            Some(None)
        );
        let cleanup = LogCleanup {
            job_id: Some(1),
            below_id: tenth_newest,
            ..LogCleanup::default()
        };
        assert_eq!(store.delete_logs_batch(&cleanup, 10).await.ok(), Some(10));
        assert_eq!(store.delete_logs_batch(&cleanup, 10).await.ok(), Some(5));
        assert_eq!(store.delete_logs_batch(&cleanup, 10).await.ok(), Some(0));
        let remaining = remaining_ids(&store).await;
        assert_eq!(remaining.len(), 11);
        assert_eq!(remaining[0], ids[15]);
    }

    #[tokio::test]
    async fn tokens_are_listed_for_runs_of_groups_that_have_one() {
        let (_dir, store) = store().await;
        for (app, token) in [("app-one", "s3cret"), ("app-two", "")] {
            sqlx::query(
                "INSERT INTO xjob_group (app_name, title, address_type, access_token, updated_ms) \
                 VALUES (?, 't', 'AUTO', ?, 0)",
            )
            .bind(app)
            .bind(token)
            .execute(&store.writer)
            .await
            .expect("group inserted");
        }
        let in_group_one = insert_run(&store, 1, "RUNNING", DAY_START, 0).await;
        let in_group_two: i64 = sqlx::query_scalar(
            "INSERT INTO xjob_log (job_id, group_id, status, trigger_type) \
             VALUES (2, 2, 'RUNNING', 'MANUAL') RETURNING id",
        )
        .fetch_one(&store.writer)
        .await
        .expect("run inserted");
        let tokens = store
            .log_group_tokens(&[in_group_one, in_group_two, 999])
            .await
            .expect("tokens");
        assert_eq!(tokens, vec![(in_group_one, "s3cret".to_string())]);
    }
}
