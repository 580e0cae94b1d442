//! Workflow schedules: a workflow's schedule and params round-trip, the due ones are found,
//! and each occurrence starts one run even when two admins (two stores on one database) claim
//! it at once, or when an edit puts an occurrence already started back in front.

use super::*;
use crate::model::workflow_run::NewWorkflowRun;
use crate::model::workflow_run::WorkflowRunStatus;
use crate::model::workflow_schedule::{OccurrenceClaim, WorkflowSchedule};
use crate::model::{EdgeCondition, FanIn, MisfireStrategy, OverlapPolicy, Workflow};

fn scheduled(group_id: GroupId, job_id: JobId, next_fire_ms: i64) -> Workflow {
    let nodes = [("a", FanIn::AllSuccess), ("b", FanIn::AllSuccess)];
    let edges = [("a", "b", EdgeCondition::OnSuccess)];
    Workflow {
        schedule: WorkflowSchedule {
            schedule_type: ScheduleType::FixRate,
            schedule_conf: "2".to_string(),
            time_zone: "Europe/Berlin".to_string(),
            misfire: MisfireStrategy::FireOnceNow,
            next_fire_ms,
            overlap: OverlapPolicy::AllowAll,
        },
        params: "nightly=1".to_string(),
        ..workflow(group_id, job_id, "every-2s", &nodes, &edges)
    }
}

fn occurrence(workflow: &Workflow, at: i64) -> NewWorkflowRun {
    NewWorkflowRun {
        graph: workflow.clone(),
        params: workflow.params.clone(),
        created_ms: at,
        traceparent: String::new(),
        trigger_type: TriggerType::Cron,
        scheduled_at_ms: at,
    }
}

#[tokio::test]
async fn each_workflow_occurrence_starts_one_run_across_two_admins() {
    for (backend, url, _dir) in super::fresh_databases().await {
        let store = Store::connect(&url).await.expect("store");
        let other = Store::connect(&url).await.expect("a second admin's store");
        let group = store.insert_group(&group("wf-sched")).await.expect("group");
        let job = store.insert_job(&job(group.id, 0)).await.expect("job");
        let created = store
            .insert_workflow(&scheduled(group.id, job.id, 10_000))
            .await
            .expect("insert");
        let loaded = store.get_workflow(created.id).await.expect("get");
        assert_eq!(loaded.as_ref(), Some(&created), "{backend}: round trip");
        let unscheduled = Workflow {
            schedule: WorkflowSchedule::default(),
            ..scheduled(group.id, job.id, 0)
        };
        store.insert_workflow(&unscheduled).await.expect("insert");

        assert!(
            store
                .due_workflows(9_999, 10)
                .await
                .expect("due")
                .is_empty()
        );
        let due = other.due_workflows(10_000, 10).await.expect("due");
        assert_eq!(
            due,
            vec![created.clone()],
            "{backend}: only the scheduled one"
        );

        // Both admins claim the occurrence at 10 000 at once, several times over.
        for round in 0..5 {
            let at = 10_000 + round * 2_000;
            let run = occurrence(&created, at);
            let (mine, theirs) = tokio::join!(
                store.claim_workflow_occurrence(created.id.0, at, at + 2_000, Some(&run)),
                other.claim_workflow_occurrence(created.id.0, at, at + 2_000, Some(&run)),
            );
            let won: Vec<OccurrenceClaim> = [mine.expect("claim"), theirs.expect("claim")]
                .into_iter()
                .flatten()
                .collect();
            assert_eq!(won.len(), 1, "{backend}: occurrence {at} started once");
        }
        let runs = store
            .list_workflow_runs(created.id, 0, 100)
            .await
            .expect("list");
        let times: Vec<i64> = runs.iter().map(|run| run.scheduled_at_ms).collect();
        assert_eq!(times, [18_000, 16_000, 14_000, 12_000, 10_000], "{backend}");
        assert!(
            runs.iter()
                .all(|run| run.trigger_type == TriggerType::Cron && run.params == "nightly=1"),
            "{backend}: scheduled runs are marked and carry the workflow's params"
        );
        let moved = store.get_workflow(created.id).await.expect("get");
        assert_eq!(moved.expect("there").schedule.next_fire_ms, 20_000);

        // An edit puts 12 000 (started already) back in front: the key refuses a second run,
        // and the schedule still moves past it.
        let mut edited = created.clone();
        edited.schedule.next_fire_ms = 12_000;
        assert!(store.update_workflow(&edited).await.expect("update"));
        let again = occurrence(&created, 12_000);
        let claim = store.claim_workflow_occurrence(created.id.0, 12_000, 14_000, Some(&again));
        assert_eq!(claim.await.expect("claim"), None, "{backend}");
        let after = store.get_workflow(created.id).await.expect("get");
        assert_eq!(after.expect("there").schedule.next_fire_ms, 14_000);
        // A dropped occurrence (missed, DO_NOTHING) only moves the time.
        let dropped = store.claim_workflow_occurrence(created.id.0, 14_000, 30_000, None);
        assert_eq!(
            dropped.await.expect("claim"),
            Some(OccurrenceClaim::Dropped),
            "{backend}"
        );
        let runs = store.list_workflow_runs(created.id, 0, 100).await;
        assert_eq!(runs.expect("list").len(), 5, "{backend}");

        // StartWorkflow runs have no occurrence: any number of them.
        for _ in 0..2 {
            let manual = NewWorkflowRun {
                trigger_type: TriggerType::Manual,
                scheduled_at_ms: 0,
                ..occurrence(&created, 1)
            };
            store
                .insert_workflow_run(&manual)
                .await
                .expect("manual run");
        }
        let latest = store.list_workflow_runs(created.id, 0, 1).await;
        let latest = latest.expect("list").remove(0);
        assert_eq!(latest.trigger_type, TriggerType::Manual, "{backend}");
        assert_eq!(latest.scheduled_at_ms, 0, "{backend}");
        other.close().await;
        store.close().await;
    }
}

