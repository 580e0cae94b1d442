//! SHARDING_BROADCAST shard rows: at dispatch of a broadcast fire, its shard 0 learns the shard
//! total and shards 1..n-1 get their own log rows, in one transaction.
//!
//! Idempotent twice over: shard 0 is only expanded while its `shard_total` is still 1 (a
//! conditional update; a concurrent expansion waits for the row and then finds it expanded),
//! and a scheduled shard's `fire_key` is unique, so a shard row is never created twice.

use sqlx::{Postgres, QueryBuilder};

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{INSERT_BATCH, PgStore, map_error};
use crate::model::{NewRun, RunLog};
use crate::store::StoreResult;

impl PgStore {
    pub async fn expand_broadcast(
        &self,
        log_id: i64,
        shard_total: i32,
        shards: &[NewRun],
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let first = sqlx::query(&format!(
            "UPDATE xjob_log SET shard_total = $1 WHERE id = $2 AND shard_total = 1 \
             AND shard_index = 0 AND status = 'RUNNING' RETURNING {LOG_COLUMNS}"
        ))
        .bind(shard_total)
        .bind(log_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(map_error)?;
        let Some(first) = first else {
            // Already expanded, or no longer running: nothing to add.
            return Ok(Vec::new());
        };
        let mut expanded = vec![run_from_row(&first)?];
        for chunk in shards.chunks(INSERT_BATCH) {
            let mut query = dispatched_shard_insert(chunk, now_ms);
            query.push(format!(
                " ON CONFLICT (fire_key) DO NOTHING RETURNING {LOG_COLUMNS}"
            ));
            let rows = query.build().fetch_all(&mut *tx).await.map_err(map_error)?;
            for row in &rows {
                expanded.push(run_from_row(row)?);
            }
        }
        tx.commit().await.map_err(map_error)?;
        expanded.sort_by_key(|run| run.shard_index);
        Ok(expanded)
    }
}

/// `INSERT INTO xjob_log (…) VALUES …` for shards that are dispatched right away: they are
/// written already claimed (`RUNNING`, trigger time set) by the node in their row.
fn dispatched_shard_insert(shards: &[NewRun], now_ms: i64) -> QueryBuilder<'_, Postgres> {
    let mut query = QueryBuilder::new(
        "INSERT INTO xjob_log (job_id, group_id, fire_key, status, trigger_type, \
         scheduled_at_ms, trigger_time_ms, handler, params, shard_index, shard_total, attempt, \
         owner_node, epoch) ",
    );
    query.push_values(shards, |mut row, shard| {
        row.push_bind(shard.job_id)
            .push_bind(shard.group_id)
            .push_bind(shard.fire_key.as_deref())
            .push_bind(shard.status.as_str())
            .push_bind(shard.trigger_type.as_str())
            .push_bind(shard.scheduled_at_ms)
            .push_bind(now_ms)
            .push_bind(shard.handler.as_str())
            .push_bind(shard.params.as_str())
            .push_bind(shard.shard_index)
            .push_bind(shard.shard_total)
            .push_bind(shard.attempt)
            .push_bind(shard.owner_node.as_str())
            .push_bind(shard.epoch);
    });
    query
}
