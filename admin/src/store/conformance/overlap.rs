//! Overlap policies: what a job's earlier runs look like to a fire about to be sent, fires
//! parked WAITING (bounded for BUFFER_ONE), and their release once the job has nothing running,
//! oldest first and once only when admins release together.

use super::followups::dispatched_to;
use super::*;
use crate::model::overlap::Overlap;
use crate::store::Parked;

fn n1() -> NodeIdentity {
    NodeIdentity::new("n1", 1)
}

#[tokio::test]
async fn a_fire_sees_the_earlier_running_runs_of_its_job_and_its_waiting_runs() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let job = new_job(&store, group.id, ScheduleType::Cron).await;
        let other = new_job(&store, group.id, ScheduleType::Cron).await;
        let sent = insert_running(&store, fire(&job, 1_000, "n1", 1), 1_000).await;
        dispatched_to(&store, sent, "http://e:1").await;
        let unsent = insert_running(&store, fire(&job, 2_000, "n1", 1), 2_000).await;
        let done = insert_running(&store, fire(&job, 3_000, "n1", 1), 3_000).await;
        finish(&store, done, RunStatus::Success, 3_500).await;
        insert_running(&store, fire(&other, 4_000, "n1", 1), 4_000).await;
        let me = insert_running(&store, fire(&job, 5_000, "n1", 1), 5_000).await;
        insert_running(&store, fire(&job, 6_000, "n1", 1), 6_000).await;
        assert_eq!(
            store.overlap_state(job.id, me).await.expect("state"),
            Overlap {
                running: vec![(sent, "http://e:1".into()), (unsent, String::new())],
                waiting: Vec::new(),
            },
            "{backend}: RUNNING runs of this job older than the fire, sent or not"
        );
        assert_eq!(
            store.overlap_state(job.id, sent).await.expect("state"),
            Overlap::default(),
            "{backend}: the oldest run has nothing before it"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn fires_park_waiting_up_to_the_bound_and_only_while_this_node_holds_them_unsent() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let running = insert_running(&store, fire(&job, 1_000, "n1", 1), 1_000).await;
        dispatched_to(&store, running, "http://e:1").await;
        let first = insert_running(&store, fire(&job, 2_000, "n1", 1), 2_000).await;
        let second = insert_running(&store, fire(&job, 3_000, "n1", 1), 3_000).await;
        let third = insert_running(&store, fire(&job, 4_000, "n1", 1), 4_000).await;
        // The trigger time each claim wrote.
        let claimed_at = |log_id| match log_id {
            id if id == first => 2_000,
            id if id == second => 3_000,
            id if id == third => 4_000,
            _ => 1_000,
        };
        let park = |log_id, node: NodeIdentity, max_waiting| {
            let store = store.clone();
            async move {
                store
                    .park_run(
                        log_id,
                        job.id,
                        &node,
                        claimed_at(log_id),
                        max_waiting,
                        "waiting for run 1",
                    )
                    .await
                    .expect("park")
            }
        };
        assert_eq!(park(first, n1(), 1).await, Parked::Waiting, "{backend}");
        assert_eq!(
            park(second, n1(), 1).await,
            Parked::Full(first),
            "{backend}: BUFFER_ONE holds one"
        );
        assert_eq!(
            park(second, NodeIdentity::new("n1", 2), 0).await,
            Parked::Gone,
            "{backend}: another epoch's run"
        );
        assert_eq!(
            park(running, n1(), 0).await,
            Parked::Gone,
            "{backend}: a run already sent"
        );
        assert_eq!(park(second, n1(), 0).await, Parked::Waiting, "{backend}");
        let waiting = store.get_log(first).await.expect("log").expect("run");
        assert_eq!(waiting.status, RunStatus::Waiting, "{backend}");
        assert_eq!(waiting.trigger_msg, "waiting for run 1", "{backend}");
        assert_eq!(
            store.overlap_state(job.id, third).await.expect("state"),
            Overlap {
                running: vec![(running, "http://e:1".into())],
                waiting: vec![first, second],
            },
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn waiting_runs_are_released_oldest_first_once_nothing_runs_and_once_only_together() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let quiet = new_job(&store, job.group_id, ScheduleType::Cron).await;
        let running = insert_running(&store, fire(&job, 1_000, "n1", 1), 1_000).await;
        dispatched_to(&store, running, "http://e:1").await;
        let mut waiting = Vec::new();
        for at in [2_000, 3_000, 4_000] {
            let id = insert_running(&store, fire(&job, at, "n1", 1), at).await;
            let parked = store.park_run(id, job.id, &n1(), at, 0, "wait").await;
            assert_eq!(parked.expect("park"), Parked::Waiting, "{backend}");
            waiting.push(id);
        }
        let lone = insert_running(&store, fire(&quiet, 2_000, "n1", 1), 2_000).await;
        let parked = store
            .park_run(lone, quiet.id, &n1(), 2_000, 0, "wait")
            .await;
        assert_eq!(parked.expect("park"), Parked::Waiting, "{backend}");
        let releaser = NodeIdentity::new("n2", 5);

        // The quiet job has nothing running: its waiting run goes; the busy job's wait.
        let released = store
            .release_waiting(&releaser, 9_000, 10)
            .await
            .expect("release");
        assert_eq!(ids_of(&released), vec![lone], "{backend}");
        let run = &released[0];
        assert_eq!(run.status, RunStatus::Running, "{backend}");
        assert_eq!((run.owner_node.as_str(), run.epoch), ("n2", 5), "{backend}");
        assert_eq!(run.trigger_time_ms, 9_000, "{backend}");
        assert!(
            run.executor_address.is_empty(),
            "{backend}: claimed, not sent"
        );

        // Two admins release together when the running run ends: the oldest goes, once.
        finish(&store, running, RunStatus::Success, 9_500).await;
        let other = NodeIdentity::new("n3", 1);
        let (a, b) = tokio::join!(
            store.release_waiting(&releaser, 10_000, 10),
            store.release_waiting(&other, 10_000, 10)
        );
        let mut together = ids_of(&a.expect("release"));
        together.extend(ids_of(&b.expect("release")));
        assert_eq!(together, vec![waiting[0]], "{backend}");
        assert!(
            store
                .release_waiting(&releaser, 10_100, 10)
                .await
                .expect("release")
                .is_empty(),
            "{backend}: the released run is running now"
        );
        finish(&store, waiting[0], RunStatus::Success, 11_000).await;
        let next = store
            .release_waiting(&releaser, 11_100, 10)
            .await
            .expect("release");
        assert_eq!(ids_of(&next), vec![waiting[1]], "{backend}: in order");
        store.close().await;
    }
}

