//! Workflow runs on a real admin and executor: a diamond A → (B, C) → D runs each node once, D
//! only after both B and C, and each child reads its parents' results in its params; a failing
//! node runs its ON_FAILURE branch and skips its ON_SUCCESS one; a node whose first attempt
//! fails and whose retry succeeds counts as succeeded; a cancelled run kills its running node
//! and starts nothing after it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use xjob_admin::model::now_ms;
use xjob_executor::{JobContext, JobError, JobOutput};
use xjob_proto::pb;
use xjob_tests::{HandlerFuture, TestCluster, held_handler, wait_until};

const APP: &str = "workflow-run-app";
pub(super) const DEADLINE: Duration = Duration::from_secs(20);

/// One run the `step` handler served.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub(super) job_id: i64,
    pub(super) params: String,
    started_ms: i64,
    finished_ms: i64,
}

pub(super) type SeenRuns = Arc<Mutex<Vec<Seen>>>;

/// Fails when its params' first line is `fail`; else succeeds with `result of <first line>`.
/// Records every run before it answers.
fn step_handler(seen: SeenRuns) -> impl Fn(JobContext) -> HandlerFuture + Send + Sync + 'static {
    move |ctx: JobContext| {
        let seen = Arc::clone(&seen);
        Box::pin(async move {
            let started_ms = now_ms();
            let params = ctx.params().to_string();
            // Long enough for two nodes started together to overlap.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let first = params.lines().next().unwrap_or("").to_string();
            seen.lock()
                .map_err(|_| JobError::new("poisoned"))?
                .push(Seen {
                    job_id: ctx.job_id(),
                    params,
                    started_ms,
                    finished_ms: now_ms(),
                });
            // `flaky` fails its first attempt only (the record above counts attempts).
            let attempts = seen
                .lock()
                .map_err(|_| JobError::new("poisoned"))?
                .iter()
                .filter(|run| run.params.lines().next() == Some(first.as_str()))
                .count();
            if first == "fail" || (first == "flaky" && attempts == 1) {
                return Err(JobError::new("failed on purpose"));
            }
            Ok(JobOutput::message(format!("result of {first}")))
        })
    }
}

pub(super) fn node(key: &str, job_id: i64) -> pb::WorkflowNode {
    pb::WorkflowNode {
        key: key.to_string(),
        job_id,
        fan_in: pb::WorkflowFanIn::AllSuccess as i32,
    }
}

pub(super) fn edge(from: &str, to: &str, condition: pb::WorkflowEdgeCondition) -> pb::WorkflowEdge {
    pb::WorkflowEdge {
        from: from.to_string(),
        to: to.to_string(),
        condition: condition as i32,
    }
}

pub(super) struct Setup {
    pub(super) cluster: TestCluster,
    pub(super) group_id: i64,
    pub(super) seen: SeenRuns,
    pub(super) gate: Arc<Semaphore>,
}

pub(super) async fn setup() -> anyhow::Result<Setup> {
    let mut cluster = TestCluster::builder()
        .configure(|config| config.followup_interval = Duration::from_millis(50))
        .start()
        .await?;
    let group_id = cluster.create_group(APP).await?;
    let seen: SeenRuns = Arc::default();
    let gate = Arc::new(Semaphore::new(0));
    let executor = cluster
        .executor(APP)
        .handler("step", step_handler(Arc::clone(&seen)))
        .handler("held", held_handler(Arc::clone(&gate)));
    cluster.start_executor(executor).await?;
    Ok(Setup {
        cluster,
        group_id,
        seen,
        gate,
    })
}

/// A job of the `step` handler whose params are `params`; returns its id.
pub(super) async fn step_job(setup: &Setup, params: &str) -> anyhow::Result<i64> {
    let job = pb::Job {
        name: format!("step {params}"),
        params: params.to_string(),
        ..TestCluster::job(setup.group_id, "step", pb::ScheduleType::None, "")
    };
    Ok(setup.cluster.create_job(job).await?.id)
}

