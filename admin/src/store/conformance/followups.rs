//! The monitors' store methods for follow-ups of finished runs (claim, adopt, write: retries,
//! child jobs, FIX_DELAY release); delayed and lost runs are in `recovery`.
//!
//! The "together" tests start the follow-ups of one fire at the same moment from several
//! connections, repeated over several fires: a backend that lets two of them miss each other's
//! writes starts children twice, or never releases a FIX_DELAY job.
//!
//! Follow-up writes are fenced by the claim (owner node and epoch), so the tests claim the runs
//! (as node `n1` epoch 1) before writing their follow-ups.

use super::*;
use crate::store::{FixDelayRelease, FollowupWrite};

pub(super) const T0: i64 = 1_800_000_000_000;
/// The `trigger_next_ms` of a FIX_DELAY job waiting for its fire to finish.
const AWAITING: i64 = i64::MAX;

/// The follow-up of `log_id` by node `n1` epoch 1 (claimed with `claim_all`).
fn followup(log_id: LogId) -> FollowupWrite {
    FollowupWrite {
        log_id,
        claim_node: "n1".into(),
        claim_epoch: 1,
        alarm_status: AlarmStatus::NothingToAlarm,
        alarm_delivery: String::new(),
        retry: None,
        children: Vec::new(),
        children_need_all_shards: false,
        fix_delay_release: None,
    }
}

/// Claims every finished run not claimed yet, for node `n1` epoch 1.
async fn claim_all(store: &Store) {
    store
        .claim_followups(&NodeIdentity::new("n1", 1), 1_000)
        .await
        .expect("claim");
}

/// The `alarm_status` of run `log_id` (a test-only read of each backend: `RunLog` lacks it).
pub(super) async fn alarm_status_of(store: &Store, log_id: LogId) -> i32 {
    use crate::store::shared::followups::alarm_status_of;
    let alarm_status = match store {
        Store::Sqlite(backend) => alarm_status_of(backend.pools(), log_id).await,
        Store::Postgres(backend) => alarm_status_of(backend.pools(), log_id).await,
        Store::Mysql(backend) => alarm_status_of(backend.pools(), log_id).await,
    };
    alarm_status.expect("alarm status")
}

/// The PARENT run of `child` a parent's follow-up starts.
fn child_run(child: &Job) -> NewRun {
    NewRun {
        trigger_type: TriggerType::Parent,
        dispatch_at_ms: T0,
        ..manual_run(child, RunStatus::Pending)
    }
}

/// The follow-up of a broadcast shard that starts `child` once the whole fire succeeded.
fn with_children(log_id: LogId, child: &Job) -> FollowupWrite {
    FollowupWrite {
        children: vec![child_run(child)],
        children_need_all_shards: true,
        ..followup(log_id)
    }
}

/// Records that run `log_id` reached the executor at `address`.
pub(super) async fn dispatched_to(store: &Store, log_id: LogId, address: &str) {
    store
        .record_dispatches(
            &NodeIdentity::new("n1", 1),
            &[DispatchRecord {
                log_id,
                outcome: DispatchOutcome::Accepted,
                trigger_code: 200,
                trigger_msg: "accepted".into(),
                executor_address: address.to_string(),
                finished_ms: 0,
                trace_id: String::new(),
            }],
        )
        .await
        .expect("dispatch recorded");
}

