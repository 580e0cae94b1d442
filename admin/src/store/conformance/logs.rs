//! Run logs (inserts, dispatch outcomes, executor results, queries) and the shard rows of a
//! SHARDING_BROADCAST fire.

use super::*;

#[tokio::test]
async fn dispatch_outcomes_and_results_never_overwrite_a_final_state() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = store.insert_group(&group("app")).await.expect("group");
        let job = store.insert_job(&job(group.id, 0)).await.expect("job");
        let ids = store
            .insert_runs(&[fire(&job, 1_000, "n1", 1)])
            .await
            .expect("runs");
        store
            .claim_runs(&ids, &NodeIdentity::new("n1", 1), 1_000)
            .await
            .expect("claim");
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
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
        };
        store
            .record_dispatches(&NodeIdentity::new("n1", 1), &[accepted])
            .await
            .expect("record");
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
        assert_eq!(
            run.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736",
            "{backend}: the dispatch writes the run's trace id"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn runs_are_listed_newest_first_with_every_filter() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let first_job = new_job(&store, group.id, ScheduleType::Cron).await;
        let second_job = new_job(&store, group.id, ScheduleType::Cron).await;
        let ids = store
            .insert_runs(&[
                fire(&first_job, 1_000, "n1", 1),
                fire(&first_job, 2_000, "n1", 1),
                manual_run(&second_job, RunStatus::Pending),
            ])
            .await
            .expect("runs");
        assert_eq!(ids.len(), 3, "{backend}");
        assert!(
            ids[0] < ids[1] && ids[1] < ids[2],
            "{backend}: ids in insert order"
        );
        let stored = store.get_log(ids[2]).await.expect("get").expect("run");
        assert_eq!(
            (stored.job_id, stored.fire_key.clone(), stored.trigger_type),
            (second_job.id, None, TriggerType::Manual),
            "{backend}"
        );
        assert_eq!(
            store.get_log(LogId(9999)).await.expect("get"),
            None,
            "{backend}"
        );
        store
            .claim_runs(&ids[..2], &NodeIdentity::new("n1", 1), 5_000)
            .await
            .expect("claim");
        finish(&store, ids[0], RunStatus::Success, 5_500).await;

        let list = |filter: LogFilter| {
            let store = store.clone();
            async move {
                let runs = store
                    .list_logs(&LogFilter {
                        limit: 10,
                        ..filter
                    })
                    .await
                    .expect("logs");
                ids_of(&runs)
            }
        };
        assert_eq!(
            list(LogFilter::default()).await,
            vec![ids[2], ids[1], ids[0]],
            "{backend}"
        );
        assert_eq!(
            list(LogFilter {
                group_id: Some(group.id),
                job_id: Some(first_job.id),
                ..LogFilter::default()
            })
            .await,
            vec![ids[1], ids[0]],
            "{backend}"
        );
        assert_eq!(
            list(LogFilter {
                status: Some(RunStatus::Running),
                ..LogFilter::default()
            })
            .await,
            vec![ids[1]],
            "{backend}"
        );
        assert_eq!(
            list(LogFilter {
                from_ms: Some(5_000),
                to_ms: Some(5_000),
                ..LogFilter::default()
            })
            .await,
            vec![ids[1], ids[0]],
            "{backend}: by trigger time, bounds included"
        );
        assert!(
            list(LogFilter {
                group_id: Some(GroupId(9999)),
                ..LogFilter::default()
            })
            .await
            .is_empty(),
            "{backend}"
        );
        let page = store
            .list_logs(&LogFilter {
                offset: 1,
                limit: 1,
                ..LogFilter::default()
            })
            .await
            .expect("page");
        assert_eq!(ids_of(&page), vec![ids[1]], "{backend}");
        store.close().await;
    }
}

