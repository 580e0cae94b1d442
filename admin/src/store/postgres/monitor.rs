//! SQL of the monitors: the follow-up of finished runs (claim, adopt, write) and the lost-run
//! checks (running runs, marking LOST, who holds which executor).
//!
//! A follow-up is claimed by compare-and-set on `alarm_status` (0 → -1, owner = the claiming
//! node/epoch) over rows locked with `FOR UPDATE SKIP LOCKED`, so two admins never follow up the
//! same run and each takes the next free runs instead of waiting. Everything one follow-up
//! decides is written in one transaction: the retry row, child runs, the final `alarm_status`
//! and a FIX_DELAY job's next fire.
//!
//! SQLite serializes those transactions; PostgreSQL does not, and under READ COMMITTED two
//! follow-ups of the same fire would each miss the other's uncommitted write (each would see
//! the other run still open, and a FIX_DELAY job would never be released). So a follow-up first
//! locks its job's row: follow-ups of one job run one after the other, and each statement after
//! the lock sees what the previous one committed. The broadcast children claim is in addition a
//! compare-and-set on the fire's shard-0 row, so children start once either way.
//!
//! The write and `finish_followups` are fenced by the claim: right after the job lock (which
//! writes nothing) the transaction sets the final `alarm_status` only where it is still -1 with
//! the writer's node/epoch as owner, and writes nothing else (rolls back) when that matches no
//! row. An adoption in flight holds the row's lock; the fence waits for it and re-checks its
//! condition on the adopted row, so it fails. So an admin that stalled after claiming, whose
//! claim another admin adopted meanwhile, cannot start a second child run or overwrite the
//! adopter's `alarm_status` when it resumes.

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{PgStore, map_error};
use crate::model::RunLog;
use crate::store::StoreResult;

/// Statuses a run can end in; each is followed up once.
const FINAL_STATUSES: &str = "'SUCCESS', 'FAILED', 'TIMEOUT', 'KILLED', 'LOST', 'SKIPPED'";

impl PgStore {
    pub async fn claim_followups(
        &self,
        node_id: &str,
        epoch: i64,
        limit: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let rows = sqlx::query(&format!(
            "UPDATE xjob_log SET alarm_status = -1, owner_node = $1, epoch = $2 \
             WHERE id IN ( \
               SELECT id FROM xjob_log WHERE alarm_status = 0 AND status IN ({FINAL_STATUSES}) \
               ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED) \
             RETURNING {LOG_COLUMNS}"
        ))
        .bind(node_id)
        .bind(epoch)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(map_error)?;
        runs_by_id(&rows)
    }
}

/// Decodes returned runs, ordered by id (RETURNING has no order of its own).
pub(super) fn runs_by_id(rows: &[sqlx::postgres::PgRow]) -> StoreResult<Vec<RunLog>> {
    let mut runs = rows
        .iter()
        .map(run_from_row)
        .collect::<StoreResult<Vec<RunLog>>>()?;
    runs.sort_by_key(|run| run.id);
    Ok(runs)
}
