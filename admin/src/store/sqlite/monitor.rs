//! The follow-up claim on SQLite: one `UPDATE … RETURNING` over the oldest finished runs not
//! followed up yet, through the partial index of those rows (see `plans.rs`); SQLite's single
//! writer keeps two claims apart. Adoption, the write and its claim fence are shared
//! (`shared/adoption.rs`, `shared/followups.rs`, `shared/claims.rs`).

use super::rows::{LOG_COLUMNS, run_from_row};
use super::{SqliteStore, map_error};
use crate::model::{NodeIdentity, RunLog};
use crate::store::StoreResult;

/// Statuses a run can end in; each is followed up once.
const FINAL_STATUSES: &str = "'SUCCESS', 'FAILED', 'TIMEOUT', 'KILLED', 'LOST', 'SKIPPED'";

// The periodic lookups below each read one small set of rows through its partial index
// (migration 0005); `super::plans` checks that SQLite's plans do.

/// Claims the oldest finished runs not followed up yet.
pub(super) fn claim_followups_sql() -> String {
    format!(
        "UPDATE xjob_log SET alarm_status = -1, owner_node = ?, epoch = ? \
         WHERE alarm_status = 0 AND id IN ( \
           SELECT id FROM xjob_log WHERE alarm_status = 0 AND status IN ({FINAL_STATUSES}) \
           ORDER BY id LIMIT ?) \
         RETURNING {LOG_COLUMNS}"
    )
}

