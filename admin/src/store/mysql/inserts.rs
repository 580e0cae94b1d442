//! Inserting runs without `RETURNING` or `ON CONFLICT`.
//!
//! A single run is inserted on its own and its id read from the statement's insert id; a
//! duplicate `fire_key` makes that one statement fail, which MySQL undoes without ending the
//! transaction, so "skip if the key exists" is exact even when two admins write the same key at
//! once (the second waits for the first and then fails). Scheduled fires go in as multi-row
//! inserts and their ids are read back by `fire_key`; auto-increment ids of a multi-row insert
//! are never assumed consecutive.

use std::collections::{HashMap, HashSet};

use sqlx::{MySql, MySqlConnection, QueryBuilder};

use super::rows::get;
use super::{insert_id, map_error, placeholders};
use crate::model::NewRun;
use crate::store::{StoreError, StoreResult};

/// Most rows per multi-row insert (17 parameters each).
const INSERT_ROWS: usize = 500;
/// Most bytes of text per multi-row insert, well below the default `max_allowed_packet`
/// (16 MiB on MariaDB, 64 MiB on MySQL 8).
const INSERT_BYTES: usize = 4 << 20;

/// `INSERT INTO xjob_log (…) VALUES (…), (…)` for new runs. Every TEXT column is written (they
/// have no defaults); a new run has no result and no executor yet.
pub(super) fn new_run_insert(runs: &[NewRun]) -> QueryBuilder<'_, MySql> {
    let mut query = QueryBuilder::new(
        "INSERT INTO xjob_log (job_id, group_id, fire_key, status, trigger_type, \
         scheduled_at_ms, handler, params, shard_index, shard_total, attempt, trigger_msg, \
         handle_msg, executor_address, owner_node, epoch, dispatch_at_ms) ",
    );
    query.push_values(runs, |mut row, run| {
        row.push_bind(run.job_id)
            .push_bind(run.group_id)
            .push_bind(run.fire_key.as_deref())
            .push_bind(run.status.as_str())
            .push_bind(run.trigger_type.as_str())
            .push_bind(run.scheduled_at_ms)
            .push_bind(run.handler.as_str())
            .push_bind(run.params.as_str())
            .push_bind(run.shard_index)
            .push_bind(run.shard_total)
            .push_bind(run.attempt)
            .push_bind(run.trigger_msg.as_str())
            .push("''")
            .push("''")
            .push_bind(run.owner_node.as_str())
            .push_bind(run.epoch)
            .push_bind(run.dispatch_at_ms);
    });
    query
}

/// Inserts one run unless its `fire_key` exists already (`None` then).
pub(super) async fn insert_run_once(
    conn: &mut MySqlConnection,
    run: &NewRun,
) -> StoreResult<Option<i64>> {
    try_insert(conn, new_run_insert(std::slice::from_ref(run))).await
}

/// Inserts runs that all carry a `fire_key`, skipping keys already present; returns
/// `(id, fire_key)` of each row this call wrote, in the order of `runs`.
///
/// Keys already present are left out first; the rest go in as one multi-row insert, which
/// either writes every row (so each key read back is ours) or, when a concurrent writer took a
/// key meanwhile, fails as a whole and is redone row by row.
pub(super) async fn insert_keyed<F>(
    conn: &mut MySqlConnection,
    runs: &[NewRun],
    build: F,
) -> StoreResult<Vec<(i64, String)>>
where
    F: for<'a> Fn(&'a [NewRun]) -> QueryBuilder<'a, MySql>,
{
    let mut written = Vec::with_capacity(runs.len());
    for batch in batches(runs) {
        let keys = batch
            .iter()
            .map(|run| {
                run.fire_key.clone().ok_or_else(|| {
                    StoreError::Corrupt("keyed insert of a run without fire_key".to_string())
                })
            })
            .collect::<StoreResult<Vec<String>>>()?;
        let existing = existing_keys(conn, &keys).await?;
        let mut seen = HashSet::new();
        let fresh: Vec<(NewRun, String)> = batch
            .iter()
            .zip(keys)
            .filter(|(_, key)| !existing.contains(key) && seen.insert(key.clone()))
            .map(|(run, key)| (run.clone(), key))
            .collect();
        if fresh.is_empty() {
            continue;
        }
        let fresh_runs: Vec<NewRun> = fresh.iter().map(|(run, _)| run.clone()).collect();
        match build(&fresh_runs).build().execute(&mut *conn).await {
            Ok(_) => written.extend(ids_by_key(conn, &fresh).await?),
            Err(error) if is_unique_violation(&error) => {
                for (run, key) in &fresh {
                    let id = try_insert(conn, build(std::slice::from_ref(run))).await?;
                    written.extend(id.map(|id| (id, key.clone())));
                }
            }
            Err(error) => return Err(map_error(error)),
        }
    }
    Ok(written)
}

