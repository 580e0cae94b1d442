//! Workflows on and off the wire. Unspecified enums read as their defaults (ON_SUCCESS,
//! ALL_SUCCESS); unknown numbers are refused naming the field.

use xjob_proto::pb;

use crate::error::Error;
use crate::model::{
    EdgeCondition, FanIn, GroupId, JobId, Workflow, WorkflowEdge, WorkflowId, WorkflowNode,
};

/// A workflow off the wire; `updated_ms` is left for the handler to set.
pub fn workflow_from_pb(workflow: pb::Workflow) -> Result<Workflow, Error> {
    let mut nodes = Vec::with_capacity(workflow.nodes.len());
    for (index, node) in workflow.nodes.into_iter().enumerate() {
        nodes.push(WorkflowNode {
            key: node.key,
            job_id: JobId(node.job_id),
            fan_in: fan_in_from_pb(node.fan_in, &format!("workflow.nodes[{index}].fan_in"))?,
        });
    }
    let mut edges = Vec::with_capacity(workflow.edges.len());
    for (index, edge) in workflow.edges.into_iter().enumerate() {
        let field = format!("workflow.edges[{index}].condition");
        edges.push(WorkflowEdge {
            from: edge.from,
            to: edge.to,
            condition: condition_from_pb(edge.condition, &field)?,
        });
    }
    Ok(Workflow {
        id: WorkflowId(workflow.id),
        group_id: GroupId(workflow.group_id),
        name: workflow.name,
        nodes,
        edges,
        updated_ms: 0,
    })
}

pub fn workflow_to_pb(workflow: Workflow) -> pb::Workflow {
    pb::Workflow {
        id: workflow.id.0,
        group_id: workflow.group_id.0,
        name: workflow.name,
        nodes: (workflow.nodes.into_iter())
            .map(|node| pb::WorkflowNode {
                key: node.key,
                job_id: node.job_id.0,
                fan_in: fan_in_to_pb(node.fan_in) as i32,
            })
            .collect(),
        edges: (workflow.edges.into_iter())
            .map(|edge| pb::WorkflowEdge {
                from: edge.from,
                to: edge.to,
                condition: condition_to_pb(edge.condition) as i32,
            })
            .collect(),
        updated_ms: workflow.updated_ms,
    }
}

fn fan_in_from_pb(value: i32, field: &str) -> Result<FanIn, Error> {
    match pb::WorkflowFanIn::try_from(value) {
        Ok(pb::WorkflowFanIn::Unspecified | pb::WorkflowFanIn::AllSuccess) => Ok(FanIn::AllSuccess),
        Ok(pb::WorkflowFanIn::AnySuccess) => Ok(FanIn::AnySuccess),
        Err(_) => Err(Error::invalid(field, format!("unknown value {value}"))),
    }
}

fn fan_in_to_pb(fan_in: FanIn) -> pb::WorkflowFanIn {
    match fan_in {
        FanIn::AllSuccess => pb::WorkflowFanIn::AllSuccess,
        FanIn::AnySuccess => pb::WorkflowFanIn::AnySuccess,
    }
}

fn condition_from_pb(value: i32, field: &str) -> Result<EdgeCondition, Error> {
    use pb::WorkflowEdgeCondition as Wire;
    match Wire::try_from(value) {
        Ok(Wire::Unspecified | Wire::OnSuccess) => Ok(EdgeCondition::OnSuccess),
        Ok(Wire::OnFailure) => Ok(EdgeCondition::OnFailure),
        Ok(Wire::Always) => Ok(EdgeCondition::Always),
        Err(_) => Err(Error::invalid(field, format!("unknown value {value}"))),
    }
}

fn condition_to_pb(condition: EdgeCondition) -> pb::WorkflowEdgeCondition {
    match condition {
        EdgeCondition::OnSuccess => pb::WorkflowEdgeCondition::OnSuccess,
        EdgeCondition::OnFailure => pb::WorkflowEdgeCondition::OnFailure,
        EdgeCondition::Always => pb::WorkflowEdgeCondition::Always,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workflow_round_trips_and_unknown_enums_are_refused() {
        let wire = pb::Workflow {
            id: 3,
            group_id: 1,
            name: "w".into(),
            nodes: vec![pb::WorkflowNode {
                key: "a".into(),
                job_id: 7,
                fan_in: pb::WorkflowFanIn::AnySuccess as i32,
            }],
            edges: vec![pb::WorkflowEdge {
                from: "a".into(),
                to: "a".into(),
                condition: pb::WorkflowEdgeCondition::OnFailure as i32,
            }],
            updated_ms: 0,
        };
        let model = workflow_from_pb(wire.clone()).expect("converts");
        assert_eq!(workflow_to_pb(model), wire);
        let mut unknown = wire;
        unknown.edges[0].condition = 42;
        let error = workflow_from_pb(unknown).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "workflow.edges[0].condition: unknown value 42"
        );
    }
}
