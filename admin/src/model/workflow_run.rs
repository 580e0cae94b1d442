//! A workflow run's next step, as a pure rule: from the graph and the states its nodes reached,
//! which nodes start, which can no longer run (SKIPPED), and whether the run is over. The
//! admin applies it under the run's lock each time a node ends, so evaluating it twice, or on
//! two admins, decides the same.

use std::collections::HashMap;

use crate::model::{EdgeCondition, FanIn, Workflow};

/// Where one node of a run stands. A node with no state yet is waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeState {
    Running,
    Succeeded,
    /// Its run ended FAILED, TIMEOUT, KILLED or LOST (after its retries).
    Failed,
    /// It can no longer run: its in-edges' conditions cannot hold, or the run was cancelled.
    Skipped,
    /// A user skipped it (SkipWorkflowNode): it does not run, and its children take it as a
    /// success once it is reached (all its parents are final).
    SkippedByUser,
}

impl NodeState {
    pub const ALL: &'static [NodeState] = &[
        NodeState::Running,
        NodeState::Succeeded,
        NodeState::Failed,
        NodeState::Skipped,
        NodeState::SkippedByUser,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Running => "RUNNING",
            NodeState::Succeeded => "SUCCEEDED",
            NodeState::Failed => "FAILED",
            NodeState::Skipped => "SKIPPED",
            NodeState::SkippedByUser => "SKIPPED_BY_USER",
        }
    }

    pub fn parse(text: &str) -> Option<NodeState> {
        Self::ALL
            .iter()
            .copied()
            .find(|state| state.as_str() == text)
    }

    pub fn is_final(self) -> bool {
        self != NodeState::Running
    }
}

/// A workflow run's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkflowRunStatus {
    Running,
    /// Every node succeeded or was skipped.
    Succeeded,
    /// Some node failed (even one whose failure branch ran).
    Failed,
    Cancelled,
    /// A scheduled occurrence not run: an earlier run was going (overlap policy SKIP, or
    /// BUFFER_ONE with one waiting already).
    Skipped,
    /// A scheduled occurrence held back until the runs before it end (BUFFER_ONE, BUFFER_ALL).
    Waiting,
}

impl WorkflowRunStatus {
    pub const ALL: &'static [WorkflowRunStatus] = &[
        WorkflowRunStatus::Running,
        WorkflowRunStatus::Succeeded,
        WorkflowRunStatus::Failed,
        WorkflowRunStatus::Cancelled,
        WorkflowRunStatus::Skipped,
        WorkflowRunStatus::Waiting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowRunStatus::Running => "RUNNING",
            WorkflowRunStatus::Succeeded => "SUCCEEDED",
            WorkflowRunStatus::Failed => "FAILED",
            WorkflowRunStatus::Cancelled => "CANCELLED",
            WorkflowRunStatus::Skipped => "SKIPPED",
            WorkflowRunStatus::Waiting => "WAITING",
        }
    }

    pub fn parse(text: &str) -> Option<WorkflowRunStatus> {
        Self::ALL
            .iter()
            .copied()
            .find(|status| status.as_str() == text)
    }
}

/// What the current states lead to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    /// Waiting nodes whose in-edges now allow them to run, in graph order.
    pub start: Vec<String>,
    /// Waiting nodes that can no longer run, in graph order.
    pub skip: Vec<String>,
    /// The run's final status when, after this step, no node runs or can run.
    pub finished: Option<WorkflowRunStatus>,
}

/// Whether an edge's condition holds for a parent that ended `parent`. A skipped parent
/// satisfies no condition: its branch did not happen. A parent a user skipped counts as a
/// success (ON_SUCCESS and ALWAYS hold, ON_FAILURE does not): skipping is how a user lets the
/// run go on past a node.
fn holds(condition: EdgeCondition, parent: NodeState) -> bool {
    matches!(
        (condition, parent),
        (
            EdgeCondition::OnSuccess | EdgeCondition::Always,
            NodeState::Succeeded | NodeState::SkippedByUser
        ) | (EdgeCondition::OnFailure, NodeState::Failed)
            | (EdgeCondition::Always, NodeState::Failed)
    )
}

/// Whether node `key` has been reached: every node above it is final. A node a user skipped
/// before its turn holds its children back until then, as if it had run in its place.
fn reached(workflow: &Workflow, now: &HashMap<&str, NodeState>, key: &str) -> bool {
    let mut pending = vec![key];
    let mut seen = std::collections::HashSet::new();
    while let Some(current) = pending.pop() {
        for edge in workflow.edges.iter().filter(|edge| edge.to == current) {
            let parent = edge.from.as_str();
            if !now.get(parent).is_some_and(|state| state.is_final()) {
                return false;
            }
            if seen.insert(parent) {
                pending.push(parent);
            }
        }
    }
    true
}

