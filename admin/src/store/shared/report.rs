//! Operations data: the daily report rows (`xjob_log_report`) and the batched deletion of log
//! rows behind `ClearLogs` and the retention clean-up.
//!
//! Every statement here is idempotent, so several admins may run the same refresh or clean-up
//! at the same time: a report row is recomputed from the log rows and upserted, and deleting a
//! row twice deletes it once.

use crate::model::{GroupId, JobId, LogId};
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql};
use crate::store::{DayCounts, JobDayCounts, LogCleanup, OutcomeCount, StoreResult};

/// The first attempt of a scheduled fire that was sent (its lateness is what the dashboard
/// charts).
const SCHEDULED_SENT: &str = "trigger_type IN ('CRON', 'MISFIRE') AND attempt = 0 \
    AND status <> 'SKIPPED' AND scheduled_at_ms > 0";

/// Status filter every deletion carries: a run still pending, running or waiting is never deleted.
const FINAL_ONLY: &str = " AND status NOT IN ('PENDING', 'RUNNING', 'WAITING')";

/// How the first attempts (shard 0) of a group's fires scheduled in `[from_ms, to_ms)` ended,
/// counted by status and reason class (for benchmarks: what became of every planned fire).
pub async fn run_outcomes<DB: Dialect>(
    db: Pools<'_, DB>,
    group_id: GroupId,
    from_ms: i64,
    to_ms: i64,
) -> StoreResult<Vec<OutcomeCount>> {
    let rows = Sql::<DB>::new(
        "SELECT status, CASE WHEN trigger_msg LIKE 'overloaded%' THEN 'overloaded' \
           WHEN trigger_msg LIKE 'misfire%' THEN 'misfire' ELSE '' END AS reason, \
           COUNT(*) AS runs FROM xjob_log WHERE group_id = ",
    )
    .bind(group_id.0)
    .push(" AND scheduled_at_ms >= ")
    .bind(from_ms)
    .push(" AND scheduled_at_ms < ")
    .bind(to_ms)
    .push(" AND attempt = 0 AND shard_index = 0 GROUP BY status, reason ORDER BY status, reason")
    .fetch_all(&mut *db.read().await?)
    .await?;
    rows.iter()
        .map(|row| {
            let cols = Cols::<DB>(row);
            Ok(OutcomeCount {
                status: cols.get("status")?,
                reason: cols.get("reason")?,
                runs: cols.get("runs")?,
            })
        })
        .collect()
}

pub async fn refresh_log_report<DB: Dialect>(
    db: Pools<'_, DB>,
    day_start_ms: i64,
    day_end_ms: i64,
    now_ms: i64,
) -> StoreResult<DayCounts> {
    // Counted, then upserted: a concurrent refresh by another admin can only replace the row
    // with counts just as fresh.
    let counts = count_log_day(db, day_start_ms, day_end_ms).await?;
    upsert_report_row(db, &counts, now_ms).await?;
    Ok(counts)
}

/// The counts of the runs triggered in `[day_start_ms, day_end_ms)`, read now (nothing is
/// written). Counted through a read connection: the count walks a whole day of log rows, and
/// on SQLite's single writer connection it would hold every dispatch write back meanwhile.
/// COUNT yields a 64-bit integer everywhere (MySQL's SUM would not).
pub async fn count_log_day<DB: Dialect>(
    db: Pools<'_, DB>,
    day_start_ms: i64,
    day_end_ms: i64,
) -> StoreResult<DayCounts> {
    let row = day_counts_query::<DB>(day_start_ms, day_end_ms)
        .fetch_one(&mut *db.read().await?)
        .await?;
    day_counts::<DB>(&row, day_start_ms)
}

/// [`count_log_day`]'s statement (PostgreSQL's plan test reads it too).
pub fn day_counts_query<'q, DB: Dialect>(day_start_ms: i64, day_end_ms: i64) -> Sql<'q, DB> {
    Sql::<DB>::new(format!(
        "SELECT {} FROM xjob_log WHERE trigger_time_ms >= ",
        day_columns()
    ))
    .bind(day_start_ms)
    .push(" AND trigger_time_ms < ")
    .bind(day_end_ms)
    .push(TRIGGERED)
}

