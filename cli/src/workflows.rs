//! `xjob workflows …`: named graphs of jobs (and their runs: `workflow_runs`). A workflow is written as a JSON file (the same
//! shape `xjob workflows show ID -o json` prints, so one can be read, edited and saved back):
//!
//! ```json
//! {"group_id": 1, "name": "nightly",
//!  "nodes": [{"key": "a", "job_id": 1}, {"key": "b", "job_id": 2, "fan_in": "ANY_SUCCESS"}],
//!  "edges": [{"from": "a", "to": "b", "condition": "ON_FAILURE"}]}
//! ```

use std::path::PathBuf;

use clap::Subcommand;
use serde::{Deserialize, Serialize};
use xjob_proto::pb;

use super::client::Client;
use super::error::CliError;
use super::group_names::resolve_group;
use super::prompt::confirm;
use super::render::{self, Details, Output, Table};
use super::view;
use super::workflow_runs;
use super::workflow_schedule::{self, ScheduleFlags};

#[derive(Subcommand)]
pub enum WorkflowsCommand {
    /// Lists workflows.
    List {
        /// Only this group's (id or app name).
        #[arg(long)]
        group: Option<String>,
    },
    /// Shows a workflow with its nodes and edges.
    #[command(alias = "get")]
    Show { id: i64 },
    /// Creates a workflow from a JSON file ("-" = stdin); schedule flags replace the file's.
    Create {
        #[arg(long, short = 'f')]
        file: PathBuf,
        #[command(flatten)]
        schedule: ScheduleFlags,
    },
    /// Replaces a workflow with a JSON file's; without --file, changes only the schedule
    /// flags given.
    Update {
        id: i64,
        #[arg(long, short = 'f')]
        file: Option<PathBuf>,
        #[command(flatten)]
        schedule: ScheduleFlags,
    },
    /// The next times the workflow's schedule starts a run.
    Preview {
        id: i64,
        /// How many times (at most 100).
        #[arg(short = 'n', long, default_value_t = 5)]
        count: i32,
    },
    /// Deletes a workflow.
    Delete {
        id: i64,
        /// Do not ask for confirmation (required when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Starts a run of a workflow; prints the run's id.
    Start {
        id: i64,
        /// Params of every node's run (default: each node's job's own).
        #[arg(long)]
        params: Option<String>,
    },
    /// Lists a workflow's runs, newest first.
    Runs { id: i64 },
    /// Shows a workflow run: each node's state, run and result.
    Run { run_id: i64 },
    /// Cancels a running workflow run: no node starts any more, running ones are killed.
    Cancel {
        run_id: i64,
        /// Do not ask for confirmation (required when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Retries a FAILED node of a workflow run: a new run of its job starts, and when it
    /// succeeds the workflow run goes on from there.
    RetryNode {
        run_id: i64,
        /// The node's key.
        node: String,
    },
    /// Skips a FAILED or waiting node of a workflow run: it does not run, and its children
    /// take it as a success.
    SkipNode {
        run_id: i64,
        /// The node's key.
        node: String,
    },
}

/// A workflow as the file holds it and as JSON output shows it. Conditions and fan-ins are the
/// wire names without their prefix; missing ones are ON_SUCCESS and ALL_SUCCESS.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowView {
    #[serde(default, skip_deserializing)]
    pub id: i64,
    pub group_id: i64,
    pub name: String,
    pub nodes: Vec<NodeView>,
    #[serde(default)]
    pub edges: Vec<EdgeView>,
    #[serde(default, skip_deserializing)]
    pub updated_ms: i64,
    /// NONE, CRON or FIX_RATE.
    #[serde(default = "no_schedule")]
    pub schedule_type: String,
    #[serde(default)]
    pub schedule_conf: String,
    #[serde(default)]
    pub time_zone: String,
    /// DO_NOTHING or FIRE_ONCE_NOW.
    #[serde(default = "do_nothing")]
    pub misfire_strategy: String,
    #[serde(default)]
    pub params: String,
    #[serde(default, skip_deserializing)]
    pub next_fire_ms: i64,
    /// ALLOW_ALL, SKIP, BUFFER_ONE, BUFFER_ALL or CANCEL_OTHER.
    #[serde(default = "allow_all")]
    pub overlap_policy: String,
}

fn allow_all() -> String {
    "ALLOW_ALL".to_string()
}

fn no_schedule() -> String {
    "NONE".to_string()
}

fn do_nothing() -> String {
    "DO_NOTHING".to_string()
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeView {
    pub key: String,
    pub job_id: i64,
    #[serde(default = "all_success")]
    pub fan_in: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeView {
    pub from: String,
    pub to: String,
    #[serde(default = "on_success")]
    pub condition: String,
}

fn all_success() -> String {
    "ALL_SUCCESS".to_string()
}

fn on_success() -> String {
    "ON_SUCCESS".to_string()
}

impl From<&pb::Workflow> for WorkflowView {
    fn from(workflow: &pb::Workflow) -> WorkflowView {
        let fan_in = |value: i32| {
            let name = pb::WorkflowFanIn::try_from(value).map_or("", |v| v.as_str_name());
            name.trim_start_matches("WORKFLOW_FAN_IN_").to_string()
        };
        let condition = |value: i32| {
            let name = pb::WorkflowEdgeCondition::try_from(value).map_or("", |v| v.as_str_name());
            name.trim_start_matches("WORKFLOW_EDGE_CONDITION_")
                .to_string()
        };
        WorkflowView {
            id: workflow.id,
            group_id: workflow.group_id,
            name: workflow.name.clone(),
            nodes: (workflow.nodes.iter())
                .map(|node| NodeView {
                    key: node.key.clone(),
                    job_id: node.job_id,
                    fan_in: fan_in(node.fan_in),
                })
                .collect(),
            edges: (workflow.edges.iter())
                .map(|edge| EdgeView {
                    from: edge.from.clone(),
                    to: edge.to.clone(),
                    condition: condition(edge.condition),
                })
                .collect(),
            updated_ms: workflow.updated_ms,
            schedule_type: view::schedule_type(workflow.schedule_type),
            schedule_conf: workflow.schedule_conf.clone(),
            time_zone: workflow.time_zone.clone(),
            misfire_strategy: view::misfire_strategy(workflow.misfire_strategy),
            params: workflow.params.clone(),
            next_fire_ms: workflow.next_fire_ms,
            overlap_policy: view::overlap_policy(workflow.overlap_policy),
        }
    }
}

impl WorkflowView {
    /// The wire form; an unknown condition or fan-in is a usage error naming it.
    fn to_pb(&self, id: i64) -> Result<pb::Workflow, CliError> {
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let name = format!("WORKFLOW_FAN_IN_{}", node.fan_in.to_ascii_uppercase());
            let fan_in = pb::WorkflowFanIn::from_str_name(&name).ok_or_else(|| {
                let known = "ALL_SUCCESS or ANY_SUCCESS";
                CliError::Usage(format!(
                    "node '{}': fan_in '{}' is not {known}",
                    node.key, node.fan_in
                ))
            })?;
            nodes.push(pb::WorkflowNode {
                key: node.key.clone(),
                job_id: node.job_id,
                fan_in: fan_in as i32,
            });
        }
        let mut edges = Vec::with_capacity(self.edges.len());
        for edge in &self.edges {
            let name = format!(
                "WORKFLOW_EDGE_CONDITION_{}",
                edge.condition.to_ascii_uppercase()
            );
            let condition = pb::WorkflowEdgeCondition::from_str_name(&name).ok_or_else(|| {
                let known = "ON_SUCCESS, ON_FAILURE or ALWAYS";
                let message = format!(
                    "edge {} -> {}: condition '{}' is not {known}",
                    edge.from, edge.to, edge.condition
                );
                CliError::Usage(message)
            })?;
            edges.push(pb::WorkflowEdge {
                from: edge.from.clone(),
                to: edge.to.clone(),
                condition: condition as i32,
            });
        }
        let schedule_type = match self.schedule_type.as_str() {
            "" | "UNSPECIFIED" => pb::ScheduleType::None as i32,
            name => view::parse_schedule_type(name)
                .map_err(|error| CliError::Usage(format!("schedule_type: {error}")))?,
        };
        let misfire_strategy = match self.misfire_strategy.as_str() {
            "" | "UNSPECIFIED" => pb::MisfireStrategy::DoNothing as i32,
            name => view::parse_misfire_strategy(name)
                .map_err(|error| CliError::Usage(format!("misfire_strategy: {error}")))?,
        };
        let overlap_policy = match self.overlap_policy.as_str() {
            "" | "UNSPECIFIED" => pb::OverlapPolicy::AllowAll as i32,
            name => view::parse_overlap_policy(name)
                .map_err(|error| CliError::Usage(format!("overlap_policy: {error}")))?,
        };
        Ok(pb::Workflow {
            id,
            group_id: self.group_id,
            name: self.name.clone(),
            nodes,
            edges,
            updated_ms: 0,
            schedule_type,
            schedule_conf: self.schedule_conf.clone(),
            time_zone: self.time_zone.clone(),
            misfire_strategy,
            params: self.params.clone(),
            next_fire_ms: 0,
            overlap_policy,
        })
    }
}

/// Reads a workflow file ("-" = stdin).
fn read_file(path: &PathBuf) -> Result<WorkflowView, CliError> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(path)
            .map_err(|error| CliError::Usage(format!("cannot read {}: {error}", path.display())))?
    };
    serde_json::from_str(&text)
        .map_err(|error| CliError::Usage(format!("{}: {error}", path.display())))
}

