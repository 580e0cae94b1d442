//! The follow-up claim on PostgreSQL: compare-and-set on `alarm_status` (0 → -1, owner = the
//! claiming node/epoch) over rows locked with `FOR UPDATE SKIP LOCKED`, so two admins never
//! follow up the same run and each takes the next free runs instead of waiting. Adoption, the
//! write and its claim fence are shared (`shared/adoption.rs`, `shared/followups.rs`,
//! `shared/claims.rs`).

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{PgStore, map_error};
use crate::model::{NodeIdentity, RunLog};
use crate::store::StoreResult;

/// Statuses a run can end in; each is followed up once.
const FINAL_STATUSES: &str = "'SUCCESS', 'FAILED', 'TIMEOUT', 'KILLED', 'LOST', 'SKIPPED'";

impl PgStore {
    pub async fn claim_followups(
        &self,
        node: &NodeIdentity,
        limit: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
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
