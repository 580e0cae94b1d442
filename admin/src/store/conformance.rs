//! One test suite every store backend must pass. Each test runs against a fresh SQLite file and,
//! when `XJOB_TEST_POSTGRES_URL` / `XJOB_TEST_MYSQL_URL` point at a server (`.ci/run` starts
//! them), against a fresh database there too; without those variables the server backends are
//! skipped with a message, so `cargo test` works on a laptop.
//!
//! The suite speaks only through `Store` methods (no SQL), so it describes the contract every
//! backend keeps, including under concurrency: tests marked "together" start their writes at
//! once from several connections, which is where a server database differs from SQLite's single
//! writer. Families: groups, jobs and registry here; the schedule round, leases, claims and
//! adoption in `schedule`; backfills in `backfills`; run logs and broadcast shards in `logs`; follow-ups in `followups`;
//! delayed and lost runs in `recovery`; report, clean-up, tokens and the shared registry in
//! `operations`.

mod auth;
mod backfills;
mod calendars;
mod followups;
mod logs;
mod operations;
mod overlap;
mod partitions;
mod recovery;
mod schedule;
mod workflow_reopen;
mod workflow_runs;
mod workflow_schedule;
mod workflows;

use std::sync::Arc;

use super::{JobFilter, JobScheduleUpdate, Store};
use crate::model::{
    AddressType, AlarmStatus, ExecutorInfo, ExecutorProtocol, Group, GroupId, Job, JobId,
    JobStatus, LogFilter, LogId, NewRun, NodeIdentity, RetryBackoff, RunStatus, ScheduleType,
    TriggerType,
};
use crate::store::{DispatchOutcome, DispatchRecord, RunCompletion, StoreError};

/// A fresh store per available backend, with the temp dirs that must outlive it.
pub(crate) async fn fresh_stores() -> Vec<(&'static str, Store, Option<tempfile::TempDir>)> {
    let mut stores = Vec::new();
    for (name, url, dir) in fresh_databases().await {
        let store = Store::connect(&url).await.expect("store");
        stores.push((name, store, dir));
    }
    stores
}

/// The URL of a fresh database per available backend (not connected yet), with the temp dirs
/// that must outlive it.
async fn fresh_databases() -> Vec<(&'static str, String, Option<tempfile::TempDir>)> {
    let mut databases = Vec::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("conformance.db").display());
    databases.push(("sqlite", url, Some(dir)));
    for (name, variable) in [
        ("postgres", "XJOB_TEST_POSTGRES_URL"),
        ("mysql", "XJOB_TEST_MYSQL_URL"),
    ] {
        match std::env::var(variable) {
            Ok(base_url) => {
                let url = Store::create_scratch_database(&base_url)
                    .await
                    .expect("scratch database");
                databases.push((name, url, None));
            }
            Err(_) => eprintln!("skipping the {name} backend: {variable} is not set"),
        }
    }
    databases
}

pub(crate) fn group(app_name: &str) -> Group {
    Group {
        id: GroupId(0),
        app_name: app_name.to_string(),
        title: "title".to_string(),
        address_type: AddressType::Manual,
        addresses: vec!["http://a:1".to_string(), "http://b:1".to_string()],
        access_token: String::new(),
        updated_ms: 1,
    }
}

pub(crate) fn job(group_id: GroupId, next_ms: i64) -> Job {
    Job {
        author: "me".to_string(),
        schedule_conf: "* * * * * ?".to_string(),
        time_zone: "UTC".to_string(),
        handler: "h".to_string(),
        params: "p".to_string(),
        fail_retry_count: 2,
        retry_backoff: RetryBackoff {
            initial_delay_ms: 100,
            factor: 2.0,
            max_delay_ms: 1000,
        },
        status: if next_ms > 0 {
            JobStatus::Running
        } else {
            JobStatus::Stopped
        },
        trigger_next_ms: next_ms,
        created_ms: 1,
        updated_ms: 1,
        ..Job::new(group_id, "job")
    }
}

