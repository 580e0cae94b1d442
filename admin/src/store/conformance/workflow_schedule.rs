//! Workflow schedules: a workflow's schedule and params round-trip, the due ones are found,
//! and each occurrence starts one run even when two admins (two stores on one database) claim
//! it at once, or when an edit puts an occurrence already started back in front.

use super::*;
use crate::model::workflow_run::NewWorkflowRun;
use crate::model::workflow_schedule::WorkflowSchedule;
use crate::model::{EdgeCondition, FanIn, MisfireStrategy, Workflow};

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
            let won: Vec<i64> = [mine.expect("claim"), theirs.expect("claim")]
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
        assert_eq!(dropped.await.expect("claim"), Some(0), "{backend}");
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