/// An admin that decided not to send a run (a pool full, an overlap policy, no executor)
/// writes that outcome late, after another admin took the run over (its lease had lapsed)
/// and sent it: the late outcome must leave the run to the admin that owns it now.
#[tokio::test]
async fn failed_and_skipped_dispatches_of_a_run_taken_over_leave_it_alone() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let taken = insert_running(&store, fire(&job, 1_000, "n2", 3), 1_000).await;
        let earlier_epoch = insert_running(&store, fire(&job, 2_000, "n1", 2), 2_000).await;
        let record = |log_id, outcome| DispatchRecord {
            log_id,
            outcome,
            trigger_code: 500,
            trigger_msg: format!("{outcome:?}"),
            executor_address: String::new(),
            finished_ms: 4_000,
            trace_id: String::new(),
        };
        store
            .record_dispatches(
                &NodeIdentity::new("n1", 1),
                &[
                    record(taken, DispatchOutcome::Skipped),
                    record(earlier_epoch, DispatchOutcome::Failed),
                ],
            )
            .await
            .expect("record");
        for id in [taken, earlier_epoch] {
            let run = store.get_log(id).await.expect("get").expect("run");
            assert_eq!(
                (run.status, run.trigger_msg.as_str()),
                (RunStatus::Running, ""),
                "{backend}: run {id} is another owner's"
            );
        }
        store.close().await;
    }
}