/// [`count_log_day`]'s counts per job, in one statement (one snapshot of the rows on every
/// backend), so sums over the jobs and the jobs' own counts never disagree.
///
/// It reads the day's rows through `ix_log_trigger_time` (a B-tree on SQLite and MySQL, a
/// block-range index on PostgreSQL) and groups them in a temporary tree; no other index pays
/// for itself. Measured on SQLite with 7 days of 33,000 runs over 1,000
/// jobs (CPU per call, warm cache): 37 ms as is, 22 ms for the day's totals alone (the
/// grouping is the rest); an index on (trigger_time_ms, group_id, job_id) is not chosen by
/// the planner; (group_id, job_id, trigger_time_ms) makes it 39 ms; a covering index over
/// every column read, 34 ms, for 12% more file and one more index entry rewritten on each
/// status change of every run.
pub async fn count_log_day_by_job<DB: Dialect>(
    db: Pools<'_, DB>,
    day_start_ms: i64,
    day_end_ms: i64,
) -> StoreResult<Vec<JobDayCounts>> {
    let rows = day_counts_by_job_query::<DB>(day_start_ms, day_end_ms)
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter()
        .map(|row| {
            let cols = Cols::<DB>(row);
            Ok(JobDayCounts {
                group_id: GroupId(cols.get("group_id")?),
                job_id: JobId(cols.get("job_id")?),
                last_failed_ms: cols.get("last_failed_ms")?,
                counts: day_counts::<DB>(row, day_start_ms)?,
            })
        })
        .collect()
}

/// [`count_log_day_by_job`]'s statement (PostgreSQL's plan test reads it too).
pub fn day_counts_by_job_query<'q, DB: Dialect>(day_start_ms: i64, day_end_ms: i64) -> Sql<'q, DB> {
    Sql::<DB>::new(format!(
        "SELECT group_id, job_id, {}, COALESCE(MAX(CASE WHEN {FAILED} THEN trigger_time_ms END), 0) \
         AS last_failed_ms FROM xjob_log WHERE trigger_time_ms >= ",
        day_columns()
    ))
    .bind(day_start_ms)
    .push(" AND trigger_time_ms < ")
    .bind(day_end_ms)
    .push(TRIGGERED)
    .push(" GROUP BY group_id, job_id")
}

/// Always true of a day's rows (`day_start_ms` > 0), and the condition of PostgreSQL's partial
/// trigger-time index, which its planner uses only when the query states it (a bound parameter
/// proves nothing in a generic plan).
const TRIGGERED: &str = " AND trigger_time_ms > 0";

/// The statuses counted as failed: every final one but SUCCESS and SKIPPED.
const FAILED: &str = "status NOT IN ('PENDING', 'RUNNING', 'WAITING', 'SUCCESS', 'SKIPPED')";

/// The aggregate columns of a day's counts (COUNT yields a 64-bit integer everywhere, MySQL's
/// SUM would not).
fn day_columns() -> String {
    format!(
        "COUNT(CASE WHEN status IN ('PENDING', 'RUNNING', 'WAITING') THEN 1 END) AS running, \
         COUNT(CASE WHEN status = 'SUCCESS' THEN 1 END) AS success, \
         COUNT(CASE WHEN {FAILED} THEN 1 END) AS failed, \
         COUNT(CASE WHEN status = 'LOST' THEN 1 END) AS lost, \
         COUNT(CASE WHEN status = 'SKIPPED' THEN 1 END) AS skipped, \
         COUNT(CASE WHEN {SCHEDULED_SENT} AND trigger_time_ms - scheduled_at_ms > 1000 \
           THEN 1 END) AS late_fires, \
         COALESCE(MAX(CASE WHEN {SCHEDULED_SENT} AND trigger_time_ms > scheduled_at_ms \
           THEN trigger_time_ms - scheduled_at_ms END), 0) AS max_lateness_ms"
    )
}

fn day_counts<DB: Dialect>(row: &DB::Row, day_ms: i64) -> StoreResult<DayCounts> {
    let row = Cols::<DB>(row);
    Ok(DayCounts {
        day_ms,
        running: row.get("running")?,
        success: row.get("success")?,
        failed: row.get("failed")?,
        lost: row.get("lost")?,
        skipped: row.get("skipped")?,
        late_fires: row.get("late_fires")?,
        max_lateness_ms: row.get("max_lateness_ms")?,
    })
}

async fn upsert_report_row<DB: Dialect>(
    db: Pools<'_, DB>,
    counts: &DayCounts,
    now_ms: i64,
) -> StoreResult<()> {
    Sql::<DB>::new(
        "INSERT INTO xjob_log_report (day_ms, running, success, failed, lost, skipped, \
         late_fires, max_lateness_ms, updated_ms) VALUES (",
    )
    .bind(counts.day_ms)
    .push(", ")
    .bind(counts.running)
    .push(", ")
    .bind(counts.success)
    .push(", ")
    .bind(counts.failed)
    .push(", ")
    .bind(counts.lost)
    .push(", ")
    .bind(counts.skipped)
    .push(", ")
    .bind(counts.late_fires)
    .push(", ")
    .bind(counts.max_lateness_ms)
    .push(", ")
    .bind(now_ms)
    .push(") ")
    .push(&DB::upsert(
        "day_ms",
        &[
            "running",
            "success",
            "failed",
            "lost",
            "skipped",
            "late_fires",
            "max_lateness_ms",
            "updated_ms",
        ],
    ))
    .execute(&mut *db.write().await?)
    .await?;
    Ok(())
}

