//! The schedule round under the lock, node leases, claims fenced by owner/epoch, adoption of
//! orphaned fires, and skipping planned fires.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;
use crate::store::RoundPlan;

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
        assert_eq!(found, 1, "{backend}");
        assert!(
            inserted.len() == 2 && inserted.iter().all(Option::is_some),
            "{backend}: both fires written, answered by position: {inserted:?}"
        );
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
        assert_eq!(inserted_again, vec![None], "{backend}: fire_key is unique");
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
            .adopt_orphan_runs(&NodeIdentity::new("n1", new_epoch), 2_000)
            .await
            .expect("adopt");
        assert_eq!(
            adopted.iter().map(|run| run.id).collect::<Vec<_>>(),
            ids,
            "{backend}"
        );
        assert!(
            store
                .claim_runs(&ids, &NodeIdentity::new("n1", old_epoch), 2_100)
                .await
                .expect("claim")
                .is_empty(),
            "{backend}"
        );
        let claimed = store
            .claim_runs(&ids, &NodeIdentity::new("n1", new_epoch), 2_200)
            .await
            .expect("claim");
        assert_eq!(claimed.len(), 1, "{backend}");
        assert_eq!(claimed[0].status, RunStatus::Running, "{backend}");
        assert!(
            store
                .claim_runs(&ids, &NodeIdentity::new("n1", new_epoch), 2_300)
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
                .adopt_orphan_runs(&NodeIdentity::new("n1", new_epoch), 2_500)
                .await
                .expect("adopt")
                .is_empty(),
            "{backend}"
        );
        assert_eq!(
            store
                .adopt_orphan_runs(&NodeIdentity::new("n1", new_epoch), 3_500)
                .await
                .expect("adopt")
                .len(),
            1,
            "{backend}"
        );
        store.close().await;
    }
}

