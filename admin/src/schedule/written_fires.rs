//! A fire the scan plans, once written and claimed by id, is exactly the row the claim left: the
//! ring keeps only the plan and the log id, and rebuilds the run from them instead of reading it
//! back. Runs on every store backend (the store conformance suite's databases).

use std::sync::Arc;

use super::plan::{ScanParams, plan_job};
use crate::model::{Job, JobId, LogId, NodeIdentity, UnwrittenFire};
use crate::store::RoundPlan;
use crate::store::conformance::{fresh_stores, group, job};

/// The scan's own fires are claimed by id only and rebuilt from their plan; the rebuilt run must
/// be exactly the row the claim left, and the id-only claim keeps the same fence.
#[tokio::test]
async fn an_id_only_claim_is_fenced_and_the_planned_run_matches_its_row() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = store.insert_group(&group("app")).await.expect("group");
        let due = store.insert_job(&job(group.id, 10_000)).await.expect("job");
        let epoch = store.register_node("n1", 0, 60_000).await.expect("node");
        let params = ScanParams {
            now_ms: 9_000,
            window_ms: 5_000,
            misfire_threshold_ms: 5_000,
            default_tz: chrono_tz::UTC,
            node_id: "n1".to_string(),
            epoch,
            calendars: Arc::default(),
        };
        let mut planned = Vec::new();
        let mut plan = |jobs: Vec<Job>| {
            let mut round = RoundPlan::default();
            for job in jobs {
                let job_plan = plan_job(&job, &params);
                planned.extend(
                    job_plan
                        .runs
                        .iter()
                        .map(|run| (run.scheduled_at_ms, run.trigger_type, Arc::new(job.clone()))),
                );
                round.new_runs.extend(job_plan.runs);
                round.job_updates.push(job_plan.update);
            }
            round
        };
        let (_, inserted) = store
            .run_schedule_round(14_000, 100, &mut plan)
            .await
            .expect("round");
        assert_eq!(
            inserted.len(),
            planned.len(),
            "{backend}: one answer per row"
        );
        assert!(
            !inserted.is_empty(),
            "{backend}: the job is due in the window"
        );
        assert!(
            planned.iter().all(|(_, _, job)| job.id == due.id),
            "{backend}"
        );
        let inserted: Vec<LogId> = inserted
            .into_iter()
            .map(|id| id.expect("a fresh database has none of the fires"))
            .collect();
        let ids = inserted.clone();
        let runs: Vec<(LogId, JobId)> = ids.iter().map(|id| (*id, due.id)).collect();

        let wrong_epoch = store
            .claim_run_ids(&runs, &NodeIdentity::new("n1", epoch + 1), 10_000)
            .await
            .expect("claim");
        assert!(wrong_epoch.is_empty(), "{backend}: fenced by epoch");
        let mut claimed = store
            .claim_run_ids(&runs, &NodeIdentity::new("n1", epoch), 10_000)
            .await
            .expect("claim");
        claimed.sort_unstable();
        assert_eq!(claimed, ids, "{backend}");
        let again = store
            .claim_run_ids(&runs, &NodeIdentity::new("n1", epoch), 10_001)
            .await
            .expect("claim");
        assert!(again.is_empty(), "{backend}: claimed once");

        let node = NodeIdentity {
            node_id: "n1".to_string(),
            epoch,
        };
        for (id, (scheduled_at_ms, trigger_type, job)) in inserted.into_iter().zip(planned) {
            let fire = UnwrittenFire::scheduled(job, scheduled_at_ms, trigger_type).written(id);
            let row = store.get_log(LogId(id.0)).await.expect("get").expect("row");
            assert_eq!(fire.claimed_run(&node, 10_000), row, "{backend}");
        }
        store.close().await;
    }
}
