//! Job definitions and their scheduling state.

use sqlx::QueryBuilder;

use super::rows::{JOB_COLUMNS, job_from_row, join_ids};
use super::{SqliteStore, map_error, placeholders};
use crate::model::{Job, JobStatus};
use crate::store::{JobFilter, JobScheduleUpdate, StoreResult, batch_json};

fn status_value(status: JobStatus) -> i64 {
    match status {
        JobStatus::Running => 1,
        JobStatus::Stopped => 0,
    }
}

impl SqliteStore {
    pub async fn insert_job(&self, job: &Job) -> StoreResult<Job> {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO xjob_job (group_id, name, author, alarm_email, alarm_on_every_failure, \
             schedule_type, \
             schedule_conf, time_zone, misfire_strategy, route_strategy, handler, params, \
             block_strategy, timeout_ms, fail_retry_count, retry_initial_delay_ms, retry_factor, \
             retry_max_delay_ms, glue_type, glue_source, glue_remark, glue_updated_ms, \
             child_job_ids, trigger_status, trigger_last_ms, trigger_next_ms, created_ms, \
             updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \
             ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(job.group_id)
        .bind(&job.name)
        .bind(&job.author)
        .bind(&job.alarm_email)
        .bind(job.alarm_on_every_failure)
        .bind(job.schedule_type.as_str())
        .bind(&job.schedule_conf)
        .bind(&job.time_zone)
        .bind(job.misfire_strategy.as_str())
        .bind(job.route_strategy.as_str())
        .bind(&job.handler)
        .bind(&job.params)
        .bind(job.block_strategy.as_str())
        .bind(job.timeout_ms)
        .bind(job.fail_retry_count)
        .bind(job.retry_backoff.initial_delay_ms)
        .bind(job.retry_backoff.factor)
        .bind(job.retry_backoff.max_delay_ms)
        .bind(job.glue_type.as_str())
        .bind(&job.glue_source)
        .bind(&job.glue_remark)
        .bind(job.glue_updated_ms)
        .bind(join_ids(&job.child_job_ids))
        .bind(status_value(job.status))
        .bind(job.trigger_last_ms)
        .bind(job.trigger_next_ms)
        .bind(job.created_ms)
        .bind(job.updated_ms)
        .fetch_one(&self.writer)
        .await
        .map_err(map_error)?;
        Ok(Job { id, ..job.clone() })
    }

    pub async fn update_job(&self, job: &Job) -> StoreResult<bool> {
        let result = sqlx::query(
            "UPDATE xjob_job SET group_id = ?, name = ?, author = ?, alarm_email = ?, \
             alarm_on_every_failure = ?, \
             schedule_type = ?, schedule_conf = ?, time_zone = ?, misfire_strategy = ?, \
             route_strategy = ?, handler = ?, params = ?, block_strategy = ?, timeout_ms = ?, \
             fail_retry_count = ?, retry_initial_delay_ms = ?, retry_factor = ?, \
             retry_max_delay_ms = ?, glue_source = ?, glue_remark = ?, glue_updated_ms = ?, \
             child_job_ids = ?, updated_ms = ? WHERE id = ?",
        )
        .bind(job.group_id)
        .bind(&job.name)
        .bind(&job.author)
        .bind(&job.alarm_email)
        .bind(job.alarm_on_every_failure)
        .bind(job.schedule_type.as_str())
        .bind(&job.schedule_conf)
        .bind(&job.time_zone)
        .bind(job.misfire_strategy.as_str())
        .bind(job.route_strategy.as_str())
        .bind(&job.handler)
        .bind(&job.params)
        .bind(job.block_strategy.as_str())
        .bind(job.timeout_ms)
        .bind(job.fail_retry_count)
        .bind(job.retry_backoff.initial_delay_ms)
        .bind(job.retry_backoff.factor)
        .bind(job.retry_backoff.max_delay_ms)
        .bind(&job.glue_source)
        .bind(&job.glue_remark)
        .bind(job.glue_updated_ms)
        .bind(join_ids(&job.child_job_ids))
        .bind(job.updated_ms)
        .bind(job.id)
        .execute(&self.writer)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected() == 1)
    }

