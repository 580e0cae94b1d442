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

use sqlx::PgConnection;

use super::rows::{LOG_COLUMNS, run_from_row};
use super::schedule::runs_by_id;
use super::{PgStore, map_error};
use crate::model::{NewRun, RunLog};
use crate::store::shared::inserts::insert_one_unless_present;
use crate::store::shared::logs::new_run_insert;
use crate::store::{FixDelayRelease, FollowupWrite, FollowupWritten, StoreResult};

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

    pub async fn adopt_stale_followups(
        &self,
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let rows = sqlx::query(&format!(
            "UPDATE xjob_log SET owner_node = $1, epoch = $2 WHERE id IN ( \
               SELECT id FROM xjob_log WHERE alarm_status = -1 AND ( \
                 (owner_node = $1 AND epoch <= $2) OR owner_node IN ( \
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

    pub async fn write_followup(&self, write: &FollowupWrite) -> StoreResult<FollowupWritten> {
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        // The job lock stays first (follow-ups of one job lock their job, then log rows, in that
        // order); then the fence, before anything is written.
        lock_job_of_run(&mut tx, write.log_id).await?;
        if !close_claim(&mut tx, write).await? {
            tx.rollback().await.map_err(map_error)?;
            return Ok(FollowupWritten::fenced_off());
        }
        let mut written = FollowupWritten::default();
        if let Some(retry) = &write.retry {
            written.retry_id = insert_one(&mut tx, retry).await?;
        }
        let children_allowed = !write.children_need_all_shards
            || claim_broadcast_children(&mut tx, write.log_id).await?;
        if children_allowed {
            for child in &write.children {
                written.child_ids.extend(insert_one(&mut tx, child).await?);
            }
        }
        if let Some(release) = &write.fix_delay_release {
            written.released = release_fix_delay(&mut tx, write.log_id, release).await?;
        }
        tx.commit().await.map_err(map_error)?;
        Ok(written)
    }

    pub async fn stranded_dispatches(
        &self,
        node_id: &str,
        epoch: i64,
        now_ms: i64,
        claimed_before_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let rows = sqlx::query(&format!(
            "SELECT {LOG_COLUMNS} FROM xjob_log WHERE status = 'RUNNING' \
             AND executor_address = '' AND trigger_time_ms < $1 AND ( \
               (owner_node = $2 AND epoch < $3) OR owner_node IN ( \
                 SELECT node_id FROM xjob_node WHERE lease_until_ms < $4 AND node_id <> $2)) \
             ORDER BY id LIMIT 10000"
        ))
        .bind(claimed_before_ms)
        .bind(node_id)
        .bind(epoch)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(map_error)?;
        rows.iter().map(run_from_row).collect()
    }
}

/// Locks the row of the job `log_id` belongs to until the follow-up commits (nothing when the
/// job was deleted: then no other run of it is followed up either).
async fn lock_job_of_run(conn: &mut PgConnection, log_id: i64) -> StoreResult<()> {
    sqlx::query(
        "SELECT id FROM xjob_job WHERE id = (SELECT job_id FROM xjob_log WHERE id = $1) \
         FOR UPDATE",
    )
    .bind(log_id)
    .fetch_optional(conn)
    .await
    .map_err(map_error)?;
    Ok(())
}

#[cfg(test)]
impl PgStore {
    /// The `alarm_status` of run `log_id` (conformance tests; `RunLog` does not carry it).
    pub(crate) async fn alarm_status_of(&self, log_id: i64) -> StoreResult<i32> {
        sqlx::query_scalar("SELECT alarm_status FROM xjob_log WHERE id = $1")
            .bind(log_id)
            .fetch_one(&self.pool)
            .await
            .map_err(map_error)
    }
}

/// The claim fence of a follow-up: sets the run's final `alarm_status` only while it is still
/// claimed (-1) by the writer's node and epoch; false when the claim was lost (adopted by
/// another admin, or the follow-up was written before), and then nothing may be written.
async fn close_claim(conn: &mut PgConnection, write: &FollowupWrite) -> StoreResult<bool> {
    let result = sqlx::query(
        "UPDATE xjob_log SET alarm_status = $1 WHERE id = $2 AND alarm_status = -1 \
         AND owner_node = $3 AND epoch = $4",
    )
    .bind(write.alarm_status)
    .bind(write.log_id)
    .bind(&write.claim_node)
    .bind(write.claim_epoch)
    .execute(&mut *conn)
    .await
    .map_err(map_error)?;
    Ok(result.rows_affected() == 1)
}

/// Inserts one run; `None` when its `fire_key` already exists (the attempt was created before;
/// an insert of the same key by a concurrent transaction is waited for, then skipped).
async fn insert_one(conn: &mut PgConnection, run: &NewRun) -> StoreResult<Option<i64>> {
    insert_one_unless_present::<sqlx::Postgres>(conn, run, new_run_insert::<sqlx::Postgres>, 0)
        .await
}

/// Claims the child jobs of the broadcast fire `log_id` belongs to (its job, scheduled time and
/// shard total): true only when every shard of the fire (any attempt) succeeded and no
/// follow-up claimed them before. The claim sits on the fire's first successful shard-0 row,
/// which every shard's follow-up finds alike; a concurrent claim waits for that row and then
/// finds `children_claimed` already set.
async fn claim_broadcast_children(conn: &mut PgConnection, log_id: i64) -> StoreResult<bool> {
    let result = sqlx::query(
        "WITH fire AS (SELECT job_id, scheduled_at_ms, shard_total FROM xjob_log WHERE id = $1), \
         shards AS (SELECT run.id, run.shard_index FROM xjob_log run, fire \
           WHERE run.job_id = fire.job_id AND run.scheduled_at_ms = fire.scheduled_at_ms \
           AND run.shard_total = fire.shard_total \
           AND run.status = 'SUCCESS') \
         UPDATE xjob_log SET children_claimed = TRUE WHERE NOT children_claimed \
           AND id = (SELECT MIN(id) FROM shards WHERE shard_index = 0) \
           AND (SELECT COUNT(DISTINCT shard_index) FROM shards) = \
               (SELECT shard_total FROM fire)",
    )
    .bind(log_id)
    .execute(&mut *conn)
    .await
    .map_err(map_error)?;
    Ok(result.rows_affected() == 1)
}

/// Sets a FIX_DELAY job's next fire, only while it still waits for this fire and no other run
/// of the fire is open (pending, running, or final but not yet followed up). The job row is
/// locked by this transaction, so no other follow-up of the job is between its check and write.
async fn release_fix_delay(
    conn: &mut PgConnection,
    log_id: i64,
    release: &FixDelayRelease,
) -> StoreResult<bool> {
    let result = sqlx::query(
        "UPDATE xjob_job SET trigger_next_ms = $1 WHERE id = $2 AND trigger_status = 1 \
         AND trigger_next_ms = $3 AND NOT EXISTS ( \
           SELECT 1 FROM xjob_log WHERE job_id = $2 AND scheduled_at_ms = $4 \
           AND fire_key IS NOT NULL AND id <> $5 \
           AND (status IN ('PENDING', 'RUNNING') OR alarm_status IN (0, -1)))",
    )
    .bind(release.next_fire_ms)
    .bind(release.job_id)
    .bind(release.awaiting_ms)
    .bind(release.scheduled_at_ms)
    .bind(log_id)
    .execute(&mut *conn)
    .await
    .map_err(map_error)?;
    Ok(result.rows_affected() == 1)
}
