//! Inserting runs and learning their ids, on dialects with and without `RETURNING` and
//! `ON CONFLICT … DO NOTHING`.
//!
//! SQLite and PostgreSQL insert a batch as one multi-row statement that skips fire keys present
//! and returns the rows it wrote. MySQL has neither: a single run is inserted on its own and its
//! id read from the statement's insert id; a duplicate `fire_key` makes that one statement fail,
//! which MySQL undoes without ending the transaction, so "skip if the key exists" is exact even
//! when two admins write the same key at once (the second waits for the first and then fails).
//! Keyed batches go in as multi-row inserts and their ids are read back by `fire_key`;
//! auto-increment ids of a multi-row insert are never assumed consecutive.

use std::collections::{HashMap, HashSet};

use crate::model::{LogId, NewRun};
use crate::store::dialect::Dialect;
use crate::store::error::{StoreError, StoreResult};
use crate::store::sql::{Cols, Sql};

/// Most rows per multi-row insert (17 values each: far below every parameter limit).
const INSERT_ROWS: usize = 500;
/// Most bytes of text per multi-row insert, well below MySQL's default `max_allowed_packet`
/// (16 MiB on MariaDB, 64 MiB on MySQL 8).
const INSERT_BYTES: usize = 4 << 20;

/// Builds `INSERT INTO xjob_log (…) VALUES (…), …` for a batch of runs.
pub type BuildInsert<DB> = for<'a> fn(&'a [NewRun], i64) -> Sql<'a, DB>;

/// Inserts runs that all carry a `fire_key`, skipping keys already present; returns the id
/// of each row this call wrote, aligned with `runs` (`None` where the key existed, or appeared
/// earlier in `runs`). `extra` is passed to `build` (a trigger time for rows written already
/// claimed).
pub async fn insert_keyed<DB: Dialect>(
    conn: &mut DB::Connection,
    runs: &[NewRun],
    build: BuildInsert<DB>,
    extra: i64,
) -> StoreResult<Vec<Option<LogId>>> {
    let mut written = Vec::with_capacity(runs.len());
    for batch in batches(runs) {
        if DB::INSERT_RETURNING {
            let rows = build(batch, extra)
                .push(" ON CONFLICT (fire_key) DO NOTHING RETURNING id, fire_key")
                .fetch_all(&mut *conn)
                .await?;
            // RETURNING has no order of its own: each returned key finds its row.
            let mut ids: HashMap<String, LogId> = HashMap::with_capacity(rows.len());
            for row in &rows {
                let row = Cols::<DB>(row);
                ids.insert(row.get("fire_key")?, row.get("id")?);
            }
            written.extend(
                batch
                    .iter()
                    .map(|run| run.fire_key.as_ref().and_then(|key| ids.remove(key))),
            );
        } else {
            written.extend(
                insert_keyed_without_returning::<DB>(&mut *conn, batch, build, extra).await?,
            );
        }
    }
    Ok(written)
}

/// `insert_keyed` for MySQL (see the module doc): keys already present are left out first;
/// the rest go in as one multi-row insert, which either writes every row (so each key read
/// back is ours) or, when a concurrent writer took a key meanwhile, fails as a whole and is
/// redone row by row. Returns the new ids aligned with `batch`.
async fn insert_keyed_without_returning<DB: Dialect>(
    conn: &mut DB::Connection,
    batch: &[NewRun],
    build: BuildInsert<DB>,
    extra: i64,
) -> StoreResult<Vec<Option<LogId>>> {
    let keys = batch
        .iter()
        .map(|run| {
            run.fire_key.clone().ok_or_else(|| {
                StoreError::Corrupt("keyed insert of a run without fire_key".to_string())
            })
        })
        .collect::<StoreResult<Vec<String>>>()?;
    let existing: HashSet<String> = fire_keys_in::<DB>(&mut *conn, &keys, "fire_key")
        .await?
        .into_iter()
        .map(|(_, key)| key)
        .collect();
    let mut seen = HashSet::new();
    // The positions in `batch` of the runs to write.
    let fresh: Vec<usize> = keys
        .iter()
        .enumerate()
        .filter(|(_, key)| !existing.contains(*key) && seen.insert(key.as_str()))
        .map(|(index, _)| index)
        .collect();
    let mut written = vec![None; batch.len()];
    if fresh.is_empty() {
        return Ok(written);
    }
    let fresh_runs: Vec<NewRun> = fresh.iter().map(|&index| batch[index].clone()).collect();
    match build(&fresh_runs, extra).execute(&mut *conn).await {
        Ok(_) => {
            let fresh_keys: Vec<String> = fresh.iter().map(|&index| keys[index].clone()).collect();
            let ids: HashMap<String, LogId> =
                fire_keys_in::<DB>(&mut *conn, &fresh_keys, "id, fire_key")
                    .await?
                    .into_iter()
                    .map(|(id, key)| (key, id))
                    .collect();
            for index in fresh {
                let key = &keys[index];
                let id = ids
                    .get(key)
                    .ok_or_else(|| StoreError::Corrupt(format!("inserted fire {key} not found")))?;
                written[index] = Some(*id);
            }
        }
        Err(StoreError::Conflict(_)) => {
            for (index, run) in fresh.into_iter().zip(&fresh_runs) {
                written[index] =
                    insert_one_unless_present::<DB>(&mut *conn, run, build, extra).await?;
            }
        }
        Err(error) => return Err(error),
    }
    Ok(written)
}