/// Writes the follow-ups of `log_ids` at the same moment; returns how many started children
/// and how many released the FIX_DELAY job.
async fn write_together(store: &Store, writes: Vec<FollowupWrite>) -> (usize, usize) {
    let tasks: Vec<_> = writes
        .into_iter()
        .map(|write| {
            let store = store.clone();
            tokio::spawn(async move { store.write_followup(&write).await })
        })
        .collect();
    let (mut children, mut released) = (0, 0);
    for task in tasks {
        let written = task.await.expect("task").expect("follow-up written");
        children += written.child_ids.len();
        released += usize::from(written.released);
    }
    (children, released)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follow_ups_claimed_together_are_claimed_once_and_adopted_from_dead_nodes() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let runs: Vec<NewRun> = (0..3)
            .map(|index| shard_run(&job, T0, (index, 3), 0, RunStatus::Failed))
            .chain([shard_run(&job, T0, (0, 3), 5, RunStatus::Running)])
            .collect();
        store.insert_runs(&runs).await.expect("runs");
        store.register_node("a", T0, 10_000).await.expect("node a");
        store.register_node("b", T0, 10_000).await.expect("node b");
        let node_a = NodeIdentity::new("a", 1);
        let node_b = NodeIdentity::new("b", 1);
        let (claimed_a, claimed_b) = tokio::join!(
            store.claim_followups(&node_a, 2),
            store.claim_followups(&node_b, 2),
        );
        let mut claimed = ids_of(&claimed_a.expect("claim"));
        claimed.extend(ids_of(&claimed_b.expect("claim")));
        claimed.sort_unstable();
        claimed.dedup();
        assert_eq!(
            claimed.len(),
            3,
            "{backend}: each finished run once, the running one never"
        );
        assert!(
            store
                .claim_followups(&NodeIdentity::new("a", 1), 10)
                .await
                .expect("claim")
                .is_empty(),
            "{backend}: nothing left to claim"
        );

        // Node b dies: after its lease, a takes over b's unfinished claims, not before.
        let early = store
            .adopt_stale_followups(&NodeIdentity::new("a", 1), T0 + 5_000)
            .await
            .expect("adopt");
        assert!(early.len() < 3, "{backend}: b is still alive");
        assert!(early.iter().all(|run| run.owner_node == "a"), "{backend}");
        let adopted = store
            .adopt_stale_followups(&NodeIdentity::new("a", 1), T0 + 20_000)
            .await
            .expect("adopt");
        assert_eq!(
            adopted.len(),
            3,
            "{backend}: a's own unfinished claims and b's"
        );
        assert!(
            adopted
                .iter()
                .all(|run| run.owner_node == "a" && run.epoch == 1),
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn a_finished_follow_up_is_neither_claimed_nor_adopted_again() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let done = insert(&store, shard_run(&job, T0, (0, 1), 0, RunStatus::Success)).await;
        let claimed = store
            .claim_followups(&NodeIdentity::new("n1", 1), 10)
            .await
            .expect("claim");
        assert_eq!(ids_of(&claimed), vec![done], "{backend}");
        // A run finishing after the claim is not touched by ending the earlier claims.
        let later = insert(
            &store,
            shard_run(&job, T0 + 1, (0, 1), 0, RunStatus::Success),
        )
        .await;
        let finished = store
            .finish_followups(
                &NodeIdentity::new("n1", 1),
                &[done, later],
                AlarmStatus::NothingToAlarm,
            )
            .await
            .expect("finish");
        assert_eq!(finished, 1, "{backend}: only the claimed run");
        assert!(
            store
                .adopt_stale_followups(&NodeIdentity::new("n1", 1), T0)
                .await
                .expect("adopt")
                .is_empty(),
            "{backend}"
        );
        let next = store
            .claim_followups(&NodeIdentity::new("n1", 1), 10)
            .await
            .expect("claim");
        assert_eq!(ids_of(&next), vec![later], "{backend}");
        let none = store
            .finish_followups(
                &NodeIdentity::new("n1", 1),
                &[],
                AlarmStatus::NothingToAlarm,
            )
            .await
            .expect("nothing to finish");
        assert_eq!(none, 0, "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn a_stalled_admin_writes_nothing_for_a_follow_up_another_admin_adopted() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let parent = new_job(&store, group.id, ScheduleType::FixDelay).await;
        let child = new_job(&store, group.id, ScheduleType::None).await;
        awaiting_fix_delay(&store, &parent, T0).await;
        let epoch_a = store.register_node("a", T0, 10_000).await.expect("node a");
        let epoch_b = store.register_node("b", T0, 10_000).await.expect("node b");
        let done = insert(
            &store,
            shard_run(&parent, T0, (0, 1), 0, RunStatus::Success),
        )
        .await;
        let quiet = insert(&store, manual_run(&parent, RunStatus::Success)).await;
        let claimed = store
            .claim_followups(&NodeIdentity::new("a", epoch_a), 10)
            .await
            .expect("claim");
        assert_eq!(ids_of(&claimed), vec![done, quiet], "{backend}");
        // What a would write for `done`: a child run, a retry, an alarm, the FIX_DELAY release.
        let late_write = |claim_node: &str, claim_epoch| FollowupWrite {
            claim_node: claim_node.to_string(),
            claim_epoch,
            alarm_status: AlarmStatus::Failed,
            alarm_delivery: String::new(),
            retry: Some(shard_run(&parent, T0, (0, 1), 1, RunStatus::Pending)),
            children: vec![child_run(&child)],
            ..with_release(done, &parent, T0, T0 + 5_000)
        };

        // a stalls past its lease; b (alive) adopts a's claims.
        assert!(
            store
                .renew_node(&NodeIdentity::new("b", epoch_b), T0 + 30_000)
                .await
                .expect("renew")
        );
        let adopted = store
            .adopt_stale_followups(&NodeIdentity::new("b", epoch_b), T0 + 20_000)
            .await
            .expect("adopt");
        assert_eq!(ids_of(&adopted), vec![done, quiet], "{backend}");

        // a resumes before b wrote anything: refused, and b's claims are untouched.
        let refused = store
            .write_followup(&late_write("a", epoch_a))
            .await
            .expect("write");
        assert_eq!(
            refused,
            crate::store::FollowupWritten::fenced_off(),
            "{backend}: nothing written"
        );
        let finished = store
            .finish_followups(
                &NodeIdentity::new("a", epoch_a),
                &[quiet],
                AlarmStatus::Failed,
            )
            .await
            .expect("finish");
        assert_eq!(finished, 0, "{backend}: a's finish after the adoption");
        for log_id in [done, quiet] {
            assert_eq!(alarm_status_of(&store, log_id).await, -1, "{backend}");
        }
        assert!(runs_of(&store, child.id).await.is_empty(), "{backend}");
        assert_eq!(runs_of(&store, parent.id).await.len(), 2, "{backend}");
        assert_eq!(next_fire_of(&store, &parent).await, AWAITING, "{backend}");

        // b, holding the claims, follows up: one child, alarm sent; the other run needs nothing.
        let by_b = store
            .write_followup(&FollowupWrite {
                claim_node: "b".into(),
                claim_epoch: epoch_b,
                alarm_status: AlarmStatus::Sent,
                alarm_delivery: "email: sent to 2 recipient(s)\nwebhook: sent (HTTP 200)".into(),
                children: vec![child_run(&child)],
                ..followup(done)
            })
            .await
            .expect("write");
        assert!(!by_b.fenced_off, "{backend}");
        assert_eq!(by_b.child_ids.len(), 1, "{backend}");
        let finished = store
            .finish_followups(
                &NodeIdentity::new("b", epoch_b),
                &[quiet],
                AlarmStatus::NothingToAlarm,
            )
            .await
            .expect("finish");
        assert_eq!(finished, 1, "{backend}");

        // a, later still: refused again; no second child, no retry, b's alarm_status stays.
        let refused = store
            .write_followup(&late_write("a", epoch_a))
            .await
            .expect("write");
        assert!(refused.fenced_off, "{backend}");
        assert_eq!(refused.child_ids, Vec::<LogId>::new(), "{backend}");
        let finished = store
            .finish_followups(
                &NodeIdentity::new("a", epoch_a),
                &[done, quiet],
                AlarmStatus::Failed,
            )
            .await
            .expect("finish");
        assert_eq!(finished, 0, "{backend}");
        assert_eq!(alarm_status_of(&store, done).await, 2, "{backend}");
        let delivered = store.get_log(done).await.expect("read").expect("row");
        assert_eq!(
            delivered.alarm_delivery, "email: sent to 2 recipient(s)\nwebhook: sent (HTTP 200)",
            "{backend}: the delivery is written with the alarm status, and kept by the refusal"
        );
        assert_eq!(alarm_status_of(&store, quiet).await, 1, "{backend}");
        assert_eq!(
            ids_of(&runs_of(&store, child.id).await),
            by_b.child_ids,
            "{backend}: one child run"
        );
        assert_eq!(
            runs_of(&store, parent.id).await.len(),
            2,
            "{backend}: no retry"
        );
        assert_eq!(next_fire_of(&store, &parent).await, AWAITING, "{backend}");

        // The epoch counts too: a restarted (epoch 2) adopts its own earlier claim, after which
        // the old life's write is refused and the new one's goes through.
        let own = insert(&store, manual_run(&parent, RunStatus::Success)).await;
        let claimed = store
            .claim_followups(&NodeIdentity::new("a", epoch_a), 10)
            .await
            .expect("claim");
        assert_eq!(ids_of(&claimed), vec![own], "{backend}");
        let epoch_a2 = store
            .register_node("a", T0 + 20_000, 10_000)
            .await
            .expect("node a");
        assert!(epoch_a2 > epoch_a, "{backend}");
        let adopted = store
            .adopt_stale_followups(&NodeIdentity::new("a", epoch_a2), T0 + 20_000)
            .await
            .expect("adopt");
        assert_eq!(ids_of(&adopted), vec![own], "{backend}");
        let old_life = FollowupWrite {
            claim_node: "a".into(),
            claim_epoch: epoch_a,
            ..followup(own)
        };
        let refused = store.write_followup(&old_life).await.expect("write");
        assert!(refused.fenced_off, "{backend}: epoch {epoch_a} is over");
        let new_life = FollowupWrite {
            claim_epoch: epoch_a2,
            ..old_life
        };
        let written = store.write_followup(&new_life).await.expect("write");
        assert!(!written.fenced_off, "{backend}");
        assert_eq!(alarm_status_of(&store, own).await, 1, "{backend}");
        store.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_is_created_once_per_attempt_even_when_written_together() {
    for (backend, store, _dir) in fresh_stores().await {
        let job = new_job(&store, new_group(&store).await.id, ScheduleType::Cron).await;
        let failed = insert(&store, shard_run(&job, T0, (0, 1), 0, RunStatus::Failed)).await;
        let manual = insert(&store, manual_run(&job, RunStatus::Failed)).await;
        claim_all(&store).await;
        let with_retry = |log_id| FollowupWrite {
            retry: Some(shard_run(&job, T0, (0, 1), 1, RunStatus::Pending)),
            ..followup(log_id)
        };
        let twice = with_retry(failed);
        let (first, second) =
            tokio::join!(store.write_followup(&twice), store.write_followup(&twice),);
        let (first, second) = (first.expect("write"), second.expect("write"));
        assert!(
            first.fenced_off != second.fenced_off,
            "{backend}: the claim admits one write: {first:?} {second:?}"
        );
        let retry_ids: Vec<LogId> = [&first, &second]
            .into_iter()
            .filter_map(|written| written.retry_id)
            .collect();
        assert_eq!(retry_ids.len(), 1, "{backend}");
        let repeat = store
            .write_followup(&with_retry(failed))
            .await
            .expect("write");
        assert!(repeat.fenced_off, "{backend}: the claim is closed");
        assert_eq!(repeat.retry_id, None, "{backend}");
        // Another claimed run proposing the same attempt adds no row: the fire_key exists.
        let same_key = store
            .write_followup(&with_retry(manual))
            .await
            .expect("write");
        assert!(!same_key.fenced_off, "{backend}");
        assert_eq!(
            same_key.retry_id, None,
            "{backend}: the fire_key exists already"
        );
        let runs = runs_of(&store, job.id).await;
        assert_eq!(runs.len(), 3, "{backend}");
        let retry = &runs[2];
        assert_eq!(
            (retry.id, retry.attempt, retry.status, retry.scheduled_at_ms),
            (retry_ids[0], 1, RunStatus::Pending, T0),
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn broadcast_children_start_once_after_every_shard_succeeded() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let parent = new_job(&store, group.id, ScheduleType::Cron).await;
        let child = new_job(&store, group.id, ScheduleType::None).await;
        let shard = |index, status| shard_run(&parent, T0, (index, 3), 0, status);
        let first = insert(&store, shard(0, RunStatus::Success)).await;
        let second = insert(&store, shard(1, RunStatus::Success)).await;
        let third = insert_running(&store, shard(2, RunStatus::Pending), T0).await;
        claim_all(&store).await;

        let early = store
            .write_followup(&with_children(first, &child))
            .await
            .expect("write");
        assert!(early.child_ids.is_empty(), "{backend}: shard 2 still runs");

        // Shards 1 and 2 are followed up at the same time (two admins): one starts them.
        finish(&store, third, RunStatus::Success, T0 + 100).await;
        claim_all(&store).await;
        let (started, _) = write_together(
            &store,
            vec![with_children(second, &child), with_children(third, &child)],
        )
        .await;
        assert_eq!(started, 1, "{backend}: children started exactly once");
        let again = store
            .write_followup(&with_children(first, &child))
            .await
            .expect("write");
        assert!(
            again.fenced_off && again.child_ids.is_empty(),
            "{backend}: a late repeat (its claim closed) starts nothing"
        );

        // More fires whose three shards are all followed up at once.
        for fire_at in (1..=5).map(|second| T0 + second * 1_000) {
            let runs: Vec<NewRun> = (0..3)
                .map(|index| shard_run(&parent, fire_at, (index, 3), 0, RunStatus::Success))
                .collect();
            let ids = store.insert_runs(&runs).await.expect("shards");
            claim_all(&store).await;
            let writes = ids.iter().map(|id| with_children(*id, &child)).collect();
            let (started, _) = write_together(&store, writes).await;
            assert_eq!(started, 1, "{backend}: fire at {fire_at}");
        }
        assert_eq!(runs_of(&store, child.id).await.len(), 6, "{backend}");
        store.close().await;
    }
}

#[tokio::test]
async fn a_shard_that_succeeds_on_retry_completes_the_fire() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let parent = new_job(&store, group.id, ScheduleType::Cron).await;
        let child = new_job(&store, group.id, ScheduleType::None).await;
        let runs = [
            shard_run(&parent, T0, (0, 3), 0, RunStatus::Success),
            shard_run(&parent, T0, (1, 3), 0, RunStatus::Failed),
            shard_run(&parent, T0, (1, 3), 1, RunStatus::Success),
            shard_run(&parent, T0, (2, 3), 0, RunStatus::Success),
        ];
        let ids = store.insert_runs(&runs).await.expect("runs");
        claim_all(&store).await;
        let written = store
            .write_followup(&with_children(ids[2], &child))
            .await
            .expect("write");
        assert_eq!(written.child_ids.len(), 1, "{backend}");
        let child_runs = runs_of(&store, child.id).await;
        assert_eq!(ids_of(&child_runs), written.child_ids, "{backend}");
        assert_eq!(child_runs[0].trigger_type, TriggerType::Parent, "{backend}");
        store.close().await;
    }
}

/// A FIX_DELAY job waiting for its fire at `scheduled_at_ms` to finish.
async fn awaiting_fix_delay(store: &Store, job: &Job, scheduled_at_ms: i64) {
    let waiting = JobScheduleUpdate {
        job_id: job.id,
        trigger_last_ms: scheduled_at_ms,
        trigger_next_ms: AWAITING,
        status: JobStatus::Running,
    };
    assert!(store.set_job_schedule(waiting).await.expect("schedule"));
}

fn with_release(
    log_id: LogId,
    job: &Job,
    scheduled_at_ms: i64,
    next_fire_ms: i64,
) -> FollowupWrite {
    FollowupWrite {
        fix_delay_release: Some(FixDelayRelease {
            job_id: job.id,
            scheduled_at_ms,
            next_fire_ms,
            awaiting_ms: AWAITING,
        }),
        ..followup(log_id)
    }
}

async fn next_fire_of(store: &Store, job: &Job) -> i64 {
    let job = store.get_job(job.id).await.expect("get").expect("job");
    job.trigger_next_ms
}

#[tokio::test]
async fn fix_delay_continues_once_after_the_last_open_run_of_the_fire() {
    for (backend, store, _dir) in fresh_stores().await {
        let delayed = new_job(&store, new_group(&store).await.id, ScheduleType::FixDelay).await;
        awaiting_fix_delay(&store, &delayed, T0).await;
        let shard = |index, attempt, status| shard_run(&delayed, T0, (index, 3), attempt, status);
        let first = insert(&store, shard(0, 0, RunStatus::Success)).await;
        let second = insert_running(&store, shard(1, 0, RunStatus::Pending), T0).await;
        let third = insert(&store, shard(2, 0, RunStatus::Success)).await;
        claim_all(&store).await;

        let blocked = store
            .write_followup(&with_release(first, &delayed, T0, T0 + 5_000))
            .await
            .expect("write");
        assert!(!blocked.released, "{backend}: shard 1 is still running");
        assert_eq!(next_fire_of(&store, &delayed).await, AWAITING, "{backend}");

        // Shard 1 fails and is retried: the retry keeps the job waiting.
        finish(&store, second, RunStatus::Failed, T0 + 100).await;
        claim_all(&store).await;
        let retried = store
            .write_followup(&FollowupWrite {
                retry: Some(shard(1, 1, RunStatus::Pending)),
                ..followup(second)
            })
            .await
            .expect("write");
        let retry_id = retried.retry_id.expect("retry inserted");
        let not_yet = store
            .write_followup(&with_release(third, &delayed, T0, T0 + 6_000))
            .await
            .expect("write");
        assert!(!not_yet.released, "{backend}: the retry is pending");

        // The retry ends: its follow-up lets the schedule continue.
        store
            .claim_runs(&[retry_id], &NodeIdentity::new("n1", 1), T0 + 200)
            .await
            .expect("claim");
        finish(&store, retry_id, RunStatus::Success, T0 + 300).await;
        claim_all(&store).await;
        let released = store
            .write_followup(&with_release(retry_id, &delayed, T0, T0 + 9_000))
            .await
            .expect("write");
        assert!(released.released, "{backend}");
        assert_eq!(
            next_fire_of(&store, &delayed).await,
            T0 + 9_000,
            "{backend}"
        );
        // A repeat (its claim closed) is fenced off and does not move it again.
        let repeat = store
            .write_followup(&with_release(retry_id, &delayed, T0, T0 + 99_000))
            .await
            .expect("write");
        assert!(repeat.fenced_off && !repeat.released, "{backend}");
        assert_eq!(
            next_fire_of(&store, &delayed).await,
            T0 + 9_000,
            "{backend}"
        );
        store.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fix_delay_is_released_exactly_once_when_the_runs_of_a_fire_finish_together() {
    for (backend, store, _dir) in fresh_stores().await {
        let delayed = new_job(&store, new_group(&store).await.id, ScheduleType::FixDelay).await;
        for fire_at in (0..6).map(|second| T0 + second * 1_000) {
            awaiting_fix_delay(&store, &delayed, fire_at).await;
            let runs: Vec<NewRun> = (0..3)
                .map(|index| shard_run(&delayed, fire_at, (index, 3), 0, RunStatus::Success))
                .collect();
            let ids = store.insert_runs(&runs).await.expect("shards");
            let claimed = store
                .claim_followups(&NodeIdentity::new("n1", 1), 100)
                .await
                .expect("claim");
            assert_eq!(claimed.len(), 3, "{backend}");
            let writes = ids
                .iter()
                .map(|id| with_release(*id, &delayed, fire_at, fire_at + 500))
                .collect();
            let (_, released) = write_together(&store, writes).await;
            assert_eq!(released, 1, "{backend}: fire at {fire_at}");
            assert_eq!(
                next_fire_of(&store, &delayed).await,
                fire_at + 500,
                "{backend}"
            );
        }
        store.close().await;
    }
}

/// `DeleteJob` and the follow-up of one of the job's runs, at the same moment, many times: both
/// take the job row's lock and the run's, so they must take them in the same order (the job
/// first) or the database breaks the deadlock by failing one of them. Afterwards nothing of the
/// job is left, whichever ran first.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_a_job_during_the_follow_up_of_its_run_never_deadlocks() {
    const ROUNDS: usize = 40;
    for (backend, store, _dir) in fresh_stores().await {
        let group_id = new_group(&store).await.id;
        for round in 0..ROUNDS {
            let job = new_job(&store, group_id, ScheduleType::FixDelay).await;
            awaiting_fix_delay(&store, &job, T0).await;
            let run = insert(&store, shard_run(&job, T0, (0, 1), 0, RunStatus::Failed)).await;
            claim_all(&store).await;
            let write = with_release(run, &job, T0, T0 + 1_000);
            let (deleted, written) = tokio::join!(
                tokio::spawn({
                    let store = store.clone();
                    async move { store.delete_job(job.id).await }
                }),
                tokio::spawn({
                    let store = store.clone();
                    async move { store.write_followup(&write).await }
                }),
            );
            let deleted = deleted.expect("task");
            let written = written.expect("task");
            assert!(
                matches!(deleted, Ok(true)),
                "{backend} round {round}: delete_job: {deleted:?}"
            );
            assert!(
                written.is_ok(),
                "{backend} round {round}: write_followup: {written:?}"
            );
            assert_eq!(store.get_job(job.id).await.expect("get"), None, "{backend}");
            assert!(
                runs_of(&store, job.id).await.is_empty(),
                "{backend} round {round}: runs of the deleted job are left"
            );
        }
        store.close().await;
    }
}