#[tokio::test]
async fn failed_and_skipped_dispatches_end_only_open_runs() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let refused = insert_running(&store, fire(&job, 1_000, "n1", 1), 1_000).await;
        let stopped = insert_running(&store, fire(&job, 2_000, "n1", 1), 2_000).await;
        let done = insert_running(&store, fire(&job, 3_000, "n1", 1), 3_000).await;
        finish(&store, done, RunStatus::Success, 3_100).await;
        let record = |log_id, outcome| DispatchRecord {
            log_id,
            outcome,
            trigger_code: 500,
            trigger_msg: format!("{outcome:?}"),
            executor_address: "http://a:1".into(),
            finished_ms: 4_000,
            trace_id: String::new(),
        };
        store
            .record_dispatches(
                &NodeIdentity::new("n1", 1),
                &[
                    record(done, DispatchOutcome::Failed),
                    record(refused, DispatchOutcome::Failed),
                    record(stopped, DispatchOutcome::Skipped),
                ],
            )
            .await
            .expect("record");
        let run = |id| {
            let store = store.clone();
            async move { store.get_log(id).await.expect("get").expect("run") }
        };
        let failed = run(refused).await;
        assert_eq!(
            (
                failed.status,
                failed.trigger_code,
                failed.trigger_msg.as_str(),
                failed.executor_address.as_str(),
                failed.handle_time_ms
            ),
            (RunStatus::Failed, 500, "Failed", "http://a:1", 4_000),
            "{backend}"
        );
        let skipped = run(stopped).await;
        assert_eq!(
            (skipped.status, skipped.trigger_msg.as_str()),
            (RunStatus::Skipped, "Skipped"),
            "{backend}"
        );
        let finished = run(done).await;
        assert_eq!(
            (
                finished.status,
                finished.handle_code,
                finished.handle_time_ms
            ),
            (RunStatus::Success, 200, 3_100),
            "{backend}: a final run keeps its result"
        );
        // A result for a run that already ended changes nothing either.
        let late = store
            .complete_runs(&[RunCompletion {
                log_id: refused,
                status: RunStatus::Success,
                handle_code: 200,
                handle_msg: "late".into(),
                finished_ms: 5_000,
            }])
            .await
            .expect("complete");
        assert!(late.is_empty(), "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn results_return_the_runs_they_changed() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let first = insert_running(&store, fire(&job, 1_000, "n1", 1), 1_000).await;
        let second = insert_running(&store, fire(&job, 2_000, "n1", 1), 2_000).await;
        let completion = |log_id, status| RunCompletion {
            log_id,
            status,
            handle_code: 502,
            handle_msg: "timed out".into(),
            finished_ms: 3_000,
        };
        let changed = store
            .complete_runs(&[
                completion(second, RunStatus::Timeout),
                completion(first, RunStatus::Killed),
                completion(second, RunStatus::Success),
                completion(LogId(9999), RunStatus::Success),
            ])
            .await
            .expect("complete");
        let mut changed = changed;
        changed.sort_unstable();
        assert_eq!(
            changed,
            vec![first, second],
            "{backend}: the repeated result of a batch does not count twice"
        );
        let mut described = Vec::new();
        for log_id in [first, second] {
            let run = store.get_log(log_id).await.expect("get").expect("run");
            described.push((run.id, run.status, run.handle_code, run.handle_time_ms));
        }
        assert_eq!(
            described,
            vec![
                (first, RunStatus::Killed, 502, 3_000),
                (second, RunStatus::Timeout, 502, 3_000),
            ],
            "{backend}: the first result of a run in a batch wins"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn a_result_write_folds_in_the_accepted_dispatch_outcome() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let open = insert_running(&store, fire(&job, 1_000, "n1", 1), 1_000).await;
        let plain = insert_running(&store, fire(&job, 2_000, "n1", 1), 2_000).await;
        let ended = insert_running(&store, fire(&job, 3_000, "n1", 1), 3_000).await;
        let completion = |log_id| RunCompletion {
            log_id,
            status: RunStatus::Success,
            handle_code: 200,
            handle_msg: "ok".into(),
            finished_ms: 4_000,
        };
        store
            .complete_runs(&[completion(ended)])
            .await
            .expect("first result");
        let accepted = |log_id| DispatchRecord {
            log_id,
            outcome: DispatchOutcome::Accepted,
            trigger_code: 200,
            trigger_msg: format!("sent {log_id}"),
            executor_address: "http://a:1".into(),
            finished_ms: 3_500,
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
        };
        let mut finished = store
            .complete_runs_folding(
                &[completion(open), completion(plain), completion(ended)],
                &[accepted(open), accepted(ended)],
            )
            .await
            .expect("complete");
        finished.sort_unstable();
        assert_eq!(finished, vec![open, plain], "{backend}");
        let run = |id| {
            let store = store.clone();
            async move { store.get_log(id).await.expect("get").expect("run") }
        };
        let folded = run(open).await;
        assert_eq!(
            (
                folded.status,
                folded.handle_code,
                folded.trigger_code,
                folded.trigger_msg,
                folded.executor_address.as_str(),
                folded.trace_id.as_str()
            ),
            (
                RunStatus::Success,
                200,
                200,
                format!("sent {open}"),
                "http://a:1",
                "4bf92f3577b34da6a3ce929d0e0e4736"
            ),
            "{backend}: result and dispatch outcome in one write"
        );
        let alone = run(plain).await;
        assert_eq!(
            (
                alone.status,
                alone.trigger_code,
                alone.executor_address.as_str()
            ),
            (RunStatus::Success, 0, ""),
            "{backend}: a run without an outcome to fold keeps its own"
        );
        let untouched = run(ended).await;
        assert_eq!(
            (untouched.trigger_code, untouched.executor_address.as_str()),
            (0, ""),
            "{backend}: a run the write does not finish gets nothing (the caller records it)"
        );
        store.close().await;
    }
}