pub(super) async fn save(
    setup: &Setup,
    name: &str,
    nodes: Vec<pb::WorkflowNode>,
    edges: Vec<pb::WorkflowEdge>,
) -> anyhow::Result<i64> {
    let workflow = pb::Workflow {
        group_id: setup.group_id,
        name: name.to_string(),
        nodes,
        edges,
        ..Default::default()
    };
    let request = pb::CreateWorkflowRequest {
        workflow: Some(workflow),
    };
    let created = setup.cluster.client().create_workflow(request).await?;
    let created = created.into_inner().workflow;
    Ok(created.ok_or_else(|| anyhow::anyhow!("no workflow"))?.id)
}

pub(super) async fn start(setup: &Setup, workflow_id: i64) -> anyhow::Result<i64> {
    let request = pb::StartWorkflowRequest {
        workflow_id,
        params: String::new(),
    };
    let started = setup.cluster.client().start_workflow(request).await?;
    Ok(started.into_inner().workflow_run_id)
}

pub(super) async fn get_run(setup: &Setup, id: i64) -> anyhow::Result<pb::WorkflowRun> {
    let request = pb::GetWorkflowRunRequest { id };
    let run = setup.cluster.client().get_workflow_run(request).await?;
    run.into_inner()
        .run
        .ok_or_else(|| anyhow::anyhow!("no run {id}"))
}

/// Waits until the run is no longer RUNNING; returns it.
pub(super) async fn wait_ended(setup: &Setup, id: i64) -> anyhow::Result<pb::WorkflowRun> {
    let ended = wait_until(DEADLINE, "the workflow run to end", || async {
        let run = get_run(setup, id).await.ok()?;
        (run.state != pb::WorkflowRunState::Running as i32).then_some(run)
    })
    .await;
    if ended.is_err() {
        // What it was waiting for, to tell which node held the run.
        eprintln!(
            "workflow run {id} still running: {:?}",
            get_run(setup, id).await
        );
    }
    ended
}

pub(super) fn node_of<'a>(run: &'a pb::WorkflowRun, key: &str) -> &'a pb::WorkflowRunNode {
    let found = run.nodes.iter().find(|node| node.key == key);
    found.unwrap_or_else(|| panic!("node {key} in {run:?}"))
}

pub(super) fn runs_of(seen: &SeenRuns, job_id: i64) -> Vec<Seen> {
    let seen = seen.lock().map(|seen| seen.clone()).unwrap_or_default();
    seen.into_iter()
        .filter(|run| run.job_id == job_id)
        .collect()
}

