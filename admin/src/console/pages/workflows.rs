//! Workflows: the list, and one workflow's graph drawn as server-rendered SVG with each node
//! coloured by its state in the latest run, refreshed in place while that run goes on
//! (`live.js`; without it a reload shows the newest states). Viewers who may operate the
//! workflow's group get its buttons (`workflow_actions`).
//! Nodes are laid out in columns by their longest path from a root, so every edge points
//! right; edges on failure are dashed, edges that always hold dotted.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::Uri;
use axum::response::Response;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::csrf::Fields;
use super::super::frame::{self, Nav};
use super::super::html::{self, Markup, Tone, markup};
use super::super::i18n::{Lang, t, tf};
use super::super::session::Viewer;
use super::super::shared::{Shared, request};
use super::{Path, status_page};

const BOX_W: i64 = 150;
const BOX_H: i64 = 44;
const COL_W: i64 = 210;
const ROW_H: i64 = 70;
const MARGIN: i64 = 16;

pub async fn list(State(console): State<Shared>, viewer: Viewer) -> Response {
    let lang = viewer.lang;
    let asked = pb::ListWorkflowsRequest {
        group_id: 0,
        page_size: 1000,
        page_token: String::new(),
    };
    let workflows = match console
        .api()
        .list_workflows(request(&viewer.caller, asked))
        .await
    {
        Ok(answer) => answer.into_inner().workflows,
        Err(status) => return status_page(lang, &status),
    };
    let mut body = markup!("<p class=\"muted\">{}</p>", t(lang, "workflows.intro"));
    if workflows.is_empty() {
        body.push(markup!(
            "<p class=\"empty\">{}</p>",
            t(lang, "workflows.none")
        ));
    }
    for workflow in &workflows {
        body.push(markup!(
            "<section class=\"card\" id=\"workflow-{}\"><h2><a href=\"/workflows/{}\">{}</a></h2>\
             <p class=\"muted\">{} {} · {} {}</p></section>",
            workflow.id,
            workflow.id,
            workflow.name,
            workflow.nodes.len(),
            t(lang, "workflows.nodes"),
            workflow.edges.len(),
            t(lang, "workflows.edges"),
        ));
    }
    frame::page(
        Some(&viewer),
        t(lang, "workflows.title"),
        Nav::Workflows,
        body,
    )
}

pub async fn detail(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(id): Path<i64>,
    uri: Uri,
) -> Response {
    let lang = viewer.lang;
    // The outcome of a button pressed here (`workflow_actions`).
    let notice = Fields::from_query(uri.query()).get("notice").to_string();
    let api = console.api();
    let workflow = match api
        .get_workflow(request(&viewer.caller, pb::GetWorkflowRequest { id }))
        .await
    {
        Ok(answer) => answer.into_inner().workflow.unwrap_or_default(),
        Err(status) => return status_page(lang, &status),
    };
    let latest = pb::ListWorkflowRunsRequest {
        workflow_id: id,
        page_size: 1,
        page_token: String::new(),
    };
    let latest = match api
        .list_workflow_runs(request(&viewer.caller, latest))
        .await
    {
        Ok(answer) => answer.into_inner().runs.into_iter().next(),
        Err(status) => return status_page(lang, &status),
    };
    let run = match latest {
        Some(latest) => {
            let asked = pb::GetWorkflowRunRequest { id: latest.id };
            match api.get_workflow_run(request(&viewer.caller, asked)).await {
                Ok(answer) => answer.into_inner().run,
                Err(status) => return status_page(lang, &status),
            }
        }
        None => None,
    };
    let operate = viewer.can_operate(workflow.group_id);
    let mut body = html::notice(Tone::Ok, &notice);
    if operate {
        body.push(markup!(
            "<form method=\"post\" action=\"/workflows/{}/start\" data-confirm=\"{}\">{}\
             <button id=\"start-workflow\">{}</button></form>",
            id,
            t(lang, "workflows.start_confirm"),
            frame::csrf_field(&viewer),
            t(lang, "workflows.start"),
        ));
    }
    let running = run
        .as_ref()
        .is_some_and(|run| run.state == pb::WorkflowRunState::Running as i32);
    // Live (live.js refreshes it in place) while the run goes on; a finished run's region
    // comes back without the mark, which ends the refreshing.
    body.push(if running {
        Markup::literal("<div id=\"workflow-live\" data-live>")
    } else {
        Markup::literal("<div id=\"workflow-live\">")
    });
    match &run {
        Some(run) => body.push(markup!(
            "<p id=\"latest-run\">{} {} {} {}</p>",
            t(lang, "workflows.latest_run"),
            run.id,
            html::badge(&state_label(run_state_name(run.state))),
            run.reason,
        )),
        None => body.push(markup!(
            "<p class=\"empty\" id=\"latest-run\">{}</p>",
            t(lang, "workflows.no_runs")
        )),
    }
    if let Some(run) = run.as_ref().filter(|_| running && operate) {
        body.push(markup!(
            "<form method=\"post\" action=\"/workflow-runs/{}/cancel\" data-confirm=\"{}\">{}\
             <button class=\"danger\" id=\"cancel-workflow-run\">{}</button></form>",
            run.id,
            tf(lang, "workflows.cancel_confirm", &[&run.id]),
            frame::csrf_field(&viewer),
            t(lang, "workflows.cancel"),
        ));
    }
    let states: HashMap<&str, &pb::WorkflowRunNode> = run
        .as_ref()
        .map(|run| {
            run.nodes
                .iter()
                .map(|node| (node.key.as_str(), node))
                .collect()
        })
        .unwrap_or_default();
    let next = super::workflow_schedule::next_runs(&console, &viewer, &workflow).await;
    let notice = Fields::from_query(uri.query());
    body.push(html::notice(Tone::Ok, notice.get("notice")));
    body.push(super::workflow_schedule::card(lang, &workflow, &next));
    body.push(graph_svg(lang, &workflow, &states));
    // Retry and skip apply to a run that is going on or failed (the API says why otherwise).
    let actions = run
        .as_ref()
        .filter(|run| {
            operate
                && (run.state == pb::WorkflowRunState::Running as i32
                    || run.state == pb::WorkflowRunState::Failed as i32)
        })
        .map(|run| NodeActions {
            viewer: &viewer,
            run_id: run.id,
        });
    body.push(node_table(lang, &workflow, &states, actions));
    body.push(Markup::literal("</div>"));
    frame::page(Some(&viewer), &workflow.name, Nav::Workflows, body)
}

