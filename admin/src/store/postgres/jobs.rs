//! Job definitions and their scheduling state.

use sqlx::PgConnection;

use super::map_error;
use crate::store::shared::jobs::status_value;
use crate::store::{JobScheduleUpdate, StoreResult};

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
    let ids: Vec<i64> = updates.iter().map(|update| update.job_id.0).collect();
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