/// A claim whose answer was lost leaves its rows RUNNING and unsent; only those of the
/// claiming node and epoch, with the trigger time that claim wrote, go back to PENDING: never
/// a sent or finished run, nor one this node made its own since in another way (released from
/// WAITING, taken over), which may be on its way to an executor already.
#[tokio::test]
async fn only_own_unsent_claims_go_back_to_pending() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = store.insert_group(&group("app")).await.expect("group");
        let job = store.insert_job(&job(group.id, 0)).await.expect("job");
        let epoch = store.register_node("n1", 0, 60_000).await.expect("node");
        let ids = store
            .insert_runs(&[
                fire(&job, 5_000, "n1", epoch),
                fire(&job, 6_000, "n1", epoch),
                fire(&job, 7_000, "n1", epoch),
                fire(&job, 8_000, "n1", epoch),
            ])
            .await
            .expect("runs");
        let claimed = store
            .claim_run_ids(
                &of_job(&ids[..3], job.id),
                &NodeIdentity::new("n1", epoch),
                5_000,
            )
            .await
            .expect("claim");
        assert_eq!(claimed.len(), 3, "{backend}");
        // Made this node's at another time (as a release from WAITING does), not yet recorded.
        let other = store
            .claim_run_ids(
                &of_job(&ids[3..], job.id),
                &NodeIdentity::new("n1", epoch),
                9_000,
            )
            .await
            .expect("claim");
        assert_eq!(other, vec![ids[3]], "{backend}");
        store
            .record_dispatches(
                &NodeIdentity::new("n1", epoch),
                &[DispatchRecord {
                    log_id: ids[1],
                    outcome: DispatchOutcome::Accepted,
                    trigger_code: 200,
                    trigger_msg: "accepted".into(),
                    executor_address: "http://127.0.0.1:1".into(),
                    finished_ms: 0,
                    trace_id: String::new(),
                }],
            )
            .await
            .expect("sent");

        for (node, wrong_epoch) in [("n2", epoch), ("n1", epoch + 1)] {
            let unclaimed = store
                .unclaim_unsent_runs(&ids, &NodeIdentity::new(node, wrong_epoch), &[5_000])
                .await
                .expect("unclaim");
            assert_eq!(unclaimed, 0, "{backend}: {node}/{wrong_epoch} owns none");
        }
        let none = store
            .unclaim_unsent_runs(&ids, &NodeIdentity::new("n1", epoch), &[])
            .await
            .expect("unclaim");
        assert_eq!(none, 0, "{backend}: no lost claim, nothing to put back");
        let unclaimed = store
            .unclaim_unsent_runs(&ids, &NodeIdentity::new("n1", epoch), &[4_000, 5_000])
            .await
            .expect("unclaim");
        assert_eq!(
            unclaimed, 2,
            "{backend}: the sent run and the run made this node's at 9 s stay RUNNING"
        );
        let kept = store.get_log(ids[3]).await.expect("get").expect("run");
        assert_eq!(kept.status, RunStatus::Running, "{backend}");
        let mut again = store
            .claim_run_ids(
                &of_job(&ids, job.id),
                &NodeIdentity::new("n1", epoch),
                5_100,
            )
            .await
            .expect("claim");
        again.sort_unstable();
        assert_eq!(again, vec![ids[0], ids[2]], "{backend}");
        store.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn schedule_rounds_started_together_run_one_after_the_other() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let due = store.insert_job(&job(group.id, 10_000)).await.expect("job");
        let inside = Arc::new(AtomicUsize::new(0));
        let most_inside = Arc::new(AtomicUsize::new(0));
        let saw_due = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(tokio::sync::Barrier::new(2));
        let mut admins = Vec::new();
        for node in ["n1", "n2"] {
            let (store, due) = (store.clone(), due.clone());
            let (inside, most_inside, saw_due, start) = (
                inside.clone(),
                most_inside.clone(),
                saw_due.clone(),
                start.clone(),
            );
            admins.push(tokio::spawn(async move {
                let mut plan = move |jobs: Vec<Job>| {
                    let now_inside = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most_inside.fetch_max(now_inside, Ordering::SeqCst);
                    // Holds the round open so that a round without the lock would overlap it;
                    // block_in_place hands this worker's other tasks (the other admin) on.
                    tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(200)));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    if jobs.is_empty() {
                        return RoundPlan::default();
                    }
                    saw_due.fetch_add(1, Ordering::SeqCst);
                    RoundPlan {
                        new_runs: vec![fire(&due, 10_000, node, 1)],
                        job_updates: vec![JobScheduleUpdate {
                            job_id: due.id,
                            trigger_last_ms: 10_000,
                            trigger_next_ms: 20_000,
                            status: JobStatus::Running,
                        }],
                    }
                };
                start.wait().await;
                store.run_schedule_round(15_000, 100, &mut plan).await
            }));
        }
        let mut inserted = 0;
        for admin in admins {
            let (_, runs) = admin.await.expect("round task").expect("round");
            inserted += runs.iter().flatten().count();
        }
        assert_eq!(
            most_inside.load(Ordering::SeqCst),
            1,
            "{backend}: rounds overlapped"
        );
        assert_eq!(
            saw_due.load(Ordering::SeqCst),
            1,
            "{backend}: the second round must see the first one's next fire time"
        );
        assert_eq!(inserted, 1, "{backend}");
        assert_eq!(runs_of(&store, due.id).await.len(), 1, "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn a_lease_is_renewed_only_by_the_current_epoch() {
    for (backend, store, _dir) in fresh_stores().await {
        let first = store.register_node("n1", 1_000, 500).await.expect("node");
        assert_eq!(first, 1, "{backend}: a new node starts at epoch 1");
        assert!(
            store
                .renew_node(&NodeIdentity::new("n1", first), 2_000)
                .await
                .expect("renew"),
            "{backend}"
        );
        let second = store
            .register_node("n1", 3_000, 500)
            .await
            .expect("restart");
        assert_eq!(second, 2, "{backend}");
        assert!(
            !store
                .renew_node(&NodeIdentity::new("n1", first), 4_000)
                .await
                .expect("renew"),
            "{backend}: the previous life of the node lost its lease"
        );
        assert!(
            store
                .renew_node(&NodeIdentity::new("n1", second), 4_000)
                .await
                .expect("renew"),
            "{backend}"
        );
        assert!(
            !store
                .renew_node(&NodeIdentity::new("nobody", 1), 4_000)
                .await
                .expect("renew"),
            "{backend}"
        );
        // The renewed lease is what others judge by: n1 is alive until 4 000.
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        insert(&store, fire(&job, 9_000, "n1", second)).await;
        store.register_node("n2", 0, 100_000).await.expect("node");
        assert!(
            store
                .adopt_orphan_runs(&NodeIdentity::new("n2", 1), 3_999)
                .await
                .expect("adopt")
                .is_empty(),
            "{backend}"
        );
        assert_eq!(
            store
                .adopt_orphan_runs(&NodeIdentity::new("n2", 1), 4_001)
                .await
                .expect("adopt")
                .len(),
            1,
            "{backend}"
        );
        store.close().await;
    }
}

