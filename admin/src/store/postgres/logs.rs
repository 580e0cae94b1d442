//! Run logs: inserts for manual triggers, dispatch outcomes, executor results, queries.
//!
//! Batches touch their rows in id order, the order every multi-row statement of this backend
//! locks in, so a batch never deadlocks with another admin's claim or adoption.

use sqlx::{QueryBuilder, Row};

use super::rows::{LOG_COLUMNS, run_from_row};
use super::schedule::new_run_insert;
use super::{INSERT_BATCH, PgStore, map_error};
use crate::model::{LogFilter, NewRun, RunLog};
use crate::store::{DispatchOutcome, DispatchRecord, RunCompletion, StoreResult};

impl PgStore {
    pub async fn insert_runs(&self, runs: &[NewRun]) -> StoreResult<Vec<i64>> {
        let mut ids = Vec::with_capacity(runs.len());
        for chunk in runs.chunks(INSERT_BATCH) {
            // A multi-row INSERT … VALUES returns its rows in the order of the VALUES list.
            let mut query = new_run_insert(chunk);
            query.push(" RETURNING id");
            let rows = query
                .build()
                .fetch_all(&self.pool)
                .await
                .map_err(map_error)?;
            for row in rows {
                ids.push(row.try_get::<i64, _>("id").map_err(map_error)?);
            }
        }
        Ok(ids)
    }

    pub async fn record_dispatches(&self, records: &[DispatchRecord]) -> StoreResult<()> {
        let mut ordered: Vec<&DispatchRecord> = records.iter().collect();
        ordered.sort_by_key(|record| record.log_id);
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        for record in ordered {
            let query = match record.outcome {
                DispatchOutcome::Skipped => sqlx::query(
                    "UPDATE xjob_log SET status = 'SKIPPED', trigger_msg = $2 WHERE id = $1 \
                     AND handle_code = 0 AND status IN ('PENDING', 'RUNNING')",
                )
                .bind(record.log_id)
                .bind(&record.trigger_msg),
                // The status stays as it is: a fast executor's callback may already have
                // finished the run, and that result must not be overwritten.
                DispatchOutcome::Accepted => sqlx::query(
                    "UPDATE xjob_log SET trigger_msg = $2, trigger_code = $3, \
                     executor_address = $4 WHERE id = $1",
                )
                .bind(record.log_id)
                .bind(&record.trigger_msg)
                .bind(record.trigger_code)
                .bind(&record.executor_address),
                DispatchOutcome::Failed => sqlx::query(
                    "UPDATE xjob_log SET status = 'FAILED', trigger_msg = $2, trigger_code = $3, \
                     executor_address = $4, handle_time_ms = $5 WHERE id = $1 \
                     AND handle_code = 0 AND status IN ('PENDING', 'RUNNING')",
                )
                .bind(record.log_id)
                .bind(&record.trigger_msg)
                .bind(record.trigger_code)
                .bind(&record.executor_address)
                .bind(record.finished_ms),
            };
            query.execute(&mut *tx).await.map_err(map_error)?;
        }
        tx.commit().await.map_err(map_error)
    }

    pub async fn complete_runs(&self, completions: &[RunCompletion]) -> StoreResult<Vec<RunLog>> {
        let mut ordered: Vec<&RunCompletion> = completions.iter().collect();
        ordered.sort_by_key(|completion| completion.log_id);
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let mut changed = Vec::new();
        for completion in ordered {
            // Conditional on a non-final status: a repeated or late result changes nothing.
            let row = sqlx::query(&format!(
                "UPDATE xjob_log SET status = $1, handle_code = $2, handle_msg = $3, \
                 handle_time_ms = $4 WHERE id = $5 AND status IN ('PENDING', 'RUNNING') \
                 RETURNING {LOG_COLUMNS}"
            ))
            .bind(completion.status.as_str())
            .bind(completion.handle_code)
            .bind(&completion.handle_msg)
            .bind(completion.finished_ms)
            .bind(completion.log_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(map_error)?;
            if let Some(row) = row {
                changed.push(run_from_row(&row)?);
            }
        }
        tx.commit().await.map_err(map_error)?;
        Ok(changed)
    }

    pub async fn get_log(&self, id: i64) -> StoreResult<Option<RunLog>> {
        let row = sqlx::query(&format!("SELECT {LOG_COLUMNS} FROM xjob_log WHERE id = $1"))
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
