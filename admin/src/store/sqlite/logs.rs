//! Run logs: inserts for manual triggers, dispatch outcomes, executor results, queries.

use sqlx::Row;

use super::batch_values::{BatchStatement, ROWS_PER_STATEMENT, SqliteQuery};
use super::{SqliteStore, map_error};
use crate::model::{LogId, NodeIdentity};
use crate::store::batch_json;
use crate::store::{DispatchOutcome, DispatchRecord, RunCompletion, StoreResult};

// In the batched UPDATEs below, `+column` keeps SQLite from using an index on that column: the
// plan must walk the batch and find each row by id. Left to itself, the planner walks every open
// run through the status index and scans the batch for each, which grows with the table.

/// The columns of one batch of dispatch outcomes, table `r`.
const DISPATCH_COLUMNS: &[&str] = &["id", "code", "msg", "address", "time", "trace"];

/// Accepted: the status stays as it is, since a fast executor's callback may already have
/// finished the run and that result must not be overwritten.
static RECORD_ACCEPTED: BatchStatement = BatchStatement::new(
    DISPATCH_COLUMNS,
    "UPDATE xjob_log SET trigger_code = r.code, trigger_msg = r.msg, \
     executor_address = r.address, trace_id = r.trace FROM r WHERE xjob_log.id = r.id",
);

/// Not delivered: FAILED, unless a result arrived first, or another admin took the run over.
static RECORD_FAILED: BatchStatement = BatchStatement::new(
    DISPATCH_COLUMNS,
    "UPDATE xjob_log SET status = 'FAILED', trigger_code = r.code, trigger_msg = r.msg, \
     executor_address = r.address, handle_time_ms = r.time, trace_id = r.trace FROM r \
     WHERE xjob_log.id = r.id AND +xjob_log.handle_code = 0 \
     AND +xjob_log.status IN ('PENDING', 'RUNNING') \
     AND +xjob_log.owner_node = ? AND +xjob_log.epoch = ?",
);

/// Not dispatched on purpose (the job was stopped after the fire was planned), unless another
/// admin took the run over.
static RECORD_SKIPPED: BatchStatement = BatchStatement::new(
    DISPATCH_COLUMNS,
    "UPDATE xjob_log SET status = 'SKIPPED', trigger_msg = r.msg, trace_id = r.trace FROM r \
     WHERE xjob_log.id = r.id AND +xjob_log.handle_code = 0 \
     AND +xjob_log.status IN ('PENDING', 'RUNNING') \
     AND +xjob_log.owner_node = ? AND +xjob_log.epoch = ?",
);

/// Results applied to runs not final yet; `tcode` … `ttrace` are a dispatch outcome folded in
/// (`batch_json::folded`), NULL where there is none, and the row keeps its own. A success whose
/// job has no child jobs and is not FIX_DELAY, and that is no workflow node's run, needs no
/// follow-up: its `alarm_status` becomes 1 here, so the follow-up loop never claims it.
static COMPLETE_RUNS: BatchStatement = BatchStatement::new(
    &[
        "id", "status", "code", "msg", "time", "tcode", "tmsg", "taddress", "ttrace",
    ],
    "UPDATE xjob_log SET status = r.status, handle_code = r.code, \
     handle_msg = r.msg, handle_time_ms = r.time, \
     trigger_code = COALESCE(r.tcode, xjob_log.trigger_code), \
     trigger_msg = COALESCE(r.tmsg, xjob_log.trigger_msg), \
     executor_address = COALESCE(r.taddress, xjob_log.executor_address), \
     trace_id = COALESCE(r.ttrace, xjob_log.trace_id), \
     alarm_status = CASE WHEN r.status = 'SUCCESS' AND xjob_log.trigger_type <> 'WORKFLOW' \
       AND NOT EXISTS ( \
         SELECT 1 FROM xjob_job j WHERE j.id = xjob_log.job_id \
         AND (j.child_job_ids <> '' OR j.schedule_type = 'FIX_DELAY')) \
       THEN 1 ELSE xjob_log.alarm_status END \
     FROM r WHERE xjob_log.id = r.id AND +xjob_log.status IN ('PENDING', 'RUNNING') \
     RETURNING xjob_log.id",
);

/// One statement for `chunk`'s dispatch outcomes (at most `ROWS_PER_STATEMENT`).
fn bind_dispatches<'q>(
    statement: &'static BatchStatement,
    chunk: &[&'q DispatchRecord],
) -> SqliteQuery<'q> {
    let (text, size) = statement.text_for(chunk.len());
    let mut query = sqlx::query(text);
    for record in chunk {
        query = query
            .bind(record.log_id.0)
            .bind(record.trigger_code)
            .bind(record.trigger_msg.as_str())
            .bind(record.executor_address.as_str())
            .bind(record.finished_ms)
            .bind(record.trace_id.as_str());
    }
    statement.pad(query, chunk.len(), size)
}