impl SqliteStore {
    pub async fn claim_followups(
        &self,
        node: &NodeIdentity,
        limit: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
        let rows = sqlx::query(&claim_followups_sql())
            .bind(node_id)
            .bind(epoch)
            .bind(limit)
            .fetch_all(&mut *self.pools().write().await?)
            .await
            .map_err(map_error)?;
        let mut claimed = rows
            .iter()
            .map(run_from_row)
            .collect::<StoreResult<Vec<RunLog>>>()?;
        claimed.sort_by_key(|run| run.id);
        Ok(claimed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        BlockStrategy, GlueType, GroupId, Job, JobId, JobStatus, LogId, MisfireStrategy, NewRun,
        RetryBackoff, RouteStrategy, RunStatus, ScheduleType, TriggerType,
    };
    use crate::store::{FixDelayRelease, FollowupWrite, JobScheduleUpdate, Store};

    const T0: i64 = 1_800_000_000_000;
    const AWAITING: i64 = i64::MAX;

    /// The writer pool of a SQLite store, for statements the store does not offer.
    fn writer(store: &Store) -> &sqlx::SqlitePool {
        match store {
            Store::Sqlite(backend) => &backend.writer,
            _ => panic!("a SQLite store was expected"),
        }
    }

    async fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("monitor.db").display());
        let store = Store::connect(&url).await.expect("store");
        (dir, store)
    }

    fn job(schedule_type: ScheduleType) -> Job {
        Job {
            id: JobId(0),
            group_id: GroupId(1),
            name: "j".into(),
            author: String::new(),
            alarm_email: String::new(),
            alarm_on_every_failure: false,
            schedule_type,
            schedule_conf: "1".into(),
            time_zone: String::new(),
            misfire_strategy: MisfireStrategy::DoNothing,
            route_strategy: RouteStrategy::ShardingBroadcast,
            handler: "h".into(),
            params: String::new(),
            block_strategy: BlockStrategy::SerialExecution,
            timeout_ms: 0,
            fail_retry_count: 0,
            retry_backoff: RetryBackoff::default(),
            glue_type: GlueType::Bean,
            glue_source: String::new(),
            glue_remark: String::new(),
            glue_updated_ms: 0,
            child_job_ids: vec![],
            policy: Default::default(),
            status: JobStatus::Stopped,
            trigger_last_ms: 0,
            trigger_next_ms: 0,
            created_ms: 0,
            updated_ms: 0,
        }
    }

    fn shard(job_id: JobId, shard_index: i32, attempt: i32, status: RunStatus) -> NewRun {
        NewRun {
            job_id,
            group_id: GroupId(1),
            fire_key: Some(NewRun::fire_key(job_id, T0, shard_index, attempt)),
            status,
            trigger_type: TriggerType::Cron,
            scheduled_at_ms: T0,
            handler: "h".into(),
            params: String::new(),
            shard_index,
            shard_total: 3,
            attempt,
            trigger_msg: String::new(),
            owner_node: "n1".into(),
            epoch: 1,
            dispatch_at_ms: 0,
            trace_id: String::new(),
        }
    }

    fn child_run(child_id: JobId) -> NewRun {
        NewRun {
            fire_key: None,
            trigger_type: TriggerType::Parent,
            scheduled_at_ms: 0,
            shard_index: 0,
            shard_total: 1,
            dispatch_at_ms: T0,
            ..shard(child_id, 0, 0, RunStatus::Pending)
        }
    }

    /// The follow-up of `log_id` by node n1 epoch 1 (claimed with `claim_all`).
    fn followup(log_id: LogId) -> FollowupWrite {
        FollowupWrite {
            log_id,
            claim_node: "n1".into(),
            claim_epoch: 1,
            alarm_status: crate::model::AlarmStatus::NothingToAlarm,
            alarm_delivery: String::new(),
            retry: None,
            children: Vec::new(),
            children_need_all_shards: false,
            fix_delay_release: None,
        }
    }

    /// Claims every finished run not claimed yet for node n1 epoch 1.
    async fn claim_all(store: &Store) {
        store
            .claim_followups(&NodeIdentity::new("n1", 1), 100)
            .await
            .expect("claim");
    }

    async fn set_status(store: &Store, log_id: LogId, status: RunStatus) {
        sqlx::query("UPDATE xjob_log SET status = ? WHERE id = ?")
            .bind(status.as_str())
            .bind(log_id.0)
            .execute(writer(store))
            .await
            .expect("status");
    }

    async fn count_runs_of(store: &Store, job_id: JobId) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM xjob_log WHERE job_id = ?")
            .bind(job_id.0)
            .fetch_one(writer(store))
            .await
            .expect("count")
    }

    #[tokio::test]
    async fn shards_finishing_together_start_the_children_once_after_all_succeeded() {
        let (_dir, store) = store().await;
        let parent = store
            .insert_job(&job(ScheduleType::Cron))
            .await
            .expect("job");
        let child = store
            .insert_job(&job(ScheduleType::None))
            .await
            .expect("job");
        let shards: Vec<NewRun> = (0..3)
            .map(|index| shard(parent.id, index, 0, RunStatus::Success))
            .collect();
        let ids = store.insert_runs(&shards).await.expect("shards");
        set_status(&store, ids[2], RunStatus::Running).await;
        claim_all(&store).await;
        let with_children = |log_id| FollowupWrite {
            children: vec![child_run(child.id)],
            children_need_all_shards: true,
            ..followup(log_id)
        };

        // Shard 2 still running: no children yet.
        let early = store
            .write_followup(&with_children(ids[0]))
            .await
            .expect("write");
        assert!(early.child_ids.is_empty());

        // Shards 1 and 2 followed up at the same time (two admins): one of them starts them.
        set_status(&store, ids[2], RunStatus::Success).await;
        claim_all(&store).await;
        let (write_1, write_2) = (with_children(ids[1]), with_children(ids[2]));
        let (first, second) = tokio::join!(
            store.write_followup(&write_1),
            store.write_followup(&write_2),
        );
        let started =
            first.expect("write").child_ids.len() + second.expect("write").child_ids.len();
        assert_eq!(started, 1, "children started exactly once");
        assert_eq!(count_runs_of(&store, child.id).await, 1);
        // A late repeat (its claim is closed) is fenced off and starts nothing more.
        let again = store
            .write_followup(&with_children(ids[0]))
            .await
            .expect("write");
        assert!(again.fenced_off && again.child_ids.is_empty());
        assert_eq!(count_runs_of(&store, child.id).await, 1);
    }

    #[tokio::test]
    async fn a_shard_that_succeeds_on_retry_completes_the_fire() {
        let (_dir, store) = store().await;
        let parent = store
            .insert_job(&job(ScheduleType::Cron))
            .await
            .expect("job");
        let child = store
            .insert_job(&job(ScheduleType::None))
            .await
            .expect("job");
        let runs = [
            shard(parent.id, 0, 0, RunStatus::Success),
            shard(parent.id, 1, 0, RunStatus::Failed),
            shard(parent.id, 1, 1, RunStatus::Success),
            shard(parent.id, 2, 0, RunStatus::Success),
        ];
        let ids = store.insert_runs(&runs).await.expect("runs");
        claim_all(&store).await;
        let written = store
            .write_followup(&FollowupWrite {
                children: vec![child_run(child.id)],
                children_need_all_shards: true,
                ..followup(ids[2])
            })
            .await
            .expect("write");
        assert_eq!(written.child_ids.len(), 1);
    }

    #[tokio::test]
    async fn fix_delay_continues_once_after_the_last_open_run_of_the_fire() {
        let (_dir, store) = store().await;
        let delayed = store
            .insert_job(&job(ScheduleType::FixDelay))
            .await
            .expect("job");
        let waiting = JobScheduleUpdate {
            job_id: delayed.id,
            trigger_last_ms: T0,
            trigger_next_ms: AWAITING,
            status: JobStatus::Running,
        };
        store.set_job_schedule(waiting).await.expect("schedule");
        let runs = [
            shard(delayed.id, 0, 0, RunStatus::Success),
            shard(delayed.id, 1, 0, RunStatus::Running),
            shard(delayed.id, 2, 0, RunStatus::Success),
        ];
        let ids = store.insert_runs(&runs).await.expect("runs");
        let release = |log_id, next_fire_ms| FollowupWrite {
            fix_delay_release: Some(FixDelayRelease {
                job_id: delayed.id,
                scheduled_at_ms: T0,
                next_fire_ms,
                awaiting_ms: AWAITING,
            }),
            ..followup(log_id)
        };
        let next_ms = |store: &Store| {
            let pool = writer(store).clone();
            async move {
                sqlx::query_scalar::<_, i64>("SELECT trigger_next_ms FROM xjob_job WHERE id = ?")
                    .bind(delayed.id.0)
                    .fetch_one(&pool)
                    .await
                    .expect("job")
            }
        };

        claim_all(&store).await;
        let blocked = store
            .write_followup(&release(ids[0], T0 + 5_000))
            .await
            .expect("write");
        assert!(!blocked.released, "shard 1 is still running");
        assert_eq!(next_ms(&store).await, AWAITING);

        // Shard 1 fails and is retried: the retry keeps the job waiting.
        set_status(&store, ids[1], RunStatus::Failed).await;
        claim_all(&store).await;
        let retried = store
            .write_followup(&FollowupWrite {
                retry: Some(shard(delayed.id, 1, 1, RunStatus::Pending)),
                ..followup(ids[1])
            })
            .await
            .expect("write");
        let retry_id = retried.retry_id.expect("retry inserted");
        let not_yet = store
            .write_followup(&release(ids[2], T0 + 6_000))
            .await
            .expect("write");
        assert!(!not_yet.released, "the retry is pending");

        // The retry ends: its follow-up lets the schedule continue.
        set_status(&store, retry_id, RunStatus::Success).await;
        claim_all(&store).await;
        let released = store
            .write_followup(&release(retry_id, T0 + 9_000))
            .await
            .expect("write");
        assert!(released.released);
        assert_eq!(next_ms(&store).await, T0 + 9_000);
        // A repeat is fenced off (its claim is closed) and does not move it again.
        let repeat = store
            .write_followup(&release(retry_id, T0 + 99_000))
            .await
            .expect("write");
        assert!(repeat.fenced_off && !repeat.released);
        assert_eq!(next_ms(&store).await, T0 + 9_000);
    }

    #[tokio::test]
    async fn a_retry_is_created_once_per_attempt() {
        let (_dir, store) = store().await;
        let failing = store
            .insert_job(&job(ScheduleType::Cron))
            .await
            .expect("job");
        let ids = store
            .insert_runs(&[
                shard(failing.id, 0, 0, RunStatus::Failed),
                shard(failing.id, 1, 0, RunStatus::Failed),
            ])
            .await
            .expect("run");
        claim_all(&store).await;
        let retry = shard(failing.id, 0, 1, RunStatus::Pending);
        let with_retry = |log_id| FollowupWrite {
            retry: Some(retry.clone()),
            ..followup(log_id)
        };
        let first = store
            .write_followup(&with_retry(ids[0]))
            .await
            .expect("write");
        assert!(first.retry_id.is_some());
        let repeat = store
            .write_followup(&with_retry(ids[0]))
            .await
            .expect("write");
        assert!(repeat.fenced_off, "the claim is closed");
        // Another claimed run proposing the same attempt (same fire_key) adds no row either.
        let same_key = store
            .write_followup(&with_retry(ids[1]))
            .await
            .expect("write");
        assert!(!same_key.fenced_off);
        assert_eq!(same_key.retry_id, None, "the fire_key exists already");
        assert_eq!(count_runs_of(&store, failing.id).await, 3);
    }

    #[tokio::test]
    async fn follow_ups_are_claimed_once_and_adopted_from_dead_nodes() {
        let (_dir, store) = store().await;
        let finished = store
            .insert_job(&job(ScheduleType::Cron))
            .await
            .expect("job");
        let runs: Vec<NewRun> = (0..3)
            .map(|index| shard(finished.id, index, 0, RunStatus::Failed))
            .chain([shard(finished.id, 0, 5, RunStatus::Running)])
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
        let mut claimed: Vec<LogId> = claimed_a
            .expect("claim")
            .iter()
            .chain(claimed_b.expect("claim").iter())
            .map(|run| run.id)
            .collect();
        claimed.sort_unstable();
        assert_eq!(
            claimed.len(),
            3,
            "each finished run once, the running one never"
        );
        claimed.dedup();
        assert_eq!(claimed.len(), 3);

        // Node b dies: after its lease, a takes over b's unfinished claims, not before.
        assert!(
            store
                .adopt_stale_followups(&NodeIdentity::new("a", 1), T0 + 5_000)
                .await
                .expect("adopt")
                .iter()
                .all(|run| run.owner_node == "a")
        );
        let adopted = store
            .adopt_stale_followups(&NodeIdentity::new("a", 1), T0 + 20_000)
            .await
            .expect("adopt");
        assert_eq!(adopted.len(), 3, "a's own unfinished claims and b's");
        assert!(
            adopted
                .iter()
                .all(|run| run.owner_node == "a" && run.epoch == 1)
        );
    }

    #[tokio::test]
    async fn stranded_dispatches_are_those_of_gone_admins_without_an_address() {
        let (_dir, store) = store().await;
        let stuck = store
            .insert_job(&job(ScheduleType::Cron))
            .await
            .expect("job");
        store.register_node("dead", T0, 10_000).await.expect("node");
        let claimed = |shard_index, owner: &str, epoch| NewRun {
            status: RunStatus::Running,
            owner_node: owner.to_string(),
            epoch,
            ..shard(stuck.id, shard_index, 0, RunStatus::Running)
        };
        let ids = store
            .insert_runs(&[
                claimed(0, "dead", 1),
                claimed(1, "me", 1),
                claimed(2, "me", 2),
            ])
            .await
            .expect("runs");
        sqlx::query("UPDATE xjob_log SET trigger_time_ms = ?")
            .bind(T0)
            .execute(writer(&store))
            .await
            .expect("trigger time");
        let stranded_ids = |runs: Vec<RunLog>| runs.iter().map(|run| run.id).collect::<Vec<_>>();

        // "me" restarted as epoch 2: its epoch-1 claim is stranded; "dead" is still leased.
        let early = store
            .stranded_dispatches(&NodeIdentity::new("me", 2), T0 + 5_000, T0 + 1_000)
            .await
            .expect("query");
        assert_eq!(stranded_ids(early), vec![ids[1]]);
        let late = store
            .stranded_dispatches(&NodeIdentity::new("me", 2), T0 + 20_000, T0 + 1_000)
            .await
            .expect("query");
        assert_eq!(stranded_ids(late), vec![ids[0], ids[1]]);
        // Claimed too recently by another node: its dispatch may still be in flight. This
        // node's earlier epoch is over, so its claim is stranded at once.
        let recent = store
            .stranded_dispatches(&NodeIdentity::new("me", 2), T0 + 20_000, T0)
            .await
            .expect("query");
        assert_eq!(stranded_ids(recent), vec![ids[1]]);
        // Once its dispatch is recorded, a run is judged by its executor instead.
        sqlx::query("UPDATE xjob_log SET executor_address = 'http://e:1' WHERE id = ?")
            .bind(ids[0].0)
            .execute(writer(&store))
            .await
            .expect("address");
        let recorded = store
            .stranded_dispatches(&NodeIdentity::new("me", 2), T0 + 20_000, T0 + 1_000)
            .await
            .expect("query");
        assert_eq!(stranded_ids(recorded), vec![ids[1]]);
    }
}