#[tokio::test]
async fn a_diamond_runs_each_node_once_and_passes_results_down() -> anyhow::Result<()> {
    use pb::WorkflowEdgeCondition::{OnFailure, OnSuccess};
    let setup = setup().await?;
    let (a, b, c, d, e) = (
        step_job(&setup, "a").await?,
        step_job(&setup, "b").await?,
        step_job(&setup, "c").await?,
        step_job(&setup, "d").await?,
        step_job(&setup, "e").await?,
    );
    let nodes = vec![
        node("a", a),
        node("b", b),
        node("c", c),
        node("d", d),
        node("e", e),
    ];
    let edges = vec![
        edge("a", "b", OnSuccess),
        edge("a", "c", OnSuccess),
        edge("b", "d", OnSuccess),
        edge("c", "d", OnSuccess),
        edge("a", "e", OnFailure),
    ];
    let workflow_id = save(&setup, "diamond", nodes, edges).await?;
    let run_id = start(&setup, workflow_id).await?;
    let run = wait_ended(&setup, run_id).await?;
    assert_eq!(run.state, pb::WorkflowRunState::Succeeded as i32, "{run:?}");

    for (key, job_id) in [("a", a), ("b", b), ("c", c), ("d", d)] {
        let node = node_of(&run, key);
        assert_eq!(
            node.state,
            pb::WorkflowNodeState::Succeeded as i32,
            "{node:?}"
        );
        assert_eq!(node.result, format!("result of {key}"));
        assert_eq!(runs_of(&setup.seen, job_id).len(), 1, "{key} ran once");
        let log = setup.cluster.get_log(node.log_id).await?;
        assert_eq!(
            log.trigger_type,
            pb::TriggerType::Workflow as i32,
            "{log:?}"
        );
    }
    let skipped = node_of(&run, "e");
    assert_eq!(skipped.state, pb::WorkflowNodeState::Skipped as i32);
    assert!(
        runs_of(&setup.seen, e).is_empty(),
        "the failure branch did not run"
    );

    // D started only after both B and C had finished.
    let (run_b, run_c, run_d) = (
        runs_of(&setup.seen, b).remove(0),
        runs_of(&setup.seen, c).remove(0),
        runs_of(&setup.seen, d).remove(0),
    );
    assert!(run_d.started_ms >= run_b.finished_ms, "D before B ended");
    assert!(run_d.started_ms >= run_c.finished_ms, "D before C ended");
    // Each child reads its parents' results after its own params.
    assert_eq!(run_b.params, "b\nparent.a: result of a");
    assert_eq!(
        run_d.params,
        "d\nparent.b: result of b\nparent.c: result of c"
    );

    let listed = setup
        .cluster
        .client()
        .list_workflow_runs(pb::ListWorkflowRunsRequest {
            workflow_id,
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(listed.runs.len(), 1);
    assert_eq!(listed.runs[0].id, run_id);
    setup.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_failed_node_runs_its_failure_branch_and_skips_its_success_branch() -> anyhow::Result<()>
{
    use pb::WorkflowEdgeCondition::{OnFailure, OnSuccess};
    let setup = setup().await?;
    let (f, g, h) = (
        step_job(&setup, "fail").await?,
        step_job(&setup, "g").await?,
        step_job(&setup, "h").await?,
    );
    let nodes = vec![node("f", f), node("g", g), node("h", h)];
    let edges = vec![edge("f", "g", OnFailure), edge("f", "h", OnSuccess)];
    let workflow_id = save(&setup, "error branch", nodes, edges).await?;
    let run_id = start(&setup, workflow_id).await?;
    let run = wait_ended(&setup, run_id).await?;
    assert_eq!(run.state, pb::WorkflowRunState::Failed as i32, "{run:?}");
    let failed = node_of(&run, "f");
    assert_eq!(failed.state, pb::WorkflowNodeState::Failed as i32);
    assert_eq!(failed.run_status, pb::RunStatus::Failed as i32);
    let branch = node_of(&run, "g");
    assert_eq!(branch.state, pb::WorkflowNodeState::Succeeded as i32);
    assert_eq!(runs_of(&setup.seen, g).len(), 1);
    let skipped = node_of(&run, "h");
    assert_eq!(skipped.state, pb::WorkflowNodeState::Skipped as i32);
    assert_eq!(skipped.log_id, 0);
    assert!(runs_of(&setup.seen, h).is_empty());
    setup.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_retried_node_counts_with_its_last_attempt() -> anyhow::Result<()> {
    use pb::WorkflowEdgeCondition::{OnFailure, OnSuccess};
    let setup = setup().await?;
    let flaky = pb::Job {
        name: "flaky".to_string(),
        params: "flaky".to_string(),
        fail_retry_count: 1,
        ..TestCluster::job(setup.group_id, "step", pb::ScheduleType::None, "")
    };
    let flaky = setup.cluster.create_job(flaky).await?.id;
    let (next, rescue) = (
        step_job(&setup, "next").await?,
        step_job(&setup, "rescue").await?,
    );
    let nodes = vec![node("f", flaky), node("n", next), node("r", rescue)];
    let edges = vec![edge("f", "n", OnSuccess), edge("f", "r", OnFailure)];
    let workflow_id = save(&setup, "retried", nodes, edges).await?;
    let run_id = start(&setup, workflow_id).await?;
    let run = wait_ended(&setup, run_id).await?;
    assert_eq!(run.state, pb::WorkflowRunState::Succeeded as i32, "{run:?}");
    let f = node_of(&run, "f");
    assert_eq!(f.state, pb::WorkflowNodeState::Succeeded as i32, "{f:?}");
    let last = setup.cluster.get_log(f.log_id).await?;
    assert_eq!(last.attempt, 1, "the node's run is its retry: {last:?}");
    assert_eq!(last.trigger_type, pb::TriggerType::Workflow as i32);
    assert_eq!(
        runs_of(&setup.seen, flaky).len(),
        2,
        "one failure, one retry"
    );
    // The failed attempt decided nothing: the failure branch never ran.
    assert_eq!(
        node_of(&run, "r").state,
        pb::WorkflowNodeState::Skipped as i32
    );
    assert!(runs_of(&setup.seen, rescue).is_empty());
    let after = runs_of(&setup.seen, next);
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].params, "next\nparent.f: result of flaky");
    setup.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_cancelled_run_kills_its_running_node_and_starts_nothing_more() -> anyhow::Result<()> {
    let setup = setup().await?;
    let held = pb::Job {
        name: "held".to_string(),
        ..TestCluster::job(setup.group_id, "held", pb::ScheduleType::None, "")
    };
    let held = setup.cluster.create_job(held).await?.id;
    let after = step_job(&setup, "after").await?;
    let nodes = vec![node("s", held), node("t", after)];
    let edges = vec![edge("s", "t", pb::WorkflowEdgeCondition::Always)];
    let workflow_id = save(&setup, "cancelled", nodes, edges).await?;
    let run_id = start(&setup, workflow_id).await?;
    let log_id = wait_until(DEADLINE, "node s to be running", || async {
        let run = get_run(&setup, run_id).await.ok()?;
        let s = node_of(&run, "s");
        (s.run_status == pb::RunStatus::Running as i32).then_some(s.log_id)
    })
    .await?;
    // Sent: the admin knows its executor, so the kill has somewhere to go.
    wait_until(DEADLINE, "node s's run to reach its executor", || async {
        let log = setup.cluster.get_log(log_id).await.ok()?;
        (!log.executor_address.is_empty()).then_some(())
    })
    .await?;

    let request = pb::CancelWorkflowRunRequest { id: run_id };
    let cancelled = setup.cluster.client().cancel_workflow_run(request).await?;
    let cancelled = cancelled.into_inner();
    assert_eq!(cancelled.killed, 1);
    let run = cancelled.run.ok_or_else(|| anyhow::anyhow!("no run"))?;
    assert_eq!(run.state, pb::WorkflowRunState::Cancelled as i32);
    let log = setup.cluster.wait_log_final(log_id, DEADLINE).await?;
    assert_eq!(log.status, pb::RunStatus::Killed as i32, "{log:?}");
    // The killed run's follow-up ends node s; the cancelled run starts nothing after it.
    let run = wait_until(DEADLINE, "node s to end", || async {
        let run = get_run(&setup, run_id).await.ok()?;
        (node_of(&run, "s").state == pb::WorkflowNodeState::Failed as i32).then_some(run)
    })
    .await?;
    assert_eq!(run.state, pb::WorkflowRunState::Cancelled as i32);
    assert_eq!(
        node_of(&run, "t").state,
        pb::WorkflowNodeState::Skipped as i32
    );
    assert!(setup.cluster.logs(after).await?.is_empty(), "t never ran");

    let again = pb::CancelWorkflowRunRequest { id: run_id };
    let refused = setup.cluster.client().cancel_workflow_run(again).await;
    let status = refused.expect_err("an ended run cannot be cancelled");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(status.message(), format!("workflow run {run_id} has ended"));
    setup.gate.close();
    setup.cluster.shutdown().await;
    Ok(())
}
