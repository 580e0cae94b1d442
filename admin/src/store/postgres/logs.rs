//! Run logs: inserts for manual triggers, dispatch outcomes, executor results, queries.
//!
//! Batches touch their rows in id order, the order every multi-row statement of this backend
//! locks in, so a batch never deadlocks with another admin's claim or adoption.

use super::{PgStore, map_error};
use crate::model::{LogId, NodeIdentity};
use crate::store::shared::logs::in_id_order;
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
         \"time\" bigint, trace text)"
    };
}

/// Accepted: the status stays as it is, since a fast executor's callback may already have
/// finished the run and that result must not be overwritten.
const RECORD_ACCEPTED: &str = concat!(
    "UPDATE xjob_log l SET trigger_code = r.code, trigger_msg = r.msg, \
     executor_address = r.address, trace_id = r.trace FROM ",
    dispatch_rows!(),
    " WHERE l.id = r.id AND l.id IN ( \
       SELECT id FROM xjob_log WHERE id = ANY($2) ORDER BY id FOR UPDATE)"
);

/// Not delivered: FAILED, unless a result arrived first, or another admin took the run over.
const RECORD_FAILED: &str = concat!(
    "UPDATE xjob_log l SET status = 'FAILED', trigger_code = r.code, trigger_msg = r.msg, \
     executor_address = r.address, handle_time_ms = r.\"time\", trace_id = r.trace FROM ",
    dispatch_rows!(),
    " WHERE l.id = r.id AND l.id IN ( \
       SELECT id FROM xjob_log WHERE id = ANY($2) AND handle_code = 0 \
       AND status IN ('PENDING', 'RUNNING') AND owner_node = $3 AND epoch = $4 \
       ORDER BY id FOR UPDATE)"
);

/// Not dispatched on purpose (the job was stopped after the fire was planned), unless another
/// admin took the run over.
const RECORD_SKIPPED: &str = concat!(
    "UPDATE xjob_log l SET status = 'SKIPPED', trigger_msg = r.msg, trace_id = r.trace FROM ",
    dispatch_rows!(),
    " WHERE l.id = r.id AND l.id IN ( \
       SELECT id FROM xjob_log WHERE id = ANY($2) AND handle_code = 0 \
       AND status IN ('PENDING', 'RUNNING') AND owner_node = $3 AND epoch = $4 \
       ORDER BY id FOR UPDATE)"
);

/// Results (`batch_json::completions`, each run once, with the accepted dispatch outcome of
/// those that have one folded in) applied to runs not final yet; returns
/// the ids it finished. Of two admins applying the same result, the second waits for the
/// first's row lock, then finds the run final and leaves it. A success that is no workflow
/// node's run, whose job has no child jobs and is not FIX_DELAY (or no longer exists), needs
/// no follow-up: its `alarm_status` becomes 1 here, so the follow-up loop never claims it. The
/// job row is only read, not locked.
const COMPLETE_RUNS: &str = "UPDATE xjob_log l SET status = r.status, handle_code = r.code, \
     handle_msg = r.msg, handle_time_ms = r.\"time\", \
     trigger_code = COALESCE(r.tcode, l.trigger_code), \
     trigger_msg = COALESCE(r.tmsg, l.trigger_msg), \
     executor_address = COALESCE(r.taddress, l.executor_address), \
     trace_id = COALESCE(r.ttrace, l.trace_id), \
     alarm_status = CASE WHEN r.status = 'SUCCESS' AND l.trigger_type <> 'WORKFLOW' \
       AND NOT EXISTS ( \
         SELECT 1 FROM xjob_job j WHERE j.id = l.job_id \
         AND (j.child_job_ids <> '' OR j.schedule_type = 'FIX_DELAY')) \
       THEN 1 ELSE l.alarm_status END \
     FROM jsonb_to_recordset($1::jsonb) \
       AS r(id bigint, status text, code integer, msg text, \"time\" bigint, \
         tcode integer, tmsg text, taddress text, ttrace text) \
     WHERE l.id = r.id AND l.id IN ( \
       SELECT id FROM xjob_log WHERE id = ANY($2) AND status IN ('PENDING', 'RUNNING') \
       ORDER BY id FOR UPDATE) \
     RETURNING l.id";

impl PgStore {
    /// One UPDATE per outcome kind present (per chunk), the rows passed as one JSON parameter.
    pub async fn record_dispatches(
        &self,
        node: &NodeIdentity,
        records: &[DispatchRecord],
    ) -> StoreResult<()> {
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
                let ids: Vec<i64> = chunk.iter().map(|record| record.log_id.0).collect();
                let mut query = sqlx::query(sql)
                    .bind(batch_json::dispatches(chunk))
                    .bind(ids);
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
        let completions = in_id_order(
            batch_json::first_completion_per_run(completions),
            |completion| completion.log_id,
        );
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let mut finished = Vec::with_capacity(completions.len());
        for chunk in completions.chunks(batch_json::ROWS_PER_STATEMENT) {
            let ids: Vec<i64> = chunk.iter().map(|completion| completion.log_id.0).collect();
            let mut changed: Vec<i64> = sqlx::query_scalar(COMPLETE_RUNS)
                .bind(batch_json::completions(chunk, &folded))
                .bind(ids)
                .fetch_all(&mut *tx)
                .await
                .map_err(map_error)?;
            changed.sort_unstable();
            finished.extend(changed.into_iter().map(LogId));
        }
        tx.commit().await.map_err(map_error)?;
        Ok(finished)
    }
}