/// A parent's state as its children see it: a node skipped by a user before it was reached
/// is not final for them yet.
fn as_parent(workflow: &Workflow, now: &HashMap<&str, NodeState>, key: &str) -> Option<NodeState> {
    match now.get(key).copied() {
        Some(NodeState::SkippedByUser) if !reached(workflow, now, key) => None,
        state => state,
    }
}

/// The next step of a run of `workflow` whose nodes stand at `states` (a missing key is
/// waiting). A node decides once all its parents are final: ALL_SUCCESS starts it when every
/// in-edge holds, ANY_SUCCESS when one does; otherwise it is skipped, which may decide its own
/// children in turn (repeated until nothing changes). Roots start at once.
pub fn next_step(workflow: &Workflow, states: &HashMap<String, NodeState>) -> Step {
    let mut now: HashMap<&str, NodeState> = states
        .iter()
        .map(|(key, state)| (key.as_str(), *state))
        .collect();
    let mut step = Step::default();
    loop {
        let mut changed = false;
        for node in &workflow.nodes {
            if now.contains_key(node.key.as_str()) {
                continue;
            }
            let in_edges: Vec<_> = (workflow.edges.iter())
                .filter(|edge| edge.to == node.key)
                .map(|edge| (edge.condition, as_parent(workflow, &now, &edge.from)))
                .collect();
            let parents_final = in_edges
                .iter()
                .all(|(_, parent)| parent.is_some_and(NodeState::is_final));
            if !parents_final {
                continue;
            }
            let held = in_edges
                .iter()
                .filter(|(condition, parent)| parent.is_some_and(|p| holds(*condition, p)))
                .count();
            let runs = match node.fan_in {
                _ if in_edges.is_empty() => true,
                FanIn::AllSuccess => held == in_edges.len(),
                FanIn::AnySuccess => held > 0,
            };
            if runs {
                step.start.push(node.key.clone());
                now.insert(node.key.as_str(), NodeState::Running);
            } else {
                step.skip.push(node.key.clone());
                now.insert(node.key.as_str(), NodeState::Skipped);
            }
            changed = true;
        }
        if !changed {
            break;
        }
    }
    let all_final = (workflow.nodes.iter()).all(|node| {
        now.get(node.key.as_str())
            .is_some_and(|state| state.is_final())
    });
    if all_final {
        let failed = now.values().any(|state| *state == NodeState::Failed);
        step.finished = Some(if failed {
            WorkflowRunStatus::Failed
        } else {
            WorkflowRunStatus::Succeeded
        });
    }
    step
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::workflow::test_workflow;
    use crate::model::{GroupId, JobId, WorkflowId};

    fn graph(nodes: &[(&str, FanIn)], edges: &[(&str, &str, EdgeCondition)]) -> Workflow {
        Workflow {
            id: WorkflowId(1),
            ..test_workflow(GroupId(1), JobId(1), "w", nodes, edges)
        }
    }

    fn states(pairs: &[(&str, NodeState)]) -> HashMap<String, NodeState> {
        pairs
            .iter()
            .map(|(key, state)| (key.to_string(), *state))
            .collect()
    }

    use EdgeCondition::{Always, OnFailure, OnSuccess};
    use FanIn::{AllSuccess, AnySuccess};
    use NodeState::{Failed, Running, Skipped, Succeeded};

    /// A → (B, C) → D, and A → E on failure.
    fn diamond(d_fan_in: FanIn) -> Workflow {
        graph(
            &[
                ("a", AllSuccess),
                ("b", AllSuccess),
                ("c", AllSuccess),
                ("d", d_fan_in),
                ("e", AllSuccess),
            ],
            &[
                ("a", "b", OnSuccess),
                ("a", "c", OnSuccess),
                ("b", "d", OnSuccess),
                ("c", "d", OnSuccess),
                ("a", "e", OnFailure),
            ],
        )
    }

    #[test]
    fn a_diamond_starts_the_root_then_fans_out_and_waits_for_both() {
        let workflow = diamond(AllSuccess);
        assert_eq!(next_step(&workflow, &states(&[])).start, ["a"]);
        let after_a = next_step(&workflow, &states(&[("a", Succeeded)]));
        assert_eq!(after_a.start, ["b", "c"]);
        assert_eq!(after_a.skip, ["e"]);
        let one_done = states(&[
            ("a", Succeeded),
            ("e", Skipped),
            ("b", Succeeded),
            ("c", Running),
        ]);
        assert_eq!(next_step(&workflow, &one_done), Step::default());
        let both = states(&[
            ("a", Succeeded),
            ("e", Skipped),
            ("b", Succeeded),
            ("c", Succeeded),
        ]);
        assert_eq!(next_step(&workflow, &both).start, ["d"]);
        let mut all = both.clone();
        all.insert("d".into(), Succeeded);
        let over = next_step(&workflow, &all);
        assert_eq!(over.finished, Some(WorkflowRunStatus::Succeeded));
    }

    #[test]
    fn a_failure_runs_its_branch_and_skips_the_rest_down_the_graph() {
        let workflow = diamond(AllSuccess);
        let step = next_step(&workflow, &states(&[("a", Failed)]));
        assert_eq!(step.start, ["e"]);
        assert_eq!(step.skip, ["b", "c", "d"]);
        assert_eq!(step.finished, None);
        let done = states(&[
            ("a", Failed),
            ("b", Skipped),
            ("c", Skipped),
            ("d", Skipped),
            ("e", Succeeded),
        ]);
        assert_eq!(
            next_step(&workflow, &done).finished,
            Some(WorkflowRunStatus::Failed)
        );
    }

    #[test]
    fn any_success_starts_on_one_parent_once_both_are_final() {
        let workflow = diamond(AnySuccess);
        let one_failed = states(&[
            ("a", Succeeded),
            ("e", Skipped),
            ("b", Failed),
            ("c", Running),
        ]);
        assert!(next_step(&workflow, &one_failed).start.is_empty());
        let mut final_both = one_failed.clone();
        final_both.insert("c".into(), Succeeded);
        assert_eq!(next_step(&workflow, &final_both).start, ["d"]);
        let mut none = one_failed;
        none.insert("c".into(), Failed);
        let step = next_step(&workflow, &none);
        assert_eq!(step.skip, ["d"]);
        assert_eq!(step.finished, Some(WorkflowRunStatus::Failed));
    }

    #[test]
    fn always_holds_for_either_outcome_but_not_for_a_skipped_parent() {
        let workflow = graph(
            &[("a", AllSuccess), ("b", AllSuccess), ("c", AllSuccess)],
            &[("a", "b", OnSuccess), ("b", "c", Always)],
        );
        assert_eq!(
            next_step(&workflow, &states(&[("a", Succeeded), ("b", Failed)])).start,
            ["c"]
        );
        let skipped = next_step(&workflow, &states(&[("a", Failed)]));
        assert_eq!(skipped.skip, ["b", "c"]);
        assert_eq!(skipped.finished, Some(WorkflowRunStatus::Failed));
    }
}

