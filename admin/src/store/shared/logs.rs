//! Run logs: inserts for manual triggers and retries, queries. The batched writes of dispatch
//! outcomes and executor results differ in shape per dialect (bound `VALUES` lists,
//! `jsonb_to_recordset`, `JSON_TABLE`) and stay in each backend's `logs.rs`.

use super::claims::unindexed;
use super::raw_ids;
use super::rows::{LOG_COLUMNS, run_from_row};
use crate::model::{JobId, LogFilter, LogId, NewRun, RunLog, SENT_AHEAD_NOTE};
use crate::store::dialect::Dialect;
use crate::store::error::StoreResult;
use crate::store::sql::{Pools, Sql, commit};

/// `INSERT INTO xjob_log (…) VALUES (…), (…)` for new runs, with `trigger_time_ms` (0 for a
/// run not dispatched yet; the claim time for broadcast shards written already claimed). Every
/// TEXT column is written (MySQL's have no defaults); a new run has no result and no executor
/// yet. The signature is `inserts::BuildInsert`.
pub fn new_run_insert<DB: Dialect>(runs: &[NewRun], trigger_time_ms: i64) -> Sql<'_, DB> {
    let mut insert = Sql::<DB>::new(
        "INSERT INTO xjob_log (job_id, group_id, fire_key, status, trigger_type, \
         scheduled_at_ms, trigger_time_ms, handler, params, shard_index, shard_total, attempt, \
         trigger_msg, handle_msg, executor_address, owner_node, epoch, dispatch_at_ms, \
         trace_id) VALUES ",
    );
    for (index, run) in runs.iter().enumerate() {
        insert.push_mut(if index == 0 { "(" } else { ", (" });
        insert.bind_mut(run.job_id.0);
        insert.push_mut(", ");
        insert.bind_mut(run.group_id.0);
        insert.push_mut(", ");
        match run.fire_key.as_deref() {
            Some(key) => insert.bind_mut(key),
            None => insert.push_mut("NULL"),
        }
        for text in [run.status.as_str(), run.trigger_type.as_str()] {
            insert.push_mut(", ");
            insert.bind_mut(text);
        }
        for number in [run.scheduled_at_ms, trigger_time_ms] {
            insert.push_mut(", ");
            insert.bind_mut(number);
        }
        for text in [run.handler.as_str(), run.params.as_str()] {
            insert.push_mut(", ");
            insert.bind_mut(text);
        }
        for number in [run.shard_index, run.shard_total, run.attempt] {
            insert.push_mut(", ");
            insert.bind_mut(number);
        }
        insert.push_mut(", ");
        insert.bind_mut(run.trigger_msg.as_str());
        insert.push_mut(", '', '', ");
        insert.bind_mut(run.owner_node.as_str());
        for number in [run.epoch, run.dispatch_at_ms] {
            insert.push_mut(", ");
            insert.bind_mut(number);
        }
        // Almost always empty (the scan's fires): a literal then, one bound value less per row.
        if run.trace_id.is_empty() {
            insert.push_mut(", ''");
        } else {
            insert.push_mut(", ");
            insert.bind_mut(run.trace_id.as_str());
        }
        insert.push_mut(")");
    }
    insert
}

/// Inserts runs (manual triggers, retries) in one transaction; returns their ids in order.
pub async fn insert_runs<DB: Dialect>(
    db: Pools<'_, DB>,
    runs: &[NewRun],
) -> StoreResult<Vec<LogId>> {
    let mut tx = db.begin().await?;
    let ids = super::inserts::insert_all::<DB>(&mut tx, runs, new_run_insert::<DB>, 0).await?;
    commit(tx).await?;
    Ok(ids)
}

/// Ids among `ids` that name no run (never written, or deleted since).
pub async fn missing_log_ids<DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[LogId],
) -> StoreResult<Vec<LogId>> {
    let raw = raw_ids(ids);
    let mut conn = db.read().await?;
    let mut found = std::collections::HashSet::with_capacity(ids.len());
    for chunk in raw.chunks(DB::IDS_PER_STATEMENT) {
        let mut select = Sql::<DB>::new("SELECT id FROM xjob_log WHERE id");
        DB::push_id_list(&mut select, chunk);
        found.extend(select.fetch_column::<LogId>(&mut conn).await?);
    }
    Ok(ids
        .iter()
        .copied()
        .filter(|id| !found.contains(id))
        .collect())
}

pub async fn get_log<DB: Dialect>(db: Pools<'_, DB>, id: LogId) -> StoreResult<Option<RunLog>> {
    let row = Sql::<DB>::new(format!("SELECT {LOG_COLUMNS} FROM xjob_log WHERE id = "))
        .bind(id.0)
        .fetch_optional(&mut *db.read().await?)
        .await?;
    row.as_ref().map(run_from_row::<DB>).transpose()
}

/// Most runs [`held_runs`] returns: a job's runs sent ahead and not started are those of at
/// most the send-ahead lead (3 s at most), a few for the busiest job.
const MOST_HELD: i64 = 1000;

