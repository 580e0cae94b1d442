//! Backfills: the row, its fenced run creation (runs, links and cursor in one transaction),
//! progress counted from the runs, cancel, finish, and the take-over of a gone admin's.

use super::*;
use crate::model::{Backfill, BackfillProgress, BackfillState};

fn backfill(job: &Job, owner: &str, epoch: i64) -> Backfill {
    Backfill {
        id: 0,
        job_id: job.id,
        from_ms: 60_000,
        to_ms: 300_000,
        max_concurrent: 2,
        state: BackfillState::Running,
        total: 5,
        created: 0,
        cursor_ms: 0,
        owner_node: owner.to_string(),
        epoch,
        created_by: "alice".to_string(),
        created_ms: 10,
        updated_ms: 10,
    }
}

/// The unkeyed PENDING BACKFILL run of the occurrence at `at`, owned by `owner`.
fn occurrence(job: &Job, at: i64, owner: &str, epoch: i64) -> NewRun {
    NewRun {
        fire_key: None,
        trigger_type: TriggerType::Backfill,
        ..fire(job, at, owner, epoch)
    }
}

#[tokio::test]
async fn backfill_runs_are_created_once_in_order_and_only_by_the_owner() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let stored = store
            .insert_backfill(&backfill(&job, "n1", 1))
            .await
            .expect("backfill");
        assert!(stored.id > 0, "{backend}");
        assert_eq!(
            store.get_backfill(stored.id).await.expect("get"),
            Some(stored.clone()),
            "{backend}: stored as written"
        );
        let n1 = NodeIdentity::new("n1", 1);
        assert_eq!(
            store.owned_backfills(&n1).await.expect("owned"),
            vec![stored.clone()]
        );
        let first = [
            occurrence(&job, 60_000, "n1", 1),
            occurrence(&job, 120_000, "n1", 1),
        ];

        // Another node, an older epoch, or a stale count write nothing.
        for (node, read) in [
            (NodeIdentity::new("n2", 1), &stored),
            (NodeIdentity::new("n1", 2), &stored),
        ] {
            let fenced = store.create_backfill_runs(read, &node, &first, 20).await;
            assert_eq!(fenced.expect("fenced write"), None, "{backend}: {node:?}");
        }
        let ids = store
            .create_backfill_runs(&stored, &n1, &first, 20)
            .await
            .expect("created")
            .expect("not fenced");
        assert_eq!(ids.len(), 2, "{backend}");
        let read = store
            .get_backfill(stored.id)
            .await
            .expect("get")
            .expect("row");
        assert_eq!(
            (read.created, read.cursor_ms, read.updated_ms),
            (2, 120_000, 20),
            "{backend}"
        );
        assert_eq!(
            store.backfill_runs(stored.id).await.expect("links"),
            vec![(60_000, ids[0]), (120_000, ids[1])],
            "{backend}: each occurrence linked to its run"
        );
        let stale = store.create_backfill_runs(&stored, &n1, &first, 30).await;
        assert_eq!(
            stale.expect("stale"),
            None,
            "{backend}: the count read is the fence"
        );

        // An occurrence that already has its run: the whole write is undone.
        let again = [
            occurrence(&job, 180_000, "n1", 1),
            occurrence(&job, 120_000, "n1", 1),
        ];
        assert!(
            store
                .create_backfill_runs(&read, &n1, &again, 40)
                .await
                .is_err(),
            "{backend}: a second run of one occurrence is refused"
        );
        let after = store
            .get_backfill(stored.id)
            .await
            .expect("get")
            .expect("row");
        assert_eq!((after.created, after.cursor_ms), (2, 120_000), "{backend}");
        assert_eq!(
            store.backfill_runs(stored.id).await.expect("links").len(),
            2,
            "{backend}"
        );
        let logs = store
            .list_logs(&LogFilter {
                job_id: Some(job.id),
                limit: 100,
                ..LogFilter::default()
            })
            .await
            .expect("logs");
        assert_eq!(logs.len(), 2, "{backend}: no run row left behind");
        assert!(
            logs.iter()
                .all(|log| log.trigger_type == TriggerType::Backfill),
            "{backend}"
        );

        // Progress comes from the runs.
        assert_eq!(
            store.backfill_progress(stored.id).await.expect("progress"),
            BackfillProgress {
                succeeded: 0,
                failed: 0,
                running: 2
            },
            "{backend}"
        );
        store.skip_runs(&ids[1..], "test", 50).await.expect("skip");
        let progress = store
            .backfills_progress(&[stored.id, 999])
            .await
            .expect("progress");
        assert_eq!(
            progress.get(&stored.id),
            Some(&BackfillProgress {
                succeeded: 0,
                failed: 1,
                running: 1
            }),
            "{backend}"
        );
        assert_eq!(progress.get(&999), None, "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn backfills_end_by_cancel_or_finish_and_a_gone_admins_are_taken_over() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let gone_epoch = store.register_node("gone", 0, 1_000).await.expect("node");
        let live_epoch = store.register_node("live", 0, 60_000).await.expect("node");
        let live = NodeIdentity::new("live", live_epoch);
        let of_gone = store
            .insert_backfill(&backfill(&job, "gone", gone_epoch))
            .await
            .expect("backfill");
        let of_live_before = store
            .insert_backfill(&backfill(&job, "live", live_epoch - 1))
            .await
            .expect("backfill");
        let own = store
            .insert_backfill(&backfill(&job, "live", live_epoch))
            .await
            .expect("backfill");
        // While the gone node's lease holds, only this node's earlier epoch is taken over.
        assert_eq!(
            store.adopt_backfills(&live, 500).await.expect("adopt"),
            1,
            "{backend}"
        );
        assert_eq!(
            store.adopt_backfills(&live, 5_000).await.expect("adopt"),
            1,
            "{backend}"
        );
        let owned: Vec<i64> = store
            .owned_backfills(&live)
            .await
            .expect("owned")
            .iter()
            .map(|backfill| backfill.id)
            .collect();
        assert_eq!(
            owned,
            vec![of_gone.id, of_live_before.id, own.id],
            "{backend}"
        );

        assert!(
            store
                .cancel_backfill(of_gone.id, 6_000)
                .await
                .expect("cancel"),
            "{backend}"
        );
        assert!(
            !store
                .cancel_backfill(of_gone.id, 6_001)
                .await
                .expect("cancel"),
            "{backend}"
        );
        assert!(
            !store
                .finish_backfill(of_gone.id, &live, 6_002)
                .await
                .expect("finish"),
            "{backend}"
        );
        let other = NodeIdentity::new("other", 1);
        assert!(
            !store
                .finish_backfill(own.id, &other, 6_003)
                .await
                .expect("finish"),
            "{backend}"
        );
        assert!(
            store
                .finish_backfill(own.id, &live, 6_004)
                .await
                .expect("finish"),
            "{backend}"
        );
        let states: Vec<(i64, BackfillState)> = store
            .list_backfills(job.id)
            .await
            .expect("list")
            .iter()
            .map(|backfill| (backfill.id, backfill.state))
            .collect();
        assert_eq!(
            states,
            vec![
                (own.id, BackfillState::Done),
                (of_live_before.id, BackfillState::Running),
                (of_gone.id, BackfillState::Cancelled),
            ],
            "{backend}: newest first"
        );
        // Ended backfills are nobody's work any more.
        let adopted_ended = store
            .adopt_backfills(&NodeIdentity::new("live", live_epoch + 1), 7_000)
            .await
            .expect("adopt");
        assert_eq!(adopted_ended, 1, "{backend}: only the running one");
        store.close().await;
    }
}
