//! Advancing a workflow run: read its nodes' states, apply the pure rule
//! (`model::workflow_run::next_step`), then write what it decided: skipped nodes, started nodes
//! (each with its run, PENDING and due at once, which the follow-up loop dispatches like a child
//! job's run), and the run's end.
//!
//! Safe to repeat and to run on several admins at once: a node decides only once all its
//! parents are final, and a final state never changes, so every evaluation that decides a node
//! decides the same; the (run, node) key in the store makes the start itself happen once. A
//! node's end is written before the run is advanced, so of two parents ending together on two
//! admins, the later read sees both ends and starts the child.

use std::sync::Arc;

use super::policy;
use crate::model::workflow_run::{NodeState, Step, WorkflowRun, WorkflowRunStatus, next_step};
use crate::model::{Job, JobId, NewRun, NodeIdentity, TriggerType};
use crate::store::{Store, StoreError};

/// What one advance wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advanced {
    /// Nodes this call started, with their runs' ids.
    pub started: Vec<(String, crate::model::LogId)>,
    /// Nodes this call skipped.
    pub skipped: Vec<String>,
    /// The run's end, when this call ended it.
    pub finished: Option<WorkflowRunStatus>,
}

/// Advances workflow run `run_id` as far as its nodes' states allow.
pub async fn advance(
    store: &Store,
    run_id: i64,
    node: &NodeIdentity,
    now_ms: i64,
) -> Result<Advanced, StoreError> {
    let mut advanced = Advanced::default();
    let Some(run) = store.get_workflow_run(run_id).await? else {
        return Ok(advanced);
    };
    if run.status != WorkflowRunStatus::Running {
        return Ok(advanced);
    }
    let Step {
        start,
        skip,
        finished,
    } = next_step(&run.graph, &run.states());
    let generation = run.generation;
    for key in skip {
        if store
            .skip_workflow_node(run_id, generation, &key, now_ms)
            .await?
        {
            advanced.skipped.push(key);
        }
    }
    let job_ids: Vec<JobId> = (run.graph.nodes.iter())
        .filter(|graph_node| start.contains(&graph_node.key))
        .map(|graph_node| graph_node.job_id)
        .collect();
    let jobs = store.get_jobs(&job_ids).await?;
    for key in start {
        let job = (run.graph.nodes.iter())
            .find(|graph_node| graph_node.key == key)
            .and_then(|graph_node| jobs.get(&graph_node.job_id));
        let Some(job) = job else {
            // Deleted since the run started: the node cannot run.
            tracing::warn!(run_id, node = %key, "workflow node's job not found; skipped");
            if store
                .skip_workflow_node(run_id, generation, &key, now_ms)
                .await?
            {
                advanced.skipped.push(key);
            }
            continue;
        };
        let results = parent_results(store, &run, &key).await?;
        let new_run = node_run(job, &run, &results, now_ms, node);
        if let Some(log_id) = store
            .start_workflow_node(run_id, generation, &key, &new_run, now_ms)
            .await?
        {
            advanced.started.push((key, log_id));
        }
    }
    if let Some(status) = finished
        && (store.finish_workflow_run(run_id, status, Some(generation), now_ms)).await?
    {
        advanced.finished = Some(status);
    }
    Ok(advanced)
}

/// The most of a parent's result message a child receives, in characters: a result is a small
/// payload ("the file it wrote", "42 rows"), not a data channel; the rest is cut off.
pub const RESULT_LIMIT: usize = 1024;

