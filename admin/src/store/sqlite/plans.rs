//! SQLite's query plans for the statements that run every second or every few hundred
//! milliseconds whatever the size of the tables: the claim and the schedule round's job update
//! look rows up by id, and each periodic lookup reads its small set of rows through its partial
//! index (migration 0005); none may walk a table or a large index. A plan that falls back to a
//! scan still returns the right rows, so only the plan can catch it.

use sqlx::Row;

use super::SqliteStore;
use super::jobs::SCHEDULE_UPDATES;
use super::monitor::claim_followups_sql;
use crate::store::shared::adoption::sqlite_texts_for_plans;
use crate::store::shared::claims::claim_sql_for_plans;
use crate::store::shared::logs::held_runs_query;
use crate::store::shared::monitor::{due_delayed_runs_query, running_runs_query};

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
async fn hot_statements_look_rows_up_by_id_or_through_their_partial_index() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("plans.db").display());
    let store = SqliteStore::connect(&url).await.expect("store");
    let by_id = "PRIMARY KEY";
    let [
        adopt_orphan_runs,
        adopt_stale_followups,
        stranded_dispatches,
        claimed_unsent_of,
    ] = sqlite_texts_for_plans();
    let expected = [
        (claim_sql_for_plans("id"), by_id),
        (SCHEDULE_UPDATES.text_for(1).0.to_string(), by_id),
        (SCHEDULE_UPDATES.text_for(256).0.to_string(), by_id),
        (adopt_orphan_runs, "ix_log_pending"),
        (
            due_delayed_runs_query::<sqlx::Sqlite>("n1", 1, 0, 10)
                .text()
                .to_string(),
            "ix_log_delayed",
        ),
        (
            running_runs_query::<sqlx::Sqlite>(10).text().to_string(),
            "ix_log_running",
        ),
        (stranded_dispatches, "ix_log_running"),
        (claimed_unsent_of, "ix_log_running"),
        (
            held_runs_query::<sqlx::Sqlite>(crate::model::JobId(7), 0)
                .text()
                .to_string(),
            "ix_log_running",
        ),
        (claim_followups_sql(), "ix_log_followup_due"),
        (adopt_stale_followups, "ix_log_followup_claimed"),
    ];
    for (sql, index) in expected {
        let plan = plan_of(&store, &sql).await;
        // Steps on the small node table are fine; every step on the log and job tables must use
        // the expected index.
        let log_lines: Vec<&str> = plan
            .lines()
            .filter(|line| line.contains("xjob_log") || line.contains("xjob_job"))
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
