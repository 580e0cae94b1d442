//! Partitioned scheduling on the servers: shares, joins, frees of a dead admin, and the round
//! fenced on the partition rows. SQLite keeps one scanning admin: it answers "not partitioned".

use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::model::partition::{PARTITIONS, partition_of};
use crate::store::RoundPlan;

/// Registers a node by the database's clock (the partition share judges leases by it).
async fn node(store: &Store, node_id: &str) -> NodeIdentity {
    let now = store.database_now_ms().await.expect("now");
    let epoch = store
        .register_node(node_id, now, 60_000)
        .await
        .expect("node");
    NodeIdentity::new(node_id, epoch)
}

async fn rebalance(store: &Store, node: &NodeIdentity) -> Vec<i64> {
    store
        .rebalance_partitions(node, 60_000)
        .await
        .expect("rebalance")
        .expect("partitioned on a server")
}

/// The ids of the jobs a partition round of `node` over `partitions` reads.
async fn jobs_planned(store: &Store, node: &NodeIdentity, partitions: &[i64]) -> Vec<JobId> {
    let mut read = Vec::new();
    let mut plan = |jobs: Vec<Job>| {
        read.extend(jobs.iter().map(|job| job.id));
        RoundPlan::default()
    };
    store
        .run_partition_round(node, partitions, i64::MAX / 2, 100, &mut plan)
        .await
        .expect("round");
    read
}

#[tokio::test]
async fn admins_share_the_partitions_and_a_round_reads_only_the_jobs_of_its_own() {
    for (backend, store, _dir) in fresh_stores().await {
        let a = node(&store, "a").await;
        if backend == "sqlite" {
            assert_eq!(
                store
                    .rebalance_partitions(&a, 60_000)
                    .await
                    .expect("rebalance"),
                None
            );
            store.close().await;
            continue;
        }
        let group = new_group(&store).await;
        let due = store.insert_job(&job(group.id, 10_000)).await.expect("job");
        let all: Vec<i64> = (0..PARTITIONS).collect();
        assert_eq!(
            rebalance(&store, &a).await,
            all,
            "{backend}: alone, a takes all"
        );
        assert_eq!(
            jobs_planned(&store, &a, &all).await,
            vec![due.id],
            "{backend}"
        );

        // A joiner finds nothing free; the owner releases its surplus (the last half in
        // `spread_rank` order: the odd partitions); the joiner takes it.
        let b = node(&store, "b").await;
        assert!(rebalance(&store, &b).await.is_empty(), "{backend}");
        let kept = rebalance(&store, &a).await;
        assert_eq!(
            kept,
            (0..256).step_by(2).collect::<Vec<_>>(),
            "{backend}: a keeps its share"
        );
        let taken = rebalance(&store, &b).await;
        assert_eq!(taken, (1..256).step_by(2).collect::<Vec<_>>(), "{backend}");
        // Settled: another round of each moves nothing.
        assert_eq!(rebalance(&store, &a).await, kept, "{backend}");
        assert_eq!(rebalance(&store, &b).await, taken, "{backend}");

        // Each round reads the jobs of the partitions it still owns, whatever it asks for.
        let a_reads = jobs_planned(&store, &a, &all).await;
        let b_reads = jobs_planned(&store, &b, &all).await;
        let owner_reads = if partition_of(due.id.0) % 2 == 0 {
            &a_reads
        } else {
            &b_reads
        };
        assert_eq!(owner_reads, &vec![due.id], "{backend}");
        assert_eq!(a_reads.len() + b_reads.len(), 1, "{backend}: planned once");

        // A clean stop releases everything; the other takes it at its next round.
        assert_eq!(store.release_partitions(&b).await.expect("release"), 128);
        store.close().await;
    }
}

#[tokio::test]
async fn a_dead_admins_partitions_move_and_its_stalled_round_plans_nothing() {
    for (backend, store, _dir) in fresh_stores().await {
        if backend == "sqlite" {
            continue;
        }
        let group = new_group(&store).await;
        let due = store.insert_job(&job(group.id, 10_000)).await.expect("job");
        let a = node(&store, "a").await;
        let stalled_view = rebalance(&store, &a).await;
        assert_eq!(stalled_view.len(), 256, "{backend}");
        let b = node(&store, "b").await;
        // The liveness watch found "a" dead: its partitions are freed and it is counted out
        // of the share, so "b" takes them all.
        assert_eq!(
            store.free_partitions_of(&a).await.expect("free"),
            256,
            "{backend}"
        );
        let taken = rebalance(&store, &b).await;
        assert_eq!(taken, stalled_view, "{backend}");
        // "a" resumes with the partition list it had: its round is fenced off the moved rows.
        let a_moved: Vec<i64> = stalled_view
            .iter()
            .copied()
            .filter(|part| taken.contains(part))
            .collect();
        assert!(
            jobs_planned(&store, &a, &a_moved).await.is_empty(),
            "{backend}: a stalled owner reads no job of a partition that moved"
        );
        assert_eq!(
            jobs_planned(&store, &b, &taken).await,
            vec![due.id],
            "{backend}"
        );
        // A restart of "a" (a new epoch) does not resurrect the old epoch's ownership.
        let a2 = node(&store, "a").await;
        assert!(
            jobs_planned(&store, &a2, &a_moved).await.is_empty(),
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rounds_of_two_admins_over_their_own_partitions_run_side_by_side() {
    for (backend, store, _dir) in fresh_stores().await {
        if backend == "sqlite" {
            continue;
        }
        let a = node(&store, "a").await;
        let b = node(&store, "b").await;
        rebalance(&store, &a).await;
        rebalance(&store, &b).await;
        let a_parts = rebalance(&store, &a).await;
        let b_parts = rebalance(&store, &b).await;
        assert!(!a_parts.is_empty() && !b_parts.is_empty(), "{backend}");
        // a's round stops inside its transaction (holding its partition rows and the shared
        // schedule lock) until b's round has committed: were rounds serialized, b's would wait
        // for a's, which waits for b's, and b's bounded wait would end it.
        let (inside, a_inside) = tokio::sync::oneshot::channel::<()>();
        let (done, b_committed) = mpsc::channel::<()>();
        let b_committed = std::sync::Mutex::new(b_committed);
        let store_a = store.clone();
        let a_round = tokio::spawn(async move {
            let mut inside = Some(inside);
            let mut signalled = false;
            let mut plan = |_jobs: Vec<Job>| {
                if let Some(inside) = inside.take() {
                    let _ = inside.send(());
                }
                // Blocking here holds the round inside its transaction; `block_in_place`
                // hands this worker's other tasks (and the drivers) to another thread.
                tokio::task::block_in_place(|| {
                    if let Ok(receiver) = b_committed.lock() {
                        // Under PostgreSQL's idle-in-transaction timeout (5 s).
                        signalled = receiver.recv_timeout(Duration::from_secs(4)).is_ok();
                    }
                });
                RoundPlan::default()
            };
            store_a
                .run_partition_round(&a, &a_parts, i64::MAX / 2, 100, &mut plan)
                .await
                .expect("a's round");
            signalled
        });
        a_inside.await.expect("a's round started planning");
        let b_round =
            tokio::time::timeout(Duration::from_secs(4), jobs_planned(&store, &b, &b_parts)).await;
        let _ = done.send(());
        let signalled = a_round.await.expect("a's task");
        assert!(
            b_round.is_ok() && signalled,
            "{backend}: b's round committed while a's was open"
        );
        store.close().await;
    }
}
