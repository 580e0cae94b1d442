//! The monitors' recovery reads: delayed runs coming due for their owner, runs lost on an
//! executor, and dispatches stranded by admins that went away.

use super::followups::{T0, dispatched_to};
use super::*;

#[tokio::test]
async fn delayed_runs_come_due_for_their_owner_and_epoch_only() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let delayed = |dispatch_at_ms, owner: &str, epoch| NewRun {
            dispatch_at_ms,
            owner_node: owner.to_string(),
            epoch,
            ..manual_run(&job, RunStatus::Pending)
        };
        let later = insert(&store, delayed(200, "n1", 2)).await;
        let sooner = insert(&store, delayed(100, "n1", 2)).await;
        for not_due in [
            delayed(10_000, "n1", 2),
            delayed(0, "n1", 2),
            delayed(50, "n2", 2),
            delayed(50, "n1", 1),
        ] {
            insert(&store, not_due).await;
        }
        insert_running(&store, delayed(50, "n1", 2), 60).await;
        assert_eq!(
            store
                .due_delayed_runs(&NodeIdentity::new("n1", 2), 1_000, 10)
                .await
                .expect("due"),
            vec![sooner, later],
            "{backend}: pending, due, this node and epoch, soonest first"
        );
        assert_eq!(
            store
                .due_delayed_runs(&NodeIdentity::new("n1", 2), 1_000, 1)
                .await
                .expect("due"),
            vec![sooner],
            "{backend}"
        );
        assert_eq!(
            store
                .due_delayed_runs(&NodeIdentity::new("n1", 2), 150, 10)
                .await
                .expect("due"),
            vec![sooner],
            "{backend}"
        );
        store.close().await;
    }
}

/// The lost-run check reads its runs row by row; every row comes through, in id order, up to
/// the limit (more rows than a driver sends before its reader takes them).
#[tokio::test]
async fn running_runs_are_read_whole_and_in_order_past_a_driver_buffer() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let mut ids = Vec::new();
        for second in 1..=150 {
            let id = insert_running(&store, fire(&job, second * 1_000, "n1", 1), second).await;
            dispatched_to(&store, id, &format!("http://e:{second}")).await;
            ids.push(id);
        }
        let running = store.running_runs(1_000).await.expect("running");
        assert_eq!(ids_of(&running), ids, "{backend}");
        assert_eq!(running[149].executor_address, "http://e:150", "{backend}");
        assert_eq!(running[149].params, job.params, "{backend}");
        let first = store.running_runs(120).await.expect("running");
        assert_eq!(ids_of(&first), ids[..120].to_vec(), "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn running_runs_that_reached_an_executor_are_marked_lost_once() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let watched = insert_running(&store, fire(&job, 1_000, "n1", 1), 1_000).await;
        dispatched_to(&store, watched, "http://e:1").await;
        let undelivered = insert_running(&store, fire(&job, 2_000, "n1", 1), 2_000).await;
        let done = insert_running(&store, fire(&job, 3_000, "n1", 1), 3_000).await;
        dispatched_to(&store, done, "http://e:1").await;
        finish(&store, done, RunStatus::Success, 3_500).await;
        let second = insert_running(&store, fire(&job, 4_000, "n1", 1), 4_000).await;
        dispatched_to(&store, second, "http://e:2").await;

        let running = store.running_runs(10).await.expect("running");
        assert_eq!(ids_of(&running), vec![watched, second], "{backend}");
        assert_eq!(running[0].executor_address, "http://e:1", "{backend}");
        assert_eq!(
            ids_of(&store.running_runs(1).await.expect("running")),
            vec![watched],
            "{backend}"
        );
        assert_ne!(undelivered, watched);

        assert!(
            store
                .mark_lost(watched, "executor gone", 9_000)
                .await
                .expect("lost"),
            "{backend}"
        );
        let lost = store.get_log(watched).await.expect("get").expect("run");
        assert_eq!(
            (
                lost.status,
                lost.handle_code,
                lost.handle_msg.as_str(),
                lost.handle_time_ms
            ),
            (RunStatus::Lost, 500, "executor gone", 9_000),
            "{backend}"
        );
        assert!(
            !store
                .mark_lost(watched, "again", 9_500)
                .await
                .expect("lost"),
            "{backend}"
        );
        assert!(
            !store.mark_lost(done, "late", 9_500).await.expect("lost"),
            "{backend}: a finished run is not lost"
        );
        let late_result = store
            .complete_runs(&[RunCompletion {
                log_id: watched,
                status: RunStatus::Success,
                handle_code: 200,
                handle_msg: "late".into(),
                finished_ms: 9_900,
            }])
            .await
            .expect("complete");
        assert!(late_result.is_empty(), "{backend}: LOST is final");
        store.close().await;
    }
}

#[tokio::test]
async fn stranded_dispatches_are_those_of_gone_admins_without_an_address() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        store.register_node("dead", T0, 10_000).await.expect("node");
        let claimed = |shard_index, owner: &str, epoch| NewRun {
            owner_node: owner.to_string(),
            epoch,
            ..shard_run(&job, T0, (shard_index, 3), 0, RunStatus::Pending)
        };
        let dead = insert_running(&store, claimed(0, "dead", 1), T0).await;
        let earlier_life = insert_running(&store, claimed(1, "me", 1), T0).await;
        insert_running(&store, claimed(2, "me", 2), T0).await;
        let stranded = |now_ms, claimed_before_ms| {
            let store = store.clone();
            async move {
                let runs = store
                    .stranded_dispatches(&NodeIdentity::new("me", 2), now_ms, claimed_before_ms)
                    .await
                    .expect("query");
                ids_of(&runs)
            }
        };

        // "me" restarted as epoch 2: its epoch-1 claim is stranded; "dead" is still leased.
        assert_eq!(
            stranded(T0 + 5_000, T0 + 1_000).await,
            vec![earlier_life],
            "{backend}"
        );
        assert_eq!(
            stranded(T0 + 20_000, T0 + 1_000).await,
            vec![dead, earlier_life],
            "{backend}"
        );
        // Claimed too recently by another node: its dispatch may still be in flight. This
        // node's earlier epoch is over, so its claim is stranded at once.
        assert_eq!(
            stranded(T0 + 20_000, T0).await,
            vec![earlier_life],
            "{backend}"
        );
        // Once its dispatch is recorded, a run is judged by its executor instead.
        dispatched_to(&store, dead, "http://e:1").await;
        assert_eq!(
            stranded(T0 + 20_000, T0 + 1_000).await,
            vec![earlier_life],
            "{backend}"
        );
        store.close().await;
    }
}
