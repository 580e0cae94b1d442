//! `--children-as-workflows`: each tree of XXL-JOB child links becomes a saved xjob workflow,
//! one per root job (a job with children that no imported job names as a child), instead of
//! child links on the jobs. Pure, like the rest of the plan.
//!
//! XXL-JOB starts a child once per success of each parent, so a job reached from a root by two
//! paths runs twice per fire of the root. A workflow runs each node once, so the root's tree is
//! unfolded: such a job becomes one node per path (`job-7`, `job-7-2`), which keeps the number
//! of runs XXL-JOB had. Every edge is `ON_SUCCESS`, XXL-JOB's only condition.
//!
//! In XXL-JOB a fire of the root's schedule runs the whole tree, so the root's CRON or FIX_RATE
//! schedule (zone and misfire strategy too) moves onto the workflow and the root is created
//! without one (stopped, as xjob keeps every job without a schedule; it can still be triggered
//! alone). The workflow keeps no params of its own: XXL-JOB starts each child with the child's
//! params, and a node without workflow params gets its job's. The schedule stays on the root,
//! and the plan says why, when workflows cannot hold it (FIX_DELAY), when there is none, when
//! the root is created stopped (a workflow has no stopped state, it would fire at once) or when
//! the root was imported before.
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
use chrono_tz::Tz;

use crate::model::validate::{find_child_cycle, short_prefix};
use crate::model::workflow::{MAX_WORKFLOW_NAME_BYTES, MAX_WORKFLOW_NODES};
use crate::model::workflow_schedule::{WorkflowSchedule, validate_workflow_schedule};
use crate::model::{EdgeCondition, FanIn, GroupId, JobId, Workflow, WorkflowEdge, WorkflowId};
use crate::model::{Job, JobStatus, ScheduleType, WorkflowNode};
use crate::store::xxl_source::XxlJobRow;

/// What the plan does with a job, as far as workflows care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    Create,
    Exists(JobId),
    Skip,
}

/// What xjob already holds that the workflows depend on.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// xjob jobs (imported before) that have child links in xjob.
    pub linked: &'a HashSet<JobId>,
    /// xjob workflows by name.
    pub workflows_by_name: &'a HashMap<String, WorkflowId>,
}

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
    /// The root job's schedule when it moves here (see [`take_root_schedule`]), else NONE.
    pub schedule: WorkflowSchedule,
}

