//! SQLite's query plans for the lookups that run every few hundred milliseconds whatever the
//! size of the log table: each must read its small set of rows through its partial index
//! (migration 0005), never walk the table. A plan that falls back to a scan still returns the
//! right rows, so only the plan can catch it.

use sqlx::Row;

use super::SqliteStore;
use super::monitor::{
    DUE_DELAYED_RUNS, adopt_stale_followups_sql, claim_followups_sql, running_runs_sql,
    stranded_dispatches_sql,
};
use super::schedule::adopt_orphan_runs_sql;

async fn plan_of(store: &SqliteStore, sql: &str) -> String {
    let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
        .fetch_all(&store.writer)
        .await
        .expect("plan");
    let details: Vec<String> = rows
        .iter()
        .map(|row| row.try_get::<String, _>("detail").expect("detail"))
        .collect();
    details.join("\n")
}

#[tokio::test]
async fn periodic_lookups_read_their_partial_index() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("plans.db").display());
    let store = SqliteStore::connect(&url).await.expect("store");
    let expected = [
        (adopt_orphan_runs_sql(), "ix_log_pending"),
        (DUE_DELAYED_RUNS.to_string(), "ix_log_delayed"),
        (running_runs_sql(), "ix_log_running"),
        (stranded_dispatches_sql(), "ix_log_running"),
        (claim_followups_sql(), "ix_log_followup_due"),
        (adopt_stale_followups_sql(), "ix_log_followup_claimed"),
    ];
    for (sql, index) in expected {
        let plan = plan_of(&store, &sql).await;
        let log_lines: Vec<&str> = plan
            .lines()
            .filter(|line| line.contains("xjob_log"))
            .collect();
        assert!(
            !log_lines.is_empty()
                && log_lines
                    .iter()
                    .all(|line| line.contains(index) || line.contains("PRIMARY KEY")),
            "{sql}\nexpected every xjob_log step to use {index}:\n{plan}"
        );
    }
    store.close().await;
}