/// The workflows the store and the workflow tests save.
pub(crate) use crate::model::workflow::test_workflow as workflow;

/// A PENDING schedule fire of `job` at `scheduled_at_ms`, owned by `node` and `epoch`.
pub(crate) fn fire(job: &Job, scheduled_at_ms: i64, node: &str, epoch: i64) -> NewRun {
    NewRun {
        job_id: job.id,
        group_id: job.group_id,
        fire_key: Some(NewRun::fire_key(job.id, scheduled_at_ms, 0, 0)),
        status: RunStatus::Pending,
        trigger_type: TriggerType::Cron,
        scheduled_at_ms,
        handler: job.handler.clone(),
        params: job.params.clone(),
        shard_index: 0,
        shard_total: 1,
        attempt: 0,
        trigger_msg: String::new(),
        owner_node: node.to_string(),
        epoch,
        dispatch_at_ms: 0,
        trace_id: String::new(),
    }
}

/// The group every fixture job belongs to.
async fn new_group(store: &Store) -> Group {
    store.insert_group(&group("app")).await.expect("group")
}

/// A stopped job of `schedule_type` in `group_id`.
async fn new_job(store: &Store, group_id: GroupId, schedule_type: ScheduleType) -> Job {
    let template = job(group_id, 0);
    store
        .insert_job(&Job {
            schedule_type,
            schedule_conf: match schedule_type {
                ScheduleType::Cron => template.schedule_conf.clone(),
                _ => "1".to_string(),
            },
            ..template
        })
        .await
        .expect("job")
}

/// Attempt `attempt` of shard `shard_index` of `shard_total` of `job`'s scheduled fire at
/// `scheduled_at_ms`, owned by node `n1` epoch 1.
fn shard_run(
    job: &Job,
    scheduled_at_ms: i64,
    (shard_index, shard_total): (i32, i32),
    attempt: i32,
    status: RunStatus,
) -> NewRun {
    NewRun {
        fire_key: Some(NewRun::fire_key(
            job.id,
            scheduled_at_ms,
            shard_index,
            attempt,
        )),
        status,
        shard_index,
        shard_total,
        attempt,
        ..fire(job, scheduled_at_ms, "n1", 1)
    }
}

/// A manual run of `job` (no fire key), owned by node `n1` epoch 1.
fn manual_run(job: &Job, status: RunStatus) -> NewRun {
    NewRun {
        fire_key: None,
        trigger_type: TriggerType::Manual,
        scheduled_at_ms: 0,
        status,
        ..fire(job, 0, "n1", 1)
    }
}

async fn insert(store: &Store, run: NewRun) -> LogId {
    let ids = store.insert_runs(&[run]).await.expect("run inserted");
    ids[0]
}

/// Inserts `run` PENDING and claims it for its owner at `trigger_ms`: it is then RUNNING with
/// that trigger time, as after a dispatch.
async fn insert_running(store: &Store, run: NewRun, trigger_ms: i64) -> LogId {
    let (owner, epoch) = (run.owner_node.clone(), run.epoch);
    let id = insert(
        store,
        NewRun {
            status: RunStatus::Pending,
            ..run
        },
    )
    .await;
    let claimed = store
        .claim_runs(&[id], &NodeIdentity::new(&owner, epoch), trigger_ms)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1, "the run is claimed");
    id
}

/// The executor's result for a RUNNING run.
async fn finish(store: &Store, log_id: LogId, status: RunStatus, finished_ms: i64) {
    let changed = store
        .complete_runs(&[RunCompletion {
            log_id,
            status,
            handle_code: if status == RunStatus::Success {
                200
            } else {
                500
            },
            handle_msg: status.as_str().to_lowercase(),
            finished_ms,
        }])
        .await
        .expect("completion");
    assert_eq!(changed.len(), 1, "run {log_id} was running");
}

