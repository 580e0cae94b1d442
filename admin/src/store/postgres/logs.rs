//! Run logs: inserts for manual triggers, dispatch outcomes, executor results, queries.
//!
//! Batches touch their rows in id order, the order every multi-row statement of this backend
//! locks in, so a batch never deadlocks with another admin's claim or adoption.

use sqlx::{QueryBuilder, Row};

use super::rows::{LOG_COLUMNS, run_from_row};
use super::schedule::new_run_insert;
use super::{INSERT_BATCH, PgStore, map_error};
use crate::model::{LogFilter, NewRun, RunLog};
use crate::store::{DispatchOutcome, DispatchRecord, RunCompletion, StoreResult, batch_json};

// The batched writes below take the rows as one JSON array ($1, from `batch_json`) and their
// ids as an array ($2). The ids' rows are locked first, in id order (`ORDER BY id FOR UPDATE`
// in the subquery, which PostgreSQL runs before the update and re-checks on the newest row
// version after any lock wait); the update then joins the JSON rows to them. One statement per
// chunk, whose text never changes, so it stays prepared.

/// The rows of a dispatch batch (`batch_json::dispatches`) as table `r`.
macro_rules! dispatch_rows {
    () => {
        "jsonb_to_recordset($1::jsonb) AS r(id bigint, code integer, msg text, address text, \
         \"time\" bigint)"
    };
}

/// Accepted: the status stays as it is, since a fast executor's callback may already have
/// finished the run and that result must not be overwritten.
const RECORD_ACCEPTED: &str = concat!(
    "UPDATE xjob_log l SET trigger_code = r.code, trigger_msg = r.msg, \
     executor_address = r.address FROM ",
    dispatch_rows!(),
    " WHERE l.id = r.id AND l.id IN ( \
       SELECT id FROM xjob_log WHERE id = ANY($2) ORDER BY id FOR UPDATE)"
);

/// Not delivered: FAILED, unless a result arrived first.
const RECORD_FAILED: &str = concat!(
    "UPDATE xjob_log l SET status = 'FAILED', trigger_code = r.code, trigger_msg = r.msg, \
     executor_address = r.address, handle_time_ms = r.\"time\" FROM ",
    dispatch_rows!(),
    " WHERE l.id = r.id AND l.id IN ( \
       SELECT id FROM xjob_log WHERE id = ANY($2) AND handle_code = 0 \
       AND status IN ('PENDING', 'RUNNING') ORDER BY id FOR UPDATE)"
);

/// Not dispatched on purpose (the job was stopped after the fire was planned).
const RECORD_SKIPPED: &str = concat!(
    "UPDATE xjob_log l SET status = 'SKIPPED', trigger_msg = r.msg FROM ",
    dispatch_rows!(),
    " WHERE l.id = r.id AND l.id IN ( \
       SELECT id FROM xjob_log WHERE id = ANY($2) AND handle_code = 0 \
       AND status IN ('PENDING', 'RUNNING') ORDER BY id FOR UPDATE)"
);

/// Results (`batch_json::completions`, each run once) applied to runs not final yet; returns
/// the ids it finished. Of two admins applying the same result, the second waits for the
/// first's row lock, then finds the run final and leaves it. A success whose job has no child
/// jobs and is not FIX_DELAY (or no longer exists) needs no follow-up: its `alarm_status`
/// becomes 1 here, so the follow-up loop never claims it. The job row is only read, not locked.
const COMPLETE_RUNS: &str = "UPDATE xjob_log l SET status = r.status, handle_code = r.code, \
     handle_msg = r.msg, handle_time_ms = r.\"time\", \
     alarm_status = CASE WHEN r.status = 'SUCCESS' AND NOT EXISTS ( \
         SELECT 1 FROM xjob_job j WHERE j.id = l.job_id \
         AND (j.child_job_ids <> '' OR j.schedule_type = 'FIX_DELAY')) \
       THEN 1 ELSE l.alarm_status END \
     FROM jsonb_to_recordset($1::jsonb) \
       AS r(id bigint, status text, code integer, msg text, \"time\" bigint) \
     WHERE l.id = r.id AND l.id IN ( \
       SELECT id FROM xjob_log WHERE id = ANY($2) AND status IN ('PENDING', 'RUNNING') \
       ORDER BY id FOR UPDATE) \
     RETURNING l.id";

