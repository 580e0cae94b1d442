//! SHARDING_BROADCAST shard rows: at dispatch of a broadcast fire, its shard 0 learns the shard
//! total and shards 1..n-1 get their own log rows, in one transaction.
//!
//! Idempotent twice over: shard 0 is locked and only expanded while its `shard_total` is still
//! 1, and a scheduled shard's `fire_key` (`job:scheduled:shard:attempt`) is unique, so a shard
//! row is never created twice even if two admins raced. Shards of a manual fire have no key;
//! the lock on shard 0 alone keeps them from being written twice.

use sqlx::{MySql, QueryBuilder};

use super::inserts::{insert_each, insert_keyed};
use super::rows::{LOG_COLUMNS, run_from_row};
use super::schedule::runs_by_id;
use super::{MySqlStore, map_error};
use crate::model::{NewRun, RunLog};
use crate::store::StoreResult;

impl MySqlStore {
    pub async fn expand_broadcast(
        &self,
        log_id: i64,
        shard_total: i32,
        shards: &[NewRun],
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let first = sqlx::query(&format!(
            "SELECT {LOG_COLUMNS} FROM xjob_log WHERE id = ? AND shard_total = 1 \
             AND shard_index = 0 AND status = 'RUNNING' FOR UPDATE"
        ))
        .bind(log_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(map_error)?;
        let Some(first) = first else {
            // Already expanded, or no longer running: nothing to add.
            return Ok(Vec::new());
        };
        sqlx::query("UPDATE xjob_log SET shard_total = ? WHERE id = ?")
            .bind(shard_total)
            .bind(log_id)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        let mut first = run_from_row(&first)?;
        first.shard_total = shard_total;
        // Shards of a scheduled fire have a fire_key (skipped if present); a manual fire's have
        // none and are always written.
        let (keyed, keyless): (Vec<NewRun>, Vec<NewRun>) = shards
            .iter()
            .cloned()
            .partition(|shard| shard.fire_key.is_some());
        let written = insert_keyed(&mut tx, &keyed, |runs| {
            dispatched_shard_insert(runs, now_ms)
        })
        .await?;
        let mut ids: Vec<i64> = written.iter().map(|(id, _)| *id).collect();
        ids.extend(
            insert_each(&mut tx, &keyless, |runs| {
                dispatched_shard_insert(runs, now_ms)
            })
            .await?,
        );
        let mut expanded = vec![first];
        expanded.extend(runs_by_id(&mut tx, &ids).await?);
        tx.commit().await.map_err(map_error)?;
        expanded.sort_by_key(|run| run.shard_index);
        Ok(expanded)
    }
}

/// `INSERT INTO xjob_log (…) VALUES …` for shards that are dispatched right away: they are
/// written already claimed (`RUNNING`, trigger time set) by the node in their row.
fn dispatched_shard_insert(shards: &[NewRun], now_ms: i64) -> QueryBuilder<'_, MySql> {
    let mut query = QueryBuilder::new(
        "INSERT INTO xjob_log (job_id, group_id, fire_key, status, trigger_type, \
         scheduled_at_ms, trigger_time_ms, trigger_msg, handle_msg, executor_address, handler, \
         params, shard_index, shard_total, attempt, owner_node, epoch) ",
    );
    query.push_values(shards, |mut row, shard| {
        row.push_bind(shard.job_id)
            .push_bind(shard.group_id)
            .push_bind(shard.fire_key.as_deref())
            .push_bind(shard.status.as_str())
            .push_bind(shard.trigger_type.as_str())
            .push_bind(shard.scheduled_at_ms)
            .push_bind(now_ms)
            .push("''")
            .push("''")
            .push("''")
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
