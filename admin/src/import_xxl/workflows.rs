//! `--children-as-workflows`: each tree of XXL-JOB child links becomes a saved xjob workflow,
//! one per root job (a job with children that no imported job names as a child), instead of
//! child links on the jobs. Pure, like the rest of the plan.
//!
//! XXL-JOB starts a child once per success of each parent, so a job reached from a root by two
//! paths runs twice per fire of the root. A workflow runs each node once, so the root's tree is
//! unfolded: such a job becomes one node per path (`job-7`, `job-7-2`), which keeps the number
//! of runs XXL-JOB had. Every edge is `ON_SUCCESS`, XXL-JOB's only condition.
//!
//! The choice is made per connected set of linked jobs (a "chain"): either all of its links
//! become workflows, or all stay child links. A chain stays as child links, with the reason in
//! the plan, when its links form a cycle (XXL-JOB allows them, xjob refuses them in both forms,
//! so the plain import skips the jobs on it and names the cycle), when one of its jobs is not
//! imported, when a job imported before still has child links in xjob (a workflow over it
//! would start its children twice), or when a tree unfolds past the workflow size limit. A
//! workflow is matched by name on a later import, so importing again creates none twice.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use super::mapping::parse_child_ids;
use super::plan::{Existing, JobAction, JobItem};
use crate::model::WorkflowNode;
use crate::model::validate::{find_child_cycle, short_prefix};
use crate::model::workflow::{MAX_WORKFLOW_NAME_BYTES, MAX_WORKFLOW_NODES};
use crate::model::{EdgeCondition, FanIn, GroupId, JobId, Workflow, WorkflowEdge, WorkflowId};
use crate::store::xxl_source::XxlJobRow;

#[derive(Debug, Clone, PartialEq)]
pub enum WorkflowAction {
    Create(WorkflowDraft),
    /// A workflow of this name was made by an earlier import; it is left as it is.
    Exists(WorkflowId),
    /// The chain's jobs keep their child links (`reasons` says why).
    KeepLinks,
}

/// A workflow to save, over XXL-JOB job ids resolved to xjob ids when it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowDraft {
    /// The root's XXL-JOB group: the workflow's group (whose grants decide who may start it).
    pub xxl_group_id: i64,
    /// (node key, XXL-JOB job id), the root first.
    pub nodes: Vec<(String, i64)>,
    /// (parent key, child key).
    pub edges: Vec<(String, String)>,
}