/// A workflow run about to be written; `graph` is the workflow as it stands at the start.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorkflowRun {
    pub graph: Workflow,
    pub params: String,
    pub created_ms: i64,
    /// W3C `traceparent` of the run's `workflow_run` span, which every node's `fire` span
    /// hangs under; empty when tracing is off.
    pub traceparent: String,
    /// MANUAL for StartWorkflow; CRON or MISFIRE for an occurrence of its schedule.
    pub trigger_type: crate::model::TriggerType,
    /// The occurrence a scheduled run stands for (unique with the workflow); 0 = none.
    pub scheduled_at_ms: i64,
}

/// One node of a run that started or was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowRunNode {
    pub key: String,
    pub state: NodeState,
    /// The node's current run (0 for a skipped node).
    pub log_id: crate::model::LogId,
    pub updated_ms: i64,
    /// Who skipped it (SKIPPED_BY_USER); empty otherwise.
    pub skipped_by: String,
}

/// A stored workflow run with the nodes that started or were skipped, by key.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowRun {
    pub id: i64,
    pub status: WorkflowRunStatus,
    /// The graph the run follows (the workflow as it stood when the run started).
    pub graph: Workflow,
    pub params: String,
    pub created_ms: i64,
    pub finished_ms: i64,
    /// Bumped by every retry or skip of a node: an advance that read an older one writes
    /// nothing (its decisions were made on states that changed under it).
    pub generation: i64,
    /// The run span's `traceparent` (see [`NewWorkflowRun::traceparent`]).
    pub traceparent: String,
    pub nodes: Vec<WorkflowRunNode>,
    /// Why it started (see `NewWorkflowRun`).
    pub trigger_type: crate::model::TriggerType,
    /// The occurrence it stands for; 0 for a StartWorkflow run.
    pub scheduled_at_ms: i64,
    /// Why it was SKIPPED, or CANCELLED by a later occurrence; empty otherwise.
    pub reason: String,
}

impl WorkflowRun {
    /// Each node's state by key (waiting nodes have none).
    pub fn states(&self) -> HashMap<String, NodeState> {
        (self.nodes.iter())
            .map(|node| (node.key.clone(), node.state))
            .collect()
    }
}
