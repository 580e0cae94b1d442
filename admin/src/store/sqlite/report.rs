//! SQLite-only tests of the report and clean-up statements (`shared/report.rs`), on rows
//! written directly.

use crate::model::{JobId, LogId};
use crate::store::{DayCounts, LogCleanup, Store};

/// The writer pool of a SQLite store, for statements the store does not offer.
fn writer(store: &Store) -> &sqlx::SqlitePool {
    match store {
        Store::Sqlite(backend) => &backend.writer,
        _ => panic!("a SQLite store was expected"),
    }
}

const DAY_START: i64 = 1_716_163_200_000;
const DAY_END: i64 = DAY_START + 86_400_000;

async fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("report.db").display());
    let store = Store::connect(&url).await.expect("store opens");
    (dir, store)
}

/// Inserts a run of job `job_id` (group 1) and returns its id.
async fn insert_run(
    store: &Store,
    job_id: i64,
    status: &str,
    trigger_ms: i64,
    scheduled_ms: i64,
) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO xjob_log (job_id, group_id, status, trigger_type, trigger_time_ms, \
         scheduled_at_ms) VALUES (?, 1, ?, 'MANUAL', ?, ?) RETURNING id",
    )
    .bind(job_id)
    .bind(status)
    .bind(trigger_ms)
    .bind(scheduled_ms)
    .fetch_one(writer(store))
    .await
    .expect("run inserted")
}

async fn remaining_ids(store: &Store) -> Vec<i64> {
    sqlx::query_scalar("SELECT id FROM xjob_log ORDER BY id")
        .fetch_all(writer(store))
        .await
        .expect("ids read")
}

#[tokio::test]
async fn report_counts_by_trigger_day_and_leaves_skipped_out() {
    let (_dir, store) = store().await;
    let inside = DAY_START + 1000;
    for status in [
        "PENDING", "RUNNING", "SUCCESS", "SUCCESS", "FAILED", "TIMEOUT", "KILLED", "LOST",
        "SKIPPED",
    ] {
        insert_run(&store, 1, status, inside, 0).await;
    }
    insert_run(&store, 1, "SUCCESS", DAY_START - 1, 0).await;
    insert_run(&store, 1, "SUCCESS", DAY_END, 0).await;
    let counts = store
        .refresh_log_report(DAY_START, DAY_END, 5)
        .await
        .expect("refresh");
    assert_eq!((counts.running, counts.success, counts.failed), (2, 2, 4));

    insert_run(&store, 1, "FAILED", DAY_END - 1, 0).await;
    store
        .refresh_log_report(DAY_START, DAY_END, 6)
        .await
        .expect("refresh again");
    let rows = store
        .list_log_report(DAY_START, DAY_START)
        .await
        .expect("rows");
    assert_eq!(
        rows,
        vec![DayCounts {
            day_ms: DAY_START,
            running: 2,
            success: 2,
            failed: 5,
            lost: 1,
            skipped: 1,
            ..DayCounts::default()
        }]
    );

    let empty = store
        .refresh_log_report(DAY_END + 86_400_000, DAY_END + 2 * 86_400_000, 7)
        .await;
    assert_eq!(
        empty.map(|c| (c.running, c.success, c.failed)).ok(),
        Some((0, 0, 0))
    );
}

#[tokio::test]
async fn deletion_spares_active_runs_and_ages_undispatched_runs_by_schedule() {
    let (_dir, store) = store().await;
    let old = DAY_START - 1;
    let young = DAY_START + 1;
    let old_final = insert_run(&store, 1, "SUCCESS", old, 0).await;
    let old_pending = insert_run(&store, 1, "PENDING", 0, old).await;
    let old_running = insert_run(&store, 1, "RUNNING", old, old).await;
    let old_undispatched = insert_run(&store, 1, "SKIPPED", 0, old).await;
    let young_final = insert_run(&store, 1, "FAILED", young, old).await;
    let young_undispatched = insert_run(&store, 1, "SKIPPED", 0, young).await;
    let other_job_old = insert_run(&store, 2, "FAILED", old, 0).await;
    let cleanup = LogCleanup {
        job_id: Some(JobId(1)),
        older_than_ms: Some(DAY_START),
        ..LogCleanup::default()
    };
    assert_eq!(store.delete_logs_batch(&cleanup, 1000).await.ok(), Some(2));
    assert_eq!(
        remaining_ids(&store).await,
        vec![
            old_pending,
            old_running,
            young_final,
            young_undispatched,
            other_job_old
        ]
    );
    assert!(!remaining_ids(&store).await.contains(&old_final));
    assert!(!remaining_ids(&store).await.contains(&old_undispatched));

    let everything = LogCleanup::default();
    assert_eq!(
        store.delete_logs_batch(&everything, 1000).await.ok(),
        Some(3)
    );
    assert_eq!(remaining_ids(&store).await, vec![old_pending, old_running]);
}

#[tokio::test]
async fn batches_are_bounded_and_keep_latest_counts_from_the_newest() {
    let (_dir, store) = store().await;
    let mut ids = Vec::new();
    for _ in 0..25 {
        ids.push(insert_run(&store, 1, "SUCCESS", DAY_START, 0).await);
    }
    insert_run(&store, 2, "SUCCESS", DAY_START, 0).await;
    let tenth_newest = store
        .nth_newest_log_id(None, Some(JobId(1)), 10)
        .await
        .expect("query");
    assert_eq!(tenth_newest, Some(LogId(ids[15])));
    assert_eq!(
        store.nth_newest_log_id(None, Some(JobId(1)), 26).await.ok(),
        Some(None)
    );
    let cleanup = LogCleanup {
        job_id: Some(JobId(1)),
        below_id: tenth_newest,
        ..LogCleanup::default()
    };
    assert_eq!(store.delete_logs_batch(&cleanup, 10).await.ok(), Some(10));
    assert_eq!(store.delete_logs_batch(&cleanup, 10).await.ok(), Some(5));
    assert_eq!(store.delete_logs_batch(&cleanup, 10).await.ok(), Some(0));
    let remaining = remaining_ids(&store).await;
    assert_eq!(remaining.len(), 11);
    assert_eq!(remaining[0], ids[15]);
}

#[tokio::test]
async fn tokens_are_listed_for_runs_of_groups_that_have_one() {
    let (_dir, store) = store().await;
    for (app, token) in [("app-one", "s3cret"), ("app-two", "")] {
        sqlx::query(
            "INSERT INTO xjob_group (app_name, title, address_type, access_token, updated_ms) \
             VALUES (?, 't', 'AUTO', ?, 0)",
        )
        .bind(app)
        .bind(token)
        .execute(writer(&store))
        .await
        .expect("group inserted");
    }
    let in_group_one = insert_run(&store, 1, "RUNNING", DAY_START, 0).await;
    let in_group_two: i64 = sqlx::query_scalar(
        "INSERT INTO xjob_log (job_id, group_id, status, trigger_type) \
         VALUES (2, 2, 'RUNNING', 'MANUAL') RETURNING id",
    )
    .fetch_one(writer(&store))
    .await
    .expect("run inserted");
    let tokens = store
        .log_group_tokens(&[LogId(in_group_one), LogId(in_group_two), LogId(999)])
        .await
        .expect("tokens");
    assert_eq!(tokens, vec![(LogId(in_group_one), "s3cret".to_string())]);
}