impl PgStore {
    pub async fn insert_runs(&self, runs: &[NewRun]) -> StoreResult<Vec<i64>> {
        let mut ids = Vec::with_capacity(runs.len());
        for chunk in runs.chunks(INSERT_BATCH) {
            // A multi-row INSERT … VALUES returns its rows in the order of the VALUES list.
            let mut query = new_run_insert(chunk);
            query.push(" RETURNING id");
            let rows = query
                .build()
                .fetch_all(&self.pool)
                .await
                .map_err(map_error)?;
            for row in rows {
                ids.push(row.try_get::<i64, _>("id").map_err(map_error)?);
            }
        }
        Ok(ids)
    }

    /// One UPDATE per outcome kind present (per chunk), the rows passed as one JSON parameter.
    pub async fn record_dispatches(&self, records: &[DispatchRecord]) -> StoreResult<()> {
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        for (outcome, sql) in [
            (DispatchOutcome::Accepted, RECORD_ACCEPTED),
            (DispatchOutcome::Failed, RECORD_FAILED),
            (DispatchOutcome::Skipped, RECORD_SKIPPED),
        ] {
            let of_kind = in_id_order(
                records.iter().filter(|record| record.outcome == outcome),
                |record| record.log_id,
            );
            for chunk in of_kind.chunks(batch_json::ROWS_PER_STATEMENT) {
                let ids: Vec<i64> = chunk.iter().map(|record| record.log_id).collect();
                sqlx::query(sql)
                    .bind(batch_json::dispatches(chunk))
                    .bind(ids)
                    .execute(&mut *tx)
                    .await
                    .map_err(map_error)?;
            }
        }
        tx.commit().await.map_err(map_error)
    }

    pub async fn complete_runs(&self, completions: &[RunCompletion]) -> StoreResult<Vec<i64>> {
        let completions = in_id_order(
            batch_json::first_completion_per_run(completions),
            |completion| completion.log_id,
        );
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let mut finished = Vec::with_capacity(completions.len());
        for chunk in completions.chunks(batch_json::ROWS_PER_STATEMENT) {
            let ids: Vec<i64> = chunk.iter().map(|completion| completion.log_id).collect();
            let mut changed: Vec<i64> = sqlx::query_scalar(COMPLETE_RUNS)
                .bind(batch_json::completions(chunk))
                .bind(ids)
                .fetch_all(&mut *tx)
                .await
                .map_err(map_error)?;
            changed.sort_unstable();
            finished.append(&mut changed);
        }
        tx.commit().await.map_err(map_error)?;
        Ok(finished)
    }

