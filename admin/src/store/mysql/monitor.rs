//! SQL of the monitors: the follow-up of finished runs (claim, adopt, write) and the lost-run
//! checks (running runs, marking LOST, who holds which executor).
//!
//! A follow-up is claimed by compare-and-set on `alarm_status` (0 → -1, owner = the claiming
//! node/epoch) over rows locked with `SKIP LOCKED`, so two admins never follow up the same run;
//! a claim left by a dead node is adopted like its pending fires. Everything one follow-up
//! decides is written in one transaction: the retry row, child runs, the final `alarm_status`
//! and a FIX_DELAY job's next fire.
//!
//! SQLite serializes those transactions, and the FIX_DELAY release relies on it: of the runs of
//! one fire finishing together, the one written last must see all the others final. Here two
//! admins may write follow-ups of one fire at once, and each would see the other's run still
//! open (a write skew) so neither would release the job. So a follow-up that may release first
//! locks the job row: releasing follow-ups of one job run one after the other, and at READ
//! COMMITTED the later one sees what the earlier one committed. The broadcast children claim is
//! a compare-and-set on one row, which needs no more than its row lock.
//!
//! The write and `finish_followups` are fenced by the claim: right after that job lock (which
//! writes nothing) the transaction sets the final `alarm_status` only where it is still -1 with
//! the writer's node/epoch as owner, and writes nothing else (rolls back) when that matches no
//! row. InnoDB evaluates an UPDATE's condition on the newest committed row after any lock wait,
//! so a fence racing an adoption fails once the adoption commits. So an admin that stalled after
//! claiming, whose claim another admin adopted meanwhile, cannot start a second child run or
//! overwrite the adopter's `alarm_status` when it resumes.

use sqlx::MySqlConnection;

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{MAX_BIND_PARAMS, MySqlStore, map_error, placeholders};
use crate::model::RunLog;
use crate::store::StoreResult;

/// Statuses a run can end in; each is followed up once.
const FINAL_STATUSES: [&str; 6] = ["SUCCESS", "FAILED", "TIMEOUT", "KILLED", "LOST", "SKIPPED"];

impl MySqlStore {
    pub async fn claim_followups(
        &self,
        node_id: &str,
        epoch: i64,
        limit: i64,
    ) -> StoreResult<Vec<RunLog>> {
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