/// Runs a dead admin claimed but never sent (RUNNING, no address): two admins taking them over
/// at once get each exactly once; a live owner's, a sent one and a finished one are not taken;
/// a taken run is skipped only by its new owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stranded_runs_are_taken_over_once_and_only_from_gone_owners() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let dead = store.register_node("dead", 0, 1_000).await.expect("node");
        for node in ["a", "b", "alive"] {
            store.register_node(node, 0, 100_000).await.expect("node");
        }
        let running = |second: i64, node: &str, epoch: i64| NewRun {
            status: RunStatus::Running,
            ..fire(&job, 10_000 + second * 1_000, node, epoch)
        };
        let mut runs: Vec<NewRun> = (0..40)
            .map(|second| running(second, "dead", dead))
            .collect();
        runs.push(running(40, "alive", 1));
        let ids = store.insert_runs(&runs).await.expect("runs");
        let (dead_ids, alive_id) = (&ids[..40], ids[40]);
        // One of the dead admin's runs was sent (its address recorded), one finished.
        let sent = DispatchRecord {
            log_id: dead_ids[0],
            outcome: DispatchOutcome::Accepted,
            trigger_code: 200,
            trigger_msg: "accepted".into(),
            executor_address: "http://127.0.0.1:1".into(),
            finished_ms: 5_000,
            trace_id: String::new(),
        };
        store
            .record_dispatches(&NodeIdentity::new("n1", 1), &[sent])
            .await
            .expect("record");
        store
            .mark_lost(dead_ids[1], "gone", 5_000)
            .await
            .expect("mark");

        let node_a = NodeIdentity::new("a", 1);
        let node_b = NodeIdentity::new("b", 1);
        let log_ids = ids.clone();
        let (by_a, by_b) = tokio::join!(
            store.adopt_stranded(&log_ids, &node_a, 5_000, 5_000),
            store.adopt_stranded(&log_ids, &node_b, 5_000, 5_000),
        );
        let mut taken = ids_of(&by_a.expect("adopt a"));
        taken.extend(ids_of(&by_b.expect("adopt b")));
        taken.sort_unstable();
        assert_eq!(taken, dead_ids[2..].to_vec(), "{backend}: each taken once");
        assert!(!taken.contains(&alive_id), "{backend}");

        // Only the new owner may record one skipped.
        let after = runs_of(&store, job.id).await;
        let owned_by_a: Vec<LogId> = after
            .iter()
            .filter(|run| run.owner_node == "a" && run.status == RunStatus::Running)
            .map(|run| run.id)
            .collect();
        let owned_by_b: Vec<LogId> = after
            .iter()
            .filter(|run| run.owner_node == "b" && run.status == RunStatus::Running)
            .map(|run| run.id)
            .collect();
        assert_eq!(owned_by_a.len() + owned_by_b.len(), 38, "{backend}");
        let wrong = store
            .skip_adopted_stranded(&owned_by_a, &NodeIdentity::new("b", 1), "late", 6_000)
            .await
            .expect("skip");
        assert_eq!(wrong, 0, "{backend}: not b's to skip");
        let right = store
            .skip_adopted_stranded(&owned_by_a, &NodeIdentity::new("a", 1), "late", 6_000)
            .await
            .expect("skip");
        assert_eq!(right as usize, owned_by_a.len(), "{backend}");
        store.close().await;
    }
}

