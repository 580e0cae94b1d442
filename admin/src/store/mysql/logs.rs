//! Run logs: inserts for manual triggers, dispatch outcomes, executor results, queries.

use super::{MySqlStore, map_error};
use crate::model::{LogId, NodeIdentity};
use crate::store::shared::logs::in_id_order;
use crate::store::{DispatchOutcome, DispatchRecord, RunCompletion, StoreResult, batch_json};

// The batched writes below take their rows as one JSON array, unpacked by `JSON_TABLE` and
// joined to `xjob_log` in a multi-table UPDATE: one statement per chunk, whose text never
// changes, so it stays prepared. `JSON_TABLE … STRAIGHT_JOIN xjob_log FORCE INDEX (PRIMARY)`
// makes InnoDB walk the JSON rows (sorted by id) and look each run up by primary key, so it
// locks exactly the batch's rows, in id order; the optimizer would otherwise scan a small
// `xjob_log` whole, locking (or waiting for) rows outside the batch. Text columns are declared
// utf8mb4: a `JSON_TABLE` column otherwise gets a default character set, which may be latin1
// (an emoji would become '?').

/// The rows of a dispatch batch (`batch_json::dispatches`) as table `r`, joined to `l`.
macro_rules! dispatch_rows {
    () => {
        "JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$.id', code INT PATH '$.code', \
         msg LONGTEXT CHARACTER SET utf8mb4 PATH '$.msg', \
         address LONGTEXT CHARACTER SET utf8mb4 PATH '$.address', \
         `time` BIGINT PATH '$.time', \
         trace VARCHAR(64) CHARACTER SET utf8mb4 PATH '$.trace')) \
         r STRAIGHT_JOIN xjob_log l FORCE INDEX (PRIMARY) ON l.id = r.id"
    };
}

/// Accepted: the status stays as it is, since a fast executor's callback may already have
/// finished the run and that result must not be overwritten.
const RECORD_ACCEPTED: &str = concat!(
    "UPDATE ",
    dispatch_rows!(),
    " SET l.trigger_code = r.code, l.trigger_msg = r.msg, l.executor_address = r.address, \
     l.trace_id = r.trace"
);

/// Not delivered: FAILED, unless a result arrived first.
const RECORD_FAILED: &str = concat!(
    "UPDATE ",
    dispatch_rows!(),
    " SET l.status = 'FAILED', l.trigger_code = r.code, l.trigger_msg = r.msg, \
     l.executor_address = r.address, l.handle_time_ms = r.`time`, l.trace_id = r.trace \
     WHERE l.handle_code = 0 AND l.status IN ('PENDING', 'RUNNING') \
     AND l.owner_node = ? AND l.epoch = ?"
);

/// Not dispatched on purpose (the job was stopped after the fire was planned).
const RECORD_SKIPPED: &str = concat!(
    "UPDATE ",
    dispatch_rows!(),
    " SET l.status = 'SKIPPED', l.trigger_msg = r.msg, l.trace_id = r.trace \
     WHERE l.handle_code = 0 AND l.status IN ('PENDING', 'RUNNING') \
     AND l.owner_node = ? AND l.epoch = ?"
);

/// Locks the runs of a batch of results (a JSON array of ids, ascending) that are not final
/// yet, in id order, and tells for each whether its success needs a follow-up (it is a
/// workflow node's run, or its job has child jobs or is FIX_DELAY). A locking read sees the
/// newest committed row after any lock wait, so of two admins applying the same result the
/// second finds the run final and leaves it. The job row is read by a subquery, which `FOR UPDATE` does not lock: a multi-table
/// UPDATE reading `xjob_job` would take shared locks on job rows, which the schedule round and
/// FIX_DELAY follow-ups hold exclusively.
const LOCK_OPEN_RUNS: &str = "SELECT l.id, (l.trigger_type = 'WORKFLOW' OR EXISTS (SELECT 1 \
       FROM xjob_job j WHERE j.id = l.job_id \
       AND (j.child_job_ids <> '' OR j.schedule_type = 'FIX_DELAY'))) AS needs_followup \
     FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) r \
     STRAIGHT_JOIN xjob_log l FORCE INDEX (PRIMARY) ON l.id = r.id \
     WHERE l.status IN ('PENDING', 'RUNNING') ORDER BY l.id FOR UPDATE";