#[tokio::test]
async fn a_fire_of_the_schedule_held_back_pending_goes_before_the_later_ones() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        // Its claim failed (the database was down): still PENDING, its admin retrying it.
        let held = insert(&store, fire(&job, 1_000, "n1", 1)).await;
        // A retry in its backoff is not judged by the policy, so it holds nothing back.
        let retry = NewRun {
            fire_key: Some(NewRun::fire_key(job.id, 500, 0, 1)),
            attempt: 1,
            ..fire(&job, 500, "n1", 1)
        };
        insert(&store, retry).await;
        let later = insert_running(&store, fire(&job, 2_000, "n1", 1), 2_000).await;
        assert_eq!(
            store.overlap_state(job.id, later).await.expect("state"),
            Overlap {
                running: vec![(held, String::new())],
                waiting: Vec::new(),
            },
            "{backend}: the held-back fire is going, though nothing runs"
        );
        let parked = store.park_run(later, job.id, &n1(), 2_000, 0, "wait").await;
        assert_eq!(parked.expect("park"), Parked::Waiting, "{backend}");
        let releaser = NodeIdentity::new("n2", 5);
        assert!(
            store
                .release_waiting(&releaser, 3_000, 10)
                .await
                .expect("release")
                .is_empty(),
            "{backend}: not released ahead of the older held-back fire"
        );
        // Its claim goes through at last: it sees the later one waiting and waits behind it
        // (the trigger parks it), then goes first, being the oldest.
        let claimed = store
            .claim_runs(&[held], &n1(), 4_000)
            .await
            .expect("claim");
        assert_eq!(claimed.len(), 1, "{backend}");
        assert_eq!(
            store.overlap_state(job.id, held).await.expect("state"),
            Overlap {
                running: Vec::new(),
                waiting: vec![later],
            },
            "{backend}"
        );
        let parked = store.park_run(held, job.id, &n1(), 4_000, 0, "wait").await;
        assert_eq!(parked.expect("park"), Parked::Waiting, "{backend}");
        let released = store
            .release_waiting(&releaser, 5_000, 10)
            .await
            .expect("release");
        assert_eq!(ids_of(&released), vec![held], "{backend}: oldest first");
        store.close().await;
    }
}

/// A park whose first try committed but whose answer was lost is tried again. If this same
/// node released the run meanwhile (it is sending it), the second try must not park it again:
/// it would run now and once more when released again.
#[tokio::test]
async fn a_park_tried_again_after_the_run_was_released_leaves_it_running() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let running = insert_running(&store, fire(&job, 1_000, "n1", 1), 1_000).await;
        dispatched_to(&store, running, "http://e:1").await;
        let later = insert_running(&store, fire(&job, 2_000, "n1", 1), 2_000).await;
        let node = n1();
        let park = || store.park_run(later, job.id, &node, 2_000, 0, "wait");
        assert_eq!(park().await.expect("park"), Parked::Waiting, "{backend}");
        finish(&store, running, RunStatus::Success, 3_000).await;
        let released = store
            .release_waiting(&n1(), 4_000, 10)
            .await
            .expect("release");
        assert_eq!(ids_of(&released), vec![later], "{backend}");
        assert_eq!(
            park().await.expect("park"),
            Parked::Gone,
            "{backend}: the released run is not parked again"
        );
        let run = store.get_log(later).await.expect("log").expect("run");
        assert_eq!(run.status, RunStatus::Running, "{backend}");
        store.close().await;
    }
}
