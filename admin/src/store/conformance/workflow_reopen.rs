//! A user's retry or skip of a workflow node (`reopen_workflow_node`): written once however
//! many race, only while the node stands where the plan read it and the run is not cancelled;
//! the nodes skipped below it wait again; and an advance that read the run before (an older
//! generation) writes nothing after it.

use super::*;
use crate::model::workflow::test_workflow;
use crate::model::workflow_reopen::Reopen;
use crate::model::workflow_run::{NewWorkflowRun, NodeState, WorkflowRun, WorkflowRunStatus};
use crate::model::{EdgeCondition, FanIn};

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

async fn run_of(store: &Store, run_id: i64) -> WorkflowRun {
    let run = store.get_workflow_run(run_id).await.expect("get");
    run.expect("the run")
}

fn state_of(run: &WorkflowRun, key: &str) -> Option<NodeState> {
    run.states().get(key).copied()
}

fn reopen(run_id: i64, key: &str, expected: Option<NodeState>, skip: bool) -> Reopen {
    Reopen {
        run_id,
        key: key.to_string(),
        expected,
        becomes: skip.then_some(NodeState::SkippedByUser),
        by: "ann".to_string(),
        reset: if skip {
            vec![]
        } else {
            vec!["b".into(), "c".into()]
        },
        now_ms: 50,
    }
}

#[tokio::test]
async fn a_retry_or_skip_is_written_once_and_fences_off_older_advances() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let job = new_job(&store, group.id, ScheduleType::None).await;
        let nodes = ["a", "b", "c"].map(|key| (key, FanIn::AllSuccess));
        let edges = [
            ("a", "b", EdgeCondition::OnSuccess),
            ("b", "c", EdgeCondition::OnSuccess),
        ];
        let graph = test_workflow(group.id, job.id, "reopen", &nodes, &edges);
        let workflow = store.insert_workflow(&graph).await.expect("workflow");
        let new_run = NewWorkflowRun {
            graph: workflow,
            params: String::new(),
            created_ms: 1,
            traceparent: TRACEPARENT.to_string(),
            trigger_type: crate::model::TriggerType::Manual,
            scheduled_at_ms: 0,
        };
        let run_id = store.insert_workflow_run(&new_run).await.expect("run");
        let run = run_of(&store, run_id).await;
        assert_eq!(run.traceparent, TRACEPARENT, "{backend}");
        assert_eq!(run.generation, 0, "{backend}");

        // a fails; b and c are skipped below it; the run ends FAILED.
        let node_run = manual_run(&job, RunStatus::Pending);
        let a = store
            .start_workflow_node(run_id, 0, "a", &node_run, 2)
            .await;
        let a = a.expect("start").expect("a started");
        let failed = store.finish_workflow_node(run_id, a, NodeState::Failed, 3);
        assert!(failed.await.expect("end"), "{backend}");
        for key in ["b", "c"] {
            let skipped = store.skip_workflow_node(run_id, 0, key, 4).await;
            assert!(skipped.expect("skip"), "{backend}");
        }
        let ended = store.finish_workflow_run(run_id, WorkflowRunStatus::Failed, Some(0), 5);
        assert!(ended.await.expect("end"), "{backend}");

        // Two racing retries of a: one is written.
        let retry = reopen(run_id, "a", Some(NodeState::Failed), false);
        let (one, other) = tokio::join!(
            store.reopen_workflow_node(&retry),
            store.reopen_workflow_node(&retry)
        );
        let written = [one.expect("reopen"), other.expect("reopen")];
        assert_eq!(
            written.iter().filter(|written| **written).count(),
            1,
            "{backend}: {written:?}"
        );
        let run = run_of(&store, run_id).await;
        assert_eq!(run.status, WorkflowRunStatus::Running, "{backend}");
        assert_eq!((run.generation, run.finished_ms), (1, 0), "{backend}");
        assert!(run.nodes.is_empty(), "{backend}: a, b, c wait: {run:?}");

        // An advance that read generation 0 writes nothing now.
        let stale = store
            .start_workflow_node(run_id, 0, "a", &node_run, 6)
            .await;
        assert_eq!(stale.expect("start"), None, "{backend}");
        let stale = store.skip_workflow_node(run_id, 0, "b", 6).await;
        assert!(!stale.expect("skip"), "{backend}");
        let stale = store.finish_workflow_run(run_id, WorkflowRunStatus::Failed, Some(0), 6);
        assert!(!stale.await.expect("end"), "{backend}");
        // One at generation 1 starts a again.
        let again = store
            .start_workflow_node(run_id, 1, "a", &node_run, 7)
            .await;
        let again = again.expect("start").expect("a started again");
        assert_ne!(again, a, "{backend}: a new run");

        // a fails again; a user skips it, and skips waiting c ahead of its turn.
        let failed = store.finish_workflow_node(run_id, again, NodeState::Failed, 8);
        assert!(failed.await.expect("end"), "{backend}");
        let skip = reopen(run_id, "a", Some(NodeState::Failed), true);
        assert!(
            store.reopen_workflow_node(&skip).await.expect("skip"),
            "{backend}"
        );
        assert!(
            !store.reopen_workflow_node(&skip).await.expect("skip"),
            "{backend}"
        );
        let ahead = reopen(run_id, "c", None, true);
        assert!(
            store.reopen_workflow_node(&ahead).await.expect("skip"),
            "{backend}"
        );
        assert!(
            !store.reopen_workflow_node(&ahead).await.expect("skip"),
            "{backend}"
        );
        let run = run_of(&store, run_id).await;
        assert_eq!(run.generation, 3, "{backend}");
        assert_eq!(
            state_of(&run, "a"),
            Some(NodeState::SkippedByUser),
            "{backend}"
        );
        assert_eq!(
            state_of(&run, "c"),
            Some(NodeState::SkippedByUser),
            "{backend}"
        );
        let a_row = run.nodes.iter().find(|node| node.key == "a").expect("a");
        assert_eq!(
            (a_row.skipped_by.as_str(), a_row.updated_ms),
            ("ann", 50),
            "{backend}"
        );

        // A cancelled run takes no retry or skip.
        let cancelled = store.finish_workflow_run(run_id, WorkflowRunStatus::Cancelled, None, 9);
        assert!(cancelled.await.expect("cancel"), "{backend}");
        let late = reopen(run_id, "b", None, true);
        assert!(
            !store.reopen_workflow_node(&late).await.expect("skip"),
            "{backend}"
        );
        store.close().await;
    }
}