/// Inserts runs without a `fire_key` one by one (each insert id is exact); returns their ids in
/// the order of `runs`.
pub(super) async fn insert_each<F>(
    conn: &mut MySqlConnection,
    runs: &[NewRun],
    build: F,
) -> StoreResult<Vec<i64>>
where
    F: for<'a> Fn(&'a [NewRun]) -> QueryBuilder<'a, MySql>,
{
    let mut ids = Vec::with_capacity(runs.len());
    for run in runs {
        let result = build(std::slice::from_ref(run))
            .build()
            .execute(&mut *conn)
            .await
            .map_err(map_error)?;
        ids.push(insert_id(&result)?);
    }
    Ok(ids)
}

/// Runs a one-row insert; `None` when a unique key refused it. A refused statement is undone
/// on its own in MySQL; the transaction goes on.
async fn try_insert(
    conn: &mut MySqlConnection,
    mut insert: QueryBuilder<'_, MySql>,
) -> StoreResult<Option<i64>> {
    match insert.build().execute(&mut *conn).await {
        Ok(result) => insert_id(&result).map(Some),
        Err(error) if is_unique_violation(&error) => Ok(None),
        Err(error) => Err(map_error(error)),
    }
}

fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db_error) if db_error.is_unique_violation())
}

/// The keys among `keys` that have a row.
async fn existing_keys(
    conn: &mut MySqlConnection,
    keys: &[String],
) -> StoreResult<HashSet<String>> {
    let sql = format!(
        "SELECT fire_key FROM xjob_log WHERE fire_key IN ({})",
        placeholders(keys.len())
    );
    let mut query = sqlx::query(&sql);
    for key in keys {
        query = query.bind(key);
    }
    let rows = query.fetch_all(&mut *conn).await.map_err(map_error)?;
    rows.iter().map(|row| get(row, "fire_key")).collect()
}

/// `(id, fire_key)` of the rows with the keys of `fresh`, in its order.
async fn ids_by_key(
    conn: &mut MySqlConnection,
    fresh: &[(NewRun, String)],
) -> StoreResult<Vec<(i64, String)>> {
    let sql = format!(
        "SELECT id, fire_key FROM xjob_log WHERE fire_key IN ({})",
        placeholders(fresh.len())
    );
    let mut query = sqlx::query(&sql);
    for (_, key) in fresh {
        query = query.bind(key);
    }
    let mut ids = HashMap::new();
    for row in query.fetch_all(&mut *conn).await.map_err(map_error)? {
        ids.insert(get::<String>(&row, "fire_key")?, get::<i64>(&row, "id")?);
    }
    fresh
        .iter()
        .map(|(_, key)| match ids.get(key) {
            Some(id) => Ok((*id, key.clone())),
            None => Err(StoreError::Corrupt(format!(
                "inserted fire {key} not found"
            ))),
        })
        .collect()
}

/// Splits runs into multi-row inserts bounded by row count and text size.
pub(super) fn batches(runs: &[NewRun]) -> Vec<&[NewRun]> {
    let mut batches = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (index, run) in runs.iter().enumerate() {
        let size = run.params.len() + run.handler.len() + run.trigger_msg.len() + 256;
        if index > start && (index - start == INSERT_ROWS || bytes + size > INSERT_BYTES) {
            batches.push(&runs[start..index]);
            start = index;
            bytes = 0;
        }
        bytes += size;
    }
    if start < runs.len() {
        batches.push(&runs[start..]);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunStatus, TriggerType};

    fn run(params_bytes: usize) -> NewRun {
        NewRun {
            job_id: 1,
            group_id: 1,
            fire_key: None,
            status: RunStatus::Pending,
            trigger_type: TriggerType::Manual,
            scheduled_at_ms: 0,
            handler: String::new(),
            params: "x".repeat(params_bytes),
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            trigger_msg: String::new(),
            owner_node: String::new(),
            epoch: 0,
            dispatch_at_ms: 0,
        }
    }

    #[test]
    fn batches_are_bounded_by_rows_and_bytes() {
        let small: Vec<NewRun> = (0..1201).map(|_| run(10)).collect();
        let sizes: Vec<usize> = batches(&small).iter().map(|batch| batch.len()).collect();
        assert_eq!(sizes, vec![500, 500, 201]);

        let large: Vec<NewRun> = (0..5).map(|_| run(INSERT_BYTES / 2)).collect();
        let sizes: Vec<usize> = batches(&large).iter().map(|batch| batch.len()).collect();
        assert_eq!(
            sizes,
            vec![1, 1, 1, 1, 1],
            "each row alone exceeds half the bound"
        );

        let huge = vec![run(INSERT_BYTES * 2)];
        assert_eq!(
            batches(&huge).len(),
            1,
            "an oversized row still gets its own batch"
        );
        assert!(batches(&[]).is_empty());
    }
}
