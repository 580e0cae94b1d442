//! A user's hand on a workflow run's nodes, on a real admin and executor: a failed node retried
//! succeeds and the run goes on to its end with each child run once; a failed node skipped lets
//! its children run; a node skipped before its turn never runs; two racing retries start one
//! run; and every refusal names the node's state (FAILED_PRECONDITION) or the unknown node
//! (NOT_FOUND).

use pb::WorkflowEdgeCondition::{Always, OnFailure, OnSuccess};
use xjob_proto::pb;
use xjob_tests::wait_until;

use super::workflow_runs::{
    DEADLINE, Setup, edge, get_run, node, node_of, runs_of, save, setup, start, step_job,
    wait_ended,
};

async fn retry(setup: &Setup, id: i64, key: &str) -> Result<pb::WorkflowRun, tonic::Status> {
    let request = pb::RetryWorkflowNodeRequest {
        id,
        node: key.to_string(),
    };
    let answer = setup.cluster.client().retry_workflow_node(request).await?;
    answer
        .into_inner()
        .run
        .ok_or_else(|| tonic::Status::internal("no run"))
}

async fn skip(setup: &Setup, id: i64, key: &str) -> Result<pb::WorkflowRun, tonic::Status> {
    let request = pb::SkipWorkflowNodeRequest {
        id,
        node: key.to_string(),
    };
    let answer = setup.cluster.client().skip_workflow_node(request).await?;
    answer
        .into_inner()
        .run
        .ok_or_else(|| tonic::Status::internal("no run"))
}

/// Asserts a refusal's code and message.
fn refused<T: std::fmt::Debug>(result: Result<T, tonic::Status>, code: tonic::Code, message: &str) {
    let status = result.expect_err("refused");
    assert_eq!((status.code(), status.message()), (code, message));
}

fn state(run: &pb::WorkflowRun, key: &str) -> pb::WorkflowNodeState {
    let state = node_of(run, key).state;
    pb::WorkflowNodeState::try_from(state).unwrap_or(pb::WorkflowNodeState::Unspecified)
}