    pub async fn get_log(&self, id: i64) -> StoreResult<Option<RunLog>> {
        let row = sqlx::query(&format!("SELECT {LOG_COLUMNS} FROM xjob_log WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(map_error)?;
        row.as_ref().map(run_from_row).transpose()
    }

    pub async fn list_logs(&self, filter: &LogFilter) -> StoreResult<Vec<RunLog>> {
        let mut query =
            QueryBuilder::new(format!("SELECT {LOG_COLUMNS} FROM xjob_log WHERE 1 = 1"));
        if let Some(group_id) = filter.group_id {
            query.push(" AND group_id = ").push_bind(group_id);
        }
        if let Some(job_id) = filter.job_id {
            query.push(" AND job_id = ").push_bind(job_id);
        }
        if let Some(status) = filter.status {
            query.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(from_ms) = filter.from_ms {
            query.push(" AND trigger_time_ms >= ").push_bind(from_ms);
        }
        if let Some(to_ms) = filter.to_ms {
            query.push(" AND trigger_time_ms <= ").push_bind(to_ms);
        }
        query
            .push(" ORDER BY id DESC LIMIT ")
            .push_bind(filter.limit);
        query.push(" OFFSET ").push_bind(filter.offset);
        let rows = query
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(map_error)?;
        rows.iter().map(run_from_row).collect()
    }
}

/// The items sorted by log id (stable: repeats of one run keep their order), so every batch
/// locks its rows in id order, the order every multi-row statement of this backend locks in.
fn in_id_order<'a, T>(
    items: impl IntoIterator<Item = &'a T>,
    log_id: impl Fn(&T) -> i64,
) -> Vec<&'a T> {
    let mut sorted: Vec<&T> = items.into_iter().collect();
    sorted.sort_by_key(|item| log_id(item));
    sorted
}

/// What this backend's batched writes risk beyond the conformance suite: locks beyond the
/// batch's own rows, text through `jsonb`, two admins applying one batch. Skipped (with a
/// message) when `XJOB_TEST_POSTGRES_URL` is not set.
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::{Connection, PgConnection};

    use super::super::{create_scratch_database, test_server_url};
    use super::*;
    use crate::model::RunStatus;

    /// A fresh database, its URL and one job (CRON, no children), or `None` without a server.
    async fn scratch() -> Option<(PgStore, String, i64)> {
        let server = test_server_url()?;
        let url = create_scratch_database(&server)
            .await
            .expect("scratch database");
        let store = PgStore::connect(&url).await.expect("store connects");
        let job_id = new_job(&store, "CRON", "").await;
        Some((store, url, job_id))
    }

    async fn new_job(store: &PgStore, schedule_type: &str, child_job_ids: &str) -> i64 {
        sqlx::query_scalar(
            "INSERT INTO xjob_job (group_id, name, schedule_type, schedule_conf, \
             misfire_strategy, route_strategy, handler, block_strategy, glue_type, \
             child_job_ids, created_ms, updated_ms) VALUES (1, 'j', $1, '1', 'DO_NOTHING', \
             'FIRST', 'h', 'SERIAL_EXECUTION', 'BEAN', $2, 1, 1) RETURNING id",
        )
        .bind(schedule_type)
        .bind(child_job_ids)
        .fetch_one(&store.pool)
        .await
        .expect("job")
    }

    /// `count` RUNNING runs of `job_id`.
    async fn running_runs(store: &PgStore, job_id: i64, count: i64) -> Vec<i64> {
        sqlx::query_scalar(
            "INSERT INTO xjob_log (job_id, group_id, status, trigger_type, handler) \
             SELECT $1, 1, 'RUNNING', 'CRON', 'h' FROM generate_series(1, $2) ORDER BY 1 \
             RETURNING id",
        )
        .bind(job_id)
        .bind(count)
        .fetch_all(&store.pool)
        .await
        .expect("runs")
    }

    fn success(log_id: i64, handle_msg: &str) -> RunCompletion {
        RunCompletion {
            log_id,
            status: RunStatus::Success,
            handle_code: 200,
            handle_msg: handle_msg.to_string(),
            finished_ms: 7,
        }
    }

    async fn alarm_status(store: &PgStore, log_id: i64) -> i32 {
        sqlx::query_scalar("SELECT alarm_status FROM xjob_log WHERE id = $1")
            .bind(log_id)
            .fetch_one(&store.pool)
            .await
            .expect("alarm status")
    }

