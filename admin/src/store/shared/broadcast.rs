//! SHARDING_BROADCAST shard rows: at dispatch of a broadcast fire, its shard 0 learns the shard
//! total and shards 1..n-1 get their own log rows, in one transaction.
//!
//! Idempotent twice over: shard 0 is locked and only expanded while its `shard_total` is still
//! 1 (a concurrent expansion waits for the row and then finds it expanded), and a scheduled
//! shard's `fire_key` (`job:scheduled:shard:attempt`) is unique, so a shard row is never
//! created twice even if two admins raced. Shards of a manual fire have no key; the lock on
//! shard 0 alone keeps them from being written twice.

use super::inserts::{insert_all, insert_keyed};
use super::logs::new_run_insert;
use super::rows::{LOG_COLUMNS, run_from_row};
use crate::model::{LogId, NewRun, RunLog};
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Pools, Sql, commit};

pub async fn expand_broadcast<DB: Dialect>(
    db: Pools<'_, DB>,
    log_id: LogId,
    shard_total: i32,
    shards: &[NewRun],
    now_ms: i64,
) -> StoreResult<Vec<RunLog>> {
    let mut tx = db.begin().await?;
    let first = Sql::<DB>::new(format!("SELECT {LOG_COLUMNS} FROM xjob_log WHERE id = "))
        .bind(log_id.0)
        .push(" AND shard_total = 1 AND shard_index = 0 AND status = 'RUNNING'")
        .push(DB::FOR_UPDATE)
        .fetch_optional(&mut tx)
        .await?;
    let Some(first) = first else {
        // Already expanded, or no longer running: nothing to add.
        return Ok(Vec::new());
    };
    Sql::<DB>::new("UPDATE xjob_log SET shard_total = ")
        .bind(shard_total)
        .push(" WHERE id = ")
        .bind(log_id.0)
        .execute(&mut tx)
        .await?;
    let mut first = run_from_row::<DB>(&first)?;
    first.shard_total = shard_total;
    // Shards are written already claimed (RUNNING, trigger time `now_ms`) by the node in their
    // row. Those of a scheduled fire have a fire_key (skipped if present); a manual fire's
    // have none and are always written.
    let (keyed, keyless): (Vec<NewRun>, Vec<NewRun>) = shards
        .iter()
        .cloned()
        .partition(|shard| shard.fire_key.is_some());
    let written = insert_keyed::<DB>(&mut tx, &keyed, new_run_insert::<DB>, now_ms).await?;
    let mut ids: Vec<LogId> = written.into_iter().flatten().collect();
    ids.extend(insert_all::<DB>(&mut tx, &keyless, new_run_insert::<DB>, now_ms).await?);
    let mut expanded = vec![first];
    if !ids.is_empty() {
        let mut select = Sql::<DB>::new(format!("SELECT {LOG_COLUMNS} FROM xjob_log WHERE id"));
        DB::push_id_list(&mut select, &super::raw_ids(&ids));
        for row in select.fetch_all(&mut tx).await? {
            expanded.push(run_from_row::<DB>(&row)?);
        }
    }
    commit(tx).await?;
    expanded.sort_by_key(|run| run.shard_index);
    Ok(expanded)
}
