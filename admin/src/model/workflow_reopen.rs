//! A user's hand on one node of a workflow run, as a pure rule: retrying a failed node, or
//! skipping a failed or waiting one, reopens the run. What the rule decides is written in one
//! transaction (`Store::reopen_workflow_node`) and the run's next advance does the rest, so a
//! retried node starts through the same (run, node) key as every node: once.
//!
//! - **Retry** (FAILED node): the node's row goes, so the node is waiting again with every
//!   parent final; the next advance starts it with a new run of its job.
//! - **Skip** (FAILED or waiting node): the node becomes SKIPPED_BY_USER, which its children
//!   take as a success (`workflow_run::next_step`).
//!
//! Either way the nodes below it that were SKIPPED because of it go back to waiting (their
//! rows go) so the advance decides them again, and a FAILED run is RUNNING again.

use crate::model::workflow_run::{NodeState, WorkflowRun, WorkflowRunStatus};

/// What a user asks of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAction {
    Retry,
    Skip,
}

impl NodeAction {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeAction::Retry => "retry",
            NodeAction::Skip => "skip",
        }
    }
}

/// What reopening a node writes, given the states it was decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reopen {
    pub run_id: i64,
    pub key: String,
    /// The node's state the plan read (`None`: waiting, no row); the write happens only if it
    /// still stands, so of two racing retries one writes.
    pub expected: Option<NodeState>,
    /// `None`: the node's row goes (a retry); `Some(state)`: the node gets that state.
    pub becomes: Option<NodeState>,
    /// Who asked (kept on a skipped node).
    pub by: String,
    /// Nodes below it that are SKIPPED and so go back to waiting, in graph order.
    pub reset: Vec<String>,
    pub now_ms: i64,
}

/// Why a node cannot be reopened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReopenRefusal {
    /// The run's graph has no such node.
    NoNode(String),
    /// The node or the run is not in a state the action applies to (the message says which).
    Refused(String),
}

/// Plans `action` on node `key` of `run`, asked by `by` at `now_ms`.
pub fn plan_reopen(
    run: &WorkflowRun,
    key: &str,
    action: NodeAction,
    by: &str,
    now_ms: i64,
) -> Result<Reopen, ReopenRefusal> {
    let id = run.id;
    if !run.graph.nodes.iter().any(|node| node.key == key) {
        let message = format!("workflow run {id} has no node '{key}'");
        return Err(ReopenRefusal::NoNode(message));
    }
    let refuse = |why: String| Err(ReopenRefusal::Refused(why));
    match run.status {
        WorkflowRunStatus::Cancelled => {
            return refuse(format!(
                "workflow run {id} was cancelled; start a new run instead"
            ));
        }
        WorkflowRunStatus::Skipped => {
            return refuse(format!(
                "workflow run {id} was skipped (it never ran); start a new run instead"
            ));
        }
        WorkflowRunStatus::Waiting => {
            return refuse(format!(
                "workflow run {id} is waiting for the runs before it; its nodes have not started"
            ));
        }
        WorkflowRunStatus::Succeeded => {
            return refuse(format!(
                "workflow run {id} succeeded; nothing to {}",
                action.as_str()
            ));
        }
        WorkflowRunStatus::Running | WorkflowRunStatus::Failed => {}
    }
    let states = run.states();
    let state = states.get(key).copied();
    let node = format!("node '{key}' of workflow run {id}");
    // A waiting node whose parents are all final is about to start (just retried, say).
    let starting = state.is_none()
        && (run.graph.edges.iter())
            .filter(|edge| edge.to == key)
            .all(|edge| {
                states
                    .get(&edge.from)
                    .is_some_and(|parent| parent.is_final())
            });
    let allowed = match (action, state) {
        (NodeAction::Retry, Some(NodeState::Failed)) => Ok(()),
        (_, None) if starting => Err(format!("{node} is starting")),
        (NodeAction::Skip, Some(NodeState::Failed) | None) => Ok(()),
        (_, Some(NodeState::Running)) => Err(format!("{node} is RUNNING")),
        (_, Some(NodeState::Succeeded)) => Err(format!("{node} has SUCCEEDED")),
        (_, Some(NodeState::SkippedByUser)) => Err(format!("{node} was skipped by a user")),
        (NodeAction::Retry, Some(NodeState::Skipped)) => Err(format!(
            "{node} was SKIPPED because of the nodes above it; retry the failed node above it"
        )),
        (NodeAction::Skip, Some(NodeState::Skipped)) => Err(format!("{node} is SKIPPED already")),
        (NodeAction::Retry, None) => Err(format!("{node} has not been reached yet")),
    };
    if let Err(why) = allowed {
        let only = match action {
            NodeAction::Retry => "only a FAILED node can be retried",
            NodeAction::Skip => "only a FAILED or waiting node can be skipped",
        };
        return refuse(format!("{why}: {only}"));
    }
    Ok(Reopen {
        run_id: id,
        key: key.to_string(),
        expected: state,
        becomes: match action {
            NodeAction::Retry => None,
            NodeAction::Skip => Some(NodeState::SkippedByUser),
        },
        by: by.to_string(),
        reset: skipped_below(run, key),
        now_ms,
    })
}