/// `(id, fire_key)` of the rows with the `keys` (`id` is 0 when `columns` leaves it out).
async fn fire_keys_in<DB: Dialect>(
    conn: &mut DB::Connection,
    keys: &[String],
    columns: &str,
) -> StoreResult<Vec<(LogId, String)>> {
    let mut select = Sql::<DB>::new(format!(
        "SELECT {columns} FROM xjob_log WHERE fire_key IN ("
    ));
    for (index, key) in keys.iter().enumerate() {
        if index > 0 {
            select.push_mut(", ");
        }
        select.bind_mut(key.as_str());
    }
    let rows = select.push(")").fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|row| {
            let row = Cols::<DB>(row);
            let id = if columns.starts_with("id") {
                row.get("id")?
            } else {
                LogId(0)
            };
            Ok((id, row.get("fire_key")?))
        })
        .collect()
}

/// Inserts one run unless its `fire_key` exists already (`None` then).
pub async fn insert_one_unless_present<DB: Dialect>(
    conn: &mut DB::Connection,
    run: &NewRun,
    build: BuildInsert<DB>,
    extra: i64,
) -> StoreResult<Option<LogId>> {
    if DB::INSERT_RETURNING {
        let ids = build(std::slice::from_ref(run), extra)
            .push(" ON CONFLICT (fire_key) DO NOTHING RETURNING id")
            .fetch_column::<LogId>(&mut *conn)
            .await?;
        return Ok(ids.first().copied());
    }
    let insert = build(std::slice::from_ref(run), extra);
    match super::insert_returning_id::<DB>(&mut *conn, insert).await {
        Ok(id) => Ok(Some(LogId(id))),
        Err(StoreError::Conflict(_)) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Inserts runs (no key, or keys that must not exist); returns their ids in the order of
/// `runs`: with `RETURNING`, a multi-row INSERT … VALUES returns its rows in the order of the
/// VALUES list; without it, each run is its own insert, whose insert id is exact whatever other
/// admins insert meanwhile.
pub async fn insert_all<DB: Dialect>(
    conn: &mut DB::Connection,
    runs: &[NewRun],
    build: BuildInsert<DB>,
    extra: i64,
) -> StoreResult<Vec<LogId>> {
    let mut ids = Vec::with_capacity(runs.len());
    if DB::INSERT_RETURNING {
        for batch in batches(runs) {
            let insert = build(batch, extra).push(" RETURNING id");
            ids.extend(insert.fetch_column::<LogId>(&mut *conn).await?);
        }
    } else {
        for run in runs {
            let insert = build(std::slice::from_ref(run), extra);
            ids.push(LogId(
                super::insert_returning_id::<DB>(&mut *conn, insert).await?,
            ));
        }
    }
    Ok(ids)
}

/// Splits runs into multi-row inserts bounded by row count and text size.
pub fn batches(runs: &[NewRun]) -> Vec<&[NewRun]> {
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
    use crate::model::{GroupId, JobId, RunStatus, TriggerType};

    fn run(params_bytes: usize) -> NewRun {
        NewRun {
            job_id: JobId(1),
            group_id: GroupId(1),
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
            trace_id: String::new(),
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
