//! A workflow's schedule in the console: the card on the workflow's page (the schedule and the
//! next times it starts a run) and its editor (kind, expression, zone, misfire strategy,
//! overlap policy, default params), saved through UpdateWorkflow with the rest of the workflow unchanged.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use tonic::Status;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::csrf::{Fields, Posted};
use super::super::frame::{self, Nav};
use super::super::html::{self, Markup, Tone, markup};
use super::super::i18n::{Lang, t, tf};
use super::super::session::Viewer;
use super::super::shared::{Shared, request};
use super::{Path, after_post, field_error, http_status, status_page};

/// The schedule kinds a workflow offers, as the form posts them.
const KINDS: [(&str, pb::ScheduleType); 3] = [
    ("NONE", pb::ScheduleType::None),
    ("CRON", pb::ScheduleType::Cron),
    ("FIX_RATE", pb::ScheduleType::FixRate),
];
const MISFIRES: [(&str, pb::MisfireStrategy); 2] = [
    ("DO_NOTHING", pb::MisfireStrategy::DoNothing),
    ("FIRE_ONCE_NOW", pb::MisfireStrategy::FireOnceNow),
];

/// The overlap policies a workflow schedule takes.
const OVERLAPS: [(&str, pb::OverlapPolicy); 5] = [
    ("ALLOW_ALL", pb::OverlapPolicy::AllowAll),
    ("SKIP", pb::OverlapPolicy::Skip),
    ("BUFFER_ONE", pb::OverlapPolicy::BufferOne),
    ("BUFFER_ALL", pb::OverlapPolicy::BufferAll),
    ("CANCEL_OTHER", pb::OverlapPolicy::CancelOther),
];

fn overlap_name(value: i32) -> &'static str {
    let found = OVERLAPS.iter().find(|(_, policy)| *policy as i32 == value);
    found.map_or("ALLOW_ALL", |(name, _)| name)
}

fn kind_name(value: i32) -> &'static str {
    let found = KINDS.iter().find(|(_, kind)| *kind as i32 == value);
    found.map_or("NONE", |(name, _)| name)
}

fn misfire_name(value: i32) -> &'static str {
    let found = MISFIRES
        .iter()
        .find(|(_, misfire)| *misfire as i32 == value);
    found.map_or("DO_NOTHING", |(name, _)| name)
}

/// The schedule card of a workflow's page: what starts it, and its next runs (`next`, from
/// PreviewSchedule).
pub fn card(lang: Lang, workflow: &pb::Workflow, next: &[i64]) -> Markup {
    let summary = match kind_name(workflow.schedule_type) {
        "CRON" => tf(lang, "workflows.schedule_cron", &[&workflow.schedule_conf]),
        "FIX_RATE" => tf(lang, "workflows.schedule_rate", &[&workflow.schedule_conf]),
        _ => t(lang, "workflows.schedule_none").to_string(),
    };
    let mut times = Markup::new();
    for at in next {
        times.push(markup!("<li>{}</li>", html::time(*at)));
    }
    let zone = if workflow.time_zone.is_empty() {
        t(lang, "workflows.admin_zone").to_string()
    } else {
        workflow.time_zone.clone()
    };
    let list = if next.is_empty() {
        Markup::new()
    } else {
        markup!(
            "<p>{}</p><ul id=\"next-runs\">{}</ul>",
            t(lang, "workflows.next_runs"),
            times
        )
    };
    markup!(
        "<section class=\"card\" id=\"workflow-schedule\"><h2>{}</h2>\
         <p id=\"schedule-summary\">{} · {} · {} · {}</p>{}\
         <p><a href=\"/workflows/{}/schedule\" id=\"edit-schedule\">{}</a></p></section>",
        t(lang, "workflows.schedule"),
        summary,
        zone,
        misfire_name(workflow.misfire_strategy)
            .to_lowercase()
            .replace('_', "-"),
        overlap_name(workflow.overlap_policy)
            .to_lowercase()
            .replace('_', "-"),
        list,
        workflow.id,
        t(lang, "workflows.edit_schedule")
    )
}

/// The next `count` times a workflow's schedule starts a run; none without a schedule.
pub async fn next_runs(console: &Shared, viewer: &Viewer, workflow: &pb::Workflow) -> Vec<i64> {
    if kind_name(workflow.schedule_type) == "NONE" {
        return Vec::new();
    }
    let asked = pb::PreviewScheduleRequest {
        workflow_id: workflow.id,
        count: 5,
        ..Default::default()
    };
    match console
        .api()
        .preview_schedule(request(&viewer.caller, asked))
        .await
    {
        Ok(answer) => answer.into_inner().fire_times_ms,
        Err(_) => Vec::new(),
    }
}

pub async fn edit_form(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(id): Path<i64>,
) -> Response {
    match get(&console, &viewer, id).await {
        Ok(workflow) => editor(&viewer, &workflow, None, StatusCode::OK),
        Err(status) => status_page(viewer.lang, &status),
    }
}

async fn get(console: &Shared, viewer: &Viewer, id: i64) -> Result<pb::Workflow, Status> {
    let asked = pb::GetWorkflowRequest { id };
    let answer = console
        .api()
        .get_workflow(request(&viewer.caller, asked))
        .await?;
    Ok(answer.into_inner().workflow.unwrap_or_default())
}