impl WorkflowDraft {
    /// The workflow, once its group and jobs have xjob ids (`None` for one still unknown).
    pub fn resolve(
        &self,
        name: &str,
        group_id: GroupId,
        job_id: impl Fn(i64) -> Option<JobId>,
        now_ms: i64,
    ) -> Result<Workflow, String> {
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for (key, xxl_id) in &self.nodes {
            let job_id = job_id(*xxl_id).ok_or_else(|| format!("job {xxl_id} unresolved"))?;
            nodes.push(WorkflowNode {
                key: key.clone(),
                job_id,
                fan_in: FanIn::AllSuccess,
            });
        }
        let edges = (self.edges.iter())
            .map(|(from, to)| WorkflowEdge {
                from: from.clone(),
                to: to.clone(),
                condition: EdgeCondition::OnSuccess,
            })
            .collect();
        let workflow = Workflow {
            id: WorkflowId(0),
            group_id,
            name: name.to_string(),
            nodes,
            edges,
            updated_ms: now_ms,
        };
        crate::model::workflow::validate_workflow(&workflow)
            .map_err(|refusal| refusal.to_string())?;
        Ok(workflow)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowItem {
    /// The root job (XXL-JOB id); `None` for a chain with no root (all of it on a cycle).
    pub root: Option<i64>,
    pub name: String,
    /// Every job of the chain, by XXL-JOB id.
    pub chain: Vec<i64>,
    pub action: WorkflowAction,
    pub reasons: Vec<String>,
}

/// The workflow named after `row`, the root: its description and XXL-JOB id (two XXL-JOB jobs
/// may share a description), cut to the name limit.
pub fn workflow_name(row: &XxlJobRow) -> String {
    let suffix = format!(" (XXL-JOB job {})", row.id);
    let mut desc = row.job_desc.trim().to_string();
    let room = MAX_WORKFLOW_NAME_BYTES - suffix.len();
    if desc.len() > room {
        let mut cut = room;
        while !desc.is_char_boundary(cut) {
            cut -= 1;
        }
        desc.truncate(cut);
    }
    format!("{desc}{suffix}")
}

/// The child links of every job, by XXL-JOB id, as XXL-JOB follows them: to jobs that exist,
/// without a job's link to itself. A job whose `child_jobid` does not parse is skipped by the
/// plan anyway; it counts with no links here.
fn child_graph(rows: &[XxlJobRow]) -> BTreeMap<i64, Vec<i64>> {
    let known: HashSet<i64> = rows.iter().map(|row| row.id).collect();
    rows.iter()
        .map(|row| {
            let children = parse_child_ids(&row.child_jobid).unwrap_or_default();
            let children = (children.into_iter())
                .filter(|child| *child != row.id && known.contains(child))
                .collect();
            (row.id, children)
        })
        .collect()
}

/// Connected sets of linked jobs (links taken both ways), each sorted, in order of their
/// smallest id; jobs with no link are in none.
fn chains(graph: &BTreeMap<i64, Vec<i64>>) -> Vec<Vec<i64>> {
    let mut neighbours: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for (&parent, children) in graph {
        for &child in children {
            neighbours.entry(parent).or_default().insert(child);
            neighbours.entry(child).or_default().insert(parent);
        }
    }
    let mut seen: HashSet<i64> = HashSet::new();
    let mut found = Vec::new();
    for &start in neighbours.keys() {
        if !seen.insert(start) {
            continue;
        }
        let mut chain = vec![start];
        let mut frontier = vec![start];
        while let Some(id) = frontier.pop() {
            for &next in &neighbours[&id] {
                if seen.insert(next) {
                    chain.push(next);
                    frontier.push(next);
                }
            }
        }
        chain.sort_unstable();
        found.push(chain);
    }
    found
}

/// The root's tree, unfolded: one node per path from the root. `None` past the node limit.
fn unfold(root: i64, graph: &BTreeMap<i64, Vec<i64>>) -> Option<WorkflowDraft> {
    let mut uses: HashMap<i64, usize> = HashMap::new();
    let mut key_for = |id: i64| {
        let count = uses.entry(id).or_insert(0);
        *count += 1;
        match *count {
            1 => format!("job-{id}"),
            n => format!("job-{id}-{n}"),
        }
    };
    let root_key = key_for(root);
    let mut draft = WorkflowDraft {
        xxl_group_id: 0,
        nodes: vec![(root_key.clone(), root)],
        edges: Vec::new(),
    };
    // Breadth-first, so keys number the shallower paths first; the graph is acyclic here.
    let mut queue = std::collections::VecDeque::from([(root_key, root)]);
    while let Some((key, id)) = queue.pop_front() {
        for &child in graph.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
            if draft.nodes.len() == MAX_WORKFLOW_NODES {
                return None;
            }
            let child_key = key_for(child);
            draft.nodes.push((child_key.clone(), child));
            draft.edges.push((key.clone(), child_key.clone()));
            queue.push_back((child_key, child));
        }
    }
    Some(draft)
}

/// Why a chain keeps its child links; `None` when it can become workflows.
fn keep_links_reason(
    chain: &[i64],
    graph: &BTreeMap<i64, Vec<i64>>,
    jobs: &[JobItem],
    existing: &Existing,
) -> Option<String> {
    let sub: HashMap<i64, Vec<i64>> = chain
        .iter()
        .map(|id| (*id, graph.get(id).cloned().unwrap_or_default()))
        .collect();
    if let Some(found) = chain.iter().find_map(|id| find_child_cycle(*id, &sub)) {
        let path: Vec<String> = found.cycle.iter().map(i64::to_string).collect();
        return Some(format!(
            "child links form a cycle {} (XXL-JOB job ids); xjob refuses cycles in workflows \
             and child links alike, so this chain is imported as child links, without the \
             jobs on the cycle (see their entries); remove one link in XXL-JOB and import again",
            path.join(" -> ")
        ));
    }
    for item in jobs.iter().filter(|item| chain.contains(&item.xxl_id)) {
        match item.action {
            JobAction::Skip => {
                return Some(format!(
                    "job {} is not imported (see its entry), so this chain is imported as child \
                     links",
                    item.xxl_id
                ));
            }
            JobAction::Exists(id) if existing.linked.contains(&id) => {
                return Some(format!(
                    "job {} was imported before as xjob job {id} with its child links, which a \
                     workflow would start a second time; they are left as they are",
                    item.xxl_id
                ));
            }
            _ => {}
        }
    }
    None
}

/// Decides the workflows, and takes the child links off the jobs whose links become edges.
pub fn plan(rows: &[XxlJobRow], jobs: &mut [JobItem], existing: &Existing) -> Vec<WorkflowItem> {
    let graph = child_graph(rows);
    let by_id: HashMap<i64, &XxlJobRow> = rows.iter().map(|row| (row.id, row)).collect();
    let has_parent: HashSet<i64> = graph.values().flatten().copied().collect();
    let mut items = Vec::new();
    for chain in chains(&graph) {
        let roots: Vec<i64> = (chain.iter().copied())
            .filter(|id| !has_parent.contains(id))
            .collect();
        let mut reason = keep_links_reason(&chain, &graph, jobs, existing);
        let mut drafts = Vec::new();
        for &root in &roots {
            match unfold(root, &graph) {
                Some(draft) => drafts.push(draft),
                None => {
                    reason = reason.or(Some(format!(
                        "the tree of job {root} has more than {MAX_WORKFLOW_NODES} paths, more \
                         nodes than a workflow holds, so this chain is imported as child links"
                    )));
                }
            }
        }
        if let Some(reason) = reason {
            let root = roots.first().copied();
            items.push(WorkflowItem {
                root,
                name: root.map_or_else(String::new, |id| workflow_name(by_id[&id])),
                chain,
                action: WorkflowAction::KeepLinks,
                reasons: vec![reason],
            });
            continue;
        }
        for (root, mut draft) in roots.into_iter().zip(drafts) {
            let name = workflow_name(by_id[&root]);
            draft.xxl_group_id = by_id[&root].job_group;
            let action = match existing.workflows_by_name.get(&name) {
                Some(id) => WorkflowAction::Exists(*id),
                None => WorkflowAction::Create(draft),
            };
            items.push(WorkflowItem {
                root: Some(root),
                name,
                chain: chain.clone(),
                action,
                reasons: Vec::new(),
            });
        }
        for item in jobs.iter_mut().filter(|item| chain.contains(&item.xxl_id)) {
            if let JobAction::Create(new) = &mut item.action
                && !new.xxl_children.is_empty()
            {
                let links: Vec<String> = new.xxl_children.iter().map(i64::to_string).collect();
                item.notes.push(format!(
                    "its child links to {} become workflow edges (--children-as-workflows)",
                    links.join(",")
                ));
                new.xxl_children.clear();
            }
        }
    }
    items
}

/// The plan's workflow section.
pub fn render(items: &[WorkflowItem], out: &mut String) {
    let _ = writeln!(out, "workflows:");
    for item in items {
        let chain: Vec<String> = item.chain.iter().map(i64::to_string).collect();
        let name = short_prefix(&item.name);
        let root = item.root.map_or_else(|| "-".into(), |id| id.to_string());
        let line = match &item.action {
            WorkflowAction::Create(draft) => format!(
                "create  workflow '{name}' from job {root}: {} nodes, {} edges ({})",
                draft.nodes.len(),
                draft.edges.len(),
                (draft.edges.iter())
                    .map(|(from, to)| format!("{from} -> {to}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            WorkflowAction::Exists(id) => format!(
                "exists  workflow '{name}' from job {root} -> xjob workflow {id} (left as it is)"
            ),
            WorkflowAction::KeepLinks => {
                format!(
                    "links   chain of jobs {} kept as child links",
                    chain.join(",")
                )
            }
        };
        let _ = writeln!(out, "  {line}");
        for reason in &item.reasons {
            let _ = writeln!(out, "          reason: {reason}");
        }
        if let (WorkflowAction::Create(_), Some(_)) = (&item.action, item.root) {
            let _ = writeln!(
                out,
                "          note: job {root} keeps its schedule and now starts alone; start the \
                 workflow to run the chain (xjob workflows start)"
            );
        }
    }
}

/// Counts: (to create, existing, chains kept as child links).
pub fn tally(items: &[WorkflowItem]) -> (usize, usize, usize) {
    let mut counts = (0, 0, 0);
    for item in items {
        match item.action {
            WorkflowAction::Create(_) => counts.0 += 1,
            WorkflowAction::Exists(_) => counts.1 += 1,
            WorkflowAction::KeepLinks => counts.2 += 1,
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::super::mapping::MapOptions;
    use super::super::plan::{Plan, build};
    use super::*;
    use crate::model::validate::JobLimits;
    use crate::store::xxl_source::{XxlGroupRow, XxlSnapshot};

    fn job(id: i64, children: &str) -> XxlJobRow {
        XxlJobRow {
            id,
            job_group: 1,
            job_desc: format!("job {id}"),
            schedule_type: "FIX_RATE".into(),
            schedule_conf: "60".into(),
            executor_route_strategy: "FIRST".into(),
            executor_handler: "h".into(),
            glue_type: "BEAN".into(),
            child_jobid: children.into(),
            ..XxlJobRow::default()
        }
    }

    fn plan_of(jobs: Vec<XxlJobRow>, existing: &Existing) -> Plan {
        let snapshot = XxlSnapshot {
            layout: "test".into(),
            groups: vec![XxlGroupRow {
                id: 1,
                app_name: "app-one".into(),
                title: "app-one".into(),
                address_type: 0,
                address_list: String::new(),
                access_token: String::new(),
            }],
            jobs,
            glue_versions: Vec::new(),
            max_log_id: 0,
        };
        let options = MapOptions {
            limits: JobLimits {
                max_params_bytes: 1024,
                default_time_zone: chrono_tz::UTC,
            },
            time_zone: String::new(),
            import_stopped: false,
            children_as_workflows: true,
            now_ms: 1_700_000_000_000,
        };
        build(&snapshot, existing, &options, "h:3306/x")
    }

    fn edges(item: &WorkflowItem) -> Vec<String> {
        match &item.action {
            WorkflowAction::Create(draft) => (draft.edges.iter())
                .map(|(from, to)| format!("{from}>{to}"))
                .collect(),
            other => panic!("not created: {other:?} {:?}", item.reasons),
        }
    }

    fn children(plan: &Plan, xxl_id: i64) -> Vec<i64> {
        let item = plan.jobs.iter().find(|item| item.xxl_id == xxl_id);
        match item.map(|item| &item.action) {
            Some(JobAction::Create(new)) => new.xxl_children.clone(),
            other => panic!("job {xxl_id} is not created: {other:?}"),
        }
    }

    #[test]
    fn a_chain_and_a_fan_out_become_one_workflow_each_without_child_links() {
        // Chain 1 -> 2 -> 3; tree 10 -> {11, 12}, 11 -> 13; job 20 has no link.
        let rows = vec![
            job(1, "2"),
            job(2, "3"),
            job(3, ""),
            job(10, "11,12"),
            job(11, "13"),
            job(12, ""),
            job(13, ""),
            job(20, ""),
        ];
        let plan = plan_of(rows, &Existing::default());
        let items = plan.workflows.as_ref().expect("workflows planned");
        assert_eq!(items.len(), 2, "{items:?}");
        assert_eq!(items[0].name, "job 1 (XXL-JOB job 1)");
        assert_eq!(edges(&items[0]), ["job-1>job-2", "job-2>job-3"]);
        assert_eq!(
            edges(&items[1]),
            ["job-10>job-11", "job-10>job-12", "job-11>job-13"]
        );
        for id in [1, 2, 10, 11] {
            assert!(children(&plan, id).is_empty(), "job {id} keeps child links");
        }
        let text = plan.render();
        assert!(
            text.contains("create  workflow 'job 1 (XXL-JOB job 1)' from job 1: 3 nodes"),
            "{text}"
        );
        assert!(text.contains("workflows 2 to create, 0 existing, 0 chains"));
    }

    #[test]
    fn a_job_reached_by_two_paths_is_one_node_per_path_and_shared_children_go_in_both() {
        // Diamond 1 -> {2, 3} -> 4; roots 5 and 6 share child 7.
        let rows = vec![
            job(1, "2,3"),
            job(2, "4"),
            job(3, "4"),
            job(4, ""),
            job(5, "7"),
            job(6, "7"),
            job(7, ""),
        ];
        let plan = plan_of(rows, &Existing::default());
        let items = plan.workflows.as_ref().expect("workflows planned");
        assert_eq!(
            edges(&items[0]),
            ["job-1>job-2", "job-1>job-3", "job-2>job-4", "job-3>job-4-2"]
        );
        let roots: Vec<Option<i64>> = items.iter().map(|item| item.root).collect();
        assert_eq!(roots, [Some(1), Some(5), Some(6)]);
        assert_eq!(edges(&items[1]), ["job-5>job-7"]);
        assert_eq!(edges(&items[2]), ["job-6>job-7"]);
    }

    #[test]
    fn a_cycle_keeps_its_chain_as_child_links_and_names_the_cycle() {
        // 1 -> 2 -> 3 -> 2 (a cycle below root 1), 1 -> 4; beside it a clean chain 8 -> 9.
        let rows = vec![
            job(1, "2,4"),
            job(2, "3"),
            job(3, "2"),
            job(4, ""),
            job(8, "9"),
            job(9, ""),
        ];
        let plan = plan_of(rows, &Existing::default());
        let items = plan.workflows.as_ref().expect("workflows planned");
        assert_eq!(items.len(), 2, "{items:?}");
        assert_eq!(items[0].action, WorkflowAction::KeepLinks);
        assert_eq!(items[0].chain, [1, 2, 3, 4]);
        assert!(
            items[0].reasons[0].contains("cycle 2 -> 3 -> 2"),
            "{:?}",
            items[0].reasons
        );
        assert_eq!(edges(&items[1]), ["job-8>job-9"]);
        let text = plan.render();
        assert!(
            text.contains("links   chain of jobs 1,2,3,4 kept as child links"),
            "{text}"
        );
        assert!(text.contains("1 chains kept as child links"), "{text}");
    }

    #[test]
    fn a_second_import_finds_its_workflows_and_spares_jobs_with_child_links() {
        let rows = || vec![job(1, "2"), job(2, ""), job(5, "6"), job(6, "")];
        let existing = Existing {
            imported: HashMap::from([
                (1, JobId(101)),
                (2, JobId(102)),
                (5, JobId(105)),
                (6, JobId(106)),
            ]),
            present: HashSet::from([JobId(101), JobId(102), JobId(105), JobId(106)]),
            linked: HashSet::from([JobId(105)]),
            workflows_by_name: HashMap::from([("job 1 (XXL-JOB job 1)".into(), WorkflowId(7))]),
            ..Existing::default()
        };
        let plan = plan_of(rows(), &existing);
        let items = plan.workflows.as_ref().expect("workflows planned");
        assert_eq!(items[0].action, WorkflowAction::Exists(WorkflowId(7)));
        assert_eq!(items[1].action, WorkflowAction::KeepLinks);
        assert!(items[1].reasons[0].contains("xjob job 105 with its child links"));
        // Without the workflow of job 1, and its jobs without links, it is made again.
        let existing = Existing {
            workflows_by_name: HashMap::new(),
            ..existing
        };
        let plan = plan_of(rows(), &existing);
        let items = plan.workflows.as_ref().expect("workflows planned");
        assert_eq!(edges(&items[0]), ["job-1>job-2"]);
    }

    #[test]
    fn a_draft_resolves_to_a_valid_workflow_and_long_names_are_cut() {
        let draft = WorkflowDraft {
            xxl_group_id: 1,
            nodes: vec![("job-1".into(), 1), ("job-2".into(), 2)],
            edges: vec![("job-1".into(), "job-2".into())],
        };
        let ids = HashMap::from([(1, JobId(11)), (2, JobId(12))]);
        let workflow = draft
            .resolve("w", GroupId(3), |id| ids.get(&id).copied(), 5)
            .expect("valid");
        assert_eq!(workflow.nodes[1].job_id, JobId(12));
        assert_eq!(workflow.edges[0].condition, EdgeCondition::OnSuccess);
        assert!(
            draft
                .resolve("w", GroupId(3), |_| None, 5)
                .unwrap_err()
                .contains("job 1 unresolved")
        );
        let mut row = job(42, "");
        row.job_desc = "é".repeat(300);
        let name = workflow_name(&row);
        assert!(name.len() <= MAX_WORKFLOW_NAME_BYTES && name.ends_with("(XXL-JOB job 42)"));
    }
}
