//! Access tokens of the groups that runs belong to, for checking `Registry.Callback`.

use super::{PgStore, map_error};
use crate::store::StoreResult;

impl PgStore {
    pub async fn log_group_tokens(&self, log_ids: &[i64]) -> StoreResult<Vec<(i64, String)>> {
        sqlx::query_as::<_, (i64, String)>(
            "SELECT l.id, g.access_token FROM xjob_log l \
             JOIN xjob_group g ON g.id = l.group_id \
             WHERE g.access_token <> '' AND l.id = ANY($1) ORDER BY l.id",
        )
        .bind(log_ids)
        .fetch_all(&self.pool)
        .await
        .map_err(map_error)
    }
}