/// Every run of `job_id`, oldest first.
async fn runs_of(store: &Store, job_id: JobId) -> Vec<crate::model::RunLog> {
    let mut runs = store
        .list_logs(&LogFilter {
            job_id: Some(job_id),
            limit: 10_000,
            ..LogFilter::default()
        })
        .await
        .expect("logs");
    runs.reverse();
    runs
}

fn ids_of(runs: &[crate::model::RunLog]) -> Vec<LogId> {
    runs.iter().map(|run| run.id).collect()
}

#[tokio::test]
async fn groups_round_trip_and_app_names_are_unique() {
    for (backend, store, _dir) in fresh_stores().await {
        let created = store.insert_group(&group("orders")).await.expect("insert");
        assert!(created.id > GroupId(0), "{backend}");
        let loaded = store
            .get_group(created.id)
            .await
            .expect("get")
            .expect("found");
        assert_eq!(loaded, created, "{backend}");
        assert_eq!(
            store.get_group_by_app("orders").await.expect("by app"),
            Some(created.clone())
        );
        let duplicate = store.insert_group(&group("orders")).await;
        assert!(
            matches!(duplicate, Err(StoreError::Conflict(_))),
            "{backend}: {duplicate:?}"
        );
        let updated = Group {
            title: "new".into(),
            addresses: vec![],
            ..created.clone()
        };
        assert!(
            store.update_group(&updated).await.expect("update"),
            "{backend}"
        );
        assert_eq!(
            store.list_groups("ord", 0, 10).await.expect("list"),
            vec![updated]
        );
        assert!(
            store.delete_group(created.id).await.expect("delete"),
            "{backend}"
        );
        assert_eq!(
            store.get_group(created.id).await.expect("get"),
            None,
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn groups_are_read_by_id_list_skipping_missing_ids() {
    for (backend, store, _dir) in fresh_stores().await {
        let orders = store.insert_group(&group("orders")).await.expect("orders");
        let _other = store.insert_group(&group("other")).await.expect("other");
        let billing = store
            .insert_group(&group("billing"))
            .await
            .expect("billing");
        let loaded = store
            .get_groups(&[billing.id, orders.id, GroupId(9999)])
            .await
            .expect("get groups");
        let mut loaded: Vec<Group> = loaded.into_values().map(Arc::unwrap_or_clone).collect();
        loaded.sort_by_key(|group| group.id);
        assert_eq!(loaded, vec![orders, billing], "{backend}");
        assert!(store.get_groups(&[]).await.expect("empty").is_empty());
        store.close().await;
    }
}

/// A caller granted some groups lists only their jobs and runs, filtered in the database so a
/// page is full; no group at all lists nothing.
#[tokio::test]
async fn jobs_and_runs_are_listed_for_a_set_of_groups() {
    for (backend, store, _dir) in fresh_stores().await {
        let mut granted = Vec::new();
        let mut hidden = Vec::new();
        for name in ["a", "b", "c"] {
            let group = store.insert_group(&group(name)).await.expect("group");
            for _ in 0..2 {
                let job = store.insert_job(&job(group.id, 0)).await.expect("job");
                insert(&store, manual_run(&job, RunStatus::Pending)).await;
                if name == "b" {
                    hidden.push(job.id);
                } else {
                    granted.push(job.id);
                }
            }
        }
        let groups: Vec<GroupId> = store
            .list_groups("", 0, 10)
            .await
            .expect("groups")
            .iter()
            .filter(|group| group.app_name != "b")
            .map(|group| group.id)
            .collect();
        let jobs = store
            .list_jobs(&JobFilter {
                group_ids: Some(groups.clone()),
                limit: 3,
                ..JobFilter::default()
            })
            .await
            .expect("jobs");
        let job_ids: Vec<JobId> = jobs.iter().map(|job| job.id).collect();
        assert_eq!(job_ids, granted[..3].to_vec(), "{backend}: a full page");
        let runs = store
            .list_logs(&LogFilter {
                group_ids: Some(groups),
                limit: 10,
                ..LogFilter::default()
            })
            .await
            .expect("runs");
        assert_eq!(runs.len(), 4, "{backend}");
        assert!(
            runs.iter().all(|run| !hidden.contains(&run.job_id)),
            "{backend}: no run of an ungranted group"
        );
        let no_jobs = store
            .list_jobs(&JobFilter {
                group_ids: Some(Vec::new()),
                limit: 10,
                ..JobFilter::default()
            })
            .await
            .expect("no jobs");
        let no_runs = store
            .list_logs(&LogFilter {
                group_ids: Some(Vec::new()),
                limit: 10,
                ..LogFilter::default()
            })
            .await
            .expect("no runs");
        assert!(
            no_jobs.is_empty() && no_runs.is_empty(),
            "{backend}: no grants"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn jobs_round_trip_filter_and_delete_with_their_logs() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = store.insert_group(&group("app")).await.expect("group");
        let first = store.insert_job(&job(group.id, 0)).await.expect("insert");
        let mut second = job(group.id, 0);
        second.name = "nightly report".into();
        second.child_job_ids = vec![first.id];
        let second = store.insert_job(&second).await.expect("insert");
        assert_eq!(
            store.get_job(second.id).await.expect("get"),
            Some(second.clone()),
            "{backend}"
        );
        let filter = JobFilter {
            name: Some("nightly".into()),
            limit: 10,
            ..JobFilter::default()
        };
        assert_eq!(
            store.list_jobs(&filter).await.expect("list"),
            vec![second.clone()],
            "{backend}"
        );
        assert_eq!(
            store
                .missing_job_ids(&[first.id, JobId(9999)])
                .await
                .expect("missing"),
            vec![JobId(9999)]
        );
        assert_eq!(
            store.count_jobs_in_group(group.id).await.expect("count"),
            2,
            "{backend}"
        );
        let run = fire(&first, 1000, "n1", 1);
        store
            .insert_runs(&[NewRun {
                fire_key: None,
                ..run
            }])
            .await
            .expect("run");
        assert!(
            store.delete_job(first.id).await.expect("delete"),
            "{backend}"
        );
        let logs = store
            .list_logs(&LogFilter {
                limit: 10,
                ..LogFilter::default()
            })
            .await
            .expect("logs");
        assert!(
            logs.is_empty(),
            "{backend}: a deleted job's logs go with it"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn registry_rows_belong_to_their_node() {
    for (backend, store, _dir) in fresh_stores().await {
        let executor = ExecutorInfo {
            executor_id: "n1-1-1".into(),
            app_name: "app".into(),
            address: "http://a:1".into(),
            handlers: vec!["h1".into(), "h2".into()],
            registered_ms: 1,
            last_heartbeat_ms: 2,
            admin_node: "n1".into(),
            running_log_ids: vec![],
            protocol: Default::default(),
        };
        store.upsert_registry(&executor).await.expect("upsert");
        store
            .upsert_registry(&ExecutorInfo {
                last_heartbeat_ms: 5,
                ..executor.clone()
            })
            .await
            .expect("refresh");
        let rows = store.list_registry_of_node("n1").await.expect("list");
        assert_eq!(rows.len(), 1, "{backend}");
        assert_eq!(
            (rows[0].last_heartbeat_ms, rows[0].handlers.clone()),
            (5, executor.handlers.clone())
        );
        assert_eq!(rows[0].protocol, ExecutorProtocol::Grpc, "{backend}");
        // An XXL-JOB executor's row keeps its protocol, so other admins call it over HTTP.
        let xxl = ExecutorInfo {
            executor_id: "xxl-job:app:http://b:9999".into(),
            address: "http://b:9999".into(),
            protocol: ExecutorProtocol::XxlJobHttp,
            ..executor.clone()
        };
        store.upsert_registry(&xxl).await.expect("upsert xxl");
        let live = store.list_live_registry(0).await.expect("live");
        let read = live.iter().find(|row| row.executor_id == xxl.executor_id);
        assert_eq!(
            read.map(|row| row.protocol),
            Some(ExecutorProtocol::XxlJobHttp),
            "{backend}"
        );
        store
            .delete_registry(&xxl.executor_id)
            .await
            .expect("delete");
        assert!(
            store
                .list_registry_of_node("n2")
                .await
                .expect("list")
                .is_empty(),
            "{backend}"
        );
        store
            .delete_registry(&executor.executor_id)
            .await
            .expect("delete");
        assert!(
            store
                .list_registry_of_node("n1")
                .await
                .expect("list")
                .is_empty(),
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn job_updates_keep_the_scheduling_state_and_filters_combine() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let other_group = store
            .insert_group(&self::group("other"))
            .await
            .expect("group");
        let running = store.insert_job(&job(group.id, 50_000)).await.expect("job");
        let mut stopped = job(other_group.id, 0);
        stopped.handler = "nightlyHandler".into();
        stopped.author = "ann".into();
        let stopped = store.insert_job(&stopped).await.expect("job");

        // An edit replaces the definition but never the schedule state.
        let edited = Job {
            name: "renamed".into(),
            alarm_on_every_failure: true,
            retry_backoff: RetryBackoff {
                initial_delay_ms: 7,
                factor: 1.5,
                max_delay_ms: 70,
            },
            child_job_ids: vec![stopped.id],
            policy: crate::model::SchedulePolicy {
                jitter_max_ms: 90_000,
                catch_up_window_ms: 600_000,
                catch_up_mode: crate::model::CatchUpMode::All,
                dst: crate::model::DstPolicy {
                    gap: crate::model::DstGapPolicy::Skip,
                    overlap: crate::model::DstOverlapPolicy::Both,
                },
                overlap_policy: crate::model::OverlapPolicy::BufferOne,
            },
            status: JobStatus::Stopped,
            trigger_next_ms: 1,
            ..running.clone()
        };
        assert!(
            store.update_job(&edited).await.expect("update"),
            "{backend}"
        );
        let reloaded = store.get_job(running.id).await.expect("get").expect("job");
        assert_eq!(
            reloaded,
            Job {
                status: JobStatus::Running,
                trigger_next_ms: 50_000,
                ..edited.clone()
            },
            "{backend}"
        );
        assert!(
            !store
                .update_job(&Job {
                    id: JobId(9999),
                    ..edited
                })
                .await
                .expect("update"),
            "{backend}: no such job"
        );

        let stop = JobScheduleUpdate {
            job_id: running.id,
            trigger_last_ms: 40_000,
            trigger_next_ms: 0,
            status: JobStatus::Stopped,
        };
        assert!(
            store.set_job_schedule(stop).await.expect("stop"),
            "{backend}"
        );
        let missing = JobScheduleUpdate {
            job_id: JobId(9999),
            ..stop
        };
        assert!(
            !store.set_job_schedule(missing).await.expect("stop"),
            "{backend}"
        );
        let reloaded = store.get_job(running.id).await.expect("get").expect("job");
        assert_eq!(
            (
                reloaded.status,
                reloaded.trigger_last_ms,
                reloaded.trigger_next_ms
            ),
            (JobStatus::Stopped, 40_000, 0),
            "{backend}"
        );

        assert_eq!(store.count_jobs().await.expect("count"), 2, "{backend}");
        let both = store
            .get_jobs(&[stopped.id, running.id, JobId(9999)])
            .await
            .expect("get jobs");
        let mut both_ids: Vec<JobId> = both.keys().copied().collect();
        both_ids.sort_unstable();
        assert_eq!(both_ids, vec![running.id, stopped.id], "{backend}");

        let list = |filter: JobFilter| {
            let store = store.clone();
            async move {
                let jobs = store
                    .list_jobs(&JobFilter {
                        limit: 10,
                        ..filter
                    })
                    .await
                    .expect("list");
                jobs.iter().map(|job| job.id).collect::<Vec<JobId>>()
            }
        };
        assert_eq!(
            list(JobFilter {
                group_id: Some(other_group.id),
                handler: Some("Handler".into()),
                author: Some("an".into()),
                status: Some(JobStatus::Stopped),
                ..JobFilter::default()
            })
            .await,
            vec![stopped.id],
            "{backend}"
        );
        assert!(
            list(JobFilter {
                handler: Some("handler".into()),
                ..JobFilter::default()
            })
            .await
            .is_empty(),
            "{backend}: filters are case-sensitive substrings"
        );
        assert_eq!(
            list(JobFilter {
                offset: 1,
                ..JobFilter::default()
            })
            .await,
            vec![stopped.id],
            "{backend}: paged by id"
        );
        assert!(
            !store.delete_job(JobId(9999)).await.expect("delete"),
            "{backend}"
        );
        assert!(
            !store.delete_group(GroupId(9999)).await.expect("delete"),
            "{backend}"
        );
        store.close().await;
    }
}

/// Without the `schedule_lock` row admins would not exclude each other (XXL-JOB silently loses
/// mutual exclusion then): a running admin on a server stops scheduling, and a restart is
/// refused.
#[tokio::test]
async fn an_admin_refuses_a_database_without_the_schedule_lock_row() {
    for (backend, url, _dir) in fresh_databases().await {
        let store = Store::connect(&url).await.expect("first start");
        let deleted = match &store {
            Store::Sqlite(backend) => delete_lock_row(backend.pools()).await,
            Store::Postgres(backend) => delete_lock_row(backend.pools()).await,
            Store::Mysql(backend) => delete_lock_row(backend.pools()).await,
        };
        assert_eq!(deleted, 1, "{backend}");
        // On the servers the row is the lock every round takes; SQLite's lock is its single
        // writer (`BEGIN IMMEDIATE`), so only its start-up checks the row.
        if backend != "sqlite" {
            let mut plan = |_jobs: Vec<Job>| super::RoundPlan::default();
            let round = store.run_schedule_round(0, 10, &mut plan).await;
            assert!(
                matches!(&round, Err(StoreError::Schema(message)) if message.contains("schedule_lock")),
                "{backend}: a running admin stops scheduling: {:?}",
                round.map(|(found, _)| found)
            );
        }
        store.close().await;

        match Store::connect(&url).await {
            Err(StoreError::Schema(message)) => {
                assert!(message.contains("schedule_lock"), "{backend}: {message}");
            }
            Err(other) => panic!("{backend}: expected a schema error, got {other:?}"),
            Ok(_) => panic!("{backend}: an admin started without the lock row"),
        }
    }
}

async fn delete_lock_row<DB: super::dialect::Dialect>(pools: super::sql::Pools<'_, DB>) -> u64 {
    let mut conn = pools.write().await.expect("connection");
    super::sql::Sql::<DB>::new("DELETE FROM xjob_lock")
        .affected(&mut conn)
        .await
        .expect("lock row deleted")
}

/// Renames a table (tests only): with the run table renamed away, every statement on runs fails
/// at once, as when the database is unreachable, and renaming it back heals the store, so a test
/// can fail and heal claims at points it chooses. The same statement on every backend.
pub(crate) async fn rename_table(store: &Store, from: &str, to: &str) {
    let statement = format!("ALTER TABLE {from} RENAME TO {to}");
    let result = match store {
        Store::Sqlite(backend) => sqlx::query(&statement)
            .execute(backend.pools().writer)
            .await
            .map(drop),
        Store::Postgres(backend) => sqlx::query(&statement)
            .execute(backend.pools().writer)
            .await
            .map(drop),
        Store::Mysql(backend) => sqlx::query(&statement)
            .execute(backend.pools().writer)
            .await
            .map(drop),
    };
    result.unwrap_or_else(|error| panic!("{statement}: {error}"));
}