#[tokio::test]
async fn a_failed_node_retried_succeeds_and_the_run_goes_on_to_its_end() -> anyhow::Result<()> {
    let setup = setup().await?;
    // `flaky` fails its first run only.
    let (flaky, next, rescue) = (
        step_job(&setup, "flaky").await?,
        step_job(&setup, "next").await?,
        step_job(&setup, "rescue").await?,
    );
    let nodes = vec![node("f", flaky), node("n", next), node("r", rescue)];
    let edges = vec![edge("f", "n", OnSuccess), edge("f", "r", OnFailure)];
    let workflow_id = save(&setup, "retry a node", nodes, edges).await?;
    let run_id = start(&setup, workflow_id).await?;
    let failed = wait_ended(&setup, run_id).await?;
    assert_eq!(
        failed.state,
        pb::WorkflowRunState::Failed as i32,
        "{failed:?}"
    );
    assert_eq!(state(&failed, "f"), pb::WorkflowNodeState::Failed);
    assert_eq!(state(&failed, "n"), pb::WorkflowNodeState::Skipped);
    assert_eq!(state(&failed, "r"), pb::WorkflowNodeState::Succeeded);
    let first_attempt = node_of(&failed, "f").log_id;

    let reopened = retry(&setup, run_id, "f").await?;
    assert_eq!(reopened.state, pb::WorkflowRunState::Running as i32);
    let done = wait_ended(&setup, run_id).await?;
    assert_eq!(
        done.state,
        pb::WorkflowRunState::Succeeded as i32,
        "{done:?}"
    );
    let f = node_of(&done, "f");
    assert_eq!(state(&done, "f"), pb::WorkflowNodeState::Succeeded, "{f:?}");
    assert_ne!(f.log_id, first_attempt, "the retry is a new run of f's job");
    let log = setup.cluster.get_log(f.log_id).await?;
    assert_eq!(
        log.trigger_type,
        pb::TriggerType::Workflow as i32,
        "{log:?}"
    );
    assert_eq!(state(&done, "n"), pb::WorkflowNodeState::Succeeded);
    assert_eq!(
        runs_of(&setup.seen, flaky).len(),
        2,
        "one failure, one retry"
    );
    let after = runs_of(&setup.seen, next);
    assert_eq!(after.len(), 1, "the child ran once");
    assert_eq!(after[0].params, "next\nparent.f: result of flaky");
    // The failure branch ran once, for the first failure, and stays as it ran.
    assert_eq!(state(&done, "r"), pb::WorkflowNodeState::Succeeded);
    assert_eq!(runs_of(&setup.seen, rescue).len(), 1);

    refused(
        retry(&setup, run_id, "f").await,
        tonic::Code::FailedPrecondition,
        &format!("workflow run {run_id} succeeded; nothing to retry"),
    );
    setup.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn racing_retries_start_one_run() -> anyhow::Result<()> {
    let setup = setup().await?;
    let (flaky, next) = (
        step_job(&setup, "flaky").await?,
        step_job(&setup, "next").await?,
    );
    let nodes = vec![node("f", flaky), node("n", next)];
    let workflow_id = save(&setup, "racing", nodes, vec![edge("f", "n", OnSuccess)]).await?;
    let run_id = start(&setup, workflow_id).await?;
    let failed = wait_ended(&setup, run_id).await?;
    assert_eq!(
        failed.state,
        pb::WorkflowRunState::Failed as i32,
        "{failed:?}"
    );

    let (one, other) = tokio::join!(retry(&setup, run_id, "f"), retry(&setup, run_id, "f"));
    let (won, lost) = match (one, other) {
        (Ok(run), Err(status)) | (Err(status), Ok(run)) => (run, status),
        both => panic!("one retry must win: {both:?}"),
    };
    assert_eq!(won.id, run_id);
    assert_eq!(lost.code(), tonic::Code::FailedPrecondition, "{lost:?}");
    // The loser finds the node about to start, or already running its new run.
    let node = format!("node 'f' of workflow run {run_id}");
    assert!(
        [
            format!("{node} is starting: only a FAILED node can be retried"),
            format!("{node} is RUNNING: only a FAILED node can be retried"),
        ]
        .contains(&lost.message().to_string()),
        "{lost:?}"
    );
    let done = wait_ended(&setup, run_id).await?;
    assert_eq!(
        done.state,
        pb::WorkflowRunState::Succeeded as i32,
        "{done:?}"
    );
    assert_eq!(
        runs_of(&setup.seen, flaky).len(),
        2,
        "one failure, one retry"
    );
    assert_eq!(
        setup.cluster.logs(flaky).await?.len(),
        2,
        "one retry run written"
    );
    assert_eq!(runs_of(&setup.seen, next).len(), 1);
    setup.cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_failed_node_skipped_lets_its_children_run() -> anyhow::Result<()> {
    let setup = setup().await?;
    let (fail, next) = (
        step_job(&setup, "fail").await?,
        step_job(&setup, "next").await?,
    );
    let nodes = vec![node("f", fail), node("n", next)];
    let workflow_id = save(
        &setup,
        "skip a node",
        nodes,
        vec![edge("f", "n", OnSuccess)],
    )
    .await?;
    let run_id = start(&setup, workflow_id).await?;
    let failed = wait_ended(&setup, run_id).await?;
    assert_eq!(
        failed.state,
        pb::WorkflowRunState::Failed as i32,
        "{failed:?}"
    );

    let skipped = skip(&setup, run_id, "f").await?;
    assert_eq!(skipped.state, pb::WorkflowRunState::Running as i32);
    let done = wait_ended(&setup, run_id).await?;
    assert_eq!(
        done.state,
        pb::WorkflowRunState::Succeeded as i32,
        "{done:?}"
    );
    let f = node_of(&done, "f");
    assert_eq!(state(&done, "f"), pb::WorkflowNodeState::Skipped);
    // No users: the open caller.
    assert_eq!(f.skipped_by, "(open)", "{f:?}");
    assert!(f.skipped_ms > 0, "{f:?}");
    assert_eq!(
        runs_of(&setup.seen, fail).len(),
        1,
        "a skipped node does not run again"
    );
    let after = runs_of(&setup.seen, next);
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].params, "next", "a skipped parent passes no result");
    refused(
        skip(&setup, run_id, "f").await,
        tonic::Code::FailedPrecondition,
        &format!("workflow run {run_id} succeeded; nothing to skip"),
    );
    setup.cluster.shutdown().await;
    Ok(())
}