/// Any admin finds the runs of a changed job that an executor may still hold from the rows
/// alone, whoever sent them: RUNNING, recorded sent ahead, accepted by an executor, instant
/// still to come.
#[tokio::test]
async fn runs_recorded_sent_ahead_and_not_started_are_found_by_job() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let job = new_job(&store, group.id, ScheduleType::Cron).await;
        let other_job = new_job(&store, group.id, ScheduleType::Cron).await;
        let ahead = format!(
            "route FIRST, fast pool: accepted by http://a:1 ({}, 12000 in the executor's clock)",
            crate::model::SENT_AHEAD_NOTE
        );
        let accepted = |log_id, trigger_msg: &str| DispatchRecord {
            log_id,
            outcome: DispatchOutcome::Accepted,
            trigger_code: 200,
            trigger_msg: trigger_msg.to_string(),
            executor_address: "http://a:1".into(),
            finished_ms: 9_000,
            trace_id: String::new(),
        };
        let held = insert_running(&store, fire(&job, 12_000, "n1", 1), 9_000).await;
        // Sent by another admin: its row says so just the same.
        let held_elsewhere = insert_running(&store, fire(&job, 13_000, "n2", 4), 9_000).await;
        // Its instant passed: it started, or is about to.
        let started = insert_running(&store, fire(&job, 10_000, "n1", 1), 9_000).await;
        // Sent at its instant: nothing held, and its executor may not hold runs at all.
        let at_instant = insert_running(&store, fire(&job, 14_000, "n1", 1), 9_000).await;
        // Claimed, its dispatch not recorded: no executor to ask.
        let _unrecorded = insert_running(&store, fire(&job, 15_000, "n1", 1), 9_000).await;
        // Held, then cancelled.
        let ended = insert_running(&store, fire(&job, 16_000, "n1", 1), 9_000).await;
        let of_other_job = insert_running(&store, fire(&other_job, 12_000, "n1", 1), 9_000).await;
        store
            .record_dispatches(
                &NodeIdentity::new("n1", 1),
                &[
                    accepted(held, &ahead),
                    accepted(held_elsewhere, &ahead),
                    accepted(started, &ahead),
                    accepted(at_instant, "route FIRST, fast pool: accepted by http://a:1"),
                    accepted(ended, &ahead),
                    accepted(of_other_job, &ahead),
                ],
            )
            .await
            .expect("record");
        finish(&store, ended, RunStatus::Killed, 9_500).await;
        let found = store.held_runs(job.id, 10_000).await.expect("held runs");
        assert_eq!(ids_of(&found), vec![held, held_elsewhere], "{backend}");
        assert_eq!(
            (found[0].executor_address.as_str(), found[0].group_id),
            ("http://a:1", group.id),
            "{backend}"
        );
        assert!(
            store
                .held_runs(other_job.id, 12_000)
                .await
                .expect("none")
                .is_empty(),
            "{backend}: only instants after the bound"
        );
        store.close().await;
    }
}

/// Inserts and claims shard 0 of a broadcast fire at `scheduled_at_ms`; returns its id.
async fn claimed_broadcast(store: &Store, job: &Job, scheduled_at_ms: i64) -> LogId {
    insert_running(
        store,
        shard_run(job, scheduled_at_ms, (0, 1), 0, RunStatus::Pending),
        scheduled_at_ms + 10,
    )
    .await
}

/// Shards 1..total of a broadcast fire, written already claimed.
fn other_shards(job: &Job, scheduled_at_ms: i64, total: i32) -> Vec<NewRun> {
    (1..total)
        .map(|index| shard_run(job, scheduled_at_ms, (index, total), 0, RunStatus::Running))
        .collect()
}

