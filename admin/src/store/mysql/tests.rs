//! Tests of what only this backend has: the lock row as a real row lock, the start-up check of
//! that row, the insert paths that replace `RETURNING`/`ON CONFLICT`, text in a binary
//! collation, and the session settings. Behaviour shared by every backend is in the
//! conformance suite. Skipped (with a message) when `XJOB_TEST_MYSQL_URL` is not set.

use std::time::Duration;

use sqlx::{Connection, MySqlConnection};

use super::{create_scratch_database, redact, with_database};
use crate::model::{
    AddressType, BlockStrategy, GlueType, Group, Job, JobStatus, LogId, MisfireStrategy, NewRun,
    NodeIdentity, RetryBackoff, RouteStrategy, RunStatus, ScheduleType, TriggerType,
};
use crate::model::{GroupId, JobId};
use crate::store::{RoundPlan, Store};

/// How long a test waits for something that should happen promptly.
const DEADLINE: Duration = Duration::from_secs(10);

/// A fresh database and its URL, or `None` (with a message) when no server is configured.
async fn scratch() -> Option<(Store, String)> {
    let Ok(base_url) = std::env::var("XJOB_TEST_MYSQL_URL") else {
        eprintln!("skipping the mysql backend test: XJOB_TEST_MYSQL_URL is not set");
        return None;
    };
    let url = create_scratch_database(&base_url)
        .await
        .expect("scratch database");
    let store = Store::connect(&url).await.expect("store connects");
    Some((store, url))
}

/// The pool of a MySQL store, for statements the store does not offer.
fn pool(store: &Store) -> &sqlx::MySqlPool {
    match store {
        Store::Mysql(backend) => &backend.pool,
        _ => panic!("a MySQL store was expected"),
    }
}

fn group(app_name: &str) -> Group {
    Group {
        id: GroupId(0),
        app_name: app_name.to_string(),
        title: "title".to_string(),
        address_type: AddressType::Auto,
        addresses: Vec::new(),
        access_token: String::new(),
        updated_ms: 1,
    }
}

fn job(group_id: GroupId, name: &str, params: &str) -> Job {
    Job {
        id: JobId(0),
        group_id,
        name: name.to_string(),
        author: String::new(),
        alarm_email: String::new(),
        alarm_on_every_failure: true,
        schedule_type: ScheduleType::FixRate,
        schedule_conf: "1".to_string(),
        time_zone: String::new(),
        misfire_strategy: MisfireStrategy::DoNothing,
        route_strategy: RouteStrategy::First,
        handler: "h".to_string(),
        params: params.to_string(),
        block_strategy: BlockStrategy::SerialExecution,
        timeout_ms: 0,
        fail_retry_count: 0,
        retry_backoff: RetryBackoff {
            initial_delay_ms: 0,
            factor: 1.5,
            max_delay_ms: 0,
        },
        glue_type: GlueType::Bean,
        glue_source: String::new(),
        glue_remark: String::new(),
        glue_updated_ms: 0,
        child_job_ids: Vec::new(),
        policy: Default::default(),
        status: JobStatus::Running,
        trigger_last_ms: 0,
        trigger_next_ms: 1_000,
        created_ms: 1,
        updated_ms: 1,
    }
}

fn fire(job_id: JobId, scheduled_at_ms: i64) -> NewRun {
    NewRun {
        job_id,
        group_id: GroupId(1),
        fire_key: Some(NewRun::fire_key(job_id, scheduled_at_ms, 0, 0)),
        status: RunStatus::Pending,
        trigger_type: TriggerType::Cron,
        scheduled_at_ms,
        handler: "h".to_string(),
        params: String::new(),
        shard_index: 0,
        shard_total: 1,
        attempt: 0,
        trigger_msg: String::new(),
        owner_node: "n1".to_string(),
        epoch: 1,
        dispatch_at_ms: 0,
        trace_id: String::new(),
    }
}

