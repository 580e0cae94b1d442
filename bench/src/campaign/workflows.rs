//! The campaign's workflows: a diamond (a -> b, c -> d) and a branch (`extract` -> `check`,
//! whose handler always fails, -> `load` on success, which is therefore skipped, and `alert`
//! on failure), each over jobs of their own that are never started (they run only as nodes).
//! Both are started again and again through the admins in turn while the faults hit the
//! cluster; after the drain a verdict per workflow run, from the stored runs, the run rows and
//! the executors' own records:
//!
//! - **unfinished**: the workflow run is still RUNNING after the drain;
//! - **duplicated**: a node's run started twice by the executors, or a run row of a node job
//!   that no node of any workflow run holds (a node started twice: each start writes a row);
//! - **out of order**: a node started although its parent's outcome did not allow it (the
//!   parent not final, or not what the edge asks), or its run was written before its parent's;
//! - **lost**: in an ended workflow run, a node still RUNNING or never decided (neither
//!   started nor skipped), or SUCCEEDED although no executor ran it.
//!
//! Any of these fails the campaign. A node that FAILED because its executor was killed is the
//! outcome the campaign expects from its faults, not a loss: its run ends FAILED.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tonic::transport::Channel;
use xjob_admin::model::workflow_run::{NodeState, WorkflowRun, WorkflowRunStatus};
use xjob_admin::model::{EdgeCondition, WorkflowId};
use xjob_admin::store::Store;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;

use crate::clock::now_ms;
use crate::failover::LogRow;
use crate::grpc;
use crate::metrics::Record;

/// How often a workflow is started (the two in turn).
const START_EVERY: Duration = Duration::from_secs(2);
/// How long one admin gets to answer a start before the next is asked.
const TRY_FOR: Duration = Duration::from_secs(3);

/// A workflow to create: its name, its nodes (key, handler) and edges (from, to, condition).
type Graph<'a> = (
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a [(&'a str, &'a str, pb::WorkflowEdgeCondition)],
);

/// The workflows the campaign created, and their jobs.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    pub workflow_ids: Vec<i64>,
    pub job_ids: HashSet<i64>,
}

/// Creates the diamond and the branch (`enabled` false: none).
pub async fn create(
    client: &mut JobAdminClient<Channel>,
    group_id: i64,
    enabled: bool,
) -> anyhow::Result<Setup> {
    let mut setup = Setup::default();
    if !enabled {
        return Ok(setup);
    }
    let diamond: [(&str, &str); 4] = [("a", "noop"), ("b", "noop"), ("c", "noop"), ("d", "noop")];
    let diamond_edges = [
        ("a", "b", pb::WorkflowEdgeCondition::OnSuccess),
        ("a", "c", pb::WorkflowEdgeCondition::OnSuccess),
        ("b", "d", pb::WorkflowEdgeCondition::OnSuccess),
        ("c", "d", pb::WorkflowEdgeCondition::OnSuccess),
    ];
    let branch: [(&str, &str); 4] = [
        ("extract", "noop"),
        ("check", "fail"),
        ("load", "noop"),
        ("alert", "noop"),
    ];
    let branch_edges = [
        ("extract", "check", pb::WorkflowEdgeCondition::OnSuccess),
        ("check", "load", pb::WorkflowEdgeCondition::OnSuccess),
        ("check", "alert", pb::WorkflowEdgeCondition::OnFailure),
    ];
    let graphs: [Graph<'_>; 2] = [
        ("campaign-diamond", &diamond, &diamond_edges),
        ("campaign-branch", &branch, &branch_edges),
    ];
    for (name, nodes, edges) in graphs {
        let mut workflow = pb::Workflow {
            group_id,
            name: name.into(),
            ..Default::default()
        };
        for (key, handler) in nodes {
            let job_name = format!("{name}-{key}");
            let job_id = grpc::create_handler_job(client, group_id, &job_name, handler).await?;
            setup.job_ids.insert(job_id);
            workflow.nodes.push(pb::WorkflowNode {
                key: (*key).into(),
                job_id,
                fan_in: pb::WorkflowFanIn::AllSuccess as i32,
            });
        }
        for (from, to, condition) in edges {
            workflow.edges.push(pb::WorkflowEdge {
                from: (*from).into(),
                to: (*to).into(),
                condition: *condition as i32,
            });
        }
        let created = client
            .create_workflow(pb::CreateWorkflowRequest {
                workflow: Some(workflow),
            })
            .await?
            .into_inner()
            .workflow
            .ok_or_else(|| anyhow::anyhow!("no workflow returned"))?;
        setup.workflow_ids.push(created.id);
    }
    Ok(setup)
}