pub async fn run(
    command: WorkflowsCommand,
    out: Output,
    mut client: Client,
) -> Result<(), CliError> {
    match command {
        WorkflowsCommand::List { group } => {
            let group_id = match group {
                Some(group) => resolve_group(&mut client, &group).await?,
                None => 0,
            };
            let request = pb::ListWorkflowsRequest {
                group_id,
                page_size: 1000,
                page_token: String::new(),
            };
            let workflows = client.list_workflows(request).await?.into_inner().workflows;
            let views: Vec<WorkflowView> = workflows.iter().map(WorkflowView::from).collect();
            let empty = "No workflows. Create one with: xjob workflows create --file FILE";
            out.list(&views, empty, |workflows| {
                let mut table = Table::new(&["ID", "GROUP", "NAME", "NODES", "EDGES"]);
                for workflow in workflows {
                    table.row(vec![
                        workflow.id.to_string(),
                        workflow.group_id.to_string(),
                        render::cell(&workflow.name, 40),
                        workflow.nodes.len().to_string(),
                        workflow.edges.len().to_string(),
                    ]);
                }
                table
            })
        }
        WorkflowsCommand::Show { id } => {
            let workflow = get(&mut client, id).await?;
            out.object(&WorkflowView::from(&workflow), details)
        }
        WorkflowsCommand::Create { file, schedule } => {
            let mut workflow = read_file(&file)?.to_pb(0)?;
            schedule.apply(&mut workflow);
            let request = pb::CreateWorkflowRequest {
                workflow: Some(workflow),
            };
            let created = client.create_workflow(request).await?.into_inner().workflow;
            let created =
                created.ok_or_else(|| CliError::Failed("the admin returned no workflow".into()))?;
            let sentence = format!("Created workflow {} '{}'", created.id, created.name);
            out.done(&WorkflowView::from(&created), &sentence)
        }
        WorkflowsCommand::Update { id, file, schedule } => {
            let mut workflow = match file {
                Some(file) => read_file(&file)?.to_pb(id)?,
                None => get(&mut client, id).await?,
            };
            schedule.apply(&mut workflow);
            let request = pb::UpdateWorkflowRequest {
                workflow: Some(workflow),
            };
            let updated = client.update_workflow(request).await?.into_inner().workflow;
            let updated =
                updated.ok_or_else(|| CliError::Failed("the admin returned no workflow".into()))?;
            let sentence = format!("Updated workflow {} '{}'", updated.id, updated.name);
            out.done(&WorkflowView::from(&updated), &sentence)
        }
        WorkflowsCommand::Delete { id, yes } => {
            if !yes {
                confirm(&format!("Delete workflow {id}?"))?;
            }
            client
                .delete_workflow(pb::DeleteWorkflowRequest { id })
                .await?;
            out.done(
                &serde_json::json!({ "deleted_workflow_id": id }),
                &format!("Deleted workflow {id}"),
            )
        }
        WorkflowsCommand::Start { id, params } => {
            workflow_runs::start(&mut client, out, id, params).await
        }
        WorkflowsCommand::Preview { id, count } => {
            workflow_schedule::preview(&mut client, out, id, count).await
        }
        WorkflowsCommand::Runs { id } => workflow_runs::list(&mut client, out, id).await,
        WorkflowsCommand::Run { run_id } => workflow_runs::show(&mut client, out, run_id).await,
        WorkflowsCommand::Cancel { run_id, yes } => {
            workflow_runs::cancel(&mut client, out, run_id, yes).await
        }
        WorkflowsCommand::RetryNode { run_id, node } => {
            workflow_runs::retry_node(&mut client, out, run_id, node).await
        }
        WorkflowsCommand::SkipNode { run_id, node } => {
            workflow_runs::skip_node(&mut client, out, run_id, node).await
        }
    }
}

