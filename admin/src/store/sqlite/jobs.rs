//! Job definitions and their scheduling state.

use super::batch_values::{BatchStatement, ROWS_PER_STATEMENT};
use super::map_error;
use crate::model::JobStatus;
use crate::store::{JobScheduleUpdate, StoreResult};

/// The schedule round's next fire times, one row per job: XXL-JOB's batched update. Looked
/// up by id (`+` keeps SQLite off the trigger_status index, which would walk every running job
/// per statement; see `super::plans`); a job stopped while the round ran stays stopped.
pub(super) static SCHEDULE_UPDATES: BatchStatement = BatchStatement::new(
    &["id", "last", "next", "status"],
    "UPDATE xjob_job SET trigger_last_ms = r.last, trigger_next_ms = r.next, \
     trigger_status = r.status FROM r WHERE xjob_job.id = r.id AND +xjob_job.trigger_status = 1",
);

pub(super) async fn write_schedule_updates(
    conn: &mut sqlx::SqliteConnection,
    updates: &[JobScheduleUpdate],
) -> StoreResult<()> {
    for chunk in updates.chunks(ROWS_PER_STATEMENT) {
        let (text, size) = SCHEDULE_UPDATES.text_for(chunk.len());
        let mut query = sqlx::query(text);
        for update in chunk {
            query = query
                .bind(update.job_id.0)
                .bind(update.trigger_last_ms)
                .bind(update.trigger_next_ms)
                .bind(i64::from(update.status == JobStatus::Running));
        }
        SCHEDULE_UPDATES
            .pad(query, chunk.len(), size)
            .execute(&mut *conn)
            .await
            .map_err(map_error)?;
    }
    Ok(())
}