/// The job's runs recorded as sent ahead (`SENT_AHEAD_NOTE` in their trigger message) and
/// accepted by an executor (an address is recorded), still RUNNING, whose instant is after
/// `after_ms`: those an executor may still hold. Oldest first. On SQLite through the partial
/// index of RUNNING rows (a small set), not the job's whole history (see `sqlite/plans.rs`).
pub fn held_runs_query<'q, DB: Dialect>(job_id: JobId, after_ms: i64) -> Sql<'q, DB> {
    Sql::<DB>::new(format!(
        "SELECT {LOG_COLUMNS} FROM xjob_log WHERE {} = ",
        unindexed::<DB>("job_id")
    ))
    .bind(job_id.0)
    .push(" AND status = 'RUNNING' AND executor_address <> '' AND scheduled_at_ms > ")
    .bind(after_ms)
    .push(" AND trigger_msg LIKE ")
    .bind(format!("%{SENT_AHEAD_NOTE}%"))
    .push(" ORDER BY id LIMIT ")
    .bind(MOST_HELD)
}

pub async fn held_runs<DB: Dialect>(
    db: Pools<'_, DB>,
    job_id: JobId,
    after_ms: i64,
) -> StoreResult<Vec<RunLog>> {
    let rows = held_runs_query::<DB>(job_id, after_ms)
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(run_from_row::<DB>).collect()
}

pub async fn list_logs<DB: Dialect>(
    db: Pools<'_, DB>,
    filter: &LogFilter,
) -> StoreResult<Vec<RunLog>> {
    if filter.group_ids.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let mut query = matching_logs::<DB>(&format!("SELECT {LOG_COLUMNS}"), filter);
    // Newest first unless asked otherwise.
    let order = filter.order.map(log_order_column).unwrap_or(("id", true));
    super::push_order(&mut query, Some(order));
    let rows = query
        .push(" LIMIT ")
        .bind(filter.limit)
        .push(" OFFSET ")
        .bind(filter.offset)
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(run_from_row::<DB>).collect()
}

/// How many runs match a filter (its page and order ignored).
pub async fn count_matching_logs<DB: Dialect>(
    db: Pools<'_, DB>,
    filter: &LogFilter,
) -> StoreResult<i64> {
    if filter.group_ids.as_ref().is_some_and(Vec::is_empty) {
        return Ok(0);
    }
    matching_logs::<DB>("SELECT COUNT(*)", filter)
        .fetch_scalar(&mut *db.read().await?)
        .await
}

/// How many runs match a filter, counting no further than `limit + 1` (its page and order
/// ignored): the matches are walked until one past the limit and no further, so a page that
/// refreshes itself every few seconds costs the same with ten runs or ten million.
pub async fn count_matching_logs_up_to<DB: Dialect>(
    db: Pools<'_, DB>,
    filter: &LogFilter,
    limit: i64,
) -> StoreResult<i64> {
    if filter.group_ids.as_ref().is_some_and(Vec::is_empty) {
        return Ok(0);
    }
    matching_logs::<DB>("SELECT COUNT(*) FROM (SELECT 1 AS matched", filter)
        .push(" LIMIT ")
        .bind(limit.saturating_add(1))
        .push(") AS bounded")
        .fetch_scalar(&mut *db.read().await?)
        .await
}

/// `select` from the runs that match the filter's conditions.
fn matching_logs<'a, DB: Dialect>(select: &str, filter: &'a LogFilter) -> Sql<'a, DB> {
    let mut query = Sql::<DB>::new(format!("{select} FROM xjob_log WHERE 1 = 1"));
    if let Some(group_ids) = &filter.group_ids {
        query.push_mut(" AND group_id");
        DB::push_id_list(&mut query, &raw_ids(group_ids));
    }
    for (condition, value) in [
        (" AND group_id = ", filter.group_id.map(|id| id.0)),
        (" AND job_id = ", filter.job_id.map(|id| id.0)),
        (" AND trigger_time_ms >= ", filter.from_ms),
        (" AND trigger_time_ms <= ", filter.to_ms),
    ] {
        if let Some(value) = value {
            query.push_mut(condition);
            query.bind_mut(value);
        }
    }
    if let Some(status) = filter.status {
        query.push_mut(" AND status = ");
        query.bind_mut(status.as_str());
    }
    query
}

/// The column of a runs-list sort key (`model::LOG_SORT_KEYS`); anything else is the id.
fn log_order_column(order: crate::model::ListOrder) -> (&'static str, bool) {
    let column = match order.key {
        "job" => "job_id",
        "group" => "group_id",
        "status" => "status",
        "triggered" => "trigger_time_ms",
        "executor" => "executor_address",
        _ => "id",
    };
    (column, order.descending)
}

/// The items sorted by log id (stable: repeats of one run keep their order). Where several
/// admins write, transactions that lock several runs lock them in id order, so two of them
/// never wait for each other in a cycle (a deadlock, which the server ends by failing one).
pub fn in_id_order<'a, T>(
    items: impl IntoIterator<Item = &'a T>,
    log_id: impl Fn(&T) -> LogId,
) -> Vec<&'a T> {
    let mut sorted: Vec<&T> = items.into_iter().collect();
    sorted.sort_by_key(|item| log_id(item));
    sorted
}
