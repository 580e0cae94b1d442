//! Access tokens of the groups that runs belong to, for checking `Registry.Callback`.

use super::rows::get;
use super::{MAX_BIND_PARAMS, MySqlStore, map_error, placeholders};
use crate::store::StoreResult;

impl MySqlStore {
    pub async fn log_group_tokens(&self, log_ids: &[i64]) -> StoreResult<Vec<(i64, String)>> {
        let mut tokens = Vec::new();
        for chunk in log_ids.chunks(MAX_BIND_PARAMS) {
            let sql = format!(
                "SELECT l.id, g.access_token FROM xjob_log l \
                 JOIN xjob_group g ON g.id = l.group_id \
                 WHERE g.access_token <> '' AND l.id IN ({})",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query(&sql);
            for id in chunk {
                query = query.bind(id);
            }
            for row in query.fetch_all(&self.pool).await.map_err(map_error)? {
                tokens.push((get(&row, "id")?, get(&row, "access_token")?));
            }
        }
        Ok(tokens)
    }
}
