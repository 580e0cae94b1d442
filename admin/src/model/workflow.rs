//! Workflows: a named graph of existing jobs (nodes) joined by dependency edges, and the pure
//! rules a graph must keep before it is saved (unique node keys, edges between known nodes, no
//! cycle). A workflow run starts its root nodes; a finished node's out-edges and each child's
//! fan-in decide which children start next (docs/scheduling.md, "Workflows").

use std::collections::{HashMap, HashSet};

use crate::model::validate::{Refusal, find_child_cycle};
use crate::model::workflow_schedule::WorkflowSchedule;
use crate::model::{GroupId, JobId};

/// Most nodes one workflow holds: the graph is checked and stored whole, and every run keeps a
/// row per node.
pub const MAX_WORKFLOW_NODES: usize = 200;
/// Most edges one workflow holds.
pub const MAX_WORKFLOW_EDGES: usize = 1000;
/// Longest node key, in bytes.
pub const MAX_NODE_KEY_BYTES: usize = 64;
/// Longest workflow name, in bytes.
pub const MAX_WORKFLOW_NAME_BYTES: usize = 255;

/// A workflow's id (`xjob_workflow.id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct WorkflowId(pub i64);

impl std::fmt::Display for WorkflowId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// When an edge lets its child start, judged on the parent node's final state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EdgeCondition {
    /// The parent succeeded.
    #[default]
    OnSuccess,
    /// The parent failed (FAILED or LOST): an error branch.
    OnFailure,
    /// The parent finished, whatever the outcome (not when it was skipped).
    Always,
}

impl EdgeCondition {
    pub const ALL: &'static [EdgeCondition] = &[
        EdgeCondition::OnSuccess,
        EdgeCondition::OnFailure,
        EdgeCondition::Always,
    ];

    /// The stored (and file format) name.
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeCondition::OnSuccess => "ON_SUCCESS",
            EdgeCondition::OnFailure => "ON_FAILURE",
            EdgeCondition::Always => "ALWAYS",
        }
    }

    /// Parses a stored name; `None` for anything else.
    pub fn parse(text: &str) -> Option<EdgeCondition> {
        Self::ALL.iter().copied().find(|c| c.as_str() == text)
    }
}

/// How a node with several parents decides, once its in-edges are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FanIn {
    /// Every in-edge's condition held.
    #[default]
    AllSuccess,
    /// At least one in-edge's condition held (the node waits until every parent is final).
    AnySuccess,
}

impl FanIn {
    pub const ALL: &'static [FanIn] = &[FanIn::AllSuccess, FanIn::AnySuccess];

    /// The stored (and file format) name.
    pub fn as_str(self) -> &'static str {
        match self {
            FanIn::AllSuccess => "ALL_SUCCESS",
            FanIn::AnySuccess => "ANY_SUCCESS",
        }
    }

    /// Parses a stored name; `None` for anything else.
    pub fn parse(text: &str) -> Option<FanIn> {
        Self::ALL.iter().copied().find(|f| f.as_str() == text)
    }
}

/// One node: a key unique in its workflow, and the job it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowNode {
    pub key: String,
    pub job_id: JobId,
    pub fan_in: FanIn,
}

/// A dependency: `to` may start after `from` finished and `condition` held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowEdge {
    pub from: String,
    pub to: String,
    pub condition: EdgeCondition,
}

/// A saved workflow. Its jobs may be in other groups; `group_id` is the group whose grants
/// decide who may see, edit and start it.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    pub id: WorkflowId,
    pub group_id: GroupId,
    pub name: String,
    pub nodes: Vec<WorkflowNode>,
    pub edges: Vec<WorkflowEdge>,
    pub updated_ms: i64,
    /// When it starts on its own (`model::workflow_schedule`).
    pub schedule: WorkflowSchedule,
    /// The params of runs started without any; empty = each node's job's own.
    pub params: String,
}

impl Workflow {
    /// Keys of the nodes no edge leads to: a run starts them.
    pub fn roots(&self) -> Vec<&WorkflowNode> {
        let targets: HashSet<&str> = self.edges.iter().map(|edge| edge.to.as_str()).collect();
        self.nodes
            .iter()
            .filter(|node| !targets.contains(node.key.as_str()))
            .collect()
    }

