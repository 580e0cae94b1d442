//! The write of one follow-up (retry row, child runs, final `alarm_status`, FIX_DELAY release)
//! in one transaction, fenced by the claim.
//!
//! Follow-ups of one job run one after the other (otherwise two follow-ups of one fire written
//! at once by two admins would each see the other's run still open, a write skew, and neither
//! would release a FIX_DELAY job): on the servers the transaction first locks
//! the job's row (the job before its runs, the order `delete_job` takes them in too), on SQLite
//! `BEGIN IMMEDIATE` takes the single writer's lock. So each check below (the other runs of the
//! fire, the broadcast claim) sees what the previous follow-up of the job committed. Right after
//! that lock, the fence: the run's `alarm_status` is set only while it is still claimed (-1) by
//! the writer's node and epoch; otherwise nothing is written (an adoption in flight holds the
//! run's row; the fence waits for it and re-checks).

use sqlx::Transaction;

use super::inserts::insert_one_unless_present;
use super::logs::new_run_insert;
use crate::model::{AlarmStatus, LogId};
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql, commit, map_error};
use crate::store::{FixDelayRelease, FollowupWrite, FollowupWritten, StoreResult};

pub async fn write_followup<DB: Dialect>(
    db: Pools<'_, DB>,
    write: &FollowupWrite,
) -> StoreResult<FollowupWritten> {
    let mut tx = begin_locking_job_of_run(db, write.log_id).await?;
    if !close_claim::<DB>(&mut tx, write).await? {
        tx.rollback().await.map_err(map_error)?;
        return Ok(FollowupWritten::fenced_off());
    }
    let mut written = FollowupWritten::default();
    if let Some(retry) = &write.retry {
        written.retry_id =
            insert_one_unless_present::<DB>(&mut tx, retry, new_run_insert::<DB>, 0).await?;
        // A workflow node's outcome is its last attempt's: the node follows its retry.
        if let Some(retry_id) = written.retry_id {
            super::workflow_runs::move_workflow_node_to_retry::<DB>(
                &mut tx,
                write.log_id,
                retry_id,
            )
            .await?;
        }
    }
    let children_allowed = !write.children_need_all_shards
        || claim_broadcast_children::<DB>(&mut tx, write.log_id).await?;
    if children_allowed {
        for child in &write.children {
            written.child_ids.extend(
                insert_one_unless_present::<DB>(&mut tx, child, new_run_insert::<DB>, 0).await?,
            );
        }
    }
    if let Some(release) = &write.fix_delay_release {
        written.released = release_fix_delay::<DB>(&mut tx, write.log_id, release).await?;
    }
    commit(tx).await?;
    Ok(written)
}

/// A transaction in which no other follow-up of the run's job writes (see the module doc). A
/// run whose job was deleted locks nothing: no other run of it is followed up either.
async fn begin_locking_job_of_run<DB: Dialect>(
    db: Pools<'_, DB>,
    log_id: LogId,
) -> StoreResult<Transaction<'static, DB>> {
    if DB::SINGLE_WRITER {
        return db
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(map_error);
    }
    let mut tx = db.begin().await?;
    // Two statements: MySQL would lock the run's row too in a locking read with a subquery.
    let job_id: Option<i64> = Sql::<DB>::new("SELECT job_id FROM xjob_log WHERE id = ")
        .bind(log_id.0)
        .fetch_optional(&mut tx)
        .await?
        .map(|row| Cols::<DB>(&row).get("job_id"))
        .transpose()?;
    if let Some(job_id) = job_id {
        Sql::<DB>::new("SELECT id FROM xjob_job WHERE id = ")
            .bind(job_id)
            .push(" FOR UPDATE")
            .fetch_optional(&mut tx)
            .await?;
    }
    Ok(tx)
}

/// The claim fence: sets the run's final `alarm_status` only while it is still claimed (-1) by
/// the writer's node and epoch; false when the claim was lost (adopted by another admin, or the
/// follow-up was written before), and then nothing may be written.
async fn close_claim<DB: Dialect>(
    conn: &mut DB::Connection,
    write: &FollowupWrite,
) -> StoreResult<bool> {
    // On MySQL rows_affected counts matched rows; the value changes from -1 anyway.
    let closed = Sql::<DB>::new("UPDATE xjob_log SET alarm_status = ")
        .bind(write.alarm_status.code())
        .push(", alarm_delivery = ")
        .bind(write.alarm_delivery.as_str())
        .push(" WHERE id = ")
        .bind(write.log_id.0)
        .push(" AND alarm_status = -1 AND owner_node = ")
        .bind(write.claim_node.as_str())
        .push(" AND epoch = ")
        .bind(write.claim_epoch)
        .affected(conn)
        .await?;
    Ok(closed == 1)
}

