//! The schedule round under the lock, node leases, and the claim/adopt steps that make every
//! scheduled fire run exactly once.
//!
//! The round is one transaction that first locks the `schedule_lock` row (`FOR UPDATE`), so
//! rounds of all admins run one after the other and each reads the job times the previous one
//! wrote. Claims and adoptions need no lock: each is a conditional update on the run's
//! status/owner/epoch, which PostgreSQL re-checks on the newest row version after waiting for a
//! concurrent writer, so of a stalled owner's claim and another node's adoption only one wins.
//! Multi-row updates lock their rows in id order first, so two admins never deadlock.

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::jobs::write_schedule_updates;
use super::rows::{JOB_COLUMNS, LOG_COLUMNS, job_from_row, run_from_row};
use super::{PgStore, map_error, missing_lock_row};
use crate::model::{Job, NewRun, RunLog};
use crate::store::shared::inserts::insert_keyed;
use crate::store::shared::logs::new_run_insert;
use crate::store::{InsertedRun, RoundPlan, StoreResult};

impl PgStore {
    pub async fn register_node(
        &self,
        node_id: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> StoreResult<i64> {
        sqlx::query_scalar(
            "INSERT INTO xjob_node (node_id, epoch, lease_until_ms, started_ms) \
             VALUES ($1, 1, $2, $3) \
             ON CONFLICT (node_id) DO UPDATE SET epoch = xjob_node.epoch + 1, \
             lease_until_ms = excluded.lease_until_ms, started_ms = excluded.started_ms \
             RETURNING epoch",
        )
        .bind(node_id)
        .bind(now_ms + lease_ms)
        .bind(now_ms)
        .fetch_one(&self.pool)
        .await
        .map_err(map_error)
    }

    pub async fn renew_node(
        &self,
        node_id: &str,
        epoch: i64,
        lease_until_ms: i64,
    ) -> StoreResult<bool> {
        let result = sqlx::query(
            "UPDATE xjob_node SET lease_until_ms = $1 WHERE node_id = $2 AND epoch = $3",
        )
        .bind(lease_until_ms)
        .bind(node_id)
        .bind(epoch)
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected() == 1)
    }

    pub async fn run_schedule_round(
        &self,
        window_end_ms: i64,
        limit: i64,
        plan: &mut (dyn FnMut(Vec<Job>) -> RoundPlan + Send),
    ) -> StoreResult<(usize, Vec<InsertedRun>)> {
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        lock_schedule(&mut tx).await?;
        // READ COMMITTED: this statement's snapshot is taken after the lock was granted, so it
        // sees the next fire times the previous holder committed.
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM xjob_job WHERE trigger_status = 1 \
             AND trigger_next_ms <= $1 ORDER BY trigger_next_ms LIMIT $2"
        ))
        .bind(window_end_ms)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await
        .map_err(map_error)?;
        let jobs = rows
            .iter()
            .map(job_from_row)
            .collect::<StoreResult<Vec<Job>>>()?;
        let job_count = jobs.len();
        let decided = plan(jobs);
        let inserted = insert_fires(&mut tx, &decided.new_runs).await?;
        write_schedule_updates(&mut tx, &decided.job_updates).await?;
        tx.commit().await.map_err(map_error)?;
        Ok((job_count, inserted))
    }

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

    pub async fn claim_runs(
        &self,
        ids: &[i64],
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let rows = self.claim(ids, node_id, epoch, now_ms, LOG_COLUMNS).await?;
        runs_by_id(&rows)
    }

    pub async fn claim_run_ids(
        &self,
        ids: &[i64],
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<i64>> {
        let rows = self.claim(ids, node_id, epoch, now_ms, "id").await?;
        rows.iter()
            .map(|row| row.try_get::<i64, _>(0).map_err(map_error))
            .collect()
    }

    /// The claim, returning `columns` of the rows claimed.
    async fn claim(
        &self,
        ids: &[i64],
        node_id: &str,
        epoch: i64,
        now_ms: i64,
        columns: &str,
    ) -> StoreResult<Vec<PgRow>> {
        // The owner/epoch condition is the fence: a node that stalled past its lease and lost
        // its fires to another node claims nothing here. FOR UPDATE (not SKIP LOCKED): a row
        // being adopted right now is waited for and then re-checked, never silently passed by.
        sqlx::query(&format!(
            "UPDATE xjob_log SET status = 'RUNNING', trigger_time_ms = $1 WHERE id IN ( \
               SELECT id FROM xjob_log WHERE id = ANY($4) AND status = 'PENDING' \
               AND owner_node = $2 AND epoch = $3 ORDER BY id FOR UPDATE) \
             RETURNING {columns}"
        ))
        .bind(now_ms)
        .bind(node_id)
        .bind(epoch)
        .bind(ids)
        .fetch_all(&self.pool)
        .await
        .map_err(map_error)
    }

    pub async fn skip_planned_fires(
        &self,
        job_id: i64,
        reason: &str,
        now_ms: i64,
    ) -> StoreResult<u64> {
        let result = sqlx::query(
            "UPDATE xjob_log SET status = 'SKIPPED', trigger_msg = $1, trigger_time_ms = $2 \
             WHERE id IN (SELECT id FROM xjob_log WHERE job_id = $3 AND status = 'PENDING' \
               AND fire_key IS NOT NULL ORDER BY id FOR UPDATE)",
        )
        .bind(reason)
        .bind(now_ms)
        .bind(job_id)
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected())
    }

    pub async fn skip_runs(&self, ids: &[i64], reason: &str, now_ms: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE xjob_log SET status = 'SKIPPED', trigger_msg = $1, trigger_time_ms = $2 \
             WHERE id IN (SELECT id FROM xjob_log WHERE id = ANY($3) AND status = 'PENDING' \
               ORDER BY id FOR UPDATE)",
        )
        .bind(reason)
        .bind(now_ms)
        .bind(ids)
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(())
    }
}

/// Takes the schedule lock for the rest of the transaction; a missing lock row is a schema
/// error, never a round without mutual exclusion.
async fn lock_schedule(conn: &mut PgConnection) -> StoreResult<()> {
    let locked: Option<String> = sqlx::query_scalar(
        "SELECT lock_name FROM xjob_lock WHERE lock_name = 'schedule_lock' FOR UPDATE",
    )
    .fetch_optional(conn)
    .await
    .map_err(map_error)?;
    locked.map(|_| ()).ok_or_else(missing_lock_row)
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

/// Inserts the round's fires; a `fire_key` already present is skipped, never duplicated.
async fn insert_fires(conn: &mut PgConnection, runs: &[NewRun]) -> StoreResult<Vec<InsertedRun>> {
    let inserted =
        insert_keyed::<sqlx::Postgres>(conn, runs, new_run_insert::<sqlx::Postgres>, 0).await?;
    Ok(inserted
        .into_iter()
        .map(|(log_id, fire_key)| InsertedRun { log_id, fire_key })
        .collect())
}