    /// The distinct job ids the nodes run, sorted.
    pub fn job_ids(&self) -> Vec<JobId> {
        let mut ids: Vec<JobId> = self.nodes.iter().map(|node| node.job_id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// Checks a workflow's own fields and graph (not whether its jobs exist: the API asks the
/// store). Errors name the field: `workflow.edges[2].to: no node 'x'`,
/// `workflow.edges: cycle a -> b -> a`.
pub fn validate_workflow(workflow: &Workflow) -> Result<(), Refusal> {
    let name = workflow.name.trim();
    if name.is_empty() {
        return Err(Refusal::invalid("workflow.name", "must not be empty"));
    }
    if name.len() > MAX_WORKFLOW_NAME_BYTES {
        let limit = format!("longer than {MAX_WORKFLOW_NAME_BYTES} bytes");
        return Err(Refusal::invalid("workflow.name", limit));
    }
    if workflow.group_id.0 <= 0 {
        return Err(Refusal::invalid("workflow.group_id", "must be set"));
    }
    validate_nodes(&workflow.nodes)?;
    validate_edges(&workflow.nodes, &workflow.edges)?;
    check_acyclic(&workflow.nodes, &workflow.edges)
}

fn validate_nodes(nodes: &[WorkflowNode]) -> Result<(), Refusal> {
    if nodes.is_empty() {
        return Err(Refusal::invalid(
            "workflow.nodes",
            "at least one node is needed",
        ));
    }
    if nodes.len() > MAX_WORKFLOW_NODES {
        let limit = format!("more than {MAX_WORKFLOW_NODES} nodes");
        return Err(Refusal::invalid("workflow.nodes", limit));
    }
    let mut seen = HashSet::new();
    for (index, node) in nodes.iter().enumerate() {
        let field = format!("workflow.nodes[{index}].key");
        if node.key.is_empty() || node.key.len() > MAX_NODE_KEY_BYTES {
            let rule = format!("must be 1 to {MAX_NODE_KEY_BYTES} bytes");
            return Err(Refusal::invalid(&field, rule));
        }
        if !node
            .key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            let rule = "only letters, digits, '-', '_' and '.'";
            return Err(Refusal::invalid(&field, rule));
        }
        if !seen.insert(node.key.as_str()) {
            let message = format!("'{}' is used by two nodes", node.key);
            return Err(Refusal::invalid(&field, message));
        }
        if node.job_id.0 <= 0 {
            let field = format!("workflow.nodes[{index}].job_id");
            return Err(Refusal::invalid(&field, "must be set"));
        }
    }
    Ok(())
}

fn validate_edges(nodes: &[WorkflowNode], edges: &[WorkflowEdge]) -> Result<(), Refusal> {
    if edges.len() > MAX_WORKFLOW_EDGES {
        let limit = format!("more than {MAX_WORKFLOW_EDGES} edges");
        return Err(Refusal::invalid("workflow.edges", limit));
    }
    let keys: HashSet<&str> = nodes.iter().map(|node| node.key.as_str()).collect();
    let mut seen = HashSet::new();
    for (index, edge) in edges.iter().enumerate() {
        for (end, key) in [("from", &edge.from), ("to", &edge.to)] {
            if !keys.contains(key.as_str()) {
                let field = format!("workflow.edges[{index}].{end}");
                return Err(Refusal::invalid(&field, format!("no node '{key}'")));
            }
        }
        if !seen.insert((edge.from.as_str(), edge.to.as_str())) {
            let field = format!("workflow.edges[{index}]");
            let message = format!("a second edge {} -> {}", edge.from, edge.to);
            return Err(Refusal::invalid(&field, message));
        }
    }
    Ok(())
}

/// Refuses a graph with a cycle, naming it (`a -> b -> a`); a self-edge is a cycle of one.
fn check_acyclic(nodes: &[WorkflowNode], edges: &[WorkflowEdge]) -> Result<(), Refusal> {
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(position, node)| (node.key.as_str(), position))
        .collect();
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    for edge in edges {
        if let (Some(&from), Some(&to)) =
            (index.get(edge.from.as_str()), index.get(edge.to.as_str()))
        {
            children.entry(from).or_default().push(to);
        }
    }
    for start in 0..nodes.len() {
        if let Some(found) = find_child_cycle(start, &children) {
            let path: Vec<&str> = found.cycle.iter().map(|&i| nodes[i].key.as_str()).collect();
            let message = format!("cycle {}", path.join(" -> "));
            return Err(Refusal::invalid("workflow.edges", message));
        }
    }
    Ok(())
}

/// A workflow for tests, named `name` in group `group_id`, whose nodes `(key, fan-in)` all run
/// `job_id`, joined by edges `(from, to, condition)`.
#[cfg(test)]
pub(crate) fn test_workflow(
    group_id: GroupId,
    job_id: JobId,
    name: &str,
    nodes: &[(&str, FanIn)],
    edges: &[(&str, &str, EdgeCondition)],
) -> Workflow {
    Workflow {
        id: WorkflowId(0),
        group_id,
        name: name.to_string(),
        nodes: (nodes.iter())
            .map(|(key, fan_in)| WorkflowNode {
                key: key.to_string(),
                job_id,
                fan_in: *fan_in,
            })
            .collect(),
        edges: (edges.iter())
            .map(|(from, to, condition)| WorkflowEdge {
                from: from.to_string(),
                to: to.to_string(),
                condition: *condition,
            })
            .collect(),
        updated_ms: 0,
        schedule: WorkflowSchedule::default(),
        params: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(key: &str) -> WorkflowNode {
        WorkflowNode {
            key: key.to_string(),
            job_id: JobId(1),
            fan_in: FanIn::AllSuccess,
        }
    }

    fn edge(from: &str, to: &str) -> WorkflowEdge {
        WorkflowEdge {
            from: from.to_string(),
            to: to.to_string(),
            condition: EdgeCondition::OnSuccess,
        }
    }

    fn workflow(nodes: &[&str], edges: &[(&str, &str)]) -> Workflow {
        Workflow {
            id: WorkflowId(0),
            group_id: GroupId(1),
            name: "w".to_string(),
            nodes: nodes.iter().map(|key| node(key)).collect(),
            edges: edges.iter().map(|(from, to)| edge(from, to)).collect(),
            updated_ms: 0,
            schedule: WorkflowSchedule::default(),
            params: String::new(),
        }
    }

    fn refusal(workflow: &Workflow) -> String {
        validate_workflow(workflow)
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn a_diamond_is_accepted_and_has_one_root() {
        let diamond = workflow(
            &["a", "b", "c", "d"],
            &[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
        );
        assert_eq!(validate_workflow(&diamond), Ok(()));
        let roots: Vec<&str> = diamond.roots().iter().map(|n| n.key.as_str()).collect();
        assert_eq!(roots, ["a"]);
    }

    #[test]
    fn a_cycle_is_refused_naming_it() {
        let looped = workflow(&["a", "b", "c"], &[("a", "b"), ("b", "c"), ("c", "b")]);
        assert_eq!(refusal(&looped), "workflow.edges: cycle b -> c -> b");
        let itself = workflow(&["a"], &[("a", "a")]);
        assert_eq!(refusal(&itself), "workflow.edges: cycle a -> a");
    }

    #[test]
    fn keys_must_be_unique_and_edges_must_name_nodes() {
        let twice = workflow(&["a", "a"], &[]);
        assert_eq!(
            refusal(&twice),
            "workflow.nodes[1].key: 'a' is used by two nodes"
        );
        let dangling = workflow(&["a"], &[("a", "zz")]);
        assert_eq!(refusal(&dangling), "workflow.edges[0].to: no node 'zz'");
        let repeated = workflow(&["a", "b"], &[("a", "b"), ("a", "b")]);
        assert_eq!(
            refusal(&repeated),
            "workflow.edges[1]: a second edge a -> b"
        );
    }

    #[test]
    fn empty_graphs_and_names_are_refused() {
        assert_eq!(
            refusal(&workflow(&[], &[])),
            "workflow.nodes: at least one node is needed"
        );
        let mut unnamed = workflow(&["a"], &[]);
        unnamed.name = " ".to_string();
        assert_eq!(refusal(&unnamed), "workflow.name: must not be empty");
    }
}
