//! Workflows on and off the wire. Unspecified enums read as their defaults (ON_SUCCESS,
//! ALL_SUCCESS); unknown numbers are refused naming the field.

use xjob_proto::pb;

use crate::api::policy_convert::{overlap_policy_from_pb, overlap_policy_to_pb};
use crate::error::Error;
use crate::model::workflow_run::{NodeState, WorkflowRun, WorkflowRunStatus};
use crate::model::workflow_schedule::WorkflowSchedule;
use crate::model::{
    EdgeCondition, FanIn, GroupId, JobId, Workflow, WorkflowEdge, WorkflowId, WorkflowNode,
};
use crate::model::{LogId, MisfireStrategy, OverlapPolicy, RunLog, ScheduleType};
use crate::wire::{
    misfire_strategy_to_pb, pb_misfire_strategy, pb_schedule_type, schedule_type_to_pb,
    trigger_type_to_pb,
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
    let schedule = WorkflowSchedule {
        schedule_type: schedule_type_from_wire(workflow.schedule_type)?,
        schedule_conf: workflow.schedule_conf.trim().to_string(),
        time_zone: workflow.time_zone.trim().to_string(),
        misfire: misfire_from_wire(workflow.misfire_strategy)?,
        next_fire_ms: 0,
        overlap: overlap_from_wire(workflow.overlap_policy)?,
    };
    Ok(Workflow {
        id: WorkflowId(workflow.id),
        group_id: GroupId(workflow.group_id),
        name: workflow.name,
        nodes,
        edges,
        updated_ms: 0,
        schedule,
        params: workflow.params,
    })
}

/// UNSPECIFIED reads as NONE (a workflow saved by a client that knows no schedules).
fn schedule_type_from_wire(value: i32) -> Result<ScheduleType, Error> {
    match pb::ScheduleType::try_from(value) {
        Ok(pb::ScheduleType::Unspecified) => Ok(ScheduleType::None),
        Ok(_) => pb_schedule_type(value, "workflow.schedule_type"),
        Err(_) => Err(Error::invalid(
            "workflow.schedule_type",
            format!("unknown value {value}"),
        )),
    }
}

/// UNSPECIFIED reads as DO_NOTHING.
fn misfire_from_wire(value: i32) -> Result<MisfireStrategy, Error> {
    match pb::MisfireStrategy::try_from(value) {
        Ok(pb::MisfireStrategy::Unspecified) => Ok(MisfireStrategy::DoNothing),
        Ok(_) => pb_misfire_strategy(value, "workflow.misfire_strategy"),
        Err(_) => Err(Error::invalid(
            "workflow.misfire_strategy",
            format!("unknown value {value}"),
        )),
    }
}