/// Results (`batch_json::completions_with_quiet`) applied to runs `LOCK_OPEN_RUNS` locked. A success that needs
/// no follow-up (`quiet`) gets `alarm_status` 1, so the follow-up loop never claims it.
const COMPLETE_RUNS: &str = "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$.id', \
       status VARCHAR(16) CHARACTER SET utf8mb4 PATH '$.status', code INT PATH '$.code', \
       msg LONGTEXT CHARACTER SET utf8mb4 PATH '$.msg', `time` BIGINT PATH '$.time', \
       quiet INT PATH '$.quiet', tcode INT PATH '$.tcode', \
       tmsg LONGTEXT CHARACTER SET utf8mb4 PATH '$.tmsg', \
       taddress LONGTEXT CHARACTER SET utf8mb4 PATH '$.taddress', \
       ttrace VARCHAR(64) CHARACTER SET utf8mb4 PATH '$.ttrace')) r \
     STRAIGHT_JOIN xjob_log l FORCE INDEX (PRIMARY) ON l.id = r.id \
     SET l.status = r.status, l.handle_code = r.code, l.handle_msg = r.msg, \
       l.handle_time_ms = r.`time`, \
       l.trigger_code = COALESCE(r.tcode, l.trigger_code), \
       l.trigger_msg = COALESCE(r.tmsg, l.trigger_msg), \
       l.executor_address = COALESCE(r.taddress, l.executor_address), \
       l.trace_id = COALESCE(r.ttrace, l.trace_id), \
       l.alarm_status = CASE WHEN r.quiet = 1 THEN 1 ELSE l.alarm_status END \
     WHERE l.status IN ('PENDING', 'RUNNING')";

/// Most bytes of JSON one statement carries: a statement and its parameter travel in one
/// packet, which must stay under the server's `max_allowed_packet` (16 MiB by default on
/// MariaDB) even when executors report long messages.
const JSON_BYTES_PER_STATEMENT: usize = 4 * 1024 * 1024;
/// JSON bytes of a row besides its text (keys, numbers, punctuation), a generous bound.
const JSON_BYTES_PER_ROW: usize = 160;

impl MySqlStore {
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
            let text_len = |record: &DispatchRecord| {
                json_len(&record.trigger_msg)
                    + json_len(&record.executor_address)
                    + json_len(&record.trace_id)
            };
            for chunk in statement_chunks(&of_kind, text_len) {
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
        let completions = in_id_order(
            batch_json::first_completion_per_run(completions),
            |completion| completion.log_id,
        );
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let mut finished = Vec::with_capacity(completions.len());
        for chunk in completions.chunks(batch_json::ROWS_PER_STATEMENT) {
            let ids: Vec<i64> = chunk.iter().map(|completion| completion.log_id.0).collect();
            let open: Vec<(i64, bool)> = sqlx::query_as(LOCK_OPEN_RUNS)
                .bind(serde_json::Value::from(ids).to_string())
                .fetch_all(&mut *tx)
                .await
                .map_err(map_error)?;
            // The results of the locked runs, with their follow-up need (both in id order).
            let mut open_runs = open.iter().peekable();
            let mut locked = Vec::with_capacity(open.len());
            for completion in chunk {
                if let Some(&(_, needs_followup)) =
                    open_runs.next_if(|(id, _)| *id == completion.log_id.0)
                {
                    locked.push((*completion, needs_followup));
                }
            }
            let text_len = |(completion, _): &(&RunCompletion, bool)| {
                let folded_len = folded.get(&completion.log_id).map_or(0, |record| {
                    JSON_BYTES_PER_ROW
                        + json_len(&record.trigger_msg)
                        + json_len(&record.executor_address)
                        + json_len(&record.trace_id)
                });
                json_len(&completion.handle_msg) + folded_len
            };
            let locked: Vec<&(&RunCompletion, bool)> = locked.iter().collect();
            for part in statement_chunks(&locked, text_len) {
                sqlx::query(COMPLETE_RUNS)
                    .bind(batch_json::completions_with_quiet(part, &folded))
                    .execute(&mut *tx)
                    .await
                    .map_err(map_error)?;
            }
            finished.extend(open.iter().map(|&(id, _)| LogId(id)));
        }
        tx.commit().await.map_err(map_error)?;
        Ok(finished)
    }
}

