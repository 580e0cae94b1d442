//! Operations data (daily report, log clean-up, callback tokens) and the registry as the
//! routing of every admin reads it.

use super::*;
use crate::store::{DayCounts, LogCleanup};

const DAY_START: i64 = 1_716_163_200_000;
const DAY_END: i64 = DAY_START + 86_400_000;

/// A run of `job` that was dispatched at `trigger_ms` and ended `status` (PENDING and SKIPPED
/// runs with `trigger_ms` 0 were never dispatched; their age is `scheduled_ms`).
async fn run_with(
    store: &Store,
    job: &Job,
    status: RunStatus,
    trigger_ms: i64,
    scheduled_ms: i64,
) -> LogId {
    let run = NewRun {
        fire_key: None,
        scheduled_at_ms: scheduled_ms,
        status,
        ..fire(job, scheduled_ms, "n1", 1)
    };
    if trigger_ms == 0 {
        return insert(store, run).await;
    }
    let id = insert_running(store, run, trigger_ms).await;
    match status {
        RunStatus::Running => {}
        RunStatus::Lost => {
            assert!(store.mark_lost(id, "gone", trigger_ms).await.expect("lost"));
        }
        RunStatus::Skipped => {
            let skip = DispatchRecord {
                log_id: id,
                outcome: DispatchOutcome::Skipped,
                trigger_code: 0,
                trigger_msg: "skipped".into(),
                executor_address: String::new(),
                finished_ms: trigger_ms,
                trace_id: String::new(),
            };
            store
                .record_dispatches(&NodeIdentity::new("n1", 1), &[skip])
                .await
                .expect("skip");
        }
        final_status => finish(store, id, final_status, trigger_ms + 1).await,
    }
    id
}

async fn remaining_ids(store: &Store) -> Vec<LogId> {
    let runs = store
        .list_logs(&LogFilter {
            limit: 10_000,
            ..LogFilter::default()
        })
        .await
        .expect("logs");
    let mut ids = ids_of(&runs);
    ids.sort_unstable();
    ids
}