/// One statement for `chunk`'s results, with the outcomes `folded` into them.
fn bind_completions<'q>(
    chunk: &[&'q RunCompletion],
    folded: &batch_json::Folded<'q>,
) -> SqliteQuery<'q> {
    let (text, size) = COMPLETE_RUNS.text_for(chunk.len());
    let mut query = sqlx::query(text);
    for completion in chunk {
        let outcome = folded.get(&completion.log_id);
        query = query
            .bind(completion.log_id.0)
            .bind(completion.status.as_str())
            .bind(completion.handle_code)
            .bind(completion.handle_msg.as_str())
            .bind(completion.finished_ms)
            .bind(outcome.map(|record| record.trigger_code))
            .bind(outcome.map(|record| record.trigger_msg.as_str()))
            .bind(outcome.map(|record| record.executor_address.as_str()))
            .bind(outcome.map(|record| record.trace_id.as_str()));
    }
    COMPLETE_RUNS.pad(query, chunk.len(), size)
}

impl SqliteStore {
    /// One UPDATE per outcome kind present, the rows bound as a `VALUES` list.
    pub async fn record_dispatches(
        &self,
        node: &NodeIdentity,
        records: &[DispatchRecord],
    ) -> StoreResult<()> {
        let mut tx = self.pools().begin().await?;
        for (outcome, statement) in [
            (DispatchOutcome::Accepted, &RECORD_ACCEPTED),
            (DispatchOutcome::Failed, &RECORD_FAILED),
            (DispatchOutcome::Skipped, &RECORD_SKIPPED),
        ] {
            let of_kind: Vec<&DispatchRecord> = records
                .iter()
                .filter(|record| record.outcome == outcome)
                .collect();
            for chunk in of_kind.chunks(ROWS_PER_STATEMENT) {
                let mut query = bind_dispatches(statement, chunk);
                if outcome != DispatchOutcome::Accepted {
                    query = query.bind(node.node_id.as_str()).bind(node.epoch);
                }
                query.execute(&mut *tx).await.map_err(map_error)?;
            }
        }
        tx.commit().await.map_err(map_error)
    }

    pub async fn complete_runs_folding(
        &self,
        completions: &[RunCompletion],
        accepted: &[DispatchRecord],
    ) -> StoreResult<Vec<LogId>> {
        let folded = batch_json::folded(accepted);
        let completions = batch_json::first_completion_per_run(completions);
        let mut tx = self.pools().begin().await?;
        let mut finished = Vec::with_capacity(completions.len());
        for chunk in completions.chunks(ROWS_PER_STATEMENT) {
            let rows = bind_completions(chunk, &folded)
                .fetch_all(&mut *tx)
                .await
                .map_err(map_error)?;
            for row in rows {
                finished.push(LogId(row.try_get::<i64, _>("id").map_err(map_error)?));
            }
        }
        tx.commit().await.map_err(map_error)?;
        Ok(finished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batched UPDATEs must find each row of the batch by id; a plan that walks the open
    /// runs instead costs a batch scan per open run.
    #[tokio::test]
    async fn batched_updates_find_rows_by_id() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("plan.db").display());
        let store = SqliteStore::connect(&url).await.expect("store opens");
        for statement in [
            &RECORD_ACCEPTED,
            &RECORD_FAILED,
            &RECORD_SKIPPED,
            &COMPLETE_RUNS,
        ] {
            for rows in [1, ROWS_PER_STATEMENT] {
                let (text, _) = statement.text_for(rows);
                let explain = format!("EXPLAIN QUERY PLAN {text}");
                let mut query = sqlx::query(&explain);
                for _ in 0..text.matches('?').count() {
                    query = query.bind(None::<i64>);
                }
                let rows = query.fetch_all(&store.writer).await.expect("plan");
                let plan: Vec<String> = rows
                    .iter()
                    .map(|row| row.try_get::<String, _>("detail").expect("detail"))
                    .collect();
                let plan = plan.join("\n");
                assert!(
                    plan.contains("SCAN r")
                        && plan.contains("SEARCH xjob_log USING INTEGER PRIMARY KEY"),
                    "{}\n{plan}",
                    statement.body()
                );
            }
        }
        store.close().await;
    }
}