#[tokio::test]
async fn a_broadcast_fire_is_expanded_once_into_claimed_shards() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let first_id = claimed_broadcast(&store, &job, 1_000).await;
        let expanded = store
            .expand_broadcast(first_id, 3, &other_shards(&job, 1_000, 3), 1_500)
            .await
            .expect("expand");
        let described: Vec<(i32, i32, RunStatus, i64, Option<String>)> = expanded
            .iter()
            .map(|run| {
                (
                    run.shard_index,
                    run.shard_total,
                    run.status,
                    run.trigger_time_ms,
                    run.fire_key.clone(),
                )
            })
            .collect();
        let key = |shard| Some(NewRun::fire_key(job.id, 1_000, shard, 0));
        assert_eq!(
            described,
            vec![
                (0, 3, RunStatus::Running, 1_010, key(0)),
                (1, 3, RunStatus::Running, 1_500, key(1)),
                (2, 3, RunStatus::Running, 1_500, key(2)),
            ],
            "{backend}"
        );
        assert_eq!(expanded[0].id, first_id, "{backend}");
        let again = store
            .expand_broadcast(first_id, 3, &other_shards(&job, 1_000, 3), 1_600)
            .await
            .expect("expand again");
        assert!(again.is_empty(), "{backend}: expanded once");
        assert_eq!(runs_of(&store, job.id).await.len(), 3, "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn a_shard_row_that_exists_is_not_written_twice() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let first_id = claimed_broadcast(&store, &job, 1_000).await;
        // Shard 1 exists already (written by another admin racing on the same fire).
        insert(
            &store,
            shard_run(&job, 1_000, (1, 3), 0, RunStatus::Pending),
        )
        .await;
        let expanded = store
            .expand_broadcast(first_id, 3, &other_shards(&job, 1_000, 3), 1_500)
            .await
            .expect("expand");
        let indexes: Vec<i32> = expanded.iter().map(|run| run.shard_index).collect();
        assert_eq!(indexes, vec![0, 2], "{backend}");

        // A pending (unclaimed) run is not expanded.
        let pending = insert(
            &store,
            shard_run(&job, 2_000, (0, 1), 0, RunStatus::Pending),
        )
        .await;
        let nothing = store
            .expand_broadcast(pending, 3, &other_shards(&job, 2_000, 3), 2_500)
            .await
            .expect("expand");
        assert!(nothing.is_empty(), "{backend}");
        store.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_admins_expanding_one_fire_together_write_each_shard_once() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        for fire_at in (1..=5).map(|second| second * 1_000) {
            let first_id = claimed_broadcast(&store, &job, fire_at).await;
            let shards = other_shards(&job, fire_at, 4);
            let (one, two) = tokio::join!(
                store.expand_broadcast(first_id, 4, &shards, fire_at + 500),
                store.expand_broadcast(first_id, 4, &shards, fire_at + 500),
            );
            let (one, two) = (one.expect("expand"), two.expect("expand"));
            assert_eq!(
                one.len() + two.len(),
                4,
                "{backend}: one expansion wins, the other adds nothing"
            );
        }
        assert_eq!(runs_of(&store, job.id).await.len(), 20, "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn only_results_with_something_to_follow_up_wait_for_the_follow_up() {
    for (backend, store, _dir) in fresh_stores().await {
        let group_id = new_group(&store).await.id;
        let plain = new_job(&store, group_id, ScheduleType::Cron).await;
        let fix_delay = new_job(&store, group_id, ScheduleType::FixDelay).await;
        let parent = store
            .insert_job(&Job {
                child_job_ids: vec![plain.id],
                ..job(group_id, 0)
            })
            .await
            .expect("parent job");
        let plain_success = insert_running(&store, fire(&plain, 1_000, "n1", 1), 1_000).await;
        let plain_failure = insert_running(&store, fire(&plain, 2_000, "n1", 1), 2_000).await;
        let delayed = insert_running(&store, fire(&fix_delay, 1_000, "n1", 1), 1_000).await;
        let with_children = insert_running(&store, fire(&parent, 1_000, "n1", 1), 1_000).await;
        finish(&store, plain_success, RunStatus::Success, 3_000).await;
        finish(&store, plain_failure, RunStatus::Failed, 3_000).await;
        finish(&store, delayed, RunStatus::Success, 3_000).await;
        finish(&store, with_children, RunStatus::Success, 3_000).await;
        let mut claimed = ids_of(
            &store
                .claim_followups(&NodeIdentity::new("n1", 1), 100)
                .await
                .expect("claim"),
        );
        claimed.sort_unstable();
        let mut expected = vec![plain_failure, delayed, with_children];
        expected.sort_unstable();
        assert_eq!(
            claimed, expected,
            "{backend}: a success with no children and no FIX_DELAY needs no follow-up"
        );
        store.close().await;
    }
}

/// `count` RUNNING manual runs of `job`.
async fn running_runs(store: &Store, job: &Job, count: usize) -> Vec<LogId> {
    let runs = vec![manual_run(job, RunStatus::Running); count];
    store.insert_runs(&runs).await.expect("runs")
}

fn success(log_id: LogId, handle_msg: &str) -> RunCompletion {
    RunCompletion {
        log_id,
        status: RunStatus::Success,
        handle_code: 200,
        handle_msg: handle_msg.to_string(),
        finished_ms: 7,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admins_applying_the_same_results_together_finish_each_run_once() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        // A clone shares the pool but writes through its own connection, as a second admin.
        let other = store.clone();
        for round in 0..3 {
            // Past one statement's rows, so each admin writes two chunks.
            let ids = running_runs(&store, &job, 1_100).await;
            let results: Vec<RunCompletion> = ids.iter().map(|&id| success(id, "ok")).collect();
            let reversed: Vec<RunCompletion> = results.iter().rev().cloned().collect();
            let (first, second) = tokio::join!(
                store.complete_runs(&results),
                other.complete_runs(&reversed)
            );
            let mut all = first.expect("first admin");
            all.extend(second.expect("second admin"));
            all.sort_unstable();
            assert_eq!(
                all, ids,
                "{backend} round {round}: every run finished exactly once"
            );
        }
        store.close().await;
    }
}

/// A transaction of another session that holds every job row and one run (server backends;
/// SQLite has no row locks: its single writer excludes the others).
enum HeldRows {
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
    Mysql(sqlx::Transaction<'static, sqlx::MySql>),
}

async fn hold_rows<DB: crate::store::dialect::Dialect>(
    pools: crate::store::sql::Pools<'_, DB>,
    log_id: LogId,
) -> sqlx::Transaction<'static, DB> {
    use crate::store::sql::Sql;
    let mut tx = pools.begin().await.expect("begin");
    Sql::<DB>::new("SELECT id FROM xjob_job FOR UPDATE")
        .fetch_all(&mut tx)
        .await
        .expect("lock jobs");
    Sql::<DB>::new("SELECT id FROM xjob_log WHERE id = ")
        .bind(log_id.0)
        .push(" FOR UPDATE")
        .fetch_all(&mut tx)
        .await
        .expect("lock a run");
    tx
}

async fn hold_rows_elsewhere(store: &Store, log_id: LogId) -> Option<HeldRows> {
    match store {
        Store::Sqlite(_) => None,
        Store::Postgres(backend) => {
            Some(HeldRows::Postgres(hold_rows(backend.pools(), log_id).await))
        }
        Store::Mysql(backend) => Some(HeldRows::Mysql(hold_rows(backend.pools(), log_id).await)),
    }
}

impl HeldRows {
    async fn release(self) {
        match self {
            HeldRows::Postgres(tx) => tx.rollback().await.expect("rollback"),
            HeldRows::Mysql(tx) => tx.rollback().await.expect("rollback"),
        }
    }
}

/// Batched dispatch outcomes and results lock only their own runs, in the order of their ids,
/// and never a job row (the schedule round and FIX_DELAY follow-ups hold those); text of every
/// kind is written exactly; a success needs no follow-up unless its job has children or is
/// FIX_DELAY.
#[tokio::test]
async fn batches_lock_only_their_runs_never_the_job_row_and_keep_text_exactly() {
    for (backend, store, _dir) in fresh_stores().await {
        let group_id = new_group(&store).await.id;
        let job = new_job(&store, group_id, ScheduleType::Cron).await;
        let mut parent = job.clone();
        parent.child_job_ids = vec![job.id];
        let parent = store.insert_job(&parent).await.expect("parent");
        let fix_delay = new_job(&store, group_id, ScheduleType::FixDelay).await;
        let gone_job = Job {
            id: JobId(job.id.0 + 1_000),
            ..job.clone()
        };
        let runs = running_runs(&store, &job, 4).await;
        let of_gone_job = running_runs(&store, &gone_job, 1).await[0];
        let of_parent = running_runs(&store, &parent, 1).await[0];
        let of_fix_delay = running_runs(&store, &fix_delay, 1).await[0];

        // Another session holds every job row and one run outside the batches: a write that
        // scanned the (small) log table or locked job rows would wait for it.
        let held = hold_rows_elsewhere(&store, runs[1]).await;

        let tricky = "quote \" backslash \\ newline \n tab \t control \u{1} é 😀 '; --";
        let deadline = std::time::Duration::from_secs(5);
        let outcome = |log_id, outcome| DispatchRecord {
            log_id,
            outcome,
            trigger_code: 500,
            trigger_msg: format!("{tricky} {log_id}"),
            executor_address: "http://exécuteur:1".to_string(),
            finished_ms: 5,
            trace_id: String::new(),
        };
        tokio::time::timeout(
            deadline,
            store.record_dispatches(
                &NodeIdentity::new("n1", 1),
                &[
                    outcome(runs[3], DispatchOutcome::Skipped),
                    outcome(runs[2], DispatchOutcome::Failed),
                    outcome(runs[0], DispatchOutcome::Accepted),
                ],
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("{backend}: dispatches waited for a lock"))
        .expect("dispatches");
        let mut finished = tokio::time::timeout(
            deadline,
            store.complete_runs(&[
                success(of_fix_delay, "ok"),
                success(runs[0], tricky),
                success(runs[2], "late"),
                success(of_parent, "ok"),
                success(of_gone_job, "ok"),
                success(runs[0], "again"),
            ]),
        )
        .await
        .unwrap_or_else(|_| panic!("{backend}: results waited for a lock"))
        .expect("results");
        finished.sort_unstable();
        assert_eq!(
            finished,
            vec![runs[0], of_gone_job, of_parent, of_fix_delay],
            "{backend}"
        );
        if let Some(held) = held {
            held.release().await;
        }

        let run = store.get_log(runs[0]).await.expect("get").expect("run");
        assert_eq!(run.status, RunStatus::Success, "{backend}");
        assert_eq!(run.handle_msg, tricky, "{backend}");
        assert_eq!(
            run.trigger_msg,
            format!("{tricky} {}", runs[0]),
            "{backend}"
        );
        assert_eq!(run.executor_address, "http://exécuteur:1", "{backend}");
        let failed = store.get_log(runs[2]).await.expect("get").expect("run");
        assert_eq!(
            (failed.status, failed.handle_time_ms),
            (RunStatus::Failed, 5),
            "{backend}"
        );
        let skipped = store.get_log(runs[3]).await.expect("get").expect("run");
        assert_eq!(skipped.status, RunStatus::Skipped, "{backend}");
        for (log_id, expected) in [
            (runs[0], 1),
            (of_gone_job, 1),
            (of_parent, 0),
            (of_fix_delay, 0),
        ] {
            assert_eq!(
                super::followups::alarm_status_of(&store, log_id).await,
                expected,
                "{backend} run {log_id}"
            );
        }
        store.close().await;
    }
}

#[tokio::test]
async fn run_ids_can_be_moved_past_an_imported_last_id_and_never_back() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let job = new_job(&store, group.id, ScheduleType::Cron).await;
        // Before the first run: the sequence starts above the given id.
        store.raise_log_ids_past(70_000).await.expect("raise");
        let first = store
            .insert_runs(&[fire(&job, 1_000, "n1", 1)])
            .await
            .expect("run");
        assert!(first[0] > LogId(70_000), "{backend}: {first:?}");
        // A lower id later (a second import of an older installation) lowers nothing.
        store.raise_log_ids_past(10).await.expect("raise again");
        store
            .raise_log_ids_past(80_000)
            .await
            .expect("raise further");
        let second = store
            .insert_runs(&[fire(&job, 2_000, "n1", 1)])
            .await
            .expect("run");
        assert!(second[0] > LogId(80_000), "{backend}: {second:?}");
        store.raise_log_ids_past(5).await.expect("raise lower");
        let third = store
            .insert_runs(&[fire(&job, 3_000, "n1", 1)])
            .await
            .expect("run");
        assert!(
            third[0] > second[0],
            "{backend}: {third:?} after {second:?}"
        );
    }
}