/// A second connection, outside the store's pool (another admin, an operator's session).
async fn other_session(url: &str) -> MySqlConnection {
    MySqlConnection::connect(url).await.expect("second session")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_waits_while_another_session_holds_the_lock_row() {
    let Some((store, url)) = scratch().await else {
        return;
    };
    let mut holder = other_session(&url).await;
    let mut held = holder.begin().await.expect("begin");
    sqlx::query("SELECT lock_name FROM xjob_lock WHERE lock_name = 'schedule_lock' FOR UPDATE")
        .execute(&mut *held)
        .await
        .expect("lock taken");

    let round_store = store.clone();
    let mut round = tokio::spawn(async move {
        let mut plan = |_jobs: Vec<Job>| RoundPlan::default();
        round_store.run_schedule_round(0, 10, &mut plan).await
    });
    let waited = tokio::time::timeout(Duration::from_millis(500), &mut round).await;
    assert!(waited.is_err(), "the round ran while the lock was held");

    held.commit().await.expect("lock released");
    let finished = tokio::time::timeout(DEADLINE, round)
        .await
        .expect("the round runs once the lock is free")
        .expect("round task");
    assert!(finished.is_ok(), "{finished:?}");
    holder.close().await.expect("close");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_written_concurrently_is_left_out_of_the_round_exactly() {
    let Some((store, url)) = scratch().await else {
        return;
    };
    // Another writer inserted the fire at 1000 and has not committed yet: the round's
    // look-up of existing keys cannot see it, so its multi-row insert meets the key, waits,
    // and fails; it then writes its fires one by one and reports only those it wrote.
    let mut writer = other_session(&url).await;
    let mut pending = writer.begin().await.expect("begin");
    sqlx::query(
        "INSERT INTO xjob_log (job_id, group_id, fire_key, status, trigger_type, trigger_msg, \
         handle_msg, executor_address, handler, params, owner_node, epoch) \
         VALUES (7, 1, ?, 'PENDING', 'CRON', '', '', '', 'h', '', 'n2', 1)",
    )
    .bind(NewRun::fire_key(JobId(7), 1_000, 0, 0))
    .execute(&mut *pending)
    .await
    .expect("concurrent fire");

    let round_store = store.clone();
    let round = tokio::spawn(async move {
        let mut plan = |_jobs: Vec<Job>| RoundPlan {
            new_runs: vec![
                fire(JobId(7), 1_000),
                fire(JobId(7), 2_000),
                fire(JobId(7), 3_000),
            ],
            job_updates: Vec::new(),
        };
        round_store.run_schedule_round(0, 10, &mut plan).await
    });
    // Commit once the round's insert is waiting on the uncommitted key.
    let waiting = wait_for_insert_waiting(&store).await;
    if !waiting {
        let finished = round.await;
        panic!("the round's insert never waited on the concurrent key: {finished:?}");
    }
    pending.commit().await.expect("commit");

    let (_, inserted) = tokio::time::timeout(DEADLINE, round)
        .await
        .expect("round finishes")
        .expect("round task")
        .expect("round");
    // By position: the first fire was the other writer's, the other two are this round's.
    assert_eq!(inserted.len(), 3, "one answer per planned row");
    assert!(inserted[0].is_none(), "the concurrent fire is not reported");
    for (id, key) in inserted[1..].iter().zip(["7:2000:0:0", "7:3000:0:0"]) {
        let id = id.expect("written by the round");
        let row = store.get_log(LogId(id.0)).await.expect("get").expect("row");
        assert_eq!(row.fire_key.as_deref(), Some(key));
        assert_eq!(row.owner_node, "n1");
    }
    let first = store
        .list_logs(&crate::model::LogFilter {
            job_id: Some(JobId(7)),
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("logs");
    assert_eq!(first.len(), 3, "one row per fire");
    writer.close().await.expect("close");
    store.close().await;
}

/// True once an insert into `xjob_log` is seen executing in this database (polled, bounded by
/// `DEADLINE`): an insert only stays visible there while it waits for a row lock.
async fn wait_for_insert_waiting(store: &Store) -> bool {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while tokio::time::Instant::now() < deadline {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.processlist WHERE db = DATABASE() \
             AND info LIKE 'INSERT INTO xjob_log%'",
        )
        .fetch_one(pool(store))
        .await
        .expect("processlist readable");
        if waiting > 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn text_keeps_its_bytes_and_case_in_names_filters_and_large_values() {
    let Some((store, _url)) = scratch().await else {
        return;
    };
    let lower = store.insert_group(&group("orders")).await.expect("group");
    let upper = store.insert_group(&group("Orders")).await;
    assert!(upper.is_ok(), "app names differ by case: {upper:?}");
    let found = store.list_groups("Ord", 0, 10).await.expect("list");
    assert_eq!(found.len(), 1, "filters are case-sensitive");
    assert_eq!(found[0].app_name, "Orders");

    let params = "参数-😀-".repeat(20_000);
    let name = format!("夜间报表 {}", "x".repeat(1_000));
    let created = store
        .insert_job(&job(lower.id, &name, &params))
        .await
        .expect("job with large params");
    let loaded = store.get_job(created.id).await.expect("get").expect("job");
    assert_eq!(loaded, created, "every field round-trips");
    assert!(loaded.alarm_on_every_failure);
    assert_eq!(loaded.retry_backoff.factor, 1.5);

    let ids = store
        .insert_runs(&[NewRun {
            params: params.clone(),
            fire_key: None,
            ..fire(created.id, 0)
        }])
        .await
        .expect("run");
    let run = store.get_log(ids[0]).await.expect("get").expect("run");
    assert_eq!((run.params, run.fire_key), (params, None));
    store.close().await;
}

#[tokio::test]
async fn sessions_read_committed_and_time_out_idle_transactions_on_mariadb() {
    let Some((store, _url)) = scratch().await else {
        return;
    };
    let version: Vec<u8> = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(pool(&store))
        .await
        .expect("version");
    let mariadb = String::from_utf8_lossy(&version).contains("MariaDB");
    let isolation_variable = if mariadb {
        "@@tx_isolation"
    } else {
        "@@transaction_isolation"
    };
    let isolation: Vec<u8> = sqlx::query_scalar(&format!("SELECT {isolation_variable}"))
        .fetch_one(pool(&store))
        .await
        .expect("isolation");
    assert_eq!(String::from_utf8_lossy(&isolation), "READ-COMMITTED");
    if mariadb {
        let timeout: u64 = sqlx::query_scalar("SELECT @@idle_transaction_timeout")
            .fetch_one(pool(&store))
            .await
            .expect("timeout");
        assert_eq!(timeout, u64::from(super::IDLE_TRANSACTION_TIMEOUT_SECONDS));
    }
    store.close().await;
}

#[test]
fn scratch_urls_replace_only_the_database() {
    let cases = [
        ("mysql://u:p@h:1/xjob", "mysql://u:p@h:1/other"),
        ("mysql://u:p@h:1", "mysql://u:p@h:1/other"),
        ("mysql://u:p@h:1/", "mysql://u:p@h:1/other"),
        (
            "mysql://u:p@h:1/xjob?ssl-mode=disabled",
            "mysql://u:p@h:1/other?ssl-mode=disabled",
        ),
        (
            "mysql://h?ssl-mode=disabled",
            "mysql://h/other?ssl-mode=disabled",
        ),
    ];
    for (base, expected) in cases {
        assert_eq!(
            with_database(base, "other").ok().as_deref(),
            Some(expected),
            "{base}"
        );
    }
    assert!(with_database("no-scheme", "other").is_err());
}

#[test]
fn passwords_are_redacted() {
    assert_eq!(redact("mysql://u:secret@h:1/db"), "mysql://u:***@h:1/db");
    assert_eq!(redact("mysql://h:1/db"), "mysql://h:1/db");
}

#[tokio::test]
async fn a_manual_broadcast_fire_gets_every_shard_row_without_fire_keys() {
    let Some((store, _url)) = scratch().await else {
        return;
    };
    let manual = |shard_index, shard_total, status| NewRun {
        fire_key: None,
        trigger_type: TriggerType::Manual,
        status,
        shard_index,
        shard_total,
        ..fire(JobId(9), 0)
    };
    let ids = store
        .insert_runs(&[manual(0, 1, RunStatus::Pending)])
        .await
        .expect("fire");
    let claimed = store
        .claim_runs(&ids, &NodeIdentity::new("n1", 1), 5_000)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    let shards = [
        manual(1, 3, RunStatus::Running),
        manual(2, 3, RunStatus::Running),
    ];
    let expanded = store
        .expand_broadcast(ids[0], 3, &shards, 5_000)
        .await
        .expect("expand");
    let described: Vec<(i32, i32, Option<String>)> = expanded
        .iter()
        .map(|run| (run.shard_index, run.shard_total, run.fire_key.clone()))
        .collect();
    assert_eq!(
        described,
        vec![(0, 3, None), (1, 3, None), (2, 3, None)],
        "one row per shard"
    );
    assert_eq!(expanded[0].id, ids[0]);
    let again = store
        .expand_broadcast(ids[0], 3, &shards, 5_000)
        .await
        .expect("expand again");
    assert!(again.is_empty(), "an expanded fire is not expanded twice");
    store.close().await;
}
