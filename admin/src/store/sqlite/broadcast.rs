//! SQLite tests of the broadcast expansion (`shared/broadcast.rs`).

use crate::model::{GroupId, JobId};
use crate::model::{LogId, NewRun, NodeIdentity, RunStatus, TriggerType};

const NOW: i64 = 1_716_163_200_000;
const SCHEDULED: i64 = NOW - 1000;

async fn store() -> (tempfile::TempDir, crate::store::Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("broadcast.db").display());
    let store = crate::store::Store::connect(&url)
        .await
        .expect("store opens");
    (dir, store)
}

fn run(shard_index: i32, shard_total: i32, fire_key: Option<String>) -> NewRun {
    NewRun {
        job_id: JobId(7),
        group_id: GroupId(1),
        fire_key,
        status: RunStatus::Pending,
        trigger_type: TriggerType::Cron,
        scheduled_at_ms: SCHEDULED,
        handler: "h".to_string(),
        params: "p".to_string(),
        shard_index,
        shard_total,
        attempt: 0,
        trigger_msg: String::new(),
        owner_node: "n".to_string(),
        epoch: 1,
        dispatch_at_ms: 0,
        trace_id: String::new(),
    }
}

/// Inserts and claims shard 0 of a scheduled fire; returns its id.
async fn claimed_fire(store: &crate::store::Store) -> LogId {
    let key = NewRun::fire_key(JobId(7), SCHEDULED, 0, 0);
    let ids = store
        .insert_runs(&[run(0, 1, Some(key))])
        .await
        .expect("insert");
    let claimed = store
        .claim_runs(&ids, &NodeIdentity::new("n", 1), NOW)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    ids[0]
}

fn shards(total: i32) -> Vec<NewRun> {
    (1..total)
        .map(|index| NewRun {
            status: RunStatus::Running,
            ..run(
                index,
                total,
                Some(NewRun::fire_key(JobId(7), SCHEDULED, index, 0)),
            )
        })
        .collect()
}

#[tokio::test]
async fn expansion_adds_claimed_shards_with_their_own_fire_keys_once() {
    let (_dir, store) = store().await;
    let first_id = claimed_fire(&store).await;

    let expanded = store
        .expand_broadcast(first_id, 3, &shards(3), NOW)
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
    let key = |shard| Some(NewRun::fire_key(JobId(7), SCHEDULED, shard, 0));
    assert_eq!(
        described,
        vec![
            (0, 3, RunStatus::Running, NOW, key(0)),
            (1, 3, RunStatus::Running, NOW, key(1)),
            (2, 3, RunStatus::Running, NOW, key(2)),
        ]
    );
    assert_eq!(expanded[0].id, first_id);

    let again = store
        .expand_broadcast(first_id, 3, &shards(3), NOW)
        .await
        .expect("second expand");
    assert!(again.is_empty(), "an expanded fire is not expanded twice");
}

#[tokio::test]
async fn an_existing_shard_fire_key_is_skipped_not_duplicated() {
    let (_dir, store) = store().await;
    let first_id = claimed_fire(&store).await;
    // Shard 1 already exists (written by another admin racing on the same fire).
    store
        .insert_runs(&[run(1, 3, Some(NewRun::fire_key(JobId(7), SCHEDULED, 1, 0)))])
        .await
        .expect("insert shard 1");

    let expanded = store
        .expand_broadcast(first_id, 3, &shards(3), NOW)
        .await
        .expect("expand");
    let indexes: Vec<i32> = expanded.iter().map(|run| run.shard_index).collect();
    assert_eq!(indexes, vec![0, 2]);
}

#[tokio::test]
async fn a_pending_or_already_sharded_run_is_not_expanded() {
    let (_dir, store) = store().await;
    let ids = store.insert_runs(&[run(0, 1, None)]).await.expect("insert");
    let expanded = store
        .expand_broadcast(ids[0], 3, &shards(3), NOW)
        .await
        .expect("expand");
    assert!(expanded.is_empty(), "an unclaimed run is not expanded");
}