/// `(parent key, result message)` of node `key`'s parents that ended with a result, in the
/// graph's edge order. A parent a user skipped passes nothing (its run's message, if it ran
/// and failed, is not a result).
async fn parent_results(
    store: &Store,
    run: &WorkflowRun,
    key: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut results = Vec::new();
    for edge in run.graph.edges.iter().filter(|edge| edge.to == key) {
        let parent = run.nodes.iter().find(|node| node.key == edge.from);
        let parent = parent.filter(|parent| parent.state != NodeState::SkippedByUser);
        let Some(parent) = parent.filter(|parent| parent.log_id.0 > 0) else {
            continue;
        };
        let Some(log) = store.get_log(parent.log_id).await? else {
            continue;
        };
        if !log.handle_msg.is_empty() {
            results.push((edge.from.clone(), log.handle_msg));
        }
    }
    Ok(results)
}

/// The params a node's run gets: the run's (or, when the run has none, its job's), followed
/// by one line `parent.<key>: <result>` per parent that returned a result message (its line
/// breaks turned into spaces, at most `RESULT_LIMIT` characters), so a handler reads its
/// parents' output from its params.
pub fn node_params(base: &str, results: &[(String, String)]) -> String {
    let mut params = base.to_string();
    for (parent, result) in results {
        if !params.is_empty() {
            params.push('\n');
        }
        let result: String = (result.chars().take(RESULT_LIMIT))
            .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
            .collect();
        params.push_str(&format!("parent.{parent}: {result}"));
    }
    params
}

/// A node's run: its job's, with the workflow run's params when it has some, and its parents'
/// results; traced under the workflow run's span (its `traceparent` is what the run's `fire`
/// span continues).
fn node_run(
    job: &Arc<Job>,
    workflow_run: &WorkflowRun,
    results: &[(String, String)],
    now_ms: i64,
    node: &NodeIdentity,
) -> NewRun {
    let run = policy::child_run(job, now_ms, node);
    let base = if workflow_run.params.is_empty() {
        run.params.as_str()
    } else {
        workflow_run.params.as_str()
    };
    let params = node_params(base, results);
    NewRun {
        params,
        trigger_type: TriggerType::Workflow,
        trace_id: workflow_run.traceparent.clone(),
        ..run
    }
}

/// Records that node run `log_id` of workflow run `run_id` ended `state` (its last attempt),
/// then advances the run. Repeating it (a follow-up redone after a crash) writes nothing twice.
pub async fn node_ended(
    store: &Store,
    run_id: i64,
    log_id: crate::model::LogId,
    state: NodeState,
    node: &NodeIdentity,
    now_ms: i64,
) -> Result<Advanced, StoreError> {
    store
        .finish_workflow_node(run_id, log_id, state, now_ms)
        .await?;
    advance(store, run_id, node, now_ms).await
}

