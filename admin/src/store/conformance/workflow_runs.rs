//! Workflow runs' store methods around the advance (which `monitor::workflow_step` tests): a
//! workflow's runs listed newest first, the RUNNING ones found, the finished runs that are a
//! node's current run found, and a retry's follow-up moving the node to the retry, so the
//! node ends with its last attempt.

use super::*;
use crate::model::workflow_run::{NewWorkflowRun, NodeState, WorkflowRunStatus};
use crate::model::{EdgeCondition, FanIn, Workflow, WorkflowEdge, WorkflowId, WorkflowNode};
use crate::store::FollowupWrite;

fn chain(group_id: GroupId, job_id: JobId) -> Workflow {
    let node = |key: &str| WorkflowNode {
        key: key.to_string(),
        job_id,
        fan_in: FanIn::AllSuccess,
    };
    Workflow {
        id: WorkflowId(0),
        group_id,
        name: "chain".to_string(),
        nodes: vec![node("a"), node("b")],
        edges: vec![WorkflowEdge {
            from: "a".to_string(),
            to: "b".to_string(),
            condition: EdgeCondition::OnSuccess,
        }],
        updated_ms: 1,
        schedule: Default::default(),
        params: String::new(),
    }
}

#[tokio::test]
async fn workflow_runs_list_find_their_nodes_and_follow_retries() {
    for (backend, store, _dir) in fresh_stores().await {
        let group = new_group(&store).await;
        let job = new_job(&store, group.id, ScheduleType::None).await;
        let workflow = store
            .insert_workflow(&chain(group.id, job.id))
            .await
            .expect("workflow");
        let new_run = |created_ms| NewWorkflowRun {
            graph: workflow.clone(),
            params: String::new(),
            created_ms,
            traceparent: String::new(),
            trigger_type: crate::model::TriggerType::Manual,
            scheduled_at_ms: 0,
        };
        let first = store.insert_workflow_run(&new_run(1)).await.expect("run");
        let second = store.insert_workflow_run(&new_run(2)).await.expect("run");
        let listed = store
            .list_workflow_runs(workflow.id, 0, 10)
            .await
            .expect("list");
        let ids: Vec<i64> = listed.iter().map(|run| run.id).collect();
        assert_eq!(ids, [second, first], "{backend}: newest first");
        let paged = store
            .list_workflow_runs(workflow.id, 1, 10)
            .await
            .expect("list");
        assert_eq!(paged.len(), 1, "{backend}");
        assert!(
            (store.list_workflow_runs(WorkflowId(999), 0, 10).await)
                .expect("list")
                .is_empty(),
            "{backend}"
        );
        assert!(
            (store
                .finish_workflow_run(second, WorkflowRunStatus::Cancelled, None, 3)
                .await)
                .expect("finish"),
            "{backend}"
        );
        let running = store.running_workflow_runs(10).await.expect("running");
        assert_eq!(running, [first], "{backend}");

        // Node a's run fails; its follow-up retries it, and the node follows the retry.
        let node_run = NewRun {
            trigger_type: TriggerType::Workflow,
            ..manual_run(&job, RunStatus::Pending)
        };
        let attempt = store
            .start_workflow_node(first, 0, "a", &node_run, 4)
            .await
            .expect("start")
            .expect("started once");
        let claimed = store
            .claim_runs(&[attempt], &NodeIdentity::new("n1", 1), 5)
            .await
            .expect("claim");
        assert_eq!(claimed.len(), 1, "{backend}");
        finish(&store, attempt, RunStatus::Failed, 6).await;
        let nodes = store
            .running_workflow_nodes(&[attempt, LogId(999_999)])
            .await
            .expect("nodes");
        assert_eq!(nodes, [(attempt, first, "a".to_string())], "{backend}");
        store
            .claim_followups(&NodeIdentity::new("n1", 1), 100)
            .await
            .expect("claim follow-ups");
        let retry = NewRun {
            attempt: 1,
            dispatch_at_ms: 7,
            ..node_run.clone()
        };
        let write = FollowupWrite {
            log_id: attempt,
            claim_node: "n1".into(),
            claim_epoch: 1,
            alarm_status: AlarmStatus::NothingToAlarm,
            alarm_delivery: String::new(),
            retry: Some(retry),
            children: Vec::new(),
            children_need_all_shards: false,
            fix_delay_release: None,
        };
        let written = store.write_followup(&write).await.expect("follow-up");
        let retry_id = written.retry_id.expect("retry written");
        let run = store
            .get_workflow_run(first)
            .await
            .expect("get")
            .expect("run");
        let a = run.nodes.iter().find(|node| node.key == "a").expect("a");
        assert_eq!(
            (a.state, a.log_id),
            (NodeState::Running, retry_id),
            "{backend}"
        );
        assert!(
            (store.running_workflow_nodes(&[attempt]).await)
                .expect("nodes")
                .is_empty(),
            "{backend}: the failed attempt is no longer the node's run"
        );
        let nodes = store
            .running_workflow_nodes(&[retry_id])
            .await
            .expect("nodes");
        assert_eq!(nodes, [(retry_id, first, "a".to_string())], "{backend}");
        store.close().await;
    }
}