/// Claims `at` (moving on by 2 s) and returns what the claim did.
async fn claim_at(store: &Store, workflow: &Workflow, at: i64) -> Option<OccurrenceClaim> {
    let run = occurrence(workflow, at);
    let claim = store.claim_workflow_occurrence(workflow.id.0, at, at + 2_000, Some(&run));
    claim.await.expect("claim")
}

fn started(claim: Option<OccurrenceClaim>) -> (i64, Vec<i64>) {
    match claim {
        Some(OccurrenceClaim::Started { run_id, cancelled }) => (run_id, cancelled),
        other => panic!("expected a started run, got {other:?}"),
    }
}

#[tokio::test]
async fn the_claim_decides_the_overlap_policy_against_running_scheduled_runs() {
    for (backend, url, _dir) in super::fresh_databases().await {
        let store = Store::connect(&url).await.expect("store");
        let other = Store::connect(&url).await.expect("a second admin's store");
        let group = store
            .insert_group(&group("wf-overlap"))
            .await
            .expect("group");
        let job = store.insert_job(&job(group.id, 0)).await.expect("job");
        let with = |overlap: OverlapPolicy| {
            let mut workflow = scheduled(group.id, job.id, 10_000);
            workflow.schedule.overlap = overlap;
            workflow
        };

        // SKIP: the second occurrence finds the first running and is written SKIPPED.
        let skip = store.insert_workflow(&with(OverlapPolicy::Skip)).await;
        let skip = skip.expect("insert");
        let loaded = store
            .get_workflow(skip.id)
            .await
            .expect("get")
            .expect("there");
        assert_eq!(loaded.schedule.overlap, OverlapPolicy::Skip, "{backend}");
        let (first, _) = started(claim_at(&store, &skip, 10_000).await);
        // Two admins at once: one claim, and it skips.
        let run = occurrence(&skip, 12_000);
        let (mine, theirs) = tokio::join!(
            store.claim_workflow_occurrence(skip.id.0, 12_000, 14_000, Some(&run)),
            other.claim_workflow_occurrence(skip.id.0, 12_000, 14_000, Some(&run)),
        );
        let won: Vec<OccurrenceClaim> = [mine.expect("claim"), theirs.expect("claim")]
            .into_iter()
            .flatten()
            .collect();
        let [OccurrenceClaim::Skipped { run_id, running }] = won.as_slice() else {
            panic!("{backend}: one claim, a skip: {won:?}");
        };
        assert_eq!(*running, first, "{backend}");
        let skipped = store
            .get_workflow_run(*run_id)
            .await
            .expect("get")
            .expect("there");
        assert_eq!(skipped.status, WorkflowRunStatus::Skipped, "{backend}");
        assert_eq!(skipped.scheduled_at_ms, 12_000, "{backend}");
        assert_eq!(
            skipped.finished_ms, skipped.created_ms,
            "{backend}: ended at once"
        );
        assert!(
            skipped.reason.contains(&format!("scheduled run {first} ")),
            "{backend}: the reason names the run going: {}",
            skipped.reason
        );
        // A StartWorkflow run going does not count; the first one ended, the next one starts.
        let manual = NewWorkflowRun {
            trigger_type: TriggerType::Manual,
            scheduled_at_ms: 0,
            ..occurrence(&skip, 1)
        };
        store
            .insert_workflow_run(&manual)
            .await
            .expect("manual run");
        let ended = store.finish_workflow_run(first, WorkflowRunStatus::Succeeded, None, 13_000);
        assert!(ended.await.expect("finish"), "{backend}");
        let (third, cancelled) = started(claim_at(&store, &skip, 14_000).await);
        assert!(cancelled.is_empty() && third > first, "{backend}");

        // CANCEL_OTHER: the second occurrence ends the first CANCELLED and starts.
        let cancel = store
            .insert_workflow(&with(OverlapPolicy::CancelOther))
            .await;
        let cancel = cancel.expect("insert");
        let (first, cancelled) = started(claim_at(&store, &cancel, 10_000).await);
        assert!(cancelled.is_empty(), "{backend}: nothing was going");
        let (second, cancelled) = started(claim_at(&other, &cancel, 12_000).await);
        assert_eq!(cancelled, [first], "{backend}");
        let earlier = store
            .get_workflow_run(first)
            .await
            .expect("get")
            .expect("there");
        assert_eq!(earlier.status, WorkflowRunStatus::Cancelled, "{backend}");
        assert!(
            earlier.reason.contains(&format!("scheduled run {second} ")),
            "{backend}: the reason names the run that cancelled it: {}",
            earlier.reason
        );
        let now = store
            .get_workflow_run(second)
            .await
            .expect("get")
            .expect("there");
        assert_eq!(now.status, WorkflowRunStatus::Running, "{backend}");
        assert!(now.reason.is_empty(), "{backend}");

        // BUFFER_ONE: one occurrence waits, the next is skipped naming it; the waiting one
        // starts once the running one ended, once even when two admins look together.
        let one = store.insert_workflow(&with(OverlapPolicy::BufferOne)).await;
        let one = one.expect("insert");
        let (first, _) = started(claim_at(&store, &one, 10_000).await);
        let Some(OccurrenceClaim::Waiting {
            run_id: waits,
            behind,
        }) = claim_at(&store, &one, 12_000).await
        else {
            panic!("{backend}: the second occurrence waits");
        };
        assert_eq!(behind, first, "{backend}");
        let Some(OccurrenceClaim::Skipped { run_id, running }) =
            claim_at(&store, &one, 14_000).await
        else {
            panic!("{backend}: the third is skipped");
        };
        assert_eq!(running, waits, "{backend}");
        let third = store
            .get_workflow_run(run_id)
            .await
            .expect("get")
            .expect("there");
        assert!(
            third.reason.contains(&format!(
                "scheduled run {waits} of this workflow already waits"
            )),
            "{backend}: {}",
            third.reason
        );
        let early = store.start_waiting_workflow_runs(10).await.expect("start");
        assert!(early.is_empty(), "{backend}: the first still runs");
        let ended = store.finish_workflow_run(first, WorkflowRunStatus::Failed, None, 15_000);
        assert!(ended.await.expect("finish"), "{backend}");
        let (mine, theirs) = tokio::join!(
            store.start_waiting_workflow_runs(10),
            other.start_waiting_workflow_runs(10),
        );
        let mut both = mine.expect("start");
        both.extend(theirs.expect("start"));
        assert_eq!(both, [waits], "{backend}: started once");
        let now = store
            .get_workflow_run(waits)
            .await
            .expect("get")
            .expect("there");
        assert_eq!(now.status, WorkflowRunStatus::Running, "{backend}");

        // BUFFER_ALL: every occurrence waits, and they start one after the other, in order.
        let all = store.insert_workflow(&with(OverlapPolicy::BufferAll)).await;
        let all = all.expect("insert");
        let (first, _) = started(claim_at(&store, &all, 10_000).await);
        let mut queue = Vec::new();
        for at in [12_000, 14_000] {
            let Some(OccurrenceClaim::Waiting { run_id, behind }) =
                claim_at(&store, &all, at).await
            else {
                panic!("{backend}: {at} waits");
            };
            assert_eq!(behind, *queue.last().unwrap_or(&first), "{backend}");
            queue.push(run_id);
        }
        for (ending, next) in [(first, queue[0]), (queue[0], queue[1])] {
            let ended = store.finish_workflow_run(ending, WorkflowRunStatus::Succeeded, None, 1);
            assert!(ended.await.expect("finish"), "{backend}");
            let started_now = store.start_waiting_workflow_runs(10).await.expect("start");
            assert_eq!(started_now, [next], "{backend}: the oldest waiting starts");
            let again = other.start_waiting_workflow_runs(10).await.expect("start");
            assert!(again.is_empty(), "{backend}: one at a time");
        }
        // A waiting run can be cancelled by a user.
        let Some(OccurrenceClaim::Waiting { run_id, .. }) = claim_at(&store, &all, 16_000).await
        else {
            panic!("{backend}: 16 000 waits");
        };
        let cancel = store.finish_workflow_run(run_id, WorkflowRunStatus::Cancelled, None, 2);
        assert!(cancel.await.expect("cancel"), "{backend}");

        // ALLOW_ALL: runs pile up as before.
        let allow = store.insert_workflow(&with(OverlapPolicy::AllowAll)).await;
        let allow = allow.expect("insert");
        started(claim_at(&store, &allow, 10_000).await);
        let (_, cancelled) = started(claim_at(&store, &allow, 12_000).await);
        assert!(cancelled.is_empty(), "{backend}");
        let runs = store
            .list_workflow_runs(allow.id, 0, 10)
            .await
            .expect("list");
        assert!(
            runs.iter()
                .all(|run| run.status == WorkflowRunStatus::Running),
            "{backend}"
        );
        other.close().await;
        store.close().await;
    }
}