    pub async fn delete_job(&self, id: i64) -> StoreResult<bool> {
        let mut tx = self.writer.begin().await.map_err(map_error)?;
        sqlx::query("DELETE FROM xjob_log WHERE job_id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        sqlx::query("DELETE FROM xjob_glue WHERE job_id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        let result = sqlx::query("DELETE FROM xjob_job WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        tx.commit().await.map_err(map_error)?;
        Ok(result.rows_affected() == 1)
    }

    pub async fn get_job(&self, id: i64) -> StoreResult<Option<Job>> {
        let row = sqlx::query(&format!("SELECT {JOB_COLUMNS} FROM xjob_job WHERE id = ?"))
            .bind(id)
            .fetch_optional(&self.reader)
            .await
            .map_err(map_error)?;
        row.as_ref().map(job_from_row).transpose()
    }

    pub async fn get_jobs(&self, ids: &[i64]) -> StoreResult<Vec<Job>> {
        let mut jobs = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(super::MAX_BIND_PARAMS) {
            let sql = format!(
                "SELECT {JOB_COLUMNS} FROM xjob_job WHERE id IN ({})",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query(&sql);
            for id in chunk {
                query = query.bind(id);
            }
            let rows = query.fetch_all(&self.reader).await.map_err(map_error)?;
            for row in &rows {
                jobs.push(job_from_row(row)?);
            }
        }
        Ok(jobs)
    }

    pub async fn list_jobs(&self, filter: &JobFilter) -> StoreResult<Vec<Job>> {
        let mut query =
            QueryBuilder::new(format!("SELECT {JOB_COLUMNS} FROM xjob_job WHERE 1 = 1"));
        if let Some(group_id) = filter.group_id {
            query.push(" AND group_id = ").push_bind(group_id);
        }
        if let Some(status) = filter.status {
            query
                .push(" AND trigger_status = ")
                .push_bind(status_value(status));
        }
        for (column, value) in [
            ("name", &filter.name),
            ("handler", &filter.handler),
            ("author", &filter.author),
        ] {
            if let Some(text) = value {
                query
                    .push(format!(" AND instr({column}, "))
                    .push_bind(text.clone())
                    .push(") > 0");
            }
        }
        query.push(" ORDER BY id LIMIT ").push_bind(filter.limit);
        query.push(" OFFSET ").push_bind(filter.offset);
        let rows = query
            .build()
            .fetch_all(&self.reader)
            .await
            .map_err(map_error)?;
        rows.iter().map(job_from_row).collect()
    }

    pub async fn missing_job_ids(&self, ids: &[i64]) -> StoreResult<Vec<i64>> {
        let found = self.get_jobs(ids).await?;
        Ok(ids
            .iter()
            .copied()
            .filter(|id| !found.iter().any(|job| job.id == *id))
            .collect())
    }

    pub async fn set_job_schedule(&self, update: JobScheduleUpdate) -> StoreResult<bool> {
        let result = sqlx::query(
            "UPDATE xjob_job SET trigger_status = ?, trigger_last_ms = ?, trigger_next_ms = ? \
             WHERE id = ?",
        )
        .bind(status_value(update.status))
        .bind(update.trigger_last_ms)
        .bind(update.trigger_next_ms)
        .bind(update.job_id)
        .execute(&self.writer)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected() == 1)
    }

    pub async fn count_jobs(&self) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT COUNT(*) FROM xjob_job")
            .fetch_one(&self.reader)
            .await
            .map_err(map_error)
    }
}

/// Writes next fire times in batches: XXL-JOB's `CASE id WHEN … END` update, guarded by
/// `trigger_status = 1` so a job stopped while the round ran stays stopped.
/// The schedule round's next fire times, one JSON row per job. Looked up by id (`+` keeps
/// SQLite off the trigger_status index, which would walk every running job per statement; see
/// `super::plans`); a job stopped meanwhile stays stopped.
pub(super) const SCHEDULE_UPDATES: &str = "UPDATE xjob_job SET trigger_last_ms = r.last, trigger_next_ms = r.next, \
     trigger_status = r.status \
     FROM (SELECT json_extract(value, '$.id') AS id, \
             json_extract(value, '$.last') AS last, \
             json_extract(value, '$.next') AS next, \
             json_extract(value, '$.status') AS status FROM json_each(?)) AS r \
     WHERE xjob_job.id = r.id AND +xjob_job.trigger_status = 1";

pub(super) async fn write_schedule_updates(
    conn: &mut sqlx::SqliteConnection,
    updates: &[JobScheduleUpdate],
) -> StoreResult<()> {
    for chunk in updates.chunks(batch_json::ROWS_PER_STATEMENT) {
        sqlx::query(SCHEDULE_UPDATES)
            .bind(batch_json::schedule_updates(chunk))
            .execute(&mut *conn)
            .await
            .map_err(map_error)?;
    }
    Ok(())
}