fn run_state_name(state: i32) -> &'static str {
    pb::WorkflowRunState::try_from(state).map_or("", |state| state.as_str_name())
}

fn node_state_name(state: i32) -> &'static str {
    pb::WorkflowNodeState::try_from(state).map_or("", |state| state.as_str_name())
}

/// `WORKFLOW_NODE_STATE_SUCCEEDED` → `SUCCEEDED` (either enum).
fn state_label(name: &str) -> String {
    let label = html::enum_label(name, "WORKFLOW_NODE_STATE_");
    html::enum_label(&label, "WORKFLOW_RUN_STATE_")
}

/// A node's fill by state: grey waiting (or never run), blue running, green, red, light grey.
fn fill(state: &str) -> &'static str {
    match state {
        "RUNNING" => "#cfe2ff",
        "SUCCEEDED" => "#d1e7dd",
        "FAILED" => "#f8d7da",
        "SKIPPED" => "#eeeeee",
        _ => "#ffffff",
    }
}

/// Each node's column: its longest path from a root (the graph is acyclic, checked at save).
fn columns(workflow: &pb::Workflow) -> HashMap<&str, i64> {
    let mut column: HashMap<&str, i64> = (workflow.nodes.iter())
        .map(|node| (node.key.as_str(), 0))
        .collect();
    // At most one pass per node: a longest path has fewer edges than there are nodes.
    for _ in 0..workflow.nodes.len() {
        let mut changed = false;
        for edge in &workflow.edges {
            let from = column.get(edge.from.as_str()).copied().unwrap_or(0);
            if let Some(to) = column.get_mut(edge.to.as_str())
                && *to < from + 1
            {
                *to = from + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    column
}

fn graph_svg(
    lang: Lang,
    workflow: &pb::Workflow,
    states: &HashMap<&str, &pb::WorkflowRunNode>,
) -> Markup {
    let column = columns(workflow);
    let mut rows_used: HashMap<i64, i64> = HashMap::new();
    let mut at: HashMap<&str, (i64, i64)> = HashMap::new();
    for node in &workflow.nodes {
        let col = column.get(node.key.as_str()).copied().unwrap_or(0);
        let row = rows_used.entry(col).or_insert(0);
        at.insert(
            node.key.as_str(),
            (MARGIN + col * COL_W, MARGIN + *row * ROW_H),
        );
        *row += 1;
    }
    let width = (at.values().map(|(x, _)| *x).max().unwrap_or(0)) + BOX_W + MARGIN;
    let height = (at.values().map(|(_, y)| *y).max().unwrap_or(0)) + BOX_H + MARGIN;
    let mut svg = markup!(
        "<svg id=\"workflow-graph\" role=\"img\" aria-label=\"{}\" width=\"{}\" height=\"{}\" \
         viewBox=\"0 0 {} {}\" xmlns=\"http://www.w3.org/2000/svg\">",
        t(lang, "workflows.graph"),
        width,
        height,
        width,
        height,
    );
    for edge in &workflow.edges {
        let (Some(from), Some(to)) = (at.get(edge.from.as_str()), at.get(edge.to.as_str())) else {
            continue;
        };
        let dash = match pb::WorkflowEdgeCondition::try_from(edge.condition) {
            Ok(pb::WorkflowEdgeCondition::OnFailure) => "6 4",
            Ok(pb::WorkflowEdgeCondition::Always) => "2 3",
            _ => "none",
        };
        svg.push(markup!(
            "<line class=\"edge\" data-from=\"{}\" data-to=\"{}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" \
             y2=\"{}\" stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"{}\"/>",
            edge.from,
            edge.to,
            from.0 + BOX_W,
            from.1 + BOX_H / 2,
            to.0,
            to.1 + BOX_H / 2,
            dash,
        ));
    }
    for node in &workflow.nodes {
        let Some((x, y)) = at.get(node.key.as_str()).copied() else {
            continue;
        };
        let state = match states.get(node.key.as_str()) {
            Some(run_node) => state_label(node_state_name(run_node.state)),
            None => String::new(),
        };
        svg.push(markup!(
            "<g class=\"node\" id=\"node-{}\" data-state=\"{}\"><rect x=\"{}\" y=\"{}\" \
             width=\"{}\" height=\"{}\" rx=\"6\" fill=\"{}\" stroke=\"#333\"/>\
             <text x=\"{}\" y=\"{}\" font-size=\"13\">{}</text>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#444\">{}</text></g>",
            node.key,
            state,
            x,
            y,
            BOX_W,
            BOX_H,
            fill(&state),
            x + 8,
            y + 18,
            node.key,
            x + 8,
            y + 35,
            state,
        ));
    }
    svg.push(Markup::literal("</svg>"));
    svg
}

/// Who may press a node's Retry and Skip buttons, on which run.
struct NodeActions<'a> {
    viewer: &'a Viewer,
    run_id: i64,
}

/// A node's Retry (FAILED) and Skip (FAILED or waiting) forms.
fn node_buttons(lang: Lang, actions: &NodeActions, key: &str, state: &str) -> Markup {
    let mut buttons = Markup::new();
    let forms = [
        (
            "retry",
            "workflows.retry_node",
            "workflows.retry_confirm",
            state == "FAILED",
        ),
        (
            "skip",
            "workflows.skip_node",
            "workflows.skip_confirm",
            state == "FAILED" || state == "WAITING",
        ),
    ];
    for (action, label, confirm, shown) in forms {
        if !shown {
            continue;
        }
        buttons.push(markup!(
            "<form class=\"inline\" method=\"post\" action=\"/workflow-runs/{}/nodes/{}/{}\" \
             data-confirm=\"{}\">{}<button class=\"small secondary\" id=\"{}-{}\">{}</button>\
             </form>",
            actions.run_id,
            key,
            action,
            tf(lang, confirm, &[&key]),
            frame::csrf_field(actions.viewer),
            action,
            key,
            t(lang, label),
        ));
    }
    buttons
}

fn node_table(
    lang: Lang,
    workflow: &pb::Workflow,
    states: &HashMap<&str, &pb::WorkflowRunNode>,
    actions: Option<NodeActions>,
) -> Markup {
    let mut rows = Markup::new();
    for node in &workflow.nodes {
        let run_node = states.get(node.key.as_str());
        let state = run_node
            .map(|run_node| state_label(node_state_name(run_node.state)))
            .unwrap_or_default();
        let run = match run_node.filter(|run_node| run_node.log_id > 0) {
            Some(run_node) => markup!(
                "<a href=\"/runs/{}\">{}</a>",
                run_node.log_id,
                run_node.log_id
            ),
            None => Markup::literal("-"),
        };
        let result = run_node
            .map(|run_node| run_node.result.clone())
            .unwrap_or_default();
        let mut state_cell = if state.is_empty() {
            Markup::literal("-")
        } else {
            html::badge(&state)
        };
        if let Some(by) = run_node
            .map(|node| &node.skipped_by)
            .filter(|by| !by.is_empty())
        {
            state_cell.push(markup!(
                " <span class=\"muted\">{}</span>",
                tf(lang, "workflows.skipped_by", &[by])
            ));
        }
        let buttons = match &actions {
            Some(actions) => markup!(
                "<td>{}</td>",
                node_buttons(lang, actions, &node.key, &state)
            ),
            None => Markup::new(),
        };
        rows.push(markup!(
            "<tr id=\"workflow-node-{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
            node.key,
            node.key,
            node.job_id,
            state_cell,
            run,
            result,
            buttons,
        ));
    }
    let actions_head = if actions.is_some() {
        markup!("<th>{}</th>", t(lang, "workflows.actions"))
    } else {
        Markup::new()
    };
    markup!(
        "<table id=\"workflow-nodes\"><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th>\
         <th>{}</th>{}</tr></thead><tbody>{}</tbody></table>",
        t(lang, "workflows.node"),
        t(lang, "workflows.job"),
        t(lang, "workflows.state"),
        t(lang, "workflows.run"),
        t(lang, "workflows.result"),
        actions_head,
        rows,
    )
}