pub async fn list_log_report<DB: Dialect>(
    db: Pools<'_, DB>,
    from_day_ms: i64,
    to_day_ms: i64,
) -> StoreResult<Vec<DayCounts>> {
    let rows = Sql::<DB>::new(
        "SELECT day_ms, running, success, failed, lost, skipped, late_fires, max_lateness_ms \
         FROM xjob_log_report WHERE day_ms >= ",
    )
    .bind(from_day_ms)
    .push(" AND day_ms <= ")
    .bind(to_day_ms)
    .push(" ORDER BY day_ms")
    .fetch_all(&mut *db.read().await?)
    .await?;
    rows.iter()
        .map(|row| {
            let row = Cols::<DB>(row);
            Ok(DayCounts {
                day_ms: row.get("day_ms")?,
                running: row.get("running")?,
                success: row.get("success")?,
                failed: row.get("failed")?,
                lost: row.get("lost")?,
                skipped: row.get("skipped")?,
                late_fires: row.get("late_fires")?,
                max_lateness_ms: row.get("max_lateness_ms")?,
            })
        })
        .collect()
}

pub async fn nth_newest_log_id<DB: Dialect>(
    db: Pools<'_, DB>,
    group_id: Option<GroupId>,
    job_id: Option<JobId>,
    n: i64,
) -> StoreResult<Option<LogId>> {
    let mut query = Sql::<DB>::new("SELECT id FROM xjob_log WHERE 1 = 1");
    push_owner_filters(&mut query, group_id, job_id);
    let ids = query
        .push(" ORDER BY id DESC LIMIT 1 OFFSET ")
        .bind(n.saturating_sub(1).max(0))
        .fetch_column::<LogId>(&mut *db.read().await?)
        .await?;
    Ok(ids.first().copied())
}

/// One bounded statement per batch: locks are held for one batch only, so the schedule round
/// and callbacks interleave with a long clean-up. Where several admins write, the rows are
/// taken in id order, as every multi-row write here locks them, and a batch waits for rows
/// another transaction holds (a follow-up claim) rather than skipping them: callers stop at the
/// first batch smaller than the limit, so a batch must delete `limit` rows whenever that many
/// qualify.
pub async fn delete_logs_batch<DB: Dialect>(
    db: Pools<'_, DB>,
    cleanup: &LogCleanup,
    limit: i64,
) -> StoreResult<u64> {
    // MySQL's single-table DELETE takes ORDER BY/LIMIT itself (a LIMIT inside an IN subquery
    // is not allowed there); the others delete by a bounded subquery.
    let mut query = if DB::DELETE_TAKES_LIMIT {
        Sql::<DB>::new("DELETE FROM xjob_log WHERE 1 = 1")
    } else {
        Sql::<DB>::new("DELETE FROM xjob_log WHERE id IN (SELECT id FROM xjob_log WHERE 1 = 1")
    };
    query.push_mut(FINAL_ONLY);
    push_owner_filters(&mut query, cleanup.group_id, cleanup.job_id);
    if let Some(below_id) = cleanup.below_id {
        query.push_mut(" AND id < ");
        query.bind_mut(below_id.0);
    }
    if let Some(cutoff_ms) = cleanup.older_than_ms {
        push_older_than(&mut query, cutoff_ms);
    }
    // SQLite's single writer needs no order: nobody else deletes meanwhile.
    query.push_mut(if DB::SINGLE_WRITER {
        " LIMIT "
    } else {
        " ORDER BY id LIMIT "
    });
    query.bind_mut(limit.max(0));
    if !DB::DELETE_TAKES_LIMIT {
        query.push_mut(DB::FOR_UPDATE);
        query.push_mut(")");
        query.push_mut(FINAL_ONLY);
    }
    query.affected(&mut *db.write().await?).await
}

/// Keeps runs aged before `cutoff_ms`. A run is aged by its trigger time; one never dispatched
/// by its scheduled time, or (a manual run that never left the admin) by the time it was
/// recorded as finished. Written so the `trigger_time_ms` index serves both branches.
fn push_older_than<DB: Dialect>(query: &mut Sql<'_, DB>, cutoff_ms: i64) {
    query.push_mut(" AND ((trigger_time_ms > 0 AND trigger_time_ms < ");
    query.bind_mut(cutoff_ms);
    query.push_mut(") OR (trigger_time_ms = 0 AND (CASE WHEN scheduled_at_ms > 0 ");
    query.push_mut("THEN scheduled_at_ms ELSE handle_time_ms END) < ");
    query.bind_mut(cutoff_ms);
    query.push_mut("))");
}

fn push_owner_filters<DB: Dialect>(
    query: &mut Sql<'_, DB>,
    group_id: Option<GroupId>,
    job_id: Option<JobId>,
) {
    if let Some(group_id) = group_id {
        query.push_mut(" AND group_id = ");
        query.bind_mut(group_id.0);
    }
    if let Some(job_id) = job_id {
        query.push_mut(" AND job_id = ");
        query.bind_mut(job_id.0);
    }
}