/// Runs a node claimed and never sent, taken over through the executors' fence while its
/// lease still holds: `claimed_unsent_of` lists exactly its RUNNING, unsent runs at its epoch
/// or earlier (not a later epoch's, not a sent or finished one, not another node's), oldest
/// first and bounded; two admins adopting them at once get each exactly once, and a run
/// recorded as sent meanwhile stays with its owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claimed_runs_of_a_fenced_owner_are_listed_and_taken_over_once() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        for node in ["dead", "a", "b", "other"] {
            // Every lease holds: the fence, not the lease, lets the others take over.
            store.register_node(node, 0, 100_000).await.expect("node");
        }
        let running = |second: i64, node: &str, epoch: i64| NewRun {
            status: RunStatus::Running,
            ..fire(&job, 10_000 + second * 1_000, node, epoch)
        };
        let mut runs: Vec<NewRun> = (0..30).map(|second| running(second, "dead", 2)).collect();
        runs.push(running(30, "dead", 1));
        runs.push(running(31, "dead", 3));
        runs.push(running(32, "other", 2));
        runs.push(NewRun {
            status: RunStatus::Pending,
            ..fire(&job, 50_000, "dead", 2)
        });
        let ids = store.insert_runs(&runs).await.expect("runs");
        let (dead_ids, older, later, others, pending) =
            (&ids[..30], ids[30], ids[31], ids[32], ids[33]);
        let sent = DispatchRecord {
            log_id: dead_ids[0],
            outcome: DispatchOutcome::Accepted,
            trigger_code: 200,
            trigger_msg: "accepted".into(),
            executor_address: "http://127.0.0.1:1".into(),
            finished_ms: 5_000,
            trace_id: String::new(),
        };
        let dead = NodeIdentity::new("dead", 2);
        store
            .record_dispatches(&dead, &[sent])
            .await
            .expect("record");
        store
            .mark_lost(dead_ids[1], "gone", 5_000)
            .await
            .expect("mark");

        let listed = ids_of(&store.claimed_unsent_of(&dead, 100).await.expect("list"));
        let mut expected: Vec<LogId> = dead_ids[2..].to_vec();
        expected.push(older);
        expected.sort_unstable();
        assert_eq!(listed, expected, "{backend}: its unsent runs, oldest first");
        for excluded in [later, others, pending, dead_ids[0], dead_ids[1]] {
            assert!(
                !listed.contains(&excluded),
                "{backend}: {excluded:?} listed"
            );
        }
        let first_five = ids_of(&store.claimed_unsent_of(&dead, 5).await.expect("list"));
        assert_eq!(first_five, expected[..5].to_vec(), "{backend}: bounded");

        let (node_a, node_b) = (NodeIdentity::new("a", 1), NodeIdentity::new("b", 1));
        let (by_a, by_b) = tokio::join!(
            store.adopt_fenced(&ids, &dead, &node_a, 6_000),
            store.adopt_fenced(&ids, &dead, &node_b, 6_000),
        );
        let (by_a, by_b) = (by_a.expect("adopt a"), by_b.expect("adopt b"));
        let mut taken = ids_of(&by_a);
        taken.extend(ids_of(&by_b));
        taken.sort_unstable();
        assert_eq!(taken, expected, "{backend}: each taken once, nothing else");
        assert!(
            by_a.iter()
                .chain(&by_b)
                .all(|run| run.trigger_time_ms == 6_000
                    && run.status == RunStatus::Running
                    && run.executor_address.is_empty()),
            "{backend}: taken with the new trigger time, still unsent"
        );
        assert!(
            store
                .claimed_unsent_of(&dead, 100)
                .await
                .expect("list")
                .is_empty(),
            "{backend}: nothing left to the fenced owner"
        );
        store.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_owner_and_an_adopter_together_never_both_get_a_fire() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        // "stalled" started at 0 with a 1 s lease and froze; "a" and "b" are alive.
        let stalled = store
            .register_node("stalled", 0, 1_000)
            .await
            .expect("node");
        for node in ["a", "b"] {
            store.register_node(node, 0, 100_000).await.expect("node");
        }
        let runs: Vec<NewRun> = (0..60)
            .map(|second| fire(&job, 10_000 + second * 1_000, "stalled", stalled))
            .collect();
        let ids = store.insert_runs(&runs).await.expect("fires");

        // The stalled node wakes up and claims its fires while a and b sweep for orphans.
        let stalled_node = NodeIdentity::new("stalled", stalled);
        let node_a = NodeIdentity::new("a", 1);
        let node_b = NodeIdentity::new("b", 1);
        let log_ids = ids.clone();
        let (claimed, adopted_a, adopted_b) = tokio::join!(
            store.claim_runs(&log_ids, &stalled_node, 5_000),
            store.adopt_orphan_runs(&node_a, 5_000),
            store.adopt_orphan_runs(&node_b, 5_000),
        );
        let mut taken: Vec<LogId> = ids_of(&claimed.expect("claim"));
        taken.extend(ids_of(&adopted_a.expect("adopt")));
        taken.extend(ids_of(&adopted_b.expect("adopt")));
        taken.sort_unstable();
        let mut expected = ids.clone();
        expected.sort_unstable();
        assert_eq!(taken, expected, "{backend}: every fire taken exactly once");

        // The adopters' claims are fenced the same way: only the current owner claims.
        let now_owned: Vec<crate::model::RunLog> = runs_of(&store, job.id)
            .await
            .into_iter()
            .filter(|run| run.status == RunStatus::Pending)
            .collect();
        for run in &now_owned {
            let wrong = if run.owner_node == "a" { "b" } else { "a" };
            assert!(
                store
                    .claim_runs(&[run.id], &NodeIdentity::new(wrong, 1), 6_000)
                    .await
                    .expect("claim")
                    .is_empty(),
                "{backend}"
            );
        }
        let pending_ids = ids_of(&now_owned);
        let node_a = NodeIdentity::new("a", 1);
        let node_b = NodeIdentity::new("b", 1);
        let pending_log_ids = pending_ids.clone();
        let (by_a, by_b) = tokio::join!(
            store.claim_runs(&pending_log_ids, &node_a, 6_000),
            store.claim_runs(&pending_log_ids, &node_b, 6_000),
        );
        assert_eq!(
            by_a.expect("claim").len() + by_b.expect("claim").len(),
            pending_ids.len(),
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn skipping_touches_only_pending_runs_and_planned_fires() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let planned = insert(&store, fire(&job, 10_000, "n1", 1)).await;
        let later = insert(&store, fire(&job, 11_000, "n1", 1)).await;
        let manual = insert(&store, manual_run(&job, RunStatus::Pending)).await;
        let running = insert_running(&store, fire(&job, 9_000, "n1", 1), 9_000).await;

        let skipped = store
            .skip_planned_fires(job.id, "job stopped", 12_000)
            .await
            .expect("skip planned");
        let skipped: Vec<LogId> = skipped.iter().map(|run| run.id).collect();
        assert_eq!(
            skipped,
            vec![planned, later],
            "{backend}: the two pending scheduled fires"
        );
        for id in [planned, later] {
            let run = store.get_log(id).await.expect("get").expect("run");
            assert_eq!(
                (run.status, run.trigger_msg.as_str(), run.trigger_time_ms),
                (RunStatus::Skipped, "job stopped", 12_000),
                "{backend}"
            );
        }
        let status_of = |id| {
            let store = store.clone();
            async move { store.get_log(id).await.expect("get").expect("run").status }
        };
        assert_eq!(status_of(manual).await, RunStatus::Pending, "{backend}");
        assert_eq!(status_of(running).await, RunStatus::Running, "{backend}");

        store
            .skip_runs(&[manual, running, LogId(9999)], "too late", 13_000)
            .await
            .expect("skip runs");
        let manual_run = store.get_log(manual).await.expect("get").expect("run");
        assert_eq!(
            (manual_run.status, manual_run.trigger_msg.as_str()),
            (RunStatus::Skipped, "too late"),
            "{backend}"
        );
        assert_eq!(
            status_of(running).await,
            RunStatus::Running,
            "{backend}: a running run is never skipped"
        );
        store.close().await;
    }
}

