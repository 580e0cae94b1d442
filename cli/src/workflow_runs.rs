//! `xjob workflows start|runs|run|cancel|retry-node|skip-node`: runs of a workflow. `run` shows each node's state,
//! its run (log id) and the result message its handler returned.

use serde::Serialize;
use xjob_proto::pb;

use super::client::Client;
use super::error::CliError;
use super::prompt::confirm;
use super::render::{self, Details, Output, Table};

/// A workflow run as JSON output shows it; states are the wire names without their prefix.
#[derive(Serialize)]
pub struct RunView {
    pub id: i64,
    pub workflow_id: i64,
    pub group_id: i64,
    pub state: String,
    pub params: String,
    pub created_ms: i64,
    pub finished_ms: i64,
    /// MANUAL (started), CRON (an occurrence of the schedule) or MISFIRE.
    pub trigger_type: String,
    /// The occurrence a scheduled run stands for; 0 for a started one.
    pub scheduled_at_ms: i64,
    /// Why it was SKIPPED, or CANCELLED by a later occurrence (overlap policy).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeRunView>,
}

#[derive(Serialize)]
pub struct NodeRunView {
    pub key: String,
    pub job_id: i64,
    pub state: String,
    pub log_id: i64,
    pub run_status: String,
    pub started_ms: i64,
    pub ended_ms: i64,
    pub result: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub skipped_by: String,
}

impl From<&pb::WorkflowRun> for RunView {
    fn from(run: &pb::WorkflowRun) -> RunView {
        let state = pb::WorkflowRunState::try_from(run.state).map_or("", |v| v.as_str_name());
        RunView {
            id: run.id,
            workflow_id: run.workflow_id,
            group_id: run.group_id,
            state: state.trim_start_matches("WORKFLOW_RUN_STATE_").to_string(),
            params: run.params.clone(),
            created_ms: run.created_ms,
            finished_ms: run.finished_ms,
            trigger_type: super::view::trigger_type(run.trigger_type),
            scheduled_at_ms: run.scheduled_at_ms,
            reason: run.reason.clone(),
            nodes: run.nodes.iter().map(NodeRunView::from).collect(),
        }
    }
}

impl From<&pb::WorkflowRunNode> for NodeRunView {
    fn from(node: &pb::WorkflowRunNode) -> NodeRunView {
        let state = pb::WorkflowNodeState::try_from(node.state).map_or("", |v| v.as_str_name());
        let status = pb::RunStatus::try_from(node.run_status).map_or("", |v| v.as_str_name());
        NodeRunView {
            key: node.key.clone(),
            job_id: node.job_id,
            state: state.trim_start_matches("WORKFLOW_NODE_STATE_").to_string(),
            log_id: node.log_id,
            run_status: status
                .trim_start_matches("RUN_STATUS_")
                .replace("UNSPECIFIED", ""),
            started_ms: node.started_ms,
            ended_ms: node.ended_ms,
            result: node.result.clone(),
            skipped_by: node.skipped_by.clone(),
        }
    }
}

pub async fn start(
    client: &mut Client,
    out: Output,
    workflow_id: i64,
    params: Option<String>,
) -> Result<(), CliError> {
    let request = pb::StartWorkflowRequest {
        workflow_id,
        params: params.unwrap_or_default(),
    };
    let run_id = client
        .start_workflow(request)
        .await?
        .into_inner()
        .workflow_run_id;
    out.done(
        &serde_json::json!({ "workflow_run_id": run_id }),
        &format!("Started workflow {workflow_id}: run {run_id} (xjob workflows run {run_id})"),
    )
}

