//! The follow-up claim on MySQL/MariaDB: compare-and-set on `alarm_status` (0 → -1, owner =
//! the claiming node/epoch) over rows locked with `SKIP LOCKED`, so two admins never follow up
//! the same run. Adoption, the write and its claim fence are shared (`shared/adoption.rs`,
//! `shared/followups.rs`, `shared/claims.rs`).

use sqlx::MySqlConnection;

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{MAX_BIND_PARAMS, MySqlStore, map_error, placeholders};
use crate::model::{NodeIdentity, RunLog};
use crate::store::StoreResult;

/// Statuses a run can end in; each is followed up once.
const FINAL_STATUSES: [&str; 6] = ["SUCCESS", "FAILED", "TIMEOUT", "KILLED", "LOST", "SKIPPED"];

impl MySqlStore {
    pub async fn claim_followups(
        &self,
        node: &NodeIdentity,
        limit: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let ids = lock_unclaimed_followups(&mut tx, limit).await?;
        set_owner(&mut tx, &ids, node_id, epoch, "alarm_status = -1, ").await?;
        let claimed = runs_by_id(&mut tx, &ids).await?;
        tx.commit().await.map_err(map_error)?;
        Ok(claimed)
    }
}

/// Locks up to `limit` of the oldest finished runs not followed up yet that no other
/// transaction holds (`SKIP LOCKED`: rows another admin is claiming are left to it).
///
/// InnoDB locks every row it reads, before any sort: with `status IN (…)` and `ORDER BY id`
/// it would lock every unclaimed row and a concurrent claimer would find none. So each final
/// status is read on its own through `ix_log_followup` (alarm_status, status, then id), which
/// yields ids in order and stops at the limit; of the union, the oldest `limit` are kept (the
/// others stay locked, unclaimed, until commit).
async fn lock_unclaimed_followups(conn: &mut MySqlConnection, limit: i64) -> StoreResult<Vec<i64>> {
    let limit = limit.max(0);
    let mut ids = Vec::new();
    for status in FINAL_STATUSES {
        let mut locked: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM xjob_log FORCE INDEX (ix_log_followup) \
             WHERE alarm_status = 0 AND status = ? ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED",
        )
        .bind(status)
        .bind(limit)
        .fetch_all(&mut *conn)
        .await
        .map_err(map_error)?;
        ids.append(&mut locked);
    }
    ids.sort_unstable();
    ids.truncate(usize::try_from(limit).unwrap_or(0));
    Ok(ids)
}

/// Sets the owner of the locked runs `ids` to this node/epoch, with `also` (`column = …, `)
/// written first.
async fn set_owner(
    conn: &mut MySqlConnection,
    ids: &[i64],
    node_id: &str,
    epoch: i64,
    also: &str,
) -> StoreResult<()> {
    for chunk in ids.chunks(MAX_BIND_PARAMS) {
        let sql = format!(
            "UPDATE xjob_log SET {also}owner_node = ?, epoch = ? WHERE id IN ({})",
            placeholders(chunk.len())
        );
        let mut query = sqlx::query(&sql).bind(node_id).bind(epoch);
        for id in chunk {
            query = query.bind(id);
        }
        query.execute(&mut *conn).await.map_err(map_error)?;
    }
    Ok(())
}

/// The runs with the given ids, by id.
pub(super) async fn runs_by_id(
    conn: &mut MySqlConnection,
    ids: &[i64],
) -> StoreResult<Vec<RunLog>> {
    let mut runs = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(MAX_BIND_PARAMS) {
        let sql = format!(
            "SELECT {LOG_COLUMNS} FROM xjob_log WHERE id IN ({}) ORDER BY id",
            placeholders(chunk.len())
        );
        let mut query = sqlx::query(&sql);
        for id in chunk {
            query = query.bind(id);
        }
        for row in query.fetch_all(&mut *conn).await.map_err(map_error)? {
            runs.push(run_from_row(&row)?);
        }
    }
    runs.sort_by_key(|run| run.id);
    Ok(runs)
}
