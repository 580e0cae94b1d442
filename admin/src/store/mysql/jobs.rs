//! Job definitions and their scheduling state.

use sqlx::QueryBuilder;

use super::map_error;
use crate::store::shared::jobs::status_value;
use crate::store::{JobScheduleUpdate, StoreResult};

/// Writes next fire times in batches: XXL-JOB's `CASE id WHEN … END` update, guarded by
/// `trigger_status = 1` so a job stopped while the round ran stays stopped.
pub(super) async fn write_schedule_updates(
    conn: &mut sqlx::MySqlConnection,
    updates: &[JobScheduleUpdate],
) -> StoreResult<()> {
    const BATCH: usize = 200;
    for chunk in updates.chunks(BATCH) {
        let mut query = QueryBuilder::new("UPDATE xjob_job SET trigger_last_ms = CASE id");
        for update in chunk {
            query.push(" WHEN ").push_bind(update.job_id.0);
            query.push(" THEN ").push_bind(update.trigger_last_ms);
        }
        query.push(" ELSE trigger_last_ms END, trigger_next_ms = CASE id");
        for update in chunk {
            query.push(" WHEN ").push_bind(update.job_id.0);
            query.push(" THEN ").push_bind(update.trigger_next_ms);
        }
        query.push(" ELSE trigger_next_ms END, trigger_status = CASE id");
        for update in chunk {
            query.push(" WHEN ").push_bind(update.job_id.0);
            query.push(" THEN ").push_bind(status_value(update.status));
        }
        query.push(" ELSE trigger_status END WHERE trigger_status = 1 AND id IN (");
        let mut ids = query.separated(", ");
        for update in chunk {
            ids.push_bind(update.job_id.0);
        }
        query.push(")");
        query.build().execute(&mut *conn).await.map_err(map_error)?;
    }
    Ok(())
}