fn editor(
    viewer: &Viewer,
    workflow: &pb::Workflow,
    error: Option<(Option<String>, String)>,
    code: StatusCode,
) -> Response {
    let lang = viewer.lang;
    let (error_field, message) = error.clone().unwrap_or((None, String::new()));
    let err = |name: &str| (error_field.as_deref() == Some(name)).then_some(message.as_str());
    let mut body = Markup::new();
    if error.is_some() && error_field.is_none() {
        body.push(html::notice(Tone::Bad, &message));
    }
    let choices = |names: &[&str]| -> Vec<(String, String)> {
        (names.iter())
            .map(|name| (name.to_string(), name.to_lowercase().replace('_', "-")))
            .collect()
    };
    let kinds = choices(&KINDS.map(|(name, _)| name));
    let misfires = choices(&MISFIRES.map(|(name, _)| name));
    let overlaps = choices(&OVERLAPS.map(|(name, _)| name));
    let fields = [
        html::field(
            t(lang, "workflows.schedule_type"),
            "schedule_type",
            html::select("schedule_type", &kinds, kind_name(workflow.schedule_type)),
            err("schedule_type"),
            Markup::new(),
        ),
        html::field(
            t(lang, "workflows.schedule_conf"),
            "schedule_conf",
            html::text_input("schedule_conf", &workflow.schedule_conf),
            err("schedule_conf"),
            markup!("{}", t(lang, "workflows.schedule_conf_hint")),
        ),
        html::field(
            t(lang, "workflows.time_zone"),
            "time_zone",
            html::text_input("time_zone", &workflow.time_zone),
            err("time_zone"),
            markup!("{}", t(lang, "workflows.time_zone_hint")),
        ),
        html::field(
            t(lang, "workflows.misfire"),
            "misfire_strategy",
            html::select(
                "misfire_strategy",
                &misfires,
                misfire_name(workflow.misfire_strategy),
            ),
            err("misfire_strategy"),
            markup!("{}", t(lang, "workflows.misfire_hint")),
        ),
        html::field(
            t(lang, "workflows.overlap"),
            "overlap_policy",
            html::select(
                "overlap_policy",
                &overlaps,
                overlap_name(workflow.overlap_policy),
            ),
            err("overlap_policy"),
            markup!("{}", t(lang, "workflows.overlap_hint")),
        ),
        html::field(
            t(lang, "workflows.params"),
            "params",
            html::textarea("params", 3, &workflow.params),
            err("params"),
            markup!("{}", t(lang, "workflows.params_hint")),
        ),
    ]
    .into_iter()
    .collect::<Markup>();
    body.push(markup!(
        "<form method=\"post\" action=\"/workflows/{}/schedule\" class=\"card form\" \
         id=\"schedule-form\">{}<div class=\"fields\">{}</div>\
         <button id=\"save-schedule\">{}</button></form>",
        workflow.id,
        frame::csrf_field(viewer),
        fields,
        t(lang, "workflows.save_schedule")
    ));
    let title = tf(lang, "workflows.schedule_title", &[&workflow.name]);
    let mut response = frame::page(Some(viewer), &title, Nav::Workflows, body);
    *response.status_mut() = code;
    response
}

/// The posted schedule fields written into `workflow`.
fn apply(fields: &Fields, workflow: &mut pb::Workflow) {
    let kind = KINDS
        .iter()
        .find(|(name, _)| *name == fields.get("schedule_type"));
    workflow.schedule_type = kind.map_or(pb::ScheduleType::None, |(_, kind)| *kind) as i32;
    workflow.schedule_conf = fields.get("schedule_conf").trim().to_string();
    workflow.time_zone = fields.get("time_zone").trim().to_string();
    let misfire = (MISFIRES.iter()).find(|(name, _)| *name == fields.get("misfire_strategy"));
    workflow.misfire_strategy =
        misfire.map_or(pb::MisfireStrategy::DoNothing, |(_, misfire)| *misfire) as i32;
    let overlap = (OVERLAPS.iter()).find(|(name, _)| *name == fields.get("overlap_policy"));
    workflow.overlap_policy =
        overlap.map_or(pb::OverlapPolicy::AllowAll, |(_, policy)| *policy) as i32;
    workflow.params = fields.get("params").to_string();
}

pub async fn update(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
    let mut workflow = match get(&console, &posted.viewer, id).await {
        Ok(workflow) => workflow,
        Err(status) => return status_page(lang, &status),
    };
    apply(&posted.fields, &mut workflow);
    let asked = pb::UpdateWorkflowRequest {
        workflow: Some(workflow.clone()),
    };
    let answer = console
        .api()
        .update_workflow(request(&posted.viewer.caller, asked))
        .await;
    let back = format!("/workflows/{id}");
    after_post(
        answer,
        &back,
        t(lang, "workflows.schedule_saved"),
        |status| {
            let error = Some(field_error(lang, &status));
            editor(&posted.viewer, &workflow, error, http_status(status.code()))
        },
    )
}