    #[tokio::test]
    async fn batches_lock_only_their_runs_never_the_job_row_and_keep_text_exactly() {
        let Some((store, url, job_id)) = scratch().await else {
            return;
        };
        let gone_job = job_id + 1_000;
        let with_children = new_job(&store, "CRON", &job_id.to_string()).await;
        let fix_delay = new_job(&store, "FIX_DELAY", "").await;
        let runs = running_runs(&store, job_id, 4).await;
        let of_gone_job = running_runs(&store, gone_job, 1).await[0];
        let of_parent = running_runs(&store, with_children, 1).await[0];
        let of_fix_delay = running_runs(&store, fix_delay, 1).await[0];

        // Another session holds every job row and one run outside the batches.
        let mut other = PgConnection::connect(&url).await.expect("connect");
        sqlx::query("BEGIN")
            .execute(&mut other)
            .await
            .expect("begin");
        sqlx::query("SELECT id FROM xjob_job FOR UPDATE")
            .fetch_all(&mut other)
            .await
            .expect("lock jobs");
        sqlx::query("SELECT id FROM xjob_log WHERE id = $1 FOR UPDATE")
            .bind(runs[1])
            .fetch_all(&mut other)
            .await
            .expect("lock a run");

        let tricky = "quote \" backslash \\ newline \n tab \t control \u{1} é 😀 '; --";
        let deadline = Duration::from_secs(5);
        let outcome = |log_id, outcome| DispatchRecord {
            log_id,
            outcome,
            trigger_code: 500,
            trigger_msg: format!("{tricky} {log_id}"),
            executor_address: "http://exécuteur:1".to_string(),
            finished_ms: 5,
        };
        tokio::time::timeout(
            deadline,
            store.record_dispatches(&[
                outcome(runs[3], DispatchOutcome::Skipped),
                outcome(runs[2], DispatchOutcome::Failed),
                outcome(runs[0], DispatchOutcome::Accepted),
            ]),
        )
        .await
        .expect("no lock wait")
        .expect("dispatches");
        let finished = tokio::time::timeout(
            deadline,
            store.complete_runs(&[
                success(of_fix_delay, "ok"),
                success(runs[0], tricky),
                success(runs[2], "late"),
                success(of_parent, "ok"),
                success(of_gone_job, "ok"),
                success(runs[0], "again"),
            ]),
        )
        .await
        .expect("no lock wait")
        .expect("results");
        assert_eq!(
            finished,
            vec![runs[0], of_gone_job, of_parent, of_fix_delay]
        );
        sqlx::query("ROLLBACK")
            .execute(&mut other)
            .await
            .expect("rollback");

        let run = store.get_log(runs[0]).await.expect("get").expect("run");
        assert_eq!(run.status, RunStatus::Success);
        assert_eq!(run.handle_msg, tricky);
        assert_eq!(run.trigger_msg, format!("{tricky} {}", runs[0]));
        assert_eq!(run.executor_address, "http://exécuteur:1");
        let failed = store.get_log(runs[2]).await.expect("get").expect("run");
        assert_eq!(
            (failed.status, failed.handle_time_ms),
            (RunStatus::Failed, 5)
        );
        let skipped = store.get_log(runs[3]).await.expect("get").expect("run");
        assert_eq!(skipped.status, RunStatus::Skipped);
        for (log_id, expected) in [
            (runs[0], 1),
            (of_gone_job, 1),
            (of_parent, 0),
            (of_fix_delay, 0),
        ] {
            assert_eq!(alarm_status(&store, log_id).await, expected, "run {log_id}");
        }
        store.close().await;
    }

    #[tokio::test]
    async fn admins_applying_the_same_results_together_finish_each_run_once() {
        let Some((store, url, job_id)) = scratch().await else {
            return;
        };
        let other = PgStore::connect(&url).await.expect("second admin");
        for round in 0..3 {
            // Past one statement's rows, so each admin writes two chunks.
            let ids = running_runs(&store, job_id, 1_100).await;
            let results: Vec<RunCompletion> = ids.iter().map(|&id| success(id, "ok")).collect();
            let reversed: Vec<RunCompletion> = results.iter().rev().cloned().collect();
            let (first, second) = tokio::join!(
                store.complete_runs(&results),
                other.complete_runs(&reversed)
            );
            let mut all = first.expect("first admin");
            all.extend(second.expect("second admin"));
            all.sort_unstable();
            assert_eq!(all, ids, "round {round}: every run finished exactly once");
        }
        other.close().await;
        store.close().await;
    }
}