/// Starts asked for and answered (a start whose answer was lost may still have written its
/// run: the verdict reads the runs from the database, not these counts).
#[derive(Debug, Default)]
pub struct Starts {
    pub asked: AtomicU64,
    pub answered: AtomicU64,
}

/// Starts the workflows in turn every [`START_EVERY`] until `until_ms`, each through the
/// admins in turn until one answers.
pub fn start_repeatedly(
    urls: Vec<String>,
    workflow_ids: Vec<i64>,
    until_ms: i64,
) -> (Arc<Starts>, tokio::task::JoinHandle<()>) {
    let starts = Arc::new(Starts::default());
    let counting = starts.clone();
    let task = tokio::spawn(async move {
        if workflow_ids.is_empty() {
            return;
        }
        let mut turn = 0usize;
        while now_ms() < until_ms {
            let workflow_id = workflow_ids[turn % workflow_ids.len()];
            counting.asked.fetch_add(1, Ordering::Relaxed);
            for attempt in 0..urls.len() {
                let url = &urls[(turn + attempt) % urls.len()];
                if start_once(url, workflow_id).await.is_ok() {
                    counting.answered.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                if now_ms() >= until_ms {
                    break;
                }
            }
            turn += 1;
            tokio::time::sleep(START_EVERY).await;
        }
    });
    (starts, task)
}

async fn start_once(url: &str, workflow_id: i64) -> anyhow::Result<()> {
    let attempt = async {
        let mut client = grpc::connect(url, TRY_FOR).await?;
        client
            .start_workflow(pb::StartWorkflowRequest {
                workflow_id,
                ..Default::default()
            })
            .await?;
        anyhow::Ok(())
    };
    tokio::time::timeout(TRY_FOR * 2, attempt)
        .await
        .map_err(|_| anyhow::anyhow!("no answer"))?
}

/// Every run of the campaign's workflows, from the database.
pub async fn runs(store: &Store, setup: &Setup) -> anyhow::Result<Vec<WorkflowRun>> {
    const PAGE: i64 = 1000;
    let mut all = Vec::new();
    for &id in &setup.workflow_ids {
        let mut offset = 0;
        loop {
            let page = store
                .list_workflow_runs(WorkflowId(id), offset, PAGE)
                .await
                .map_err(|error| anyhow::anyhow!("cannot read workflow runs: {error}"))?;
            let full = page.len() as i64 == PAGE;
            all.extend(page);
            if !full {
                break;
            }
            offset += PAGE;
        }
    }
    Ok(all)
}

/// How many of each, and a few examples of the bad ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub starts_asked: u64,
    pub starts_answered: u64,
    pub runs: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub node_runs: u64,
    pub skipped_nodes: u64,
    /// Runs under way (written, not yet ended) when an admin or an executor was killed (-9).
    pub through_kills: u64,
    pub unfinished: u64,
    pub duplicated: u64,
    pub out_of_order: u64,
    pub lost: u64,
    #[serde(skip)]
    pub examples: Vec<String>,
}

impl Verdict {
    /// Whether the workflows fail the campaign.
    pub fn failed_campaign(&self) -> bool {
        self.unfinished + self.duplicated + self.out_of_order + self.lost > 0
    }

    fn example(&mut self, text: String) {
        if self.examples.len() < 10 {
            self.examples.push(text);
        }
    }
}

/// Whether a parent that ended `state` lets a child start over an edge of `condition`.
fn edge_holds(condition: EdgeCondition, state: NodeState) -> bool {
    match condition {
        EdgeCondition::OnSuccess => state == NodeState::Succeeded,
        EdgeCondition::OnFailure => state == NodeState::Failed,
        EdgeCondition::Always => matches!(state, NodeState::Succeeded | NodeState::Failed),
    }
}