async fn get(client: &mut Client, id: i64) -> Result<pb::Workflow, CliError> {
    let workflow = client
        .get_workflow(pb::GetWorkflowRequest { id })
        .await?
        .into_inner()
        .workflow;
    workflow.ok_or_else(|| CliError::Failed(format!("the admin returned no workflow {id}")))
}

fn details(workflow: &WorkflowView) -> Details {
    let nodes: Vec<String> = (workflow.nodes.iter())
        .map(|node| format!("{} (job {}, {})", node.key, node.job_id, node.fan_in))
        .collect();
    let edges: Vec<String> = (workflow.edges.iter())
        .map(|edge| format!("{} -> {} ({})", edge.from, edge.to, edge.condition))
        .collect();
    let mut details = Details::new();
    details
        .add("id", workflow.id.to_string())
        .add("group", workflow.group_id.to_string())
        .add("name", workflow.name.clone())
        .add("nodes", nodes.join(", "))
        .add("edges", render::or_dash(&edges.join(", ")))
        .add(
            "schedule",
            workflow_schedule::schedule_text(&workflow.schedule_type, &workflow.schedule_conf),
        )
        .add("time zone", render::or_dash(&workflow.time_zone))
        .add(
            "misfire",
            workflow.misfire_strategy.to_lowercase().replace('_', "-"),
        )
        .add(
            "overlap",
            workflow.overlap_policy.to_lowercase().replace('_', "-"),
        )
        .add("params", render::or_dash(&workflow.params))
        .add("next run", render::time(workflow.next_fire_ms))
        .add("updated", render::time(workflow.updated_ms));
    details
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reads_with_defaults_and_round_trips() {
        let text = r#"{"group_id": 1, "name": "n",
            "nodes": [{"key": "a", "job_id": 1}, {"key": "b", "job_id": 2, "fan_in": "any_success"}],
            "edges": [{"from": "a", "to": "b", "condition": "ON_FAILURE"}]}"#;
        let view: WorkflowView = serde_json::from_str(text).expect("parses");
        let wire = view.to_pb(7).expect("converts");
        assert_eq!(wire.id, 7);
        assert_eq!(wire.nodes[0].fan_in, pb::WorkflowFanIn::AllSuccess as i32);
        assert_eq!(wire.nodes[1].fan_in, pb::WorkflowFanIn::AnySuccess as i32);
        let condition = pb::WorkflowEdgeCondition::OnFailure as i32;
        assert_eq!(wire.edges[0].condition, condition);
        let back = WorkflowView::from(&wire);
        assert_eq!(back.nodes[1].fan_in, "ANY_SUCCESS");
        assert_eq!(back.edges[0].condition, "ON_FAILURE");
    }

    #[test]
    fn unknown_names_and_fields_are_refused() {
        let text = r#"{"group_id": 1, "name": "n", "nodes": [{"key": "a", "job_id": 1}],
            "edges": [{"from": "a", "to": "a", "condition": "SOMETIMES"}]}"#;
        let view: WorkflowView = serde_json::from_str(text).expect("parses");
        let error = view.to_pb(0).expect_err("refused");
        assert!(
            error.message().contains("condition 'SOMETIMES'"),
            "{error:?}"
        );
        let extra = r#"{"group_id": 1, "name": "n", "nodes": [], "colour": "red"}"#;
        assert!(serde_json::from_str::<WorkflowView>(extra).is_err());
    }
}
