//! Rows of a batched write as one JSON array parameter: PostgreSQL and MySQL/MariaDB unpack it
//! in SQL (`jsonb_to_recordset`, `JSON_TABLE`), so a batch is one statement whose text never
//! changes and stays prepared, instead of one statement per row. SQLite binds the rows as a
//! `VALUES` list instead (`sqlite::batch_values`), and takes only id lists as JSON here.

use std::collections::{HashMap, HashSet};

use serde_json::json;

use super::{DispatchRecord, RunCompletion};
use crate::model::{LogId, RunStatus};

/// Most rows one batched statement carries on PostgreSQL and MySQL/MariaDB (SQLite's own limit
/// is `sqlite::batch_values::ROWS_PER_STATEMENT`).
pub const ROWS_PER_STATEMENT: usize = 1000;

/// Accepted dispatch outcomes folded into the result write, by log id (see
/// `trigger::recorder`: a run whose result arrives while its outcome is held gets both in one
/// row update).
pub type Folded<'a> = HashMap<LogId, &'a DispatchRecord>;

/// The accepted outcomes of `records` by log id (the last one of a run wins).
pub fn folded(records: &[DispatchRecord]) -> Folded<'_> {
    records
        .iter()
        .filter(|record| record.outcome == super::DispatchOutcome::Accepted)
        .map(|record| (record.log_id, record))
        .collect()
}

/// `[{"id", "status", "code", "msg", "time"}, …]` for `complete_runs`, with
/// `"tcode", "tmsg", "taddress", "ttrace"` (the dispatch outcome) on rows that have one folded
/// in; the SQL keeps the row's own values where they are absent (NULL).
pub fn completions(chunk: &[&RunCompletion], folded: &Folded<'_>) -> String {
    let rows: Vec<_> = chunk
        .iter()
        .map(|completion| completion_row(completion, folded))
        .collect();
    serde_json::Value::Array(rows).to_string()
}

/// `completions` with `"quiet"` (1 or 0) added to each row, for MySQL, which decides the
/// follow-up need in a locking read before the update: 1 for a success whose job needs no
/// follow-up.
pub fn completions_with_quiet(chunk: &[&(&RunCompletion, bool)], folded: &Folded<'_>) -> String {
    let rows: Vec<_> = chunk
        .iter()
        .map(|(completion, needs_followup)| {
            let quiet = completion.status == RunStatus::Success && !needs_followup;
            let mut row = completion_row(completion, folded);
            row["quiet"] = json!(i32::from(quiet));
            row
        })
        .collect();
    serde_json::Value::Array(rows).to_string()
}

fn completion_row(completion: &RunCompletion, folded: &Folded<'_>) -> serde_json::Value {
    let mut row = json!({
        "id": completion.log_id.0,
        "status": completion.status.as_str(),
        "code": completion.handle_code,
        "msg": completion.handle_msg,
        "time": completion.finished_ms,
    });
    if let Some(record) = folded.get(&completion.log_id) {
        row["tcode"] = json!(record.trigger_code);
        row["tmsg"] = json!(record.trigger_msg);
        row["taddress"] = json!(record.executor_address);
        row["ttrace"] = json!(record.trace_id);
    }
    row
}

/// `[{"id", "code", "msg", "address", "time", "trace"}, …]` for `record_dispatches`.
pub fn dispatches(chunk: &[&DispatchRecord]) -> String {
    let rows: Vec<_> = chunk
        .iter()
        .map(|record| {
            json!({
                "id": record.log_id.0,
                "code": record.trigger_code,
                "msg": record.trigger_msg,
                "address": record.executor_address,
                "time": record.finished_ms,
                "trace": record.trace_id,
            })
        })
        .collect();
    serde_json::Value::Array(rows).to_string()
}

/// `[id, id, …]`: a list of row ids as one parameter.
pub fn ids(ids: &[i64]) -> String {
    let mut text = String::with_capacity(ids.len() * 8 + 2);
    text.push('[');
    for (index, id) in ids.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        text.push_str(&id.to_string());
    }
    text.push(']');
    text
}

/// The completions with each log id once, the first report winning (an executor may resend a
/// result, and a batched UPDATE must not see one row twice).
pub fn first_completion_per_run(completions: &[RunCompletion]) -> Vec<&RunCompletion> {
    let mut seen = HashSet::with_capacity(completions.len());
    completions
        .iter()
        .filter(|completion| seen.insert(completion.log_id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion(log_id: i64, handle_msg: &str) -> RunCompletion {
        RunCompletion {
            log_id: LogId(log_id),
            status: RunStatus::Success,
            handle_code: 200,
            handle_msg: handle_msg.to_string(),
            finished_ms: 7,
        }
    }

    #[test]
    fn messages_with_quotes_and_newlines_survive_the_round_trip() {
        let tricky = completion(1, "said \"no\"\nthen \\ left");
        let text = completions(&[&tricky], &Folded::new());
        let parsed: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed[0]["msg"], "said \"no\"\nthen \\ left");
        assert_eq!(parsed[0]["status"], "SUCCESS");
        assert_eq!(parsed[0]["id"], 1);
    }

    #[test]
    fn a_repeated_result_keeps_the_first_report() {
        let reports = [
            completion(1, "first"),
            completion(2, "x"),
            completion(1, "again"),
        ];
        let kept = first_completion_per_run(&reports);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].handle_msg, "first");
    }
}
