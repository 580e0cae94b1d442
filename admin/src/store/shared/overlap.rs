//! Overlap policies (`model::overlap`): what the trigger reads of a job before sending one of
//! its scheduled fires, and the WAITING rows the policies BUFFER_ONE and BUFFER_ALL hold.
//!
//! A WAITING row is durable and has no owner: whichever admin's follow-up loop finds its job
//! with nothing RUNNING any more releases it (WAITING → RUNNING for that admin, unsent, as a
//! claim is), so an admin that dies loses no waiting fire, and a released run it did not send
//! is a stranded run like any other. Parking and releasing both lock the job's row first: of
//! two admins only one decides about a job's waiting rows at a time, and the oldest is always
//! the one released.

use super::claims::unindexed;
use super::rows::{LOG_COLUMNS, run_from_row};
use crate::model::overlap::Overlap;
use crate::model::{JobId, LogId, NodeIdentity, RunLog};
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql, commit};

/// Most earlier runs or waiting runs one look at a job returns (the rule needs the first).
const MOST_LISTED: i64 = 32;

/// What became of a fire asked to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parked {
    /// It is WAITING.
    Waiting,
    /// The job already has as many waiting runs as allowed; this one of them is the oldest.
    Full(LogId),
    /// The row is no longer this node's unsent RUNNING run (another admin took it over).
    Gone,
}

/// A fire of the schedule written and not claimed yet: it will be judged and sent in its turn,
/// so a later fire counts it as going. A database outage or an admin's death can hold such a
/// fire back while the next one is claimed; without this, the later fire went first and the
/// held one, judged by the runs before it only, was sent over it (two runs at once, out of
/// order). Retries and child runs are not judged by the policy and do not count.
const HELD_BACK_FIRE: &str = "status = 'PENDING' AND trigger_type IN ('CRON', 'MISFIRE') \
                              AND attempt = 0 AND shard_index = 0";

/// The job's runs older than `before` that are still going, oldest first: RUNNING (with their
/// executor) or a fire of the schedule held back PENDING (no executor); and its WAITING runs.
///
/// One statement, so one snapshot: rows move between these sets while the trigger looks
/// (a release turns WAITING into RUNNING, a claim PENDING into RUNNING, a park RUNNING into
/// WAITING), and separate reads could each miss the row that moved between them. That is how
/// a fire of a BUFFER_ONE job was once sent beside the waiting run being released.
pub async fn overlap_state<DB: Dialect>(
    db: Pools<'_, DB>,
    job_id: JobId,
    before: LogId,
) -> StoreResult<Overlap> {
    let mut conn = db.read().await?;
    // Each branch keeps its own plan (SQLite: the partial indexes of RUNNING and PENDING
    // rows, a small set, not the job's whole history); a derived table lets each have its
    // own ORDER BY and LIMIT in all three dialects.
    let select = "SELECT id, executor_address, status FROM (SELECT id, executor_address, status \
                  FROM xjob_log WHERE ";
    let job = unindexed::<DB>("job_id");
    let rows = Sql::<DB>::new(format!("{select}{job} = "))
        .bind(job_id.0)
        .push(" AND status = 'RUNNING' AND id < ")
        .bind(before.0)
        .push(" ORDER BY id LIMIT ")
        .bind(MOST_LISTED)
        .push(&format!(") going UNION ALL {select}{job} = "))
        .bind(job_id.0)
        .push(&format!(" AND {HELD_BACK_FIRE} AND id < "))
        .bind(before.0)
        .push(" ORDER BY id LIMIT ")
        .bind(MOST_LISTED)
        .push(&format!(") held UNION ALL {select}job_id = "))
        .bind(job_id.0)
        .push(" AND status = 'WAITING' ORDER BY id LIMIT ")
        .bind(MOST_LISTED)
        .push(") waiting")
        .fetch_all(&mut conn)
        .await?;
    let mut running = Vec::new();
    let mut waiting = Vec::new();
    for row in &rows {
        let cols = Cols::<DB>(row);
        let id = cols.get::<LogId>("id")?;
        match cols.get::<String>("status")?.as_str() {
            "WAITING" => waiting.push(id),
            "RUNNING" => running.push((id, cols.get::<String>("executor_address")?)),
            // A held-back fire has no executor yet.
            _ => running.push((id, String::new())),
        }
    }
    running.sort_by_key(|(id, _)| id.0);
    running.truncate(MOST_LISTED as usize);
    waiting.sort_by_key(|id| id.0);
    Ok(Overlap { running, waiting })
}

/// The job's fires of the schedule older than `before` still PENDING (`HELD_BACK_FIRE`).
async fn held_back_before<DB: Dialect>(
    conn: &mut DB::Connection,
    job_id: JobId,
    before: LogId,
    limit: i64,
) -> StoreResult<Vec<LogId>> {
    // SQLite: the partial index of PENDING rows (a small set), not the job's whole history.
    Sql::<DB>::new(format!(
        "SELECT id FROM xjob_log WHERE {} = ",
        unindexed::<DB>("job_id")
    ))
    .bind(job_id.0)
    .push(&format!(" AND {HELD_BACK_FIRE} AND id < "))
    .bind(before.0)
    .push(" ORDER BY id LIMIT ")
    .bind(limit)
    .fetch_column::<LogId>(conn)
    .await
}

/// The job's WAITING runs, oldest first.
async fn waiting_ids<DB: Dialect>(
    conn: &mut DB::Connection,
    job_id: JobId,
    limit: i64,
) -> StoreResult<Vec<LogId>> {
    Sql::<DB>::new("SELECT id FROM xjob_log WHERE job_id = ")
        .bind(job_id.0)
        .push(" AND status = 'WAITING' ORDER BY id LIMIT ")
        .bind(limit)
        .fetch_column::<LogId>(conn)
        .await
}