/// UNSPECIFIED reads as ALLOW_ALL.
fn overlap_from_wire(value: i32) -> Result<OverlapPolicy, Error> {
    overlap_policy_from_pb(value, "workflow")
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
        schedule_type: schedule_type_to_pb(workflow.schedule.schedule_type) as i32,
        schedule_conf: workflow.schedule.schedule_conf,
        time_zone: workflow.schedule.time_zone,
        misfire_strategy: misfire_strategy_to_pb(workflow.schedule.misfire) as i32,
        params: workflow.params,
        next_fire_ms: workflow.schedule.next_fire_ms,
        overlap_policy: overlap_policy_to_pb(workflow.schedule.overlap) as i32,
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

/// A workflow run on the wire: each node of its graph in graph order, with its run (`logs`,
/// by log id) when it started; `with_nodes` false leaves nodes and edges out (lists).
pub fn workflow_run_to_pb(
    run: WorkflowRun,
    logs: &std::collections::HashMap<LogId, RunLog>,
    with_nodes: bool,
) -> pb::WorkflowRun {
    let running = run.status == WorkflowRunStatus::Running;
    let nodes = if with_nodes {
        (run.graph.nodes.iter())
            .map(|graph_node| {
                let stored = run.nodes.iter().find(|node| node.key == graph_node.key);
                let log = stored.and_then(|node| logs.get(&node.log_id));
                let state = match stored.map(|node| node.state) {
                    Some(state) => node_state_to_pb(state),
                    None if running => pb::WorkflowNodeState::Waiting,
                    // The run ended before this node's turn came.
                    None => pb::WorkflowNodeState::Skipped,
                };
                pb::WorkflowRunNode {
                    key: graph_node.key.clone(),
                    job_id: graph_node.job_id.0,
                    state: state as i32,
                    log_id: stored.map(|node| node.log_id.0).unwrap_or(0),
                    started_ms: log.map(|log| log.trigger_time_ms).unwrap_or(0),
                    ended_ms: log.map(|log| log.handle_time_ms).unwrap_or(0),
                    result: log.map(|log| log.handle_msg.clone()).unwrap_or_default(),
                    run_status: log
                        .map(|log| crate::wire::run_status_to_pb(log.status) as i32)
                        .unwrap_or(0),
                    skipped_by: (stored.filter(|node| node.state == NodeState::SkippedByUser))
                        .map(|node| node.skipped_by.clone())
                        .unwrap_or_default(),
                    skipped_ms: (stored.filter(|node| node.state == NodeState::SkippedByUser))
                        .map(|node| node.updated_ms)
                        .unwrap_or(0),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let edges = if with_nodes {
        workflow_to_pb(run.graph.clone()).edges
    } else {
        Vec::new()
    };
    pb::WorkflowRun {
        id: run.id,
        workflow_id: run.graph.id.0,
        group_id: run.graph.group_id.0,
        state: run_state_to_pb(run.status) as i32,
        params: run.params,
        created_ms: run.created_ms,
        finished_ms: run.finished_ms,
        nodes,
        edges,
        trigger_type: trigger_type_to_pb(run.trigger_type) as i32,
        scheduled_at_ms: run.scheduled_at_ms,
        reason: run.reason,
    }
}

fn run_state_to_pb(status: WorkflowRunStatus) -> pb::WorkflowRunState {
    match status {
        WorkflowRunStatus::Running => pb::WorkflowRunState::Running,
        WorkflowRunStatus::Succeeded => pb::WorkflowRunState::Succeeded,
        WorkflowRunStatus::Failed => pb::WorkflowRunState::Failed,
        WorkflowRunStatus::Cancelled => pb::WorkflowRunState::Cancelled,
        WorkflowRunStatus::Skipped => pb::WorkflowRunState::Skipped,
        WorkflowRunStatus::Waiting => pb::WorkflowRunState::Waiting,
    }
}

fn node_state_to_pb(state: NodeState) -> pb::WorkflowNodeState {
    match state {
        NodeState::Running => pb::WorkflowNodeState::Running,
        NodeState::Succeeded => pb::WorkflowNodeState::Succeeded,
        NodeState::Failed => pb::WorkflowNodeState::Failed,
        NodeState::Skipped | NodeState::SkippedByUser => pb::WorkflowNodeState::Skipped,
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
            schedule_type: pb::ScheduleType::Cron as i32,
            schedule_conf: "0/2 * * * * ?".into(),
            time_zone: "Europe/Berlin".into(),
            misfire_strategy: pb::MisfireStrategy::FireOnceNow as i32,
            params: "p".into(),
            next_fire_ms: 0,
            overlap_policy: pb::OverlapPolicy::CancelOther as i32,
        };
        let model = workflow_from_pb(wire.clone()).expect("converts");
        assert_eq!(workflow_to_pb(model), wire);
        let mut odd = wire.clone();
        odd.overlap_policy = 9;
        let error = workflow_from_pb(odd).expect_err("refused");
        assert!(
            (error.to_string()).starts_with("workflow.overlap_policy: unknown value 9"),
            "{error}"
        );
        let mut unknown = wire;
        unknown.edges[0].condition = 42;
        let error = workflow_from_pb(unknown).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "workflow.edges[0].condition: unknown value 42"
        );
    }
}
