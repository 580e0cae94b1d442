//! SHARDING_BROADCAST shard rows: at dispatch of a broadcast fire, its shard 0 learns the shard
//! total and shards 1..n-1 get their own log rows, in one transaction.
//!
//! Idempotent twice over: shard 0 is only expanded while its `shard_total` is still 1, and a
//! scheduled shard's `fire_key` (`job:scheduled:shard:attempt`) is unique, so a shard row is
//! never created twice even if two admins raced.

use sqlx::{QueryBuilder, Sqlite};

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{SqliteStore, map_error};
use crate::model::{NewRun, RunLog};
use crate::store::StoreResult;

/// Rows per multi-row insert (far below SQLite's parameter limit).
const INSERT_BATCH: usize = 500;

impl SqliteStore {
    pub async fn expand_broadcast(
        &self,
        log_id: i64,
        shard_total: i32,
        shards: &[NewRun],
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let mut tx = self.writer.begin().await.map_err(map_error)?;
        let first = sqlx::query(&format!(
            "UPDATE xjob_log SET shard_total = ? WHERE id = ? AND shard_total = 1 \
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
fn dispatched_shard_insert(shards: &[NewRun], now_ms: i64) -> QueryBuilder<'_, Sqlite> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunStatus, TriggerType};

    const NOW: i64 = 1_716_163_200_000;
    const SCHEDULED: i64 = NOW - 1000;

    async fn store() -> (tempfile::TempDir, crate::store::Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("broadcast.db").display());
        let store = crate::store::Store::connect(&url)
            .await
            .expect("store opens");
        (dir, store)
    }

    fn run(shard_index: i32, shard_total: i32, fire_key: Option<String>) -> NewRun {
        NewRun {
            job_id: 7,
            group_id: 1,
            fire_key,
            status: RunStatus::Pending,
            trigger_type: TriggerType::Cron,
            scheduled_at_ms: SCHEDULED,
            handler: "h".to_string(),
            params: "p".to_string(),
            shard_index,
            shard_total,
            attempt: 0,
            trigger_msg: String::new(),
            owner_node: "n".to_string(),
            epoch: 1,
            dispatch_at_ms: 0,
        }
    }

    /// Inserts and claims shard 0 of a scheduled fire; returns its id.
    async fn claimed_fire(store: &crate::store::Store) -> i64 {
        let key = NewRun::fire_key(7, SCHEDULED, 0, 0);
        let ids = store
            .insert_runs(&[run(0, 1, Some(key))])
            .await
            .expect("insert");
        let claimed = store.claim_runs(&ids, "n", 1, NOW).await.expect("claim");
        assert_eq!(claimed.len(), 1);
        ids[0]
    }

    fn shards(total: i32) -> Vec<NewRun> {
        (1..total)
            .map(|index| NewRun {
                status: RunStatus::Running,
                ..run(index, total, Some(NewRun::fire_key(7, SCHEDULED, index, 0)))
            })
            .collect()
    }

    #[tokio::test]
    async fn expansion_adds_claimed_shards_with_their_own_fire_keys_once() {
        let (_dir, store) = store().await;
        let first_id = claimed_fire(&store).await;

        let expanded = store
            .expand_broadcast(first_id, 3, &shards(3), NOW)
            .await
            .expect("expand");
        let described: Vec<(i32, i32, RunStatus, i64, Option<String>)> = expanded
            .iter()
            .map(|run| {
                (
                    run.shard_index,
                    run.shard_total,
                    run.status,
                    run.trigger_time_ms,
                    run.fire_key.clone(),
                )
            })
            .collect();
        let key = |shard| Some(NewRun::fire_key(7, SCHEDULED, shard, 0));
        assert_eq!(
            described,
            vec![
                (0, 3, RunStatus::Running, NOW, key(0)),
                (1, 3, RunStatus::Running, NOW, key(1)),
                (2, 3, RunStatus::Running, NOW, key(2)),
            ]
        );
        assert_eq!(expanded[0].id, first_id);

        let again = store
            .expand_broadcast(first_id, 3, &shards(3), NOW)
            .await
            .expect("second expand");
        assert!(again.is_empty(), "an expanded fire is not expanded twice");
    }

    #[tokio::test]
    async fn an_existing_shard_fire_key_is_skipped_not_duplicated() {
        let (_dir, store) = store().await;
        let first_id = claimed_fire(&store).await;
        // Shard 1 already exists (written by another admin racing on the same fire).
        store
            .insert_runs(&[run(1, 3, Some(NewRun::fire_key(7, SCHEDULED, 1, 0)))])
            .await
            .expect("insert shard 1");

        let expanded = store
            .expand_broadcast(first_id, 3, &shards(3), NOW)
            .await
            .expect("expand");
        let indexes: Vec<i32> = expanded.iter().map(|run| run.shard_index).collect();
        assert_eq!(indexes, vec![0, 2]);
    }

    #[tokio::test]
    async fn a_pending_or_already_sharded_run_is_not_expanded() {
        let (_dir, store) = store().await;
        let ids = store.insert_runs(&[run(0, 1, None)]).await.expect("insert");
        let expanded = store
            .expand_broadcast(ids[0], 3, &shards(3), NOW)
            .await
            .expect("expand");
        assert!(expanded.is_empty(), "an unclaimed run is not expanded");
    }
}