/// `items` cut into statements of at most `batch_json::ROWS_PER_STATEMENT` rows and
/// `JSON_BYTES_PER_STATEMENT` bytes of JSON, given `text_len`, the JSON bytes of a row's text
/// (a single longer row gets a statement of its own).
fn statement_chunks<'a, T>(items: &'a [&'a T], text_len: impl Fn(&T) -> usize) -> Vec<&'a [&'a T]> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (index, item) in items.iter().enumerate() {
        let row_bytes = text_len(item) + JSON_BYTES_PER_ROW;
        let full = index - start == batch_json::ROWS_PER_STATEMENT
            || bytes + row_bytes > JSON_BYTES_PER_STATEMENT;
        if full && index > start {
            chunks.push(&items[start..index]);
            (start, bytes) = (index, 0);
        }
        bytes += row_bytes;
    }
    if start < items.len() {
        chunks.push(&items[start..]);
    }
    chunks
}

/// The bytes of `text` as a JSON string (serde_json escapes quotes, backslashes and control
/// characters), quotes included.
fn json_len(text: &str) -> usize {
    let escaped: usize = text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum();
    escaped + 2
}

/// What only this backend's batched writes risk: a statement past `max_allowed_packet`, text in
/// a `JSON_TABLE` column's character set (locks beyond the batch's own rows: conformance suite). Skipped (with a
/// message) when `XJOB_TEST_MYSQL_URL` is not set.
#[cfg(test)]
mod tests {

    use super::super::create_scratch_database;
    use super::*;
    use crate::model::RunStatus;

    /// A fresh database, its URL and one job (CRON, no children), or `None` without a server.
    async fn scratch() -> Option<(MySqlStore, String, i64)> {
        let Ok(base_url) = std::env::var("XJOB_TEST_MYSQL_URL") else {
            eprintln!("skipping the mysql backend test: XJOB_TEST_MYSQL_URL is not set");
            return None;
        };
        let url = create_scratch_database(&base_url)
            .await
            .expect("scratch database");
        let store = MySqlStore::connect(&url).await.expect("store connects");
        let job_id = new_job(&store, "CRON", "").await;
        Some((store, url, job_id))
    }

    async fn new_job(store: &MySqlStore, schedule_type: &str, child_job_ids: &str) -> i64 {
        let result = sqlx::query(
            "INSERT INTO xjob_job (group_id, name, author, alarm_email, schedule_type, \
             schedule_conf, misfire_strategy, route_strategy, handler, params, block_strategy, \
             glue_type, glue_source, glue_remark, child_job_ids, created_ms, updated_ms) \
             VALUES (1, 'j', '', '', ?, '1', 'DO_NOTHING', 'FIRST', 'h', '', \
             'SERIAL_EXECUTION', 'BEAN', '', '', ?, 1, 1)",
        )
        .bind(schedule_type)
        .bind(child_job_ids)
        .execute(&store.pool)
        .await
        .expect("job");
        result.last_insert_id() as i64
    }

    /// `count` RUNNING runs of `job_id`.
    async fn running_runs(store: &MySqlStore, job_id: i64, count: usize) -> Vec<i64> {
        let mut ids = Vec::with_capacity(count);
        for _ in 0..count {
            let result = sqlx::query(
                "INSERT INTO xjob_log (job_id, group_id, status, trigger_type, trigger_msg, \
                 handle_msg, executor_address, handler, params) \
                 VALUES (?, 1, 'RUNNING', 'CRON', '', '', '', 'h', '')",
            )
            .bind(job_id)
            .execute(&store.pool)
            .await
            .expect("run");
            ids.push(result.last_insert_id() as i64);
        }
        ids
    }

    fn success(log_id: i64, handle_msg: &str) -> RunCompletion {
        RunCompletion {
            log_id: LogId(log_id),
            status: RunStatus::Success,
            handle_code: 200,
            handle_msg: handle_msg.to_string(),
            finished_ms: 7,
        }
    }

