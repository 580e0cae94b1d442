//! Run logs: inserts for manual triggers, dispatch outcomes, executor results, queries.

use sqlx::QueryBuilder;

use super::inserts::insert_run;
use super::rows::{LOG_COLUMNS, run_from_row};
use super::schedule::runs_by_id;
use super::{MySqlStore, map_error};
use crate::model::{LogFilter, NewRun, RunLog};
use crate::store::{DispatchOutcome, DispatchRecord, RunCompletion, StoreResult};

impl MySqlStore {
    pub async fn insert_runs(&self, runs: &[NewRun]) -> StoreResult<Vec<i64>> {
        // One insert per run: its insert id is exact, whatever other admins insert meanwhile.
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let mut ids = Vec::with_capacity(runs.len());
        for run in runs {
            ids.push(insert_run(&mut tx, run).await?);
        }
        tx.commit().await.map_err(map_error)?;
        Ok(ids)
    }

    pub async fn record_dispatches(&self, records: &[DispatchRecord]) -> StoreResult<()> {
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        for record in in_id_order(records, |record| record.log_id) {
            if record.outcome == DispatchOutcome::Skipped {
                sqlx::query(
                    "UPDATE xjob_log SET status = 'SKIPPED', trigger_msg = ? WHERE id = ? \
                     AND handle_code = 0 AND status IN ('PENDING', 'RUNNING')",
                )
                .bind(&record.trigger_msg)
                .bind(record.log_id)
                .execute(&mut *tx)
                .await
                .map_err(map_error)?;
            } else if record.outcome == DispatchOutcome::Accepted {
                // The status stays as it is: a fast executor's callback may already have
                // finished the run, and that result must not be overwritten.
                sqlx::query(
                    "UPDATE xjob_log SET trigger_code = ?, trigger_msg = ?, executor_address = ? \
                     WHERE id = ?",
                )
                .bind(record.trigger_code)
                .bind(&record.trigger_msg)
                .bind(&record.executor_address)
                .bind(record.log_id)
                .execute(&mut *tx)
                .await
                .map_err(map_error)?;
            } else {
                sqlx::query(
                    "UPDATE xjob_log SET status = 'FAILED', trigger_code = ?, trigger_msg = ?, \
                     executor_address = ?, handle_time_ms = ? WHERE id = ? AND handle_code = 0 \
                     AND status IN ('PENDING', 'RUNNING')",
                )
                .bind(record.trigger_code)
                .bind(&record.trigger_msg)
                .bind(&record.executor_address)
                .bind(record.finished_ms)
                .bind(record.log_id)
                .execute(&mut *tx)
                .await
                .map_err(map_error)?;
            }
        }
        tx.commit().await.map_err(map_error)
    }

    pub async fn complete_runs(&self, completions: &[RunCompletion]) -> StoreResult<Vec<RunLog>> {
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let mut changed_ids = Vec::new();
        for completion in in_id_order(completions, |completion| completion.log_id) {
            // Conditional on a non-final status: a repeated or late result changes nothing.
            // The update re-checks the newest row version after any lock wait, so of two
            // results racing for one run exactly one matches.
            let result = sqlx::query(
                "UPDATE xjob_log SET status = ?, handle_code = ?, handle_msg = ?, \
                 handle_time_ms = ? WHERE id = ? AND status IN ('PENDING', 'RUNNING')",
            )
            .bind(completion.status.as_str())
            .bind(completion.handle_code)
            .bind(&completion.handle_msg)
            .bind(completion.finished_ms)
            .bind(completion.log_id)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
            if result.rows_affected() == 1 && !changed_ids.contains(&completion.log_id) {
                changed_ids.push(completion.log_id);
            }
        }
        // The changed rows stay locked by this transaction, so this reads what it wrote.
        let mut changed = runs_by_id(&mut tx, &changed_ids).await?;
        tx.commit().await.map_err(map_error)?;
        // In the order the results came in.
        changed.sort_by_key(|run| {
            completions
                .iter()
                .position(|completion| completion.log_id == run.id)
                .unwrap_or(usize::MAX)
        });
        Ok(changed)
    }

    pub async fn get_log(&self, id: i64) -> StoreResult<Option<RunLog>> {
        let row = sqlx::query(&format!("SELECT {LOG_COLUMNS} FROM xjob_log WHERE id = ?"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(map_error)?;
        row.as_ref().map(run_from_row).transpose()
    }

    pub async fn list_logs(&self, filter: &LogFilter) -> StoreResult<Vec<RunLog>> {
        let mut query =
            QueryBuilder::new(format!("SELECT {LOG_COLUMNS} FROM xjob_log WHERE 1 = 1"));
        if let Some(group_id) = filter.group_id {
            query.push(" AND group_id = ").push_bind(group_id);
        }
        if let Some(job_id) = filter.job_id {
            query.push(" AND job_id = ").push_bind(job_id);
        }
        if let Some(status) = filter.status {
            query.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(from_ms) = filter.from_ms {
            query.push(" AND trigger_time_ms >= ").push_bind(from_ms);
        }
        if let Some(to_ms) = filter.to_ms {
            query.push(" AND trigger_time_ms <= ").push_bind(to_ms);
        }
        query
            .push(" ORDER BY id DESC LIMIT ")
            .push_bind(filter.limit);
        query.push(" OFFSET ").push_bind(filter.offset);
        let rows = query
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(map_error)?;
        rows.iter().map(run_from_row).collect()
    }
}

/// The items sorted by log id (stable: repeats of one run keep their order). Transactions that
/// lock several runs lock them in id order, so two of them never wait for each other in a
/// cycle (a deadlock, which InnoDB would end by rolling one of them back).
fn in_id_order<T>(items: &[T], log_id: impl Fn(&T) -> i64) -> Vec<&T> {
    let mut sorted: Vec<&T> = items.iter().collect();
    sorted.sort_by_key(|item| log_id(item));
    sorted
}