/// Advances the RUNNING workflow runs (the `limit` newest): a run just started gets its
/// roots, and what a crash left undone is written; for the others nothing changes.
pub async fn readvance_running(
    store: &Store,
    node: &NodeIdentity,
    now_ms: i64,
    limit: i64,
) -> Result<usize, StoreError> {
    let mut started = 0;
    for run_id in store.running_workflow_runs(limit).await? {
        started += advance(store, run_id, node, now_ms).await?.started.len();
    }
    Ok(started)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::workflow_run::{NewWorkflowRun, NodeState};
    use crate::model::{EdgeCondition, FanIn, GroupId, LogId, Workflow};
    use crate::store::conformance::{fresh_stores, group, job, workflow};

    /// A → (B, C) → D (ALL_SUCCESS), and A → E on failure.
    fn diamond(group_id: GroupId, job_id: JobId) -> Workflow {
        use EdgeCondition::{OnFailure, OnSuccess};
        let nodes = ["a", "b", "c", "d", "e"].map(|key| (key, FanIn::AllSuccess));
        let edges = [
            ("a", "b", OnSuccess),
            ("a", "c", OnSuccess),
            ("b", "d", OnSuccess),
            ("c", "d", OnSuccess),
            ("a", "e", OnFailure),
        ];
        workflow(group_id, job_id, "diamond", &nodes, &edges)
    }

    fn keys(advanced: &Advanced) -> Vec<&str> {
        advanced
            .started
            .iter()
            .map(|(key, _)| key.as_str())
            .collect()
    }

    fn log_of(advanced: &Advanced, key: &str) -> LogId {
        let found = advanced.started.iter().find(|(started, _)| started == key);
        found.map(|(_, log_id)| *log_id).expect("started")
    }

    #[tokio::test]
    async fn a_diamond_runs_each_node_once_and_d_waits_for_both() {
        let admin = NodeIdentity::new("n1", 1);
        for (backend, store, _dir) in fresh_stores().await {
            let group = store.insert_group(&group("wf-step")).await.expect("group");
            let job = store.insert_job(&job(group.id, 0)).await.expect("job");
            let workflow = store
                .insert_workflow(&diamond(group.id, job.id))
                .await
                .expect("workflow");
            let new_run = NewWorkflowRun {
                graph: workflow,
                params: "from the run".into(),
                created_ms: 1,
                traceparent: String::new(),
                trigger_type: crate::model::TriggerType::Manual,
                scheduled_at_ms: 0,
            };
            let run_id = store.insert_workflow_run(&new_run).await.expect("run");

            let first = advance(&store, run_id, &admin, 2).await.expect("advance");
            assert_eq!(keys(&first), ["a"], "{backend}");
            let a = store.get_log(log_of(&first, "a")).await.expect("log");
            assert_eq!(a.expect("a's run").params, "from the run", "{backend}");
            // Nothing new until A ends, however often it is asked.
            let idle = advance(&store, run_id, &admin, 3).await.expect("advance");
            assert_eq!(idle, Advanced::default(), "{backend}");

            let end = |log_id, state| store.finish_workflow_node(run_id, log_id, state, 4);
            assert!(
                end(log_of(&first, "a"), NodeState::Succeeded)
                    .await
                    .expect("end")
            );
            let fan_out = advance(&store, run_id, &admin, 5).await.expect("advance");
            assert_eq!(keys(&fan_out), ["b", "c"], "{backend}");
            assert_eq!(fan_out.skipped, ["e"], "{backend}");

            assert!(
                end(log_of(&fan_out, "b"), NodeState::Succeeded)
                    .await
                    .expect("end")
            );
            let waiting = advance(&store, run_id, &admin, 6).await.expect("advance");
            assert_eq!(waiting, Advanced::default(), "{backend}: D waits for C");
            assert!(
                end(log_of(&fan_out, "c"), NodeState::Succeeded)
                    .await
                    .expect("end")
            );
            // Two admins advancing at once start D once.
            let peer = NodeIdentity::new("n2", 1);
            let (one, other) = tokio::join!(
                advance(&store, run_id, &admin, 7),
                advance(&store, run_id, &peer, 7)
            );
            let (one, other) = (one.expect("advance"), other.expect("advance"));
            let mut started: Vec<&str> = keys(&one);
            started.extend(keys(&other));
            assert_eq!(started, ["d"], "{backend}");
            let d = if one.started.is_empty() { &other } else { &one };
            assert!(
                end(log_of(d, "d"), NodeState::Succeeded)
                    .await
                    .expect("end")
            );

            let last = advance(&store, run_id, &admin, 8).await.expect("advance");
            assert_eq!(
                last.finished,
                Some(WorkflowRunStatus::Succeeded),
                "{backend}"
            );
            let run = store
                .get_workflow_run(run_id)
                .await
                .expect("get")
                .expect("run");
            assert_eq!(run.status, WorkflowRunStatus::Succeeded);
            assert_eq!(run.nodes.len(), 5, "{backend}: every node has its row");
            let node_runs = crate::model::LogFilter {
                job_id: Some(job.id),
                limit: 100,
                ..Default::default()
            };
            let runs = store.list_logs(&node_runs).await.expect("logs");
            assert_eq!(runs.len(), 4, "{backend}: A, B, C and D ran once each");
            store.close().await;
        }
    }
}