/// The verdict over every run of the workflows; `rows` and `records` may hold other jobs'.
/// `kills_ms`: when admins or executors were killed (-9).
pub fn check(
    setup: &Setup,
    runs: &[WorkflowRun],
    (records, rows): (&[Record], &[LogRow]),
    starts: &Starts,
    kills_ms: &[i64],
) -> Verdict {
    let mut verdict = Verdict {
        starts_asked: starts.asked.load(Ordering::Relaxed),
        starts_answered: starts.answered.load(Ordering::Relaxed),
        runs: runs.len() as u64,
        through_kills: (runs.iter())
            .filter(|run| {
                let end = if run.finished_ms > 0 {
                    run.finished_ms
                } else {
                    i64::MAX
                };
                kills_ms
                    .iter()
                    .any(|at| (run.created_ms..=end).contains(at))
            })
            .count() as u64,
        ..Verdict::default()
    };
    let rows_by_id: HashMap<i64, &LogRow> = (rows.iter())
        .filter(|row| setup.job_ids.contains(&row.job_id))
        .map(|row| (row.id, row))
        .collect();
    // Rows and executor starts per (job, scheduled time): a node's run is identified by it.
    let mut rows_per_key: HashMap<(i64, i64), u64> = HashMap::new();
    for row in rows_by_id.values() {
        *rows_per_key
            .entry((row.job_id, row.scheduled_at_ms))
            .or_default() += 1;
    }
    let mut starts_per_key: HashMap<(i64, i64), u64> = HashMap::new();
    for &(job_id, scheduled_at_ms, _) in records {
        if setup.job_ids.contains(&job_id) {
            *starts_per_key.entry((job_id, scheduled_at_ms)).or_default() += 1;
        }
    }
    for (key, started) in &starts_per_key {
        let written = rows_per_key.get(key).copied().unwrap_or(0);
        if *started > written {
            verdict.duplicated += started - written;
            verdict.example(format!(
                "job {} run at {}: {started} handler starts for {written} run rows",
                key.0, key.1
            ));
        }
    }
    let mut held: HashSet<i64> = HashSet::new();
    for run in runs {
        check_run(run, &rows_by_id, &starts_per_key, &mut verdict);
        held.extend(
            run.nodes
                .iter()
                .map(|node| node.log_id.0)
                .filter(|id| *id > 0),
        );
    }
    for row in rows_by_id.values().filter(|row| !held.contains(&row.id)) {
        verdict.duplicated += 1;
        verdict.example(format!(
            "run {} of job {}: no node of any workflow run holds it (a node started twice?)",
            row.id, row.job_id
        ));
    }
    verdict
}

