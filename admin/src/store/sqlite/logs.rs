//! Run logs: inserts for manual triggers, dispatch outcomes, executor results, queries.

use sqlx::Row;

use super::{SqliteStore, map_error};
use crate::model::{LogId, NodeIdentity};
use crate::store::batch_json;
use crate::store::{DispatchOutcome, DispatchRecord, RunCompletion, StoreResult};

// In the batched UPDATEs below, `+column` keeps SQLite from using an index on that column: the
// plan must walk the batch and find each row by id. Left to itself, the planner walks every open
// run through the status index and scans the batch for each, which grows with the table.

/// The rows of one batch (`batch_json::dispatches`) as table `r`.
macro_rules! dispatch_rows {
    () => {
        "(SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.code') AS code, \
         json_extract(value, '$.msg') AS msg, json_extract(value, '$.address') AS address, \
         json_extract(value, '$.time') AS time, json_extract(value, '$.trace') AS trace \
         FROM json_each(?)) AS r"
    };
}

/// Accepted: the status stays as it is, since a fast executor's callback may already have
/// finished the run and that result must not be overwritten.
const RECORD_ACCEPTED: &str = concat!(
    "UPDATE xjob_log SET trigger_code = r.code, trigger_msg = r.msg, \
     executor_address = r.address, trace_id = r.trace FROM ",
    dispatch_rows!(),
    " WHERE xjob_log.id = r.id"
);

/// Not delivered: FAILED, unless a result arrived first, or another admin took the run over.
const RECORD_FAILED: &str = concat!(
    "UPDATE xjob_log SET status = 'FAILED', trigger_code = r.code, trigger_msg = r.msg, \
     executor_address = r.address, handle_time_ms = r.time, trace_id = r.trace FROM ",
    dispatch_rows!(),
    " WHERE xjob_log.id = r.id AND +xjob_log.handle_code = 0 \
     AND +xjob_log.status IN ('PENDING', 'RUNNING') \
     AND +xjob_log.owner_node = ? AND +xjob_log.epoch = ?"
);

/// Not dispatched on purpose (the job was stopped after the fire was planned), unless another
/// admin took the run over.
const RECORD_SKIPPED: &str = concat!(
    "UPDATE xjob_log SET status = 'SKIPPED', trigger_msg = r.msg, trace_id = r.trace FROM ",
    dispatch_rows!(),
    " WHERE xjob_log.id = r.id AND +xjob_log.handle_code = 0 \
     AND +xjob_log.status IN ('PENDING', 'RUNNING') \
     AND +xjob_log.owner_node = ? AND +xjob_log.epoch = ?"
);

/// Results (`batch_json::completions`) applied to runs not final yet. A success whose job has
/// no child jobs and is not FIX_DELAY, and that is no workflow node's run, needs no follow-up: its `alarm_status` becomes 1 here, so
/// the follow-up loop never claims it.
const COMPLETE_RUNS: &str = "UPDATE xjob_log SET status = r.status, handle_code = r.code, \
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
     FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.status') AS status, \
       json_extract(value, '$.code') AS code, json_extract(value, '$.msg') AS msg, \
       json_extract(value, '$.time') AS time, json_extract(value, '$.tcode') AS tcode, \
       json_extract(value, '$.tmsg') AS tmsg, json_extract(value, '$.taddress') AS taddress, \
       json_extract(value, '$.ttrace') AS ttrace FROM json_each(?)) AS r \
     WHERE xjob_log.id = r.id AND +xjob_log.status IN ('PENDING', 'RUNNING') \
     RETURNING xjob_log.id";

impl SqliteStore {
    /// One UPDATE per outcome kind present, the rows passed as one JSON parameter.
    pub async fn record_dispatches(
        &self,
        node: &NodeIdentity,
        records: &[DispatchRecord],
    ) -> StoreResult<()> {
        let mut tx = self.pools().begin().await?;
        for (outcome, sql) in [
            (DispatchOutcome::Accepted, RECORD_ACCEPTED),
            (DispatchOutcome::Failed, RECORD_FAILED),
            (DispatchOutcome::Skipped, RECORD_SKIPPED),
        ] {
            let of_kind: Vec<&DispatchRecord> = records
                .iter()
                .filter(|record| record.outcome == outcome)
                .collect();
            for chunk in of_kind.chunks(batch_json::ROWS_PER_STATEMENT) {
                let mut query = sqlx::query(sql).bind(batch_json::dispatches(chunk));
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
        for chunk in completions.chunks(batch_json::ROWS_PER_STATEMENT) {
            let rows = sqlx::query(COMPLETE_RUNS)
                .bind(batch_json::completions(chunk, &folded))
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
        for sql in [
            RECORD_ACCEPTED,
            RECORD_FAILED,
            RECORD_SKIPPED,
            COMPLETE_RUNS,
        ] {
            let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
                .bind("[]")
                .fetch_all(&store.writer)
                .await
                .expect("plan");
            let plan: Vec<String> = rows
                .iter()
                .map(|row| row.try_get::<String, _>("detail").expect("detail"))
                .collect();
            let plan = plan.join("\n");
            assert!(
                plan.contains("SCAN json_each")
                    && plan.contains("SEARCH xjob_log USING INTEGER PRIMARY KEY"),
                "{sql}\n{plan}"
            );
        }
        store.close().await;
    }
}