impl WorkflowDraft {
    /// The workflow, once its group and jobs have xjob ids (`None` for one still unknown), with
    /// its schedule's first time after `now_ms` (read in `default_tz` when it names no zone).
    pub fn resolve(
        &self,
        name: &str,
        group_id: GroupId,
        job_id: impl Fn(i64) -> Option<JobId>,
        now_ms: i64,
        default_tz: Tz,
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
        let mut workflow = Workflow {
            id: WorkflowId(0),
            group_id,
            name: name.to_string(),
            nodes,
            edges,
            updated_ms: now_ms,
            schedule: self.schedule.clone(),
            // Each node runs with its own job's params, as each XXL-JOB child did.
            params: String::new(),
        };
        crate::model::workflow::validate_workflow(&workflow)
            .map_err(|refusal| refusal.to_string())?;
        validate_workflow_schedule(&workflow.schedule, &workflow.params, default_tz)
            .map_err(|refusal| refusal.to_string())?;
        if workflow.schedule.schedule_type != ScheduleType::None {
            workflow.schedule.next_fire_ms = workflow.schedule.next_after(default_tz, now_ms);
        }
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
    /// What happens to the root's schedule.
    pub notes: Vec<String>,
}

/// Moves `root`'s schedule onto `draft` and leaves the root without one (stopped: it runs
/// only when triggered or as the workflow's node). `Err` says why the schedule stays on the
/// root; nothing is changed then.
pub fn take_root_schedule(draft: &mut WorkflowDraft, root: &mut Job) -> Result<(), String> {
    match root.schedule_type {
        ScheduleType::Cron | ScheduleType::FixRate => {}
        ScheduleType::FixDelay => {
            return Err(
                "its schedule is FIX_DELAY, which a workflow cannot have (a run has no \
                 single end to count from), so a fire starts it alone; start the workflow to \
                 run the chain"
                    .into(),
            );
        }
        ScheduleType::None => {
            return Err("it has no schedule; start the workflow to run the chain".into());
        }
    }
    if root.status != JobStatus::Running {
        return Err(
            "it is created stopped and a workflow has no stopped state (its schedule would \
             fire at once), so the workflow gets none; move the schedule to the workflow when \
             the chain should run"
                .into(),
        );
    }
    draft.schedule = WorkflowSchedule {
        schedule_type: root.schedule_type,
        schedule_conf: std::mem::take(&mut root.schedule_conf),
        time_zone: root.time_zone.clone(),
        misfire: root.misfire_strategy,
        next_fire_ms: 0,
        overlap: Default::default(),
    };
    root.schedule_type = ScheduleType::None;
    root.status = JobStatus::Stopped;
    root.trigger_next_ms = 0;
    Ok(())
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
        schedule: WorkflowSchedule::default(),
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
    jobs: &HashMap<i64, Imported>,
    found: Found<'_>,
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
    for xxl_id in chain {
        match jobs.get(xxl_id) {
            None | Some(Imported::Skip) => {
                return Some(format!(
                    "job {xxl_id} is not imported (see its entry), so this chain is imported as \
                     child links"
                ));
            }
            Some(Imported::Exists(id)) if found.linked.contains(id) => {
                return Some(format!(
                    "job {xxl_id} was imported before as xjob job {id} with its child links, \
                     which a workflow would start a second time; they are left as they are"
                ));
            }
            _ => {}
        }
    }
    None
}

/// Decides the workflows from the rows and what the plan does with each job (by XXL-JOB id);
/// also returns the jobs whose child links become edges (they are created without them).
pub fn plan(
    rows: &[XxlJobRow],
    jobs: &HashMap<i64, Imported>,
    found: Found<'_>,
) -> (Vec<WorkflowItem>, HashSet<i64>) {
    let graph = child_graph(rows);
    let by_id: HashMap<i64, &XxlJobRow> = rows.iter().map(|row| (row.id, row)).collect();
    let has_parent: HashSet<i64> = graph.values().flatten().copied().collect();
    let mut items = Vec::new();
    let mut as_edges = HashSet::new();
    for chain in chains(&graph) {
        let roots: Vec<i64> = (chain.iter().copied())
            .filter(|id| !has_parent.contains(id))
            .collect();
        let mut reason = keep_links_reason(&chain, &graph, jobs, found);
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
                notes: Vec::new(),
            });
            continue;
        }
        for (root, mut draft) in roots.into_iter().zip(drafts) {
            let name = workflow_name(by_id[&root]);
            draft.xxl_group_id = by_id[&root].job_group;
            let action = match found.workflows_by_name.get(&name) {
                Some(id) => WorkflowAction::Exists(*id),
                None => WorkflowAction::Create(draft),
            };
            items.push(WorkflowItem {
                root: Some(root),
                name,
                chain: chain.clone(),
                action,
                reasons: Vec::new(),
                notes: Vec::new(),
            });
        }
        as_edges.extend(chain);
    }
    (items, as_edges)
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
                "create  workflow '{name}' from job {root}: {} nodes, {} edges ({}), {}",
                draft.nodes.len(),
                draft.edges.len(),
                (draft.edges.iter())
                    .map(|(from, to)| format!("{from} -> {to}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                describe_schedule(&draft.schedule)
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
        for note in &item.notes {
            let _ = writeln!(out, "          note: {note}");
        }
    }
}

/// `schedule CRON '0 0 3 * * ?' zone Europe/Berlin misfire DO_NOTHING`, or `no schedule`.
fn describe_schedule(schedule: &WorkflowSchedule) -> String {
    if schedule.schedule_type == ScheduleType::None {
        return "no schedule".into();
    }
    let zone = match schedule.time_zone.as_str() {
        "" => "the admin's",
        zone => zone,
    };
    format!(
        "schedule {} '{}' zone {zone} misfire {}",
        schedule.schedule_type, schedule.schedule_conf, schedule.misfire
    )
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
