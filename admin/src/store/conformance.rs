//! One test suite every store backend must pass. Each test runs against a fresh SQLite file and,
//! when `XJOB_TEST_POSTGRES_URL` / `XJOB_TEST_MYSQL_URL` point at a server (`.ci/run` starts
//! them), against a fresh database there too; without those variables the server backends are
//! skipped with a message, so `cargo test` works on a laptop.

use super::{JobFilter, JobScheduleUpdate, RoundPlan, Store};
use crate::model::{
    AddressType, BlockStrategy, ExecutorInfo, GlueType, Group, Job, JobStatus, LogFilter,
    MisfireStrategy, NewRun, RetryBackoff, RouteStrategy, RunStatus, ScheduleType, TriggerType,
};
use crate::store::{DispatchOutcome, DispatchRecord, RunCompletion, StoreError};

/// A fresh store per available backend, with the temp dirs that must outlive it.
pub(crate) async fn fresh_stores() -> Vec<(&'static str, Store, Option<tempfile::TempDir>)> {
    let mut stores = Vec::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("conformance.db").display());
    let sqlite = Store::connect(&url).await.expect("sqlite store");
    stores.push(("sqlite", sqlite, Some(dir)));
    for (name, variable) in [
        ("postgres", "XJOB_TEST_POSTGRES_URL"),
        ("mysql", "XJOB_TEST_MYSQL_URL"),
    ] {
        match std::env::var(variable) {
            Ok(base_url) => {
                let store = Store::connect_fresh_for_tests(&base_url)
                    .await
                    .expect("server store");
                stores.push((name, store, None));
            }
            Err(_) => eprintln!("skipping the {name} backend: {variable} is not set"),
        }
    }
    stores
}

fn group(app_name: &str) -> Group {
    Group {
        id: 0,
        app_name: app_name.to_string(),
        title: "title".to_string(),
        address_type: AddressType::Manual,
        addresses: vec!["http://a:1".to_string(), "http://b:1".to_string()],
        access_token: String::new(),
        updated_ms: 1,
    }
}

fn job(group_id: i64, next_ms: i64) -> Job {
    Job {
        id: 0,
        group_id,
        name: "job".to_string(),
        author: "me".to_string(),
        alarm_email: String::new(),
        alarm_on_every_failure: false,
        schedule_type: ScheduleType::Cron,
        schedule_conf: "* * * * * ?".to_string(),
        time_zone: "UTC".to_string(),
        misfire_strategy: MisfireStrategy::DoNothing,
        route_strategy: RouteStrategy::First,
        handler: "h".to_string(),
        params: "p".to_string(),
        block_strategy: BlockStrategy::SerialExecution,
        timeout_ms: 0,
        fail_retry_count: 2,
        retry_backoff: RetryBackoff {
            initial_delay_ms: 100,
            factor: 2.0,
            max_delay_ms: 1000,
        },
        glue_type: GlueType::Bean,
        glue_source: String::new(),
        glue_remark: String::new(),
        glue_updated_ms: 0,
        child_job_ids: vec![],
        status: if next_ms > 0 {
            JobStatus::Running
        } else {
            JobStatus::Stopped
        },
        trigger_last_ms: 0,
        trigger_next_ms: next_ms,
        created_ms: 1,
        updated_ms: 1,
    }
}

fn fire(job: &Job, scheduled_at_ms: i64, node: &str, epoch: i64) -> NewRun {
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
    }
}

#[tokio::test]
async fn groups_round_trip_and_app_names_are_unique() {
    for (backend, store, _dir) in fresh_stores().await {
        let created = store.insert_group(&group("orders")).await.expect("insert");
        assert!(created.id > 0, "{backend}");
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
                .missing_job_ids(&[first.id, 9999])
                .await
                .expect("missing"),
            vec![9999]
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
async fn a_schedule_round_writes_fires_once_and_guards_stopped_jobs() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = store.insert_group(&group("app")).await.expect("group");
        let due = store.insert_job(&job(group.id, 10_000)).await.expect("job");
        let stopped = store.insert_job(&job(group.id, 0)).await.expect("job");
        let epoch = store.register_node("n1", 0, 10_000).await.expect("node");
        let mut plan = |jobs: Vec<Job>| {
            assert_eq!(
                jobs.iter().map(|job| job.id).collect::<Vec<_>>(),
                vec![due.id]
            );
            RoundPlan {
                new_runs: vec![
                    fire(&due, 10_000, "n1", epoch),
                    fire(&due, 11_000, "n1", epoch),
                ],
                job_updates: vec![
                    JobScheduleUpdate {
                        job_id: due.id,
                        trigger_last_ms: 11_000,
                        trigger_next_ms: 12_000,
                        status: JobStatus::Running,
                    },
                    JobScheduleUpdate {
                        job_id: stopped.id,
                        trigger_last_ms: 1,
                        trigger_next_ms: 2,
                        status: JobStatus::Running,
                    },
                ],
            }
        };
        let (found, inserted) = store
            .run_schedule_round(15_000, 100, &mut plan)
            .await
            .expect("round");
        assert_eq!((found, inserted.len()), (1, 2), "{backend}");
        let reloaded = store.get_job(due.id).await.expect("get").expect("job");
        assert_eq!(reloaded.trigger_next_ms, 12_000, "{backend}");
        let still_stopped = store.get_job(stopped.id).await.expect("get").expect("job");
        assert_eq!(
            (still_stopped.status, still_stopped.trigger_next_ms),
            (JobStatus::Stopped, 0),
            "{backend}"
        );

        // The same fires again (a second admin, a restarted one): nothing new is written.
        let mut again = |_jobs: Vec<Job>| RoundPlan {
            new_runs: vec![fire(&due, 11_000, "n2", 1)],
            job_updates: vec![],
        };
        let (_, inserted_again) = store
            .run_schedule_round(15_000, 100, &mut again)
            .await
            .expect("round");
        assert!(inserted_again.is_empty(), "{backend}: fire_key is unique");
        store.close().await;
    }
}