fn check_run(
    run: &WorkflowRun,
    rows_by_id: &HashMap<i64, &LogRow>,
    starts_per_key: &HashMap<(i64, i64), u64>,
    verdict: &mut Verdict,
) {
    match run.status {
        WorkflowRunStatus::Running => {
            verdict.unfinished += 1;
            verdict.example(format!("workflow run {} still RUNNING", run.id));
            return;
        }
        WorkflowRunStatus::Succeeded => verdict.succeeded += 1,
        WorkflowRunStatus::Failed => verdict.failed += 1,
        WorkflowRunStatus::Cancelled => verdict.cancelled += 1,
        // An occurrence its overlap policy skipped never starts a node (the campaign's runs
        // are started by hand, so none is expected): counted as not run, nothing to check.
        WorkflowRunStatus::Skipped | WorkflowRunStatus::Waiting => {
            verdict.cancelled += 1;
            return;
        }
    }
    let nodes: HashMap<&str, _> = (run.nodes.iter())
        .map(|node| (node.key.as_str(), node))
        .collect();
    for graph_node in &run.graph.nodes {
        let Some(node) = nodes.get(graph_node.key.as_str()) else {
            verdict.lost += 1;
            verdict.example(format!(
                "workflow run {}: node {} neither started nor skipped",
                run.id, graph_node.key
            ));
            continue;
        };
        if node.state == NodeState::Skipped {
            verdict.skipped_nodes += 1;
            continue;
        }
        verdict.node_runs += 1;
        let row = rows_by_id.get(&node.log_id.0);
        let ran = row.is_some_and(|row| {
            starts_per_key
                .get(&(row.job_id, row.scheduled_at_ms))
                .is_some_and(|n| *n > 0)
        });
        let lost = match node.state {
            NodeState::Running => Some("still RUNNING in an ended run"),
            NodeState::Succeeded if !ran => Some("SUCCEEDED but no executor ran it"),
            _ if row.is_none() => Some("its run row is missing"),
            _ => None,
        };
        if let Some(why) = lost {
            verdict.lost += 1;
            verdict.example(format!(
                "workflow run {}: node {} (run {}) {why}",
                run.id, node.key, node.log_id.0
            ));
        }
        for edge in run.graph.edges.iter().filter(|e| e.to == node.key) {
            let parent = nodes.get(edge.from.as_str());
            let allowed = parent.is_some_and(|parent| {
                edge_holds(edge.condition, parent.state) && parent.log_id.0 < node.log_id.0
            });
            if !allowed {
                verdict.out_of_order += 1;
                verdict.example(format!(
                    "workflow run {}: node {} (run {}) started, parent {} {:?}",
                    run.id,
                    node.key,
                    node.log_id.0,
                    edge.from,
                    parent.map(|p| (p.state, p.log_id.0))
                ));
            }
        }
    }
}

