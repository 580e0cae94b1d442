//! Workflows through the API of a real admin: a diamond graph is saved and read back whole;
//! a cycle is refused naming it, an unknown job is NOT_FOUND naming the node, and a repeated
//! key or an edge to no node is INVALID_ARGUMENT naming the field.

use tonic::Code;
use xjob_proto::pb;
use xjob_tests::TestCluster;

fn node(key: &str, job_id: i64, fan_in: pb::WorkflowFanIn) -> pb::WorkflowNode {
    pb::WorkflowNode {
        key: key.to_string(),
        job_id,
        fan_in: fan_in as i32,
    }
}

fn edge(from: &str, to: &str, condition: pb::WorkflowEdgeCondition) -> pb::WorkflowEdge {
    pb::WorkflowEdge {
        from: from.to_string(),
        to: to.to_string(),
        condition: condition as i32,
    }
}

/// A → (B, C) → D, with an error branch A → E on failure.
fn diamond(group_id: i64, job_id: i64) -> pb::Workflow {
    use pb::WorkflowEdgeCondition::{OnFailure, OnSuccess};
    use pb::WorkflowFanIn::AllSuccess;
    pb::Workflow {
        group_id,
        name: "  nightly  ".to_string(),
        nodes: ["a", "b", "c", "d", "e"]
            .iter()
            .map(|key| node(key, job_id, AllSuccess))
            .collect(),
        edges: vec![
            edge("a", "b", OnSuccess),
            edge("a", "c", OnSuccess),
            edge("b", "d", OnSuccess),
            edge("c", "d", OnSuccess),
            edge("a", "e", OnFailure),
        ],
        ..Default::default()
    }
}

fn refusal<T: std::fmt::Debug>(outcome: Result<T, tonic::Status>, code: Code) -> String {
    let status = outcome.expect_err("refused");
    assert_eq!(status.code(), code, "{status:?}");
    status.message().to_string()
}

#[tokio::test]
async fn workflows_are_saved_checked_listed_and_deleted() -> anyhow::Result<()> {
    let cluster = TestCluster::builder().start().await?;
    let group_id = cluster.create_group("workflow-app").await?;
    let job = TestCluster::job(group_id, "step", pb::ScheduleType::None, "");
    let job_id = cluster.create_job(job).await?.id;
    let mut client = cluster.client();

    let request = pb::CreateWorkflowRequest {
        workflow: Some(diamond(group_id, job_id)),
    };
    let created = client.create_workflow(request).await?.into_inner();
    let created = created
        .workflow
        .ok_or_else(|| anyhow::anyhow!("no workflow"))?;
    assert!(created.id > 0);
    assert_eq!(created.name, "nightly");
    assert!(created.updated_ms > 0);
    let expected = pb::Workflow {
        id: created.id,
        name: "nightly".to_string(),
        updated_ms: created.updated_ms,
        // No schedule given reads back as none, with the default misfire strategy and overlap
        // policy.
        schedule_type: pb::ScheduleType::None as i32,
        misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
        overlap_policy: pb::OverlapPolicy::AllowAll as i32,
        ..diamond(group_id, job_id)
    };
    assert_eq!(created, expected);
    let read = client
        .get_workflow(pb::GetWorkflowRequest { id: created.id })
        .await?
        .into_inner();
    assert_eq!(read.workflow.as_ref(), Some(&created));
    let listed = client
        .list_workflows(pb::ListWorkflowsRequest::default())
        .await?
        .into_inner();
    assert_eq!(listed.workflows, vec![created.clone()]);
    assert_eq!(listed.next_page_token, "");

    // D → B closes the loop B → D → B.
    let mut looped = created.clone();
    looped
        .edges
        .push(edge("d", "b", pb::WorkflowEdgeCondition::Always));
    let update = pb::UpdateWorkflowRequest {
        workflow: Some(looped),
    };
    let message = refusal(client.update_workflow(update).await, Code::InvalidArgument);
    assert_eq!(message, "workflow.edges: cycle b -> d -> b");

    let mut unknown_job = diamond(group_id, job_id);
    unknown_job.nodes[2].job_id = 999_999;
    let request = pb::CreateWorkflowRequest {
        workflow: Some(unknown_job),
    };
    let message = refusal(client.create_workflow(request).await, Code::NotFound);
    assert_eq!(message, "workflow.nodes[2].job_id: job 999999 not found");

    let mut twice = diamond(group_id, job_id);
    twice.nodes[1].key = "a".to_string();
    let request = pb::CreateWorkflowRequest {
        workflow: Some(twice),
    };
    let message = refusal(client.create_workflow(request).await, Code::InvalidArgument);
    assert_eq!(message, "workflow.nodes[1].key: 'a' is used by two nodes");

    let mut dangling = diamond(group_id, job_id);
    dangling.edges[0].to = "nowhere".to_string();
    let request = pb::CreateWorkflowRequest {
        workflow: Some(dangling),
    };
    let message = refusal(client.create_workflow(request).await, Code::InvalidArgument);
    assert_eq!(message, "workflow.edges[0].to: no node 'nowhere'");

    // A valid update replaces the graph.
    let mut smaller = created.clone();
    smaller.nodes.truncate(2);
    smaller.edges.truncate(1);
    let update = pb::UpdateWorkflowRequest {
        workflow: Some(smaller),
    };
    let updated = client.update_workflow(update).await?.into_inner();
    let updated = updated
        .workflow
        .ok_or_else(|| anyhow::anyhow!("no workflow"))?;
    assert_eq!(updated.nodes.len(), 2);
    assert_eq!(
        updated.edges,
        vec![edge("a", "b", pb::WorkflowEdgeCondition::OnSuccess)]
    );

    client
        .delete_workflow(pb::DeleteWorkflowRequest { id: created.id })
        .await?;
    let gone = client
        .get_workflow(pb::GetWorkflowRequest { id: created.id })
        .await;
    let message = refusal(gone, Code::NotFound);
    assert_eq!(message, format!("workflow {} not found", created.id));
    cluster.shutdown().await;
    Ok(())
}