/// s (held until released) → t, and d alone: retries and skips that do not apply are refused
/// naming the node's state; t skipped before its turn never runs; a cancelled run takes none.
#[tokio::test]
async fn refusals_name_the_node_and_its_state() -> anyhow::Result<()> {
    let setup = setup().await?;
    let held = pb::Job {
        name: "held".to_string(),
        ..xjob_tests::TestCluster::job(setup.group_id, "held", pb::ScheduleType::None, "")
    };
    let held = setup.cluster.create_job(held).await?.id;
    let (after, done) = (
        step_job(&setup, "after").await?,
        step_job(&setup, "done").await?,
    );
    let nodes = vec![node("s", held), node("t", after), node("d", done)];
    let workflow_id = save(&setup, "refusals", nodes, vec![edge("s", "t", Always)]).await?;
    let run_id = start(&setup, workflow_id).await?;
    wait_until(DEADLINE, "s running and d done", || async {
        let run = get_run(&setup, run_id).await.ok()?;
        let s_running = node_of(&run, "s").run_status == pb::RunStatus::Running as i32;
        (s_running && state(&run, "d") == pb::WorkflowNodeState::Succeeded).then_some(())
    })
    .await?;
    let named = |key: &str| format!("node '{key}' of workflow run {run_id}");
    let precondition = tonic::Code::FailedPrecondition;
    refused(
        retry(&setup, run_id, "s").await,
        precondition,
        &format!(
            "{} is RUNNING: only a FAILED node can be retried",
            named("s")
        ),
    );
    refused(
        retry(&setup, run_id, "t").await,
        precondition,
        &format!(
            "{} has not been reached yet: only a FAILED node can be retried",
            named("t")
        ),
    );
    refused(
        skip(&setup, run_id, "d").await,
        precondition,
        &format!(
            "{} has SUCCEEDED: only a FAILED or waiting node can be skipped",
            named("d")
        ),
    );
    refused(
        retry(&setup, run_id, "zz").await,
        tonic::Code::NotFound,
        &format!("workflow run {run_id} has no node 'zz'"),
    );
    refused(
        retry(&setup, 999_999, "s").await,
        tonic::Code::NotFound,
        "workflow run 999999 not found",
    );

    // t skipped while s runs: it waits for s, then the run ends without running it.
    let skipped = skip(&setup, run_id, "t").await?;
    assert_eq!(state(&skipped, "t"), pb::WorkflowNodeState::Skipped);
    refused(
        skip(&setup, run_id, "t").await,
        precondition,
        &format!(
            "{} was skipped by a user: only a FAILED or waiting node can be skipped",
            named("t")
        ),
    );
    // A cancelled run takes no retry (its node held too, so both wait on the gate until then).
    let other = pb::Job {
        name: "held too".to_string(),
        ..xjob_tests::TestCluster::job(setup.group_id, "held", pb::ScheduleType::None, "")
    };
    let other = setup.cluster.create_job(other).await?.id;
    let alone = save(&setup, "cancelled", vec![node("h", other)], Vec::new()).await?;
    let cancelled_run = start(&setup, alone).await?;
    wait_until(DEADLINE, "h running", || async {
        let run = get_run(&setup, cancelled_run).await.ok()?;
        (node_of(&run, "h").run_status == pb::RunStatus::Running as i32).then_some(())
    })
    .await?;
    let request = pb::CancelWorkflowRunRequest { id: cancelled_run };
    setup.cluster.client().cancel_workflow_run(request).await?;
    refused(
        retry(&setup, cancelled_run, "h").await,
        precondition,
        &format!("workflow run {cancelled_run} was cancelled; start a new run instead"),
    );
    let cancelled = get_run(&setup, cancelled_run).await?;
    assert_eq!(cancelled.state, pb::WorkflowRunState::Cancelled as i32);

    // s ends; t, skipped before its turn, does not run, and the run succeeds.
    setup.gate.add_permits(1);
    let ended = wait_ended(&setup, run_id).await?;
    assert_eq!(
        ended.state,
        pb::WorkflowRunState::Succeeded as i32,
        "{ended:?}"
    );
    assert!(setup.cluster.logs(after).await?.is_empty(), "t never ran");
    setup.gate.close();
    setup.cluster.shutdown().await;
    Ok(())
}