/// Records how a queued alarm ended (`alarm_status` 4 → 2 or 3, with its `alarm_delivery`);
/// false when the run is no longer waiting for its alarm (deleted by the clean-up meanwhile).
pub async fn record_alarm_delivery<DB: Dialect>(
    db: Pools<'_, DB>,
    log_id: LogId,
    alarm_status: AlarmStatus,
    alarm_delivery: &str,
) -> StoreResult<bool> {
    let recorded = Sql::<DB>::new("UPDATE xjob_log SET alarm_status = ")
        .bind(alarm_status.code())
        .push(", alarm_delivery = ")
        .bind(alarm_delivery)
        .push(" WHERE id = ")
        .bind(log_id.0)
        .push(" AND alarm_status = 4")
        .affected(&mut *db.write().await?)
        .await?;
    Ok(recorded == 1)
}

/// Claims the child jobs of the broadcast fire `log_id` belongs to (its job, scheduled time and
/// shard total): true only when every shard of the fire (any attempt) succeeded and no
/// follow-up claimed them before. The claim sits on the fire's first successful shard-0 row,
/// which every shard's follow-up finds alike; its `children_claimed = FALSE` condition is
/// re-checked after any lock wait, so of follow-ups racing for it exactly one wins.
async fn claim_broadcast_children<DB: Dialect>(
    conn: &mut DB::Connection,
    log_id: LogId,
) -> StoreResult<bool> {
    let fire =
        Sql::<DB>::new("SELECT job_id, scheduled_at_ms, shard_total FROM xjob_log WHERE id = ")
            .bind(log_id.0)
            .fetch_optional(&mut *conn)
            .await?;
    let Some(fire) = fire else {
        return Ok(false);
    };
    let fire = Cols::<DB>(&fire);
    let shard_total: i32 = fire.get("shard_total")?;
    let shards = Sql::<DB>::new(
        "SELECT COUNT(DISTINCT shard_index) AS succeeded, \
         MIN(CASE WHEN shard_index = 0 THEN id END) AS first_shard_0 \
         FROM xjob_log WHERE job_id = ",
    )
    .bind(fire.get::<i64>("job_id")?)
    .push(" AND scheduled_at_ms = ")
    .bind(fire.get::<i64>("scheduled_at_ms")?)
    .push(" AND shard_total = ")
    .bind(shard_total)
    .push(" AND status = 'SUCCESS'")
    .fetch_one(&mut *conn)
    .await?;
    let shards = Cols::<DB>(&shards);
    let succeeded: i64 = shards.get("succeeded")?;
    let first_shard_0: Option<i64> = shards.get("first_shard_0")?;
    let (true, Some(claim_row)) = (succeeded == i64::from(shard_total), first_shard_0) else {
        return Ok(false);
    };
    let claimed = Sql::<DB>::new("UPDATE xjob_log SET children_claimed = TRUE WHERE id = ")
        .bind(claim_row)
        .push(" AND children_claimed = FALSE")
        .affected(conn)
        .await?;
    Ok(claimed == 1)
}

/// Sets a FIX_DELAY job's next fire, only while it still waits for this fire and no other run
/// of the fire is open (pending, running, or final but not yet followed up). No other
/// follow-up of the job is between this check and write (see the module doc).
async fn release_fix_delay<DB: Dialect>(
    conn: &mut DB::Connection,
    log_id: LogId,
    release: &FixDelayRelease,
) -> StoreResult<bool> {
    let open: i64 = Sql::<DB>::new("SELECT COUNT(*) FROM xjob_log WHERE job_id = ")
        .bind(release.job_id.0)
        .push(" AND scheduled_at_ms = ")
        .bind(release.scheduled_at_ms)
        .push(
            " AND fire_key IS NOT NULL AND (status IN ('PENDING', 'RUNNING') \
             OR alarm_status IN (0, -1)) AND id <> ",
        )
        .bind(log_id.0)
        .fetch_scalar(&mut *conn)
        .await?;
    if open > 0 {
        return Ok(false);
    }
    let released = Sql::<DB>::new("UPDATE xjob_job SET trigger_next_ms = ")
        .bind(release.next_fire_ms)
        .push(" WHERE id = ")
        .bind(release.job_id.0)
        .push(" AND trigger_status = 1 AND trigger_next_ms = ")
        .bind(release.awaiting_ms)
        .affected(conn)
        .await?;
    Ok(released == 1)
}

/// The `alarm_status` of run `log_id` (conformance tests; `RunLog` does not carry it).
#[cfg(test)]
pub async fn alarm_status_of<DB: Dialect>(db: Pools<'_, DB>, log_id: LogId) -> StoreResult<i32> {
    Sql::<DB>::new("SELECT alarm_status FROM xjob_log WHERE id = ")
        .bind(log_id.0)
        .fetch_scalar(&mut *db.write().await?)
        .await
}