#[tokio::test]
async fn lists_sort_by_a_whitelisted_column_with_id_ties_and_count_their_matches() {
    use crate::model::ListOrder;
    for (backend, store, _dir) in fresh_stores().await {
        let group = store.insert_group(&group("sorted")).await.expect("group");
        let mut ids = Vec::new();
        for (name, next_ms) in [("b", 300), ("a", 100), ("c", 200), ("a", 400)] {
            let job = Job {
                name: name.to_string(),
                ..job(group.id, next_ms)
            };
            ids.push(store.insert_job(&job).await.expect("job").id);
        }
        let names = |jobs: Vec<Job>| -> Vec<(String, JobId)> {
            jobs.into_iter().map(|job| (job.name, job.id)).collect()
        };
        let by = |key: &'static str, descending: bool| JobFilter {
            order: Some(ListOrder { key, descending }),
            limit: 10,
            ..JobFilter::default()
        };
        let sorted = names(store.list_jobs(&by("name", false)).await.expect("list"));
        assert_eq!(
            sorted,
            [
                ("a".to_string(), ids[1]),
                ("a".to_string(), ids[3]),
                ("b".to_string(), ids[0]),
                ("c".to_string(), ids[2]),
            ],
            "{backend}: by name, ties by id"
        );
        let sorted = names(store.list_jobs(&by("name", true)).await.expect("list"));
        assert_eq!(
            sorted[0],
            ("c".to_string(), ids[2]),
            "{backend}: descending"
        );
        assert_eq!(
            sorted[3],
            ("a".to_string(), ids[1]),
            "{backend}: ties descending too"
        );
        // A page of a sorted list, and the count of all matches.
        let page = JobFilter {
            name: Some("a".to_string()),
            offset: 1,
            limit: 1,
            ..by("next_fire", true)
        };
        let one = names(store.list_jobs(&page).await.expect("page"));
        assert_eq!(
            one,
            [("a".to_string(), ids[1])],
            "{backend}: second 'a' by next fire"
        );
        assert_eq!(store.count_matching_jobs(&page).await.expect("count"), 2);
        assert_eq!(
            store
                .count_matching_jobs(&JobFilter::default())
                .await
                .expect("count"),
            4
        );

        // Runs: newest first by default; by job, ties by id; counted with the filters.
        let jobs: Vec<Job> = store.list_jobs(&by("id", false)).await.expect("jobs");
        let fires: Vec<NewRun> = jobs
            .iter()
            .rev()
            .map(|job| fire(job, 1_000, "n1", 1))
            .collect();
        let runs = store.insert_runs(&fires).await.expect("runs");
        let listed = |order: Option<ListOrder>| LogFilter {
            order,
            limit: 10,
            ..LogFilter::default()
        };
        let newest = store.list_logs(&listed(None)).await.expect("logs");
        assert_eq!(newest[0].id, *runs.iter().max().expect("runs"), "{backend}");
        let by_job = store
            .list_logs(&listed(Some(ListOrder {
                key: "job",
                descending: false,
            })))
            .await
            .expect("logs");
        let job_ids: Vec<JobId> = by_job.iter().map(|run| run.job_id).collect();
        assert_eq!(job_ids, ids, "{backend}: by job id");
        let one_job = LogFilter {
            job_id: Some(ids[0]),
            ..listed(None)
        };
        assert_eq!(store.count_matching_logs(&one_job).await.expect("count"), 1);

        // A bounded count walks one match past its limit and stops there; under the limit it
        // is the exact count, filters included.
        let every = LogFilter::default();
        let all = store.count_matching_logs(&every).await.expect("count");
        assert_eq!(all, 4, "{backend}");
        for (limit, counted) in [(0, 1), (1, 2), (3, 4), (4, 4), (100, 4)] {
            assert_eq!(
                store
                    .count_matching_logs_up_to(&every, limit)
                    .await
                    .expect("bounded count"),
                counted,
                "{backend}: limit {limit}"
            );
        }
        assert_eq!(
            store
                .count_matching_logs_up_to(&one_job, 10)
                .await
                .expect("bounded count"),
            1,
            "{backend}"
        );
        let nothing_visible = LogFilter {
            group_ids: Some(Vec::new()),
            ..LogFilter::default()
        };
        assert_eq!(
            store
                .count_matching_logs_up_to(&nothing_visible, 10)
                .await
                .expect("bounded count"),
            0
        );
    }
}
