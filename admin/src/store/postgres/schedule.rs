//! The schedule round under the lock, node leases, and the claim/adopt steps that make every
//! scheduled fire run exactly once.
//!
//! The round is one transaction that first locks the `schedule_lock` row (`FOR UPDATE`), so
//! rounds of all admins run one after the other and each reads the job times the previous one
//! wrote. Claims and adoptions need no lock: each is a conditional update on the run's
//! status/owner/epoch, which PostgreSQL re-checks on the newest row version after waiting for a
//! concurrent writer, so of a stalled owner's claim and another node's adoption only one wins.
//! Multi-row updates lock their rows in id order first, so two admins never deadlock.

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{PgStore, map_error};
use crate::model::RunLog;
use crate::store::StoreResult;

impl PgStore {
    pub async fn adopt_orphan_runs(
        &self,
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        // SKIP LOCKED: a row another admin is adopting or claiming right now is left to it; if
        // that admin's write does not happen, the next sweep finds the row again.
        let rows = sqlx::query(&format!(
            "UPDATE xjob_log SET owner_node = $1, epoch = $2 WHERE id IN ( \
               SELECT id FROM xjob_log WHERE status = 'PENDING' AND ( \
                 (owner_node = $1 AND epoch < $2) OR owner_node IN ( \
                   SELECT node_id FROM xjob_node WHERE lease_until_ms < $3 AND node_id <> $1)) \
               ORDER BY id FOR UPDATE SKIP LOCKED) \
             RETURNING {LOG_COLUMNS}"
        ))
        .bind(node_id)
        .bind(epoch)
        .bind(now_ms)
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
