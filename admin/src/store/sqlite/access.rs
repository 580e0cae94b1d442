//! Access tokens of the groups that runs belong to, for checking `Registry.Callback`.

use super::{MAX_BIND_PARAMS, SqliteStore, map_error, placeholders};
use crate::store::StoreResult;

impl SqliteStore {
    pub async fn log_group_tokens(&self, log_ids: &[i64]) -> StoreResult<Vec<(i64, String)>> {
        let mut tokens = Vec::new();
        for chunk in log_ids.chunks(MAX_BIND_PARAMS) {
            let sql = format!(
                "SELECT l.id, g.access_token FROM xjob_log l \
                 JOIN xjob_group g ON g.id = l.group_id \
                 WHERE g.access_token <> '' AND l.id IN ({})",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query_as::<_, (i64, String)>(&sql);
            for id in chunk {
                query = query.bind(id);
            }
            tokens.extend(query.fetch_all(&self.reader).await.map_err(map_error)?);
        }
        Ok(tokens)
    }
}