#[tokio::test]
async fn claims_are_fenced_by_owner_and_epoch_and_orphans_are_adopted() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = store.insert_group(&group("app")).await.expect("group");
        let job = store.insert_job(&job(group.id, 0)).await.expect("job");
        let old_epoch = store.register_node("n1", 0, 1_000).await.expect("node");
        let ids = store
            .insert_runs(&[fire(&job, 5_000, "n1", old_epoch)])
            .await
            .expect("runs");
        let new_epoch = store
            .register_node("n1", 2_000, 1_000)
            .await
            .expect("restart");
        assert_eq!(new_epoch, old_epoch + 1, "{backend}");
        // A stalled holder of the old epoch can no longer claim its fire once adopted.
        let adopted = store
            .adopt_orphan_runs("n1", new_epoch, 2_000)
            .await
            .expect("adopt");
        assert_eq!(
            adopted.iter().map(|run| run.id).collect::<Vec<_>>(),
            ids,
            "{backend}"
        );
        assert!(
            store
                .claim_runs(&ids, "n1", old_epoch, 2_100)
                .await
                .expect("claim")
                .is_empty(),
            "{backend}"
        );
        let claimed = store
            .claim_runs(&ids, "n1", new_epoch, 2_200)
            .await
            .expect("claim");
        assert_eq!(claimed.len(), 1, "{backend}");
        assert_eq!(claimed[0].status, RunStatus::Running, "{backend}");
        assert!(
            store
                .claim_runs(&ids, "n1", new_epoch, 2_300)
                .await
                .expect("claim")
                .is_empty(),
            "{backend}"
        );
        // Another node's fires are adopted only after its lease lapsed.
        let other = store.register_node("n2", 2_000, 1_000).await.expect("node");
        store
            .insert_runs(&[fire(&job, 6_000, "n2", other)])
            .await
            .expect("runs");
        assert!(
            store
                .adopt_orphan_runs("n1", new_epoch, 2_500)
                .await
                .expect("adopt")
                .is_empty(),
            "{backend}"
        );
        assert_eq!(
            store
                .adopt_orphan_runs("n1", new_epoch, 3_500)
                .await
                .expect("adopt")
                .len(),
            1,
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn dispatch_outcomes_and_results_never_overwrite_a_final_state() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = store.insert_group(&group("app")).await.expect("group");
        let job = store.insert_job(&job(group.id, 0)).await.expect("job");
        let ids = store
            .insert_runs(&[fire(&job, 1_000, "n1", 1)])
            .await
            .expect("runs");
        store.claim_runs(&ids, "n1", 1, 1_000).await.expect("claim");
        // The executor's result lands before the dispatch outcome is recorded.
        let completion = RunCompletion {
            log_id: ids[0],
            status: RunStatus::Success,
            handle_code: 200,
            handle_msg: "ok".into(),
            finished_ms: 1_100,
        };
        assert_eq!(
            store
                .complete_runs(std::slice::from_ref(&completion))
                .await
                .expect("complete")
                .len(),
            1
        );
        let accepted = DispatchRecord {
            log_id: ids[0],
            outcome: DispatchOutcome::Accepted,
            trigger_code: 200,
            trigger_msg: "accepted".into(),
            executor_address: "http://a:1".into(),
            finished_ms: 1_050,
        };
        store.record_dispatches(&[accepted]).await.expect("record");
        let failed_late = RunCompletion {
            status: RunStatus::Failed,
            handle_code: 500,
            ..completion
        };
        assert!(
            store
                .complete_runs(&[failed_late])
                .await
                .expect("complete")
                .is_empty(),
            "{backend}"
        );
        let run = store.get_log(ids[0]).await.expect("get").expect("run");
        assert_eq!(
            (run.status, run.handle_code, run.trigger_code),
            (RunStatus::Success, 200, 200),
            "{backend}"
        );
        assert_eq!(run.executor_address, "http://a:1", "{backend}");
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