pub async fn list(client: &mut Client, out: Output, workflow_id: i64) -> Result<(), CliError> {
    let request = pb::ListWorkflowRunsRequest {
        workflow_id,
        page_size: 100,
        page_token: String::new(),
    };
    let runs = client.list_workflow_runs(request).await?.into_inner().runs;
    let views: Vec<RunView> = runs.iter().map(RunView::from).collect();
    let empty = format!("No runs. Start one with: xjob workflows start {workflow_id}");
    out.list(&views, &empty, |runs| {
        let mut table = Table::new(&["RUN", "STATE", "TRIGGER", "STARTED", "FINISHED"]);
        for run in runs {
            table.row(vec![
                run.id.to_string(),
                run.state.clone(),
                trigger_text(run),
                render::time(run.created_ms),
                render::time(run.finished_ms),
            ]);
        }
        table
    })
}

pub async fn show(client: &mut Client, out: Output, id: i64) -> Result<(), CliError> {
    let request = pb::GetWorkflowRunRequest { id };
    let run = client.get_workflow_run(request).await?.into_inner().run;
    let run = run.ok_or_else(|| CliError::Failed(format!("the admin returned no run {id}")))?;
    out.object(&RunView::from(&run), details)
}

pub async fn cancel(client: &mut Client, out: Output, id: i64, yes: bool) -> Result<(), CliError> {
    if !yes {
        confirm(&format!("Cancel workflow run {id}?"))?;
    }
    let request = pb::CancelWorkflowRunRequest { id };
    let answer = client.cancel_workflow_run(request).await?.into_inner();
    out.done(
        &serde_json::json!({ "cancelled_workflow_run_id": id, "killed": answer.killed }),
        &format!(
            "Cancelled workflow run {id} ({} node run(s) killed)",
            answer.killed
        ),
    )
}

pub async fn retry_node(
    client: &mut Client,
    out: Output,
    id: i64,
    node: String,
) -> Result<(), CliError> {
    let request = pb::RetryWorkflowNodeRequest {
        id,
        node: node.clone(),
    };
    client.retry_workflow_node(request).await?;
    out.done(
        &serde_json::json!({ "workflow_run_id": id, "retried_node": node }),
        &format!("Retrying node {node} of workflow run {id} (xjob workflows run {id})"),
    )
}

pub async fn skip_node(
    client: &mut Client,
    out: Output,
    id: i64,
    node: String,
) -> Result<(), CliError> {
    let request = pb::SkipWorkflowNodeRequest {
        id,
        node: node.clone(),
    };
    client.skip_workflow_node(request).await?;
    out.done(
        &serde_json::json!({ "workflow_run_id": id, "skipped_node": node }),
        &format!("Skipped node {node} of workflow run {id}; its children go on"),
    )
}

fn details(run: &RunView) -> Details {
    let nodes: Vec<String> = (run.nodes.iter())
        .map(|node| {
            let mut line = format!("{} {}", node.key, node.state);
            if !node.skipped_by.is_empty() {
                line.push_str(&format!(" by {}", node.skipped_by));
            }
            if node.log_id > 0 {
                line.push_str(&format!(" (log {}", node.log_id));
                if !node.result.is_empty() {
                    line.push_str(&format!(", result '{}'", render::cell(&node.result, 40)));
                }
                line.push(')');
            }
            line
        })
        .collect();
    let mut details = Details::new();
    details
        .add("run", run.id.to_string())
        .add("workflow", run.workflow_id.to_string())
        .add("state", run.state.clone())
        .add("trigger", trigger_text(run))
        .add("reason", render::or_dash(&run.reason))
        .add("params", render::or_dash(&run.params))
        .add("started", render::time(run.created_ms))
        .add("finished", render::time(run.finished_ms))
        .add("nodes", nodes.join("; "));
    details
}

/// "manual", or "cron (2027-01-01 02:00:00)": why the run started and, when scheduled, the
/// occurrence it stands for.
fn trigger_text(run: &RunView) -> String {
    let kind = run.trigger_type.to_lowercase();
    if run.scheduled_at_ms > 0 {
        format!("{kind} ({})", render::time(run.scheduled_at_ms))
    } else {
        kind
    }
}