/// A node's liveness lock: one holder at a time, seen by another admin while held, free once
/// its holder is gone (here: the lock dropped, as when the process dies); then that admin takes
/// over the node's PENDING fires of the epochs it saw, not those of a later epoch, and a claim
/// by the node it judged dead finds nothing.
#[tokio::test]
async fn a_liveness_lock_shows_while_held_and_frees_with_its_holder() {
    for (backend, url, _dir) in super::fresh_databases().await {
        let store = Store::connect(&url).await.expect("store");
        let other = Store::connect(&url).await.expect("a second admin's store");
        let mut lock = store
            .acquire_node_lock("n1")
            .await
            .expect("lock")
            .expect("a free lock is taken");
        assert!(
            other.acquire_node_lock("n1").await.expect("lock").is_none(),
            "{backend}: one holder at a time"
        );
        let names = ["n1".to_string(), "n2".to_string()];
        assert_eq!(
            other.node_locks_held(&names).await.expect("check"),
            [true, false],
            "{backend}"
        );
        lock.confirm().await.expect("the session lives");
        drop(lock);
        // The server notices the closed connection on its own schedule (at once, in practice).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while other.node_locks_held(&names).await.expect("check") != [false, false] {
            assert!(
                std::time::Instant::now() < deadline,
                "{backend}: the lock of a closed session was never released"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let dead_epoch = store.register_node("n1", 0, 100_000).await.expect("node");
        let old = insert(&store, fire(&job, 5_000, "n1", dead_epoch)).await;
        let later = insert(&store, fire(&job, 6_000, "n1", dead_epoch + 1)).await;
        let adopted = other
            .adopt_pending_of(
                &NodeIdentity::new("n1", dead_epoch),
                &NodeIdentity::new("n2", 1),
            )
            .await
            .expect("adopt");
        assert_eq!(
            adopted.iter().map(|run| run.id).collect::<Vec<_>>(),
            [old],
            "{backend}: a later epoch's fires stay with it"
        );
        assert!(
            store
                .claim_runs(&[old, later], &NodeIdentity::new("n1", dead_epoch), 1_000)
                .await
                .expect("claim")
                .is_empty(),
            "{backend}: the adopted fire is fenced off"
        );
        other.close().await;
        store.close().await;
    }
}

/// `ids`, each named with its job, as a claim of written fires takes them.
fn of_job(ids: &[LogId], job_id: JobId) -> Vec<(LogId, JobId)> {
    ids.iter().map(|id| (*id, job_id)).collect()
}

/// The claim of a second's fires (the first of each job without the id-ordered lock pass on
/// PostgreSQL, a job's further fires after them with it) while stops of half those jobs skip
/// their planned fires, many times: neither side fails (no deadlock for the server to break),
/// and every fire ends claimed or skipped, never both, as the two answers say.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stops_racing_a_claim_leave_each_fire_claimed_or_skipped() {
    const ROUNDS: i64 = 20;
    const JOBS: usize = 24;
    for (backend, store, _dir) in fresh_stores().await {
        let group = store.insert_group(&group("app")).await.expect("group");
        let epoch = store.register_node("n1", 0, 60_000).await.expect("node");
        let mut jobs = Vec::with_capacity(JOBS);
        for _ in 0..JOBS {
            jobs.push(store.insert_job(&job(group.id, 0)).await.expect("job"));
        }
        for round in 0..ROUNDS {
            let second_ms = (round + 1) * 10_000;
            // The first jobs fire three times in the second, as a broadcast's shards do.
            let fires: Vec<NewRun> = jobs
                .iter()
                .enumerate()
                .flat_map(|(index, job)| {
                    let count = if index < 4 { 3 } else { 1 };
                    (0..count).map(move |shard| fire(job, second_ms + shard, "n1", epoch))
                })
                .collect();
            let ids = store.insert_runs(&fires).await.expect("runs");
            let runs: Vec<(LogId, JobId)> = ids
                .iter()
                .zip(&fires)
                .map(|(id, fire)| (*id, fire.job_id))
                .collect();
            let claim = tokio::spawn({
                let store = store.clone();
                let node = NodeIdentity::new("n1", epoch);
                async move { store.claim_run_ids(&runs, &node, second_ms).await }
            });
            let stops: Vec<_> = jobs
                .iter()
                .step_by(2)
                .map(|job| {
                    let (store, job_id) = (store.clone(), job.id);
                    tokio::spawn(async move {
                        store.skip_planned_fires(job_id, "stopped", second_ms).await
                    })
                })
                .collect();
            let claimed: HashSet<LogId> = claim
                .await
                .expect("task")
                .unwrap_or_else(|error| panic!("{backend} round {round}: claim: {error}"))
                .into_iter()
                .collect();
            let mut skipped = HashSet::new();
            for stop in stops {
                let runs = stop
                    .await
                    .expect("task")
                    .unwrap_or_else(|error| panic!("{backend} round {round}: stop: {error}"));
                skipped.extend(runs.into_iter().map(|run| run.id));
            }
            for id in &ids {
                let run = store.get_log(*id).await.expect("get").expect("run");
                let (in_claim, in_stop) = (claimed.contains(id), skipped.contains(id));
                match run.status {
                    RunStatus::Running => assert!(
                        in_claim && !in_stop,
                        "{backend} round {round}: {id:?} RUNNING, claim {in_claim}, stop {in_stop}"
                    ),
                    RunStatus::Skipped => assert!(
                        in_stop && !in_claim,
                        "{backend} round {round}: {id:?} SKIPPED, claim {in_claim}, stop {in_stop}"
                    ),
                    other => panic!("{backend} round {round}: {id:?} is {other:?}"),
                }
            }
        }
        store.close().await;
    }
}
