//! Job definitions and their scheduling state.

use super::map_error;
use crate::store::{JobScheduleUpdate, StoreResult, batch_json};

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