/// Locks the job's row for the rest of the transaction (no-op on SQLite, one writer).
async fn lock_job<DB: Dialect>(conn: &mut DB::Connection, job_id: JobId) -> StoreResult<bool> {
    let found = Sql::<DB>::new("SELECT id FROM xjob_job WHERE id = ")
        .bind(job_id.0)
        .push(DB::FOR_UPDATE)
        .fetch_optional(conn)
        .await?;
    Ok(found.is_some())
}

/// Turns this node's claimed, unsent run `log_id` of `job_id` WAITING with `message`, unless
/// the job already has `max_waiting` waiting runs (0 = no bound). `claimed_at_ms` is the
/// trigger time its claim wrote: a release (`release_waiting`) writes another, so a park
/// retried after its first try did commit (the answer lost with the connection) cannot park
/// the run again once this same node has released it and is sending it; it ran twice.
pub async fn park_run<DB: Dialect>(
    db: Pools<'_, DB>,
    log_id: LogId,
    job_id: JobId,
    node: &NodeIdentity,
    claimed_at_ms: i64,
    max_waiting: i64,
    message: &str,
) -> StoreResult<Parked> {
    let mut tx = db.begin().await?;
    if !lock_job::<DB>(&mut tx, job_id).await? {
        return Ok(Parked::Gone);
    }
    if max_waiting > 0 {
        let waiting = waiting_ids::<DB>(&mut tx, job_id, max_waiting).await?;
        if waiting.len() as i64 >= max_waiting {
            return Ok(Parked::Full(waiting[0]));
        }
    }
    let parked = Sql::<DB>::new("UPDATE xjob_log SET status = 'WAITING', trigger_msg = ")
        .bind(message.to_string())
        .push(" WHERE id = ")
        .bind(log_id.0)
        .push(" AND status = 'RUNNING' AND executor_address = '' AND owner_node = ")
        .bind(node.node_id.clone())
        .push(" AND epoch = ")
        .bind(node.epoch)
        .push(" AND trigger_time_ms = ")
        .bind(claimed_at_ms)
        .affected(&mut tx)
        .await?;
    commit(tx).await?;
    Ok(if parked == 1 {
        Parked::Waiting
    } else {
        Parked::Gone
    })
}

/// Releases the oldest WAITING run of each job (at most `limit` jobs) that has no RUNNING run
/// left: it becomes this node's claimed, unsent run (trigger time `now_ms`), returned for the
/// caller to send.
pub async fn release_waiting<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
    now_ms: i64,
    limit: i64,
) -> StoreResult<Vec<RunLog>> {
    // The jobs with a waiting run, the job of the oldest one first; which run is a job's
    // oldest, `release_one` reads under the job's lock.
    let jobs = {
        let mut conn = db.read().await?;
        Sql::<DB>::new(
            "SELECT job_id FROM xjob_log WHERE status = 'WAITING' \
             GROUP BY job_id ORDER BY MIN(id) LIMIT ",
        )
        .bind(limit)
        .fetch_column::<JobId>(&mut conn)
        .await?
    };
    let mut released = Vec::new();
    for job_id in jobs {
        if let Some(run) = release_one::<DB>(db, job_id, node, now_ms).await? {
            released.push(run);
        }
    }
    Ok(released)
}

/// Releases the oldest WAITING run of `job_id` if the job has no RUNNING run. The oldest is
/// read under the job's lock, not before it (`release_waiting` lists only jobs): an older
/// fire may have been parked since (one held back by an outage and judged late), and
/// releasing an oldest read earlier started a later occurrence before that earlier one.
async fn release_one<DB: Dialect>(
    db: Pools<'_, DB>,
    job_id: JobId,
    node: &NodeIdentity,
    now_ms: i64,
) -> StoreResult<Option<RunLog>> {
    let mut tx = db.begin().await?;
    if !lock_job::<DB>(&mut tx, job_id).await? {
        return Ok(None);
    }
    let Some(&head) = waiting_ids::<DB>(&mut tx, job_id, 1).await?.first() else {
        // Released by another admin meanwhile, or cancelled.
        return Ok(None);
    };
    let busy = Sql::<DB>::new(format!(
        "SELECT id FROM xjob_log WHERE {} = ",
        unindexed::<DB>("job_id")
    ))
    .bind(job_id.0)
    .push(" AND status = 'RUNNING' LIMIT 1")
    .fetch_optional(&mut tx)
    .await?;
    // A fire held back before the head is older: it goes first (it waits behind the head
    // when it is judged, and the oldest waiting run is released first).
    if busy.is_some()
        || !held_back_before::<DB>(&mut tx, job_id, head, 1)
            .await?
            .is_empty()
    {
        return Ok(None);
    }
    let changed = Sql::<DB>::new("UPDATE xjob_log SET status = 'RUNNING', owner_node = ")
        .bind(node.node_id.clone())
        .push(", epoch = ")
        .bind(node.epoch)
        .push(", trigger_time_ms = ")
        .bind(now_ms)
        .push(" WHERE id = ")
        .bind(head.0)
        .push(" AND status = 'WAITING'")
        .affected(&mut tx)
        .await?;
    if changed == 0 {
        return Ok(None);
    }
    let row = Sql::<DB>::new(format!("SELECT {LOG_COLUMNS} FROM xjob_log WHERE id = "))
        .bind(head.0)
        .fetch_one(&mut tx)
        .await?;
    let run = run_from_row::<DB>(&row)?;
    commit(tx).await?;
    Ok(Some(run))
}