    async fn alarm_status(store: &MySqlStore, log_id: i64) -> i32 {
        sqlx::query_scalar("SELECT alarm_status FROM xjob_log WHERE id = ?")
            .bind(log_id)
            .fetch_one(&store.pool)
            .await
            .expect("alarm status")
    }

    #[test]
    fn statements_are_bounded_by_rows_and_by_text() {
        let short: Vec<String> = vec!["x".to_string(); 2_500];
        let items: Vec<&String> = short.iter().collect();
        let sizes: Vec<usize> = statement_chunks(&items, |text| json_len(text))
            .iter()
            .map(|chunk| chunk.len())
            .collect();
        assert_eq!(sizes, vec![1_000, 1_000, 500]);

        let long: Vec<String> = vec!["y".repeat(1_000_000); 30];
        let items: Vec<&String> = long.iter().collect();
        let chunks = statement_chunks(&items, |text| json_len(text));
        assert!(chunks.len() > 1);
        assert_eq!(chunks.iter().map(|chunk| chunk.len()).sum::<usize>(), 30);
        for chunk in chunks {
            let rows: Vec<&String> = chunk.to_vec();
            let json = serde_json::to_string(&rows).expect("json");
            assert!(json.len() <= JSON_BYTES_PER_STATEMENT);
        }
        let huge = "z".repeat(JSON_BYTES_PER_STATEMENT);
        assert_eq!(
            statement_chunks(&[&huge, &huge], |text| json_len(text)).len(),
            2
        );
        assert!(statement_chunks::<String>(&[], |text| json_len(text)).is_empty());
    }

    #[test]
    fn json_lengths_are_those_serde_json_writes() {
        for text in [
            "",
            "plain",
            "quote \" backslash \\ newline \n nul \u{0} é 😀 \u{1f}",
        ] {
            assert_eq!(
                json_len(text),
                serde_json::to_string(text).expect("json").len(),
                "{text:?}"
            );
        }
    }

    #[tokio::test]
    async fn long_and_unusual_text_is_written_exactly_whatever_the_batch_size() {
        let Some((store, _url, job_id)) = scratch().await else {
            return;
        };
        // 1 100 runs (two statements by rows) with messages of 15 000 two-byte characters:
        // 33 MB of results, past MariaDB's default max_allowed_packet (16 MiB) were the first
        // 1 000 one statement.
        let ids = running_runs(&store, job_id, 1_100).await;
        let tricky = "quote \" backslash \\ newline \n tab \t control \u{1} é 😀 '; --";
        let message = |id: i64| {
            let mut text = format!("{id} {tricky} ");
            text.push_str(&"é".repeat(15_000 - text.chars().count()));
            text
        };
        let records: Vec<DispatchRecord> = ids
            .iter()
            .map(|&log_id| DispatchRecord {
                log_id: LogId(log_id),
                outcome: DispatchOutcome::Accepted,
                trigger_code: 200,
                trigger_msg: message(log_id),
                executor_address: format!("http://exécuteur-{log_id}:1"),
                finished_ms: 5,
                trace_id: String::new(),
            })
            .collect();
        store
            .record_dispatches(&crate::model::NodeIdentity::new("n1", 1), &records)
            .await
            .expect("dispatches");
        let completions: Vec<RunCompletion> = ids
            .iter()
            .rev()
            .map(|&log_id| success(log_id, &message(log_id)))
            .collect();
        let mut finished = store
            .complete_runs_folding(&completions, &[])
            .await
            .expect("results");
        finished.sort_unstable();
        assert_eq!(finished, ids.iter().copied().map(LogId).collect::<Vec<_>>());
        for &log_id in [ids[0], ids[999], ids[1_000], ids[1_099]].iter() {
            let run = crate::store::Store::Mysql(store.clone())
                .get_log(LogId(log_id))
                .await
                .expect("get")
                .expect("run");
            assert_eq!(run.trigger_msg, message(log_id));
            assert_eq!(run.handle_msg, message(log_id));
            assert_eq!(run.executor_address, format!("http://exécuteur-{log_id}:1"));
            assert_eq!(
                (run.status, run.handle_code, run.handle_time_ms),
                (RunStatus::Success, 200, 7)
            );
            assert_eq!(alarm_status(&store, log_id).await, 1);
        }
        store.close().await;
    }
}
