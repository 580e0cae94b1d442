//! Job definitions and their scheduling state.

use sqlx::{PgConnection, QueryBuilder};

use super::rows::{JOB_COLUMNS, job_from_row, join_ids};
use super::{PgStore, map_error};
use crate::model::{Job, JobStatus};
use crate::store::{JobFilter, JobScheduleUpdate, StoreResult};

/// `trigger_status` as stored (INTEGER): 1 running, 0 stopped.
pub(super) fn status_value(status: JobStatus) -> i32 {
    match status {
        JobStatus::Running => 1,
        JobStatus::Stopped => 0,
    }
}

impl PgStore {
    pub async fn insert_job(&self, job: &Job) -> StoreResult<Job> {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO xjob_job (group_id, name, author, alarm_email, alarm_on_every_failure, \
             schedule_type, schedule_conf, time_zone, misfire_strategy, route_strategy, handler, \
             params, block_strategy, timeout_ms, fail_retry_count, retry_initial_delay_ms, \
             retry_factor, retry_max_delay_ms, glue_type, glue_source, glue_remark, \
             glue_updated_ms, child_job_ids, trigger_status, trigger_last_ms, trigger_next_ms, \
             created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
             $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28) \
             RETURNING id",
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
        .fetch_one(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(Job { id, ..job.clone() })
    }

    pub async fn update_job(&self, job: &Job) -> StoreResult<bool> {
        let result = sqlx::query(
            "UPDATE xjob_job SET group_id = $1, name = $2, author = $3, alarm_email = $4, \
             alarm_on_every_failure = $5, schedule_type = $6, schedule_conf = $7, \
             time_zone = $8, misfire_strategy = $9, route_strategy = $10, handler = $11, \
             params = $12, block_strategy = $13, timeout_ms = $14, fail_retry_count = $15, \
             retry_initial_delay_ms = $16, retry_factor = $17, retry_max_delay_ms = $18, \
             glue_source = $19, glue_remark = $20, glue_updated_ms = $21, child_job_ids = $22, \
             updated_ms = $23 WHERE id = $24",
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
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected() == 1)
    }

    pub async fn delete_job(&self, id: i64) -> StoreResult<bool> {
        // The job row first, then its runs: the order a follow-up locks them in (monitor.rs).
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let result = sqlx::query("DELETE FROM xjob_job WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        for sql in [
            "DELETE FROM xjob_log WHERE job_id = $1",
            "DELETE FROM xjob_glue WHERE job_id = $1",
        ] {
            sqlx::query(sql)
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(map_error)?;
        }
        tx.commit().await.map_err(map_error)?;
        Ok(result.rows_affected() == 1)
    }

    pub async fn get_job(&self, id: i64) -> StoreResult<Option<Job>> {
        let row = sqlx::query(&format!("SELECT {JOB_COLUMNS} FROM xjob_job WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(map_error)?;
        row.as_ref().map(job_from_row).transpose()
    }

    pub async fn get_jobs(&self, ids: &[i64]) -> StoreResult<Vec<Job>> {
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM xjob_job WHERE id = ANY($1) ORDER BY id"
        ))
        .bind(ids)
        .fetch_all(&self.pool)
        .await
        .map_err(map_error)?;
        rows.iter().map(job_from_row).collect()
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
                    .push(format!(" AND strpos({column}, "))
                    .push_bind(text.clone())
                    .push(") > 0");
            }
        }
        query.push(" ORDER BY id LIMIT ").push_bind(filter.limit);
        query.push(" OFFSET ").push_bind(filter.offset);
        let rows = query
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(map_error)?;
        rows.iter().map(job_from_row).collect()
    }

    pub async fn missing_job_ids(&self, ids: &[i64]) -> StoreResult<Vec<i64>> {
        let found: Vec<i64> = sqlx::query_scalar("SELECT id FROM xjob_job WHERE id = ANY($1)")
            .bind(ids)
            .fetch_all(&self.pool)
            .await
            .map_err(map_error)?;
        Ok(ids
            .iter()
            .copied()
            .filter(|id| !found.contains(id))
            .collect())
    }

    pub async fn set_job_schedule(&self, update: JobScheduleUpdate) -> StoreResult<bool> {
        let result = sqlx::query(
            "UPDATE xjob_job SET trigger_status = $1, trigger_last_ms = $2, \
             trigger_next_ms = $3 WHERE id = $4",
        )
        .bind(status_value(update.status))
        .bind(update.trigger_last_ms)
        .bind(update.trigger_next_ms)
        .bind(update.job_id)
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected() == 1)
    }

    pub async fn count_jobs(&self) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT COUNT(*) FROM xjob_job")
            .fetch_one(&self.pool)
            .await
            .map_err(map_error)
    }
}

/// Writes next fire times in one statement over parallel arrays (PostgreSQL's form of
/// XXL-JOB's `CASE id WHEN … END` batch), guarded by `trigger_status = 1` so a job stopped
/// while the round ran stays stopped.
pub(super) async fn write_schedule_updates(
    conn: &mut PgConnection,
    updates: &[JobScheduleUpdate],
) -> StoreResult<()> {
    if updates.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = updates.iter().map(|update| update.job_id).collect();
    let last: Vec<i64> = updates
        .iter()
        .map(|update| update.trigger_last_ms)
        .collect();
    let next: Vec<i64> = updates
        .iter()
        .map(|update| update.trigger_next_ms)
        .collect();
    let status: Vec<i32> = updates
        .iter()
        .map(|update| status_value(update.status))
        .collect();
    sqlx::query(
        "UPDATE xjob_job AS job SET trigger_last_ms = planned.last_ms, \
         trigger_next_ms = planned.next_ms, trigger_status = planned.status \
         FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::BIGINT[], $4::INTEGER[]) \
           AS planned (id, last_ms, next_ms, status) \
         WHERE job.id = planned.id AND job.trigger_status = 1",
    )
    .bind(ids)
    .bind(last)
    .bind(next)
    .bind(status)
    .execute(conn)
    .await
    .map_err(map_error)?;
    Ok(())
}
