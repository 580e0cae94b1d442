//! Workflows: the definition round-trips whole (graph, fan-ins, edge conditions), lists by
//! group, updates and deletes.

use super::*;
use crate::model::{EdgeCondition, FanIn, Workflow, WorkflowId};

fn diamond(group_id: GroupId, job_id: JobId) -> Workflow {
    use EdgeCondition::{Always, OnFailure, OnSuccess};
    use FanIn::{AllSuccess, AnySuccess};
    let nodes = [
        ("a", AllSuccess),
        ("b", AllSuccess),
        ("c", AllSuccess),
        ("d", AnySuccess),
    ];
    let edges = [
        ("a", "b", OnSuccess),
        ("a", "c", OnFailure),
        ("b", "d", Always),
        ("c", "d", OnSuccess),
    ];
    Workflow {
        updated_ms: 5,
        ..workflow(group_id, job_id, "nightly", &nodes, &edges)
    }
}

#[tokio::test]
async fn workflows_round_trip_list_by_group_update_and_delete() {
    for (backend, store, _dir) in fresh_stores().await {
        let first = store.insert_group(&group("wf-one")).await.expect("group");
        let second = store.insert_group(&group("wf-two")).await.expect("group");
        let job = store.insert_job(&job(first.id, 0)).await.expect("job");
        let created = store
            .insert_workflow(&diamond(first.id, job.id))
            .await
            .expect("insert");
        assert!(created.id.0 > 0, "{backend}");
        let loaded = store.get_workflow(created.id).await.expect("get");
        assert_eq!(loaded.as_ref(), Some(&created), "{backend}");
        let other = store
            .insert_workflow(&diamond(second.id, job.id))
            .await
            .expect("insert");

        let all = store.list_workflows(None, 0, 10).await.expect("list");
        assert_eq!(all, vec![created.clone(), other.clone()], "{backend}");
        let of_first = store
            .list_workflows(Some(&[first.id]), 0, 10)
            .await
            .expect("list");
        assert_eq!(of_first, vec![created.clone()], "{backend}");
        let none = store.list_workflows(Some(&[]), 0, 10).await.expect("list");
        assert!(none.is_empty(), "{backend}");
        let paged = store.list_workflows(None, 1, 10).await.expect("list");
        assert_eq!(paged, vec![other.clone()], "{backend}");

        let mut changed = created.clone();
        changed.name = "renamed".to_string();
        changed.edges.pop();
        changed.updated_ms = 9;
        assert!(store.update_workflow(&changed).await.expect("update"));
        // An update that changes nothing still finds the row (MySQL counts matched rows).
        assert!(store.update_workflow(&changed).await.expect("update"));
        let reloaded = store.get_workflow(created.id).await.expect("get");
        assert_eq!(reloaded, Some(changed), "{backend}");

        assert!(store.delete_workflow(created.id).await.expect("delete"));
        assert!(!store.delete_workflow(created.id).await.expect("delete"));
        assert_eq!(store.get_workflow(created.id).await.expect("get"), None);
        let missing = Workflow {
            id: WorkflowId(created.id.0 + 100),
            ..other
        };
        assert!(!store.update_workflow(&missing).await.expect("update"));
        store.close().await;
    }
}

/// A node starts once, even when started together from several connections; a started node
/// cannot be skipped; a node's end is recorded once; the run ends once.
#[tokio::test]
async fn a_workflow_node_starts_once_even_when_started_together() {
    use crate::model::workflow_run::{NewWorkflowRun, NodeState, WorkflowRunStatus};
    for (backend, store, _dir) in fresh_stores().await {
        let group = store.insert_group(&group("wf-runs")).await.expect("group");
        let job = store.insert_job(&job(group.id, 0)).await.expect("job");
        let workflow = store
            .insert_workflow(&diamond(group.id, job.id))
            .await
            .expect("workflow");
        let new_run = NewWorkflowRun {
            graph: workflow.clone(),
            params: "p".to_string(),
            created_ms: 10,
            traceparent: String::new(),
            trigger_type: crate::model::TriggerType::Manual,
            scheduled_at_ms: 0,
        };
        let run_id = store.insert_workflow_run(&new_run).await.expect("run");
        let node_run = manual_run(&job, RunStatus::Pending);

        let start = || store.start_workflow_node(run_id, 0, "a", &node_run, 11);
        let (first, second, third) = tokio::join!(start(), start(), start());
        let started: Vec<LogId> = [first, second, third]
            .into_iter()
            .filter_map(|outcome| outcome.expect("start"))
            .collect();
        assert_eq!(started.len(), 1, "{backend}: {started:?}");
        assert_eq!(
            runs_of(&store, job.id).await.len(),
            1,
            "{backend}: one run written"
        );
        let again = store
            .start_workflow_node(run_id, 0, "a", &node_run, 12)
            .await;
        assert_eq!(again.expect("start"), None, "{backend}");
        assert!(
            !store
                .skip_workflow_node(run_id, 0, "a", 12)
                .await
                .expect("skip")
        );
        assert!(
            store
                .skip_workflow_node(run_id, 0, "e", 12)
                .await
                .expect("skip")
        );

        let a_run = started[0];
        assert!(
            store
                .finish_workflow_node(run_id, a_run, NodeState::Succeeded, 13)
                .await
                .expect("finish"),
            "{backend}"
        );
        // Repeated (a follow-up redone): nothing changes.
        assert!(
            !store
                .finish_workflow_node(run_id, a_run, NodeState::Failed, 14)
                .await
                .expect("finish")
        );
        let run = store.get_workflow_run(run_id).await.expect("get");
        let run = run.expect("found");
        assert_eq!(run.status, WorkflowRunStatus::Running, "{backend}");
        assert_eq!(run.params, "p");
        assert_eq!(
            run.graph.nodes, workflow.nodes,
            "{backend}: the graph is kept"
        );
        assert_eq!(run.graph.edges, workflow.edges);
        let nodes: Vec<(&str, NodeState, LogId)> = (run.nodes.iter())
            .map(|node| (node.key.as_str(), node.state, node.log_id))
            .collect();
        assert_eq!(
            nodes,
            vec![
                ("a", NodeState::Succeeded, a_run),
                ("e", NodeState::Skipped, LogId(0))
            ],
            "{backend}"
        );
        let ended = store.finish_workflow_run(run_id, WorkflowRunStatus::Succeeded, None, 20);
        assert!(ended.await.expect("end"), "{backend}");
        let ended = store.finish_workflow_run(run_id, WorkflowRunStatus::Failed, None, 21);
        assert!(!ended.await.expect("end"), "{backend}: ended once");
        let run = store
            .get_workflow_run(run_id)
            .await
            .expect("get")
            .expect("found");
        assert_eq!(
            (run.status, run.finished_ms),
            (WorkflowRunStatus::Succeeded, 20)
        );
        assert_eq!(
            store.get_workflow_run(run_id + 100).await.expect("get"),
            None
        );
        store.close().await;
    }
}