/// The verdict as printed after the others.
pub fn text(verdict: &Verdict) -> String {
    let mut text = format!(
        "workflows: {} starts asked, {} answered; {} runs ({} succeeded, {} failed, {} \
         cancelled), {} node runs, {} nodes skipped, {} runs under way at a kill -9; unfinished \
         {}, duplicated {}, out of order {}, lost {}\n",
        verdict.starts_asked,
        verdict.starts_answered,
        verdict.runs,
        verdict.succeeded,
        verdict.failed,
        verdict.cancelled,
        verdict.node_runs,
        verdict.skipped_nodes,
        verdict.through_kills,
        verdict.unfinished,
        verdict.duplicated,
        verdict.out_of_order,
        verdict.lost
    );
    for example in &verdict.examples {
        text.push_str(&format!("  {example}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use xjob_admin::model::workflow_run::WorkflowRunNode;
    use xjob_admin::model::{
        FanIn, GroupId, JobId, LogId, RunStatus, Workflow, WorkflowEdge, WorkflowNode,
    };

    /// The branch workflow: extract (job 1) -> check (2) -> load (3) on success, alert (4) on
    /// failure.
    fn graph() -> Workflow {
        let node = |key: &str, job: i64| WorkflowNode {
            key: key.into(),
            job_id: JobId(job),
            fan_in: FanIn::AllSuccess,
        };
        let edge = |from: &str, to: &str, condition| WorkflowEdge {
            from: from.into(),
            to: to.into(),
            condition,
        };
        Workflow {
            id: WorkflowId(1),
            group_id: GroupId(1),
            name: "branch".into(),
            nodes: vec![
                node("extract", 1),
                node("check", 2),
                node("load", 3),
                node("alert", 4),
            ],
            edges: vec![
                edge("extract", "check", EdgeCondition::OnSuccess),
                edge("check", "load", EdgeCondition::OnSuccess),
                edge("check", "alert", EdgeCondition::OnFailure),
            ],
            updated_ms: 0,
            schedule: Default::default(),
            params: String::new(),
        }
    }

    fn setup() -> Setup {
        Setup {
            workflow_ids: vec![1],
            job_ids: HashSet::from([1, 2, 3, 4]),
        }
    }

    fn node(key: &str, state: NodeState, log_id: i64) -> WorkflowRunNode {
        WorkflowRunNode {
            key: key.into(),
            state,
            log_id: LogId(log_id),
            updated_ms: 0,
            skipped_by: String::new(),
        }
    }

    fn row(id: i64, job_id: i64) -> LogRow {
        LogRow {
            id,
            job_id,
            scheduled_at_ms: id * 1000,
            trigger_time_ms: id * 1000,
            status: RunStatus::Success,
            owner_node: "admin-0".into(),
            shard_index: 0,
            covers_later: false,
        }
    }

    /// A run that went as it should: extract succeeded, check failed, load skipped, alert ran.
    fn good_run() -> (WorkflowRun, Vec<Record>, Vec<LogRow>) {
        let run = WorkflowRun {
            id: 7,
            status: WorkflowRunStatus::Failed,
            graph: graph(),
            params: String::new(),
            created_ms: 0,
            finished_ms: 1,
            generation: 0,
            traceparent: String::new(),
            trigger_type: xjob_admin::model::TriggerType::Manual,
            scheduled_at_ms: 0,
            reason: String::new(),
            nodes: vec![
                node("extract", NodeState::Succeeded, 10),
                node("check", NodeState::Failed, 11),
                node("load", NodeState::Skipped, 0),
                node("alert", NodeState::Succeeded, 12),
            ],
        };
        let rows = vec![row(10, 1), row(11, 2), row(12, 4)];
        let records = rows
            .iter()
            .map(|row| (row.job_id, row.scheduled_at_ms, row.scheduled_at_ms + 5))
            .collect();
        (run, records, rows)
    }

    fn verdict(run: &WorkflowRun, records: &[Record], rows: &[LogRow]) -> Verdict {
        check(
            &setup(),
            std::slice::from_ref(run),
            (records, rows),
            &Starts::default(),
            &[],
        )
    }

    #[test]
    fn a_run_that_followed_its_edges_passes() {
        let (run, records, rows) = good_run();
        let verdict = verdict(&run, &records, &rows);
        assert!(!verdict.failed_campaign(), "{verdict:?}");
        assert_eq!((verdict.node_runs, verdict.skipped_nodes), (3, 1));
        assert_eq!(verdict.failed, 1);
        let during = check(
            &setup(),
            std::slice::from_ref(&run),
            (&records, &rows),
            &Starts::default(),
            &[1, 5],
        );
        assert_eq!(
            during.through_kills, 1,
            "a kill at 1 ms, the run from 0 to 1 ms"
        );
    }

    #[test]
    fn a_node_run_twice_or_started_twice_is_duplicated() {
        let (run, mut records, mut rows) = good_run();
        records.push(records[0]);
        assert_eq!(verdict(&run, &records, &rows).duplicated, 1);
        records.pop();
        rows.push(row(13, 4));
        let found = verdict(&run, &records, &rows);
        assert_eq!(found.duplicated, 1, "a row no node holds");
        assert!(found.examples[0].contains("run 13 of job 4"), "{found:?}");
    }

    #[test]
    fn a_child_whose_edge_did_not_hold_or_that_started_first_is_out_of_order() {
        let (mut run, records, rows) = good_run();
        run.nodes[2] = node("load", NodeState::Succeeded, 13);
        let mut rows_with = rows.clone();
        rows_with.push(row(13, 3));
        let mut records_with = records.clone();
        records_with.push((3, 13_000, 13_005));
        let found = verdict(&run, &records_with, &rows_with);
        assert_eq!(found.out_of_order, 1, "load ran although check failed");
        let (mut run, _, _) = good_run();
        run.nodes[0].log_id = LogId(11);
        run.nodes[1].log_id = LogId(10);
        assert!(verdict(&run, &records, &rows).out_of_order >= 1);
    }

    #[test]
    fn unfinished_runs_and_lost_nodes_fail() {
        let (mut run, records, rows) = good_run();
        run.status = WorkflowRunStatus::Running;
        assert_eq!(verdict(&run, &records, &rows).unfinished, 1);
        let (mut run, records, rows) = good_run();
        run.nodes.remove(2);
        assert_eq!(verdict(&run, &records, &rows).lost, 1, "load never decided");
        let (run, mut records, rows) = good_run();
        records.remove(2);
        let found = verdict(&run, &records, &rows);
        assert_eq!(found.lost, 1, "alert SUCCEEDED, no executor ran it");
        let (mut run, records, rows) = good_run();
        run.nodes[3].state = NodeState::Running;
        assert_eq!(verdict(&run, &records, &rows).lost, 1);
    }
}