/// The SKIPPED nodes below `key` (its descendants), in graph order.
fn skipped_below(run: &WorkflowRun, key: &str) -> Vec<String> {
    let mut below = std::collections::HashSet::new();
    let mut pending = vec![key];
    while let Some(current) = pending.pop() {
        for edge in run.graph.edges.iter().filter(|edge| edge.from == current) {
            if below.insert(edge.to.as_str()) {
                pending.push(edge.to.as_str());
            }
        }
    }
    let states = run.states();
    (run.graph.nodes.iter())
        .filter(|node| below.contains(node.key.as_str()))
        .filter(|node| states.get(&node.key) == Some(&NodeState::Skipped))
        .map(|node| node.key.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::workflow::test_workflow;
    use crate::model::workflow_run::{WorkflowRunNode, next_step};
    use crate::model::{EdgeCondition, FanIn, GroupId, JobId, LogId};

    /// a → b → c, and a → e on failure; `states` as stored.
    fn run(status: WorkflowRunStatus, states: &[(&str, NodeState)]) -> WorkflowRun {
        use EdgeCondition::{OnFailure, OnSuccess};
        let nodes = ["a", "b", "c", "e"].map(|key| (key, FanIn::AllSuccess));
        let edges = [
            ("a", "b", OnSuccess),
            ("b", "c", OnSuccess),
            ("a", "e", OnFailure),
        ];
        WorkflowRun {
            id: 5,
            status,
            graph: test_workflow(GroupId(1), JobId(1), "w", &nodes, &edges),
            params: String::new(),
            created_ms: 0,
            finished_ms: 0,
            generation: 0,
            traceparent: String::new(),
            trigger_type: crate::model::TriggerType::Manual,
            scheduled_at_ms: 0,
            reason: String::new(),
            nodes: (states.iter())
                .map(|(key, state)| WorkflowRunNode {
                    key: key.to_string(),
                    state: *state,
                    log_id: LogId(1),
                    updated_ms: 0,
                    skipped_by: String::new(),
                })
                .collect(),
        }
    }

    use NodeState::{Failed, Running, Skipped, Succeeded};

    fn refusal(result: Result<Reopen, ReopenRefusal>) -> String {
        match result {
            Err(ReopenRefusal::Refused(message) | ReopenRefusal::NoNode(message)) => message,
            Ok(plan) => panic!("planned {plan:?}"),
        }
    }

    #[test]
    fn a_retry_of_a_failed_node_reopens_the_nodes_skipped_below_it() {
        let failed = run(
            WorkflowRunStatus::Failed,
            &[
                ("a", Failed),
                ("b", Skipped),
                ("c", Skipped),
                ("e", Succeeded),
            ],
        );
        let plan = plan_reopen(&failed, "a", NodeAction::Retry, "ann", 9).expect("plan");
        assert_eq!(plan.expected, Some(Failed));
        assert_eq!(plan.becomes, None);
        assert_eq!(plan.reset, ["b", "c"], "the failure branch e ran and stays");
    }

    #[test]
    fn a_skipped_failed_node_lets_its_children_run_and_the_run_succeed() {
        let failed = run(
            WorkflowRunStatus::Failed,
            &[
                ("a", Succeeded),
                ("b", Failed),
                ("c", Skipped),
                ("e", Skipped),
            ],
        );
        let plan = plan_reopen(&failed, "b", NodeAction::Skip, "ann", 9).expect("plan");
        assert_eq!(plan.becomes, Some(NodeState::SkippedByUser));
        assert_eq!(plan.reset, ["c"]);
        // As the store leaves it: b skipped by ann, c waiting again.
        let reopened = run(
            WorkflowRunStatus::Running,
            &[
                ("a", Succeeded),
                ("b", NodeState::SkippedByUser),
                ("e", Skipped),
            ],
        );
        let step = next_step(&reopened.graph, &reopened.states());
        assert_eq!(step.start, ["c"]);
        let mut done = reopened.states();
        done.insert("c".into(), Succeeded);
        let over = next_step(&reopened.graph, &done).finished;
        assert_eq!(over, Some(WorkflowRunStatus::Succeeded));
    }

    #[test]
    fn a_node_skipped_before_its_turn_holds_its_children_until_it_is_reached() {
        let running = run(
            WorkflowRunStatus::Running,
            &[("a", Running), ("b", NodeState::SkippedByUser)],
        );
        let step = next_step(&running.graph, &running.states());
        assert!(step.start.is_empty(), "c waits for a: {step:?}");
        let reached = run(
            WorkflowRunStatus::Running,
            &[("a", Succeeded), ("b", NodeState::SkippedByUser)],
        );
        let step = next_step(&reached.graph, &reached.states());
        assert_eq!(step.start, ["c"]);
        assert_eq!(step.skip, ["e"]);
    }

    #[test]
    fn refusals_name_the_node_its_state_and_what_is_allowed() {
        let running = run(
            WorkflowRunStatus::Running,
            &[("a", Succeeded), ("b", Running)],
        );
        assert_eq!(
            refusal(plan_reopen(&running, "b", NodeAction::Retry, "u", 1)),
            "node 'b' of workflow run 5 is RUNNING: only a FAILED node can be retried"
        );
        assert_eq!(
            refusal(plan_reopen(&running, "a", NodeAction::Skip, "u", 1)),
            "node 'a' of workflow run 5 has SUCCEEDED: only a FAILED or waiting node can be \
             skipped"
        );
        assert_eq!(
            refusal(plan_reopen(&running, "c", NodeAction::Retry, "u", 1)),
            "node 'c' of workflow run 5 has not been reached yet: only a FAILED node can be \
             retried"
        );
        assert_eq!(
            refusal(plan_reopen(&running, "zz", NodeAction::Retry, "u", 1)),
            "workflow run 5 has no node 'zz'"
        );
        let cancelled = run(WorkflowRunStatus::Cancelled, &[("a", Failed)]);
        assert_eq!(
            refusal(plan_reopen(&cancelled, "a", NodeAction::Retry, "u", 1)),
            "workflow run 5 was cancelled; start a new run instead"
        );
        let waiting = plan_reopen(&running, "c", NodeAction::Skip, "u", 1).expect("plan");
        assert_eq!(waiting.expected, None);
        // Retried a moment ago: no row, every parent final.
        let retried = run(WorkflowRunStatus::Running, &[]);
        assert_eq!(
            refusal(plan_reopen(&retried, "a", NodeAction::Retry, "u", 1)),
            "node 'a' of workflow run 5 is starting: only a FAILED node can be retried"
        );
    }
}