#[tokio::test]
async fn the_daily_report_counts_by_trigger_day_and_leaves_skipped_runs_out() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let inside = DAY_START + 1_000;
        for status in [
            RunStatus::Running,
            RunStatus::Running,
            RunStatus::Success,
            RunStatus::Success,
            RunStatus::Failed,
            RunStatus::Timeout,
            RunStatus::Killed,
            RunStatus::Lost,
            RunStatus::Skipped,
        ] {
            run_with(&store, &job, status, inside, 0).await;
        }
        run_with(&store, &job, RunStatus::Success, DAY_START - 1, 0).await;
        run_with(&store, &job, RunStatus::Success, DAY_END, 0).await;
        let counts = store
            .refresh_log_report(DAY_START, DAY_END, 5)
            .await
            .expect("refresh");
        assert_eq!(
            (counts.day_ms, counts.running, counts.success, counts.failed),
            (DAY_START, 2, 2, 4),
            "{backend}"
        );

        run_with(&store, &job, RunStatus::Failed, DAY_END - 2, 0).await;
        store
            .refresh_log_report(DAY_START, DAY_END, 6)
            .await
            .expect("refresh again");
        let next_day = store
            .refresh_log_report(DAY_END, DAY_END + 86_400_000, 7)
            .await
            .expect("refresh next day");
        assert_eq!(
            (next_day.running, next_day.success, next_day.failed),
            (0, 1, 0),
            "{backend}"
        );
        let empty = store
            .refresh_log_report(DAY_END + 86_400_000, DAY_END + 2 * 86_400_000, 7)
            .await
            .expect("refresh an empty day");
        assert_eq!((empty.running, empty.success, empty.failed), (0, 0, 0));
        let rows = store
            .list_log_report(DAY_START, DAY_END)
            .await
            .expect("rows");
        assert_eq!(
            rows,
            vec![
                DayCounts {
                    day_ms: DAY_START,
                    running: 2,
                    success: 2,
                    failed: 5,
                    lost: 1,
                    skipped: 1,
                    ..DayCounts::default()
                },
                DayCounts {
                    day_ms: DAY_END,
                    running: 0,
                    success: 1,
                    failed: 0,
                    ..DayCounts::default()
                },
            ],
            "{backend}: oldest first, bounds included"
        );

        // Lateness of scheduled first attempts: one sent 3 s late, one 0.5 s late.
        let day = DAY_END + 3 * 86_400_000;
        run_with(&store, &job, RunStatus::Success, day + 4_000, day + 1_000).await;
        run_with(&store, &job, RunStatus::Success, day + 2_500, day + 2_000).await;
        let late = store
            .refresh_log_report(day, day + 86_400_000, 8)
            .await
            .expect("refresh a day with late fires");
        assert_eq!(
            (late.success, late.late_fires, late.max_lateness_ms),
            (2, 1, 3_000),
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn a_days_counts_per_job_add_up_to_the_days_counts() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let failing = new_job(&store, group.id, ScheduleType::Cron).await;
        let fine = new_job(&store, group.id, ScheduleType::Cron).await;
        let inside = DAY_START + 1_000;
        for (job, status, at) in [
            (&failing, RunStatus::Failed, inside),
            (&failing, RunStatus::Lost, inside + 5_000),
            (&failing, RunStatus::Success, inside + 9_000),
            (&failing, RunStatus::Skipped, inside),
            (&fine, RunStatus::Success, inside),
            (&fine, RunStatus::Running, inside),
            // Outside the day: counted on no job's row.
            (&fine, RunStatus::Failed, DAY_END),
        ] {
            run_with(&store, job, status, at, 0).await;
        }
        let day = store.count_log_day(DAY_START, DAY_END).await.expect("day");
        let mut per_job = store
            .count_log_day_by_job(DAY_START, DAY_END)
            .await
            .expect("per job");
        per_job.sort_by_key(|row| row.job_id);
        let mut summed = DayCounts {
            day_ms: DAY_START,
            ..DayCounts::default()
        };
        for row in &per_job {
            assert_eq!(row.group_id, group.id, "{backend}");
            assert_eq!(row.counts.day_ms, DAY_START, "{backend}");
            summed.add(&row.counts);
        }
        assert_eq!(summed, day, "{backend}: the jobs add up to the day");
        let rows: Vec<(JobId, i64, i64, i64, i64, i64)> = per_job
            .iter()
            .map(|row| {
                let c = row.counts;
                (
                    row.job_id,
                    c.running,
                    c.success,
                    c.failed,
                    c.lost,
                    row.last_failed_ms,
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (failing.id, 0, 1, 2, 1, inside + 5_000),
                (fine.id, 1, 1, 0, 0, 0),
            ],
            "{backend}: per job, the latest failure's trigger time"
        );
        assert_eq!(per_job[0].counts.skipped, 1, "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn clean_up_spares_active_runs_and_ages_undispatched_runs_by_schedule() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let cleaned = new_job(&store, group.id, ScheduleType::Cron).await;
        let other = new_job(&store, group.id, ScheduleType::Cron).await;
        let (old, young) = (DAY_START - 1, DAY_START + 1);
        let old_final = run_with(&store, &cleaned, RunStatus::Success, old, 0).await;
        let old_pending = run_with(&store, &cleaned, RunStatus::Pending, 0, old).await;
        let old_running = run_with(&store, &cleaned, RunStatus::Running, old, old).await;
        let old_undispatched = run_with(&store, &cleaned, RunStatus::Skipped, 0, old).await;
        let young_final = run_with(&store, &cleaned, RunStatus::Failed, young, old).await;
        let young_undispatched = run_with(&store, &cleaned, RunStatus::Skipped, 0, young).await;
        let other_job_old = run_with(&store, &other, RunStatus::Failed, old, 0).await;
        let cleanup = LogCleanup {
            job_id: Some(cleaned.id),
            older_than_ms: Some(DAY_START),
            ..LogCleanup::default()
        };
        assert_eq!(
            store
                .delete_logs_batch(&cleanup, 1000)
                .await
                .expect("delete"),
            2,
            "{backend}"
        );
        let mut expected = vec![
            old_pending,
            old_running,
            young_final,
            young_undispatched,
            other_job_old,
        ];
        expected.sort_unstable();
        assert_eq!(remaining_ids(&store).await, expected, "{backend}");
        assert!(!expected.contains(&old_final) && !expected.contains(&old_undispatched));

        let by_group = LogCleanup {
            group_id: Some(group.id),
            ..LogCleanup::default()
        };
        assert_eq!(
            store
                .delete_logs_batch(&by_group, 1000)
                .await
                .expect("delete"),
            3,
            "{backend}"
        );
        let mut active = vec![old_pending, old_running];
        active.sort_unstable();
        assert_eq!(remaining_ids(&store).await, active, "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn clean_up_batches_are_bounded_and_keep_the_newest_runs() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let cleaned = new_job(&store, group.id, ScheduleType::Cron).await;
        let other = new_job(&store, group.id, ScheduleType::Cron).await;
        let runs: Vec<NewRun> = (0..25)
            .map(|_| manual_run(&cleaned, RunStatus::Skipped))
            .collect();
        let ids = store.insert_runs(&runs).await.expect("runs");
        let newest = insert(&store, manual_run(&other, RunStatus::Skipped)).await;
        let tenth_newest = store
            .nth_newest_log_id(None, Some(cleaned.id), 10)
            .await
            .expect("query");
        assert_eq!(tenth_newest, Some(ids[15]), "{backend}");
        assert_eq!(
            store
                .nth_newest_log_id(Some(group.id), None, 1)
                .await
                .expect("query"),
            Some(newest),
            "{backend}: the other job's run is the group's newest"
        );
        assert_eq!(
            store
                .nth_newest_log_id(None, Some(cleaned.id), 26)
                .await
                .expect("query"),
            None,
            "{backend}"
        );
        let cleanup = LogCleanup {
            job_id: Some(cleaned.id),
            below_id: tenth_newest,
            ..LogCleanup::default()
        };
        for expected in [10, 5, 0] {
            assert_eq!(
                store.delete_logs_batch(&cleanup, 10).await.expect("delete"),
                expected,
                "{backend}"
            );
        }
        let remaining = remaining_ids(&store).await;
        assert_eq!(remaining.len(), 11, "{backend}");
        assert_eq!(remaining[0], ids[15], "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn callback_tokens_are_listed_for_runs_of_groups_that_have_one() {
    for (backend, store, _dir) in fresh_stores().await {
        let secured = store
            .insert_group(&Group {
                access_token: "s3cret".into(),
                ..group("app-one")
            })
            .await
            .expect("group");
        let open = store.insert_group(&group("app-two")).await.expect("group");
        let secured_job = new_job(&store, secured.id, ScheduleType::Cron).await;
        let open_job = new_job(&store, open.id, ScheduleType::Cron).await;
        let in_secured = insert(&store, manual_run(&secured_job, RunStatus::Pending)).await;
        let in_open = insert(&store, manual_run(&open_job, RunStatus::Pending)).await;
        let tokens = store
            .log_group_tokens(&[in_secured, in_open, LogId(9999)])
            .await
            .expect("tokens");
        assert_eq!(
            tokens,
            vec![(in_secured, "s3cret".to_string())],
            "{backend}"
        );
        assert!(
            store
                .log_group_tokens(&[])
                .await
                .expect("tokens")
                .is_empty(),
            "{backend}"
        );
        store.close().await;
    }
}

fn executor(executor_id: &str, owner: &str, address: &str, heartbeat_ms: i64) -> ExecutorInfo {
    ExecutorInfo {
        executor_id: executor_id.to_string(),
        app_name: "app".to_string(),
        address: address.to_string(),
        handlers: vec!["h".to_string()],
        registered_ms: 1,
        last_heartbeat_ms: heartbeat_ms,
        admin_node: owner.to_string(),
        running_log_ids: Vec::new(),
        protocol: Default::default(),
    }
}

#[tokio::test]
async fn every_admin_sees_the_live_registry_rows_of_all_admins() {
    for (backend, store, _dir) in fresh_stores().await {
        for row in [
            executor("a-1", "a", "http://h:1", 10_000),
            executor("b-1", "b", "http://h:3", 10_000),
            executor("b-2", "b", "http://h:2", 10_000),
            executor("b-3", "b", "http://h:2", 10_000),
            executor("c-1", "c", "http://h:9", 2_000),
        ] {
            store.upsert_registry(&row).await.expect("upsert");
        }
        assert_eq!(
            store
                .live_addresses_of_other_nodes("a", 5_000)
                .await
                .expect("addresses"),
            vec!["http://h:2".to_string(), "http://h:3".to_string()],
            "{backend}: distinct, sorted, live, not a's own"
        );
        let live = store.list_live_registry(5_000).await.expect("live");
        let described: Vec<(&str, &str)> = live
            .iter()
            .map(|row| (row.executor_id.as_str(), row.admin_node.as_str()))
            .collect();
        assert_eq!(
            described,
            vec![("a-1", "a"), ("b-2", "b"), ("b-3", "b"), ("b-1", "b")],
            "{backend}: by app, address, executor"
        );
        // An executor that moved to another admin: the row changes owner, it is not lost.
        store
            .upsert_registry(&executor("b-1", "a", "http://h:3", 11_000))
            .await
            .expect("handover");
        let moved = store.list_registry_of_node("a").await.expect("list");
        assert_eq!(
            moved
                .iter()
                .map(|row| row.executor_id.as_str())
                .collect::<Vec<_>>(),
            vec!["a-1", "b-1"],
            "{backend}"
        );
        assert_eq!(
            store.delete_stale_registry(5_000).await.expect("delete"),
            1,
            "{backend}: c-1 stopped heartbeating"
        );
        assert_eq!(store.list_live_registry(0).await.expect("live").len(), 4);
        store.close().await;
    }
}

/// The benchmark's outcome counts: first attempts of shard 0 in the window, by status and the
/// class of their message; retries, other shards, other groups and other seconds left out.
#[tokio::test]
async fn run_outcomes_count_first_attempts_by_status_and_reason() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let with = |at: i64, status: RunStatus, message: &str| NewRun {
            status,
            trigger_msg: message.to_string(),
            ..fire(&job, at, "n1", 1)
        };
        insert(&store, with(1_000, RunStatus::Success, "")).await;
        insert(&store, with(2_000, RunStatus::Success, "")).await;
        insert(&store, with(3_000, RunStatus::Skipped, "misfire: late")).await;
        insert(&store, with(4_000, RunStatus::Skipped, "overloaded: full")).await;
        insert(&store, with(5_000, RunStatus::Pending, "")).await;
        let retry = NewRun {
            attempt: 1,
            fire_key: Some(NewRun::fire_key(job.id, 1_000, 0, 1)),
            ..with(1_000, RunStatus::Failed, "")
        };
        insert(&store, retry).await;
        insert(&store, with(9_000, RunStatus::Failed, "")).await;
        let counts = store
            .run_outcomes(job.group_id, 1_000, 9_000)
            .await
            .expect("counts");
        let found: Vec<(String, String, i64)> = counts
            .into_iter()
            .map(|count| (count.status, count.reason, count.runs))
            .collect();
        let expected = [
            ("PENDING", "", 1),
            ("SKIPPED", "misfire", 1),
            ("SKIPPED", "overloaded", 1),
            ("SUCCESS", "", 2),
        ]
        .map(|(status, reason, runs)| (status.to_string(), reason.to_string(), runs));
        assert_eq!(found, expected, "{backend}");
        store.close().await;
    }
}
