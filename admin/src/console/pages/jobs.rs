//! Jobs: the list (filters in the URL), the editor (create, edit, copy) with its live schedule
//! preview, start/stop, delete, and trigger once with params and addresses.

use std::fmt::Write;

use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::csrf::{Fields, Posted};
use super::super::form::{self, FieldRefusal};
use super::super::html::{self, Nav, esc};
use super::super::session::Viewer;
use super::super::{Console, Shared, request};
use super::{
    Path, field_error, group_name, next_page_link, readable_groups, see_other, status_page,
};

const SCHEDULE_TYPES: &[&str] = &["CRON", "FIX_RATE", "FIX_DELAY", "NONE"];
const MISFIRE: &[&str] = &["DO_NOTHING", "FIRE_ONCE_NOW"];
const ROUTES: &[&str] = &[
    "FIRST",
    "LAST",
    "ROUND",
    "RANDOM",
    "CONSISTENT_HASH",
    "LEAST_FREQUENTLY_USED",
    "LEAST_RECENTLY_USED",
    "FAILOVER",
    "BUSYOVER",
    "SHARDING_BROADCAST",
];
const BLOCKS: &[&str] = &["SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY"];
/// Fields the editor renders: an API error naming another one is shown above the form.
const FORM_FIELDS: &[&str] = &[
    "group_id",
    "name",
    "author",
    "alarm_email",
    "schedule_type",
    "schedule_conf",
    "time_zone",
    "handler",
    "params",
    "route_strategy",
    "misfire_strategy",
    "block_strategy",
    "timeout_ms",
    "fail_retry_count",
    "child_job_ids",
    "glue_type",
    "glue_source",
];
const GLUES: &[&str] = &["BEAN", "SHELL", "PYTHON", "NODEJS", "PHP", "POWERSHELL"];

pub async fn list(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let query = Fields::from_query(uri.query());
    let groups = readable_groups(&console, &viewer).await;
    let status = match query.get("status") {
        "RUNNING" => pb::JobStatus::Running as i32,
        "STOPPED" => pb::JobStatus::Stopped as i32,
        _ => 0,
    };
    let answer = console
        .api()
        .list_jobs(request(
            &viewer.caller,
            pb::ListJobsRequest {
                group_id: query.int("group"),
                status,
                name: query.get("name").to_string(),
                handler: query.get("handler").to_string(),
                author: query.get("author").to_string(),
                page_size: 50,
                page_token: query.get("page").to_string(),
            },
        ))
        .await;
    let page = match answer {
        Ok(answer) => answer.into_inner(),
        Err(status) => return status_page(&status),
    };
    let mut body = html::notice("ok", query.get("notice"));
    body.push_str(&filters(&query, &groups));
    if viewer.can_operate_any() {
        body.push_str("<p><a class=\"button\" href=\"/jobs/new\" id=\"new-job\">New job</a></p>");
    }
    if page.jobs.is_empty() {
        body.push_str(
            "<p class=\"empty\" id=\"no-jobs\">No jobs match. Clear the filters, or create a \
             job (it starts stopped; start it to schedule it).</p>",
        );
    } else {
        body.push_str(
            "<div class=\"scroll\"><table id=\"jobs\"><tr><th>Id</th><th>Name</th><th>Group</th>\
             <th>Schedule</th><th>Handler</th><th>Author</th><th>Status</th><th>Next fire</th>\
             <th></th></tr>",
        );
        for job in &page.jobs {
            body.push_str(&job_row(&viewer, job, &groups));
        }
        body.push_str("</table></div>");
    }
    let filters: Vec<(&str, String)> = ["group", "status", "name", "handler", "author"]
        .iter()
        .map(|key| (*key, query.get(key).to_string()))
        .collect();
    body.push_str(&next_page_link("/jobs", &filters, &page.next_page_token));
    html::page(Some(&viewer), "Jobs", Nav::Jobs, &body)
}

fn filters(query: &Fields, groups: &[pb::Group]) -> String {
    let mut group_options = vec![(String::new(), "all groups".to_string())];
    group_options.extend(
        groups
            .iter()
            .map(|group| (group.id.to_string(), group_name(groups, group.id))),
    );
    let status_options: Vec<(String, String)> = [
        ("", "any status"),
        ("RUNNING", "running"),
        ("STOPPED", "stopped"),
    ]
    .iter()
    .map(|(value, label)| (value.to_string(), label.to_string()))
    .collect();
    format!(
        "<form method=\"get\" action=\"/jobs\" class=\"filters\" id=\"job-filters\">{}{}\
         <input type=\"search\" name=\"name\" placeholder=\"name\" value=\"{}\">\
         <input type=\"search\" name=\"handler\" placeholder=\"handler\" value=\"{}\">\
         <input type=\"search\" name=\"author\" placeholder=\"author\" value=\"{}\">\
         <button type=\"submit\">Filter</button> <a href=\"/jobs\">Clear</a></form>",
        html::select("group", &group_options, query.get("group")),
        html::select("status", &status_options, query.get("status")),
        esc(query.get("name")),
        esc(query.get("handler")),
        esc(query.get("author")),
    )
}

fn job_row(viewer: &Viewer, job: &pb::Job, groups: &[pb::Group]) -> String {
    let status = if job.status == pb::JobStatus::Running as i32 {
        "RUNNING"
    } else {
        "STOPPED"
    };
    let schedule = format!(
        "{} {}",
        label(
            pb::ScheduleType::try_from(job.schedule_type).map(|t| t.as_str_name()),
            "SCHEDULE_TYPE_"
        ),
        job.schedule_conf
    );
    let mut actions = format!(
        "<a href=\"/jobs/{id}\">{}</a> <a href=\"/runs?job={id}\">runs</a>",
        if viewer.can_operate(job.group_id) {
            "edit"
        } else {
            "view"
        },
        id = job.id
    );
    if viewer.can_operate(job.group_id) {
        let (action, text) = if status == "RUNNING" {
            ("stop", "Stop")
        } else {
            ("start", "Start")
        };
        let _ = write!(
            actions,
            " <a href=\"/jobs/{id}/copy\">copy</a>\
             <form method=\"post\" action=\"/jobs/{id}/{action}\" class=\"inline\">{csrf}\
             <button class=\"small\" id=\"{action}-{id}\">{text}</button></form>",
            id = job.id,
            csrf = html::csrf_field(viewer),
        );
    }
    format!(
        "<tr data-job-id=\"{}\"><td>{}</td><td><a href=\"/jobs/{}\">{}</a></td><td>{}</td>\
         <td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{actions}</td></tr>",
        job.id,
        job.id,
        job.id,
        esc(&job.name),
        esc(&group_name(groups, job.group_id)),
        esc(&schedule),
        esc(&job.handler),
        esc(&job.author),
        html::badge(status),
        html::time(job.next_fire_ms),
    )
}

fn label(name: Result<&str, prost::UnknownEnumValue>, prefix: &str) -> String {
    name.map(|name| html::enum_label(name, prefix))
        .unwrap_or_else(|_| "?".to_string())
}

/// A new job's defaults: a cron job every minute, XXL-JOB's strategies.
fn new_job(group_id: i64) -> pb::Job {
    pb::Job {
        group_id,
        schedule_type: pb::ScheduleType::Cron as i32,
        schedule_conf: "0 * * * * ?".to_string(),
        misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
        route_strategy: pb::RouteStrategy::First as i32,
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        glue_type: pb::GlueType::Bean as i32,
        ..Default::default()
    }
}

pub async fn new_form(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let query = Fields::from_query(uri.query());
    let job = new_job(query.int("group"));
    editor(&console, &viewer, &job, None, StatusCode::OK).await
}

pub async fn copy_form(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(id): Path<i64>,
) -> Response {
    match load(&console, &viewer, id).await {
        Ok(job) => {
            let copy = pb::Job {
                id: 0,
                name: format!("{} (copy)", job.name),
                status: 0,
                next_fire_ms: 0,
                last_fire_ms: 0,
                ..job
            };
            editor(&console, &viewer, &copy, None, StatusCode::OK).await
        }
        Err(response) => response,
    }
}

pub async fn edit_form(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(id): Path<i64>,
    uri: Uri,
) -> Response {
    let query = Fields::from_query(uri.query());
    match load(&console, &viewer, id).await {
        Ok(job) => {
            let glue = glue_section(&console, &viewer, &job, query.int("version"), None).await;
            let mut response =
                editor_with(&console, &viewer, &job, None, StatusCode::OK, &glue, None).await;
            if !query.get("notice").is_empty() {
                response = inject_notice(response, query.get("notice")).await;
            }
            response
        }
        Err(response) => response,
    }
}

/// Puts a notice at the top of an already rendered page (after a redirect).
async fn inject_notice(response: Response, notice: &str) -> Response {
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, axum::body::Body::empty());
    };
    let text = String::from_utf8_lossy(&bytes).replacen(
        "</h1>",
        &format!("</h1>{}", html::notice("ok", notice)),
        1,
    );
    let mut response = Response::from_parts(parts, axum::body::Body::from(text));
    response.headers_mut().remove(header::CONTENT_LENGTH);
    response
}

async fn load(console: &Console, viewer: &Viewer, id: i64) -> Result<pb::Job, Response> {
    let answer = console
        .api()
        .get_job(request(&viewer.caller, pb::GetJobRequest { id }))
        .await;
    match answer {
        Ok(answer) => answer
            .into_inner()
            .job
            .ok_or_else(|| super::error_page(StatusCode::NOT_FOUND, "job not found")),
        Err(status) => Err(status_page(&status)),
    }
}

/// The job editor; on an existing job also the trigger form and the danger zone. A viewer who
/// may not change the job sees it read-only, without any control.
async fn editor(
    console: &Console,
    viewer: &Viewer,
    job: &pb::Job,
    error: Option<(Option<String>, String)>,
    code: StatusCode,
) -> Response {
    editor_with(console, viewer, job, error, code, "", None).await
}

/// The editor with extra sections below it (a script job's source and versions), and the
/// trigger form as posted when a trigger was refused.
async fn editor_with(
    console: &Console,
    viewer: &Viewer,
    job: &pb::Job,
    error: Option<(Option<String>, String)>,
    code: StatusCode,
    extra: &str,
    trigger: Option<&TriggerForm>,
) -> Response {
    let groups = readable_groups(console, viewer).await;
    let editable = if job.id == 0 {
        viewer.can_operate_any()
    } else {
        viewer.can_operate(job.group_id)
    };
    let (error_field, error_message) = match &error {
        Some((field, message)) => (field.clone(), message.clone()),
        None => (None, String::new()),
    };
    let err = |name: &str| -> Option<&str> {
        (error_field.as_deref() == Some(name)).then_some(error_message.as_str())
    };
    let mut body = String::new();
    let on_form = error_field.as_deref().is_some_and(|field| {
        FORM_FIELDS.contains(&field) && (field != "glue_source" || job.id == 0)
    });
    if error.is_some() && !on_form {
        body.push_str(&format!(
            "<div class=\"notice bad\" id=\"form-error\" role=\"alert\">{}</div>",
            esc(&error_message)
        ));
    }
    let action = if job.id == 0 {
        "/jobs/new".to_string()
    } else {
        format!("/jobs/{}", job.id)
    };
    let group_options: Vec<(String, String)> = groups
        .iter()
        .filter(|group| viewer.can_operate(group.id) || group.id == job.group_id)
        .map(|group| (group.id.to_string(), group_name(&groups, group.id)))
        .collect();
    if group_options.is_empty() {
        body.push_str(
            "<p class=\"empty\">No executor group yet: a job runs on a group's executors. \
             <a href=\"/groups/new\">Create a group</a> first.</p>",
        );
    }
    let opts = |values: &[&str]| -> Vec<(String, String)> {
        values
            .iter()
            .map(|value| (value.to_string(), value.to_string()))
            .collect()
    };
    let current = |value: Result<&str, prost::UnknownEnumValue>, prefix: &str| label(value, prefix);
    let schedule_type = current(
        pb::ScheduleType::try_from(job.schedule_type).map(|t| t.as_str_name()),
        "SCHEDULE_TYPE_",
    );
    let children: Vec<String> = job.child_job_ids.iter().map(|id| id.to_string()).collect();
    let glue = if job.id == 0 {
        html::select(
            "glue_type",
            &opts(GLUES),
            &current(
                pb::GlueType::try_from(job.glue_type).map(|t| t.as_str_name()),
                "GLUE_TYPE_",
            ),
        )
    } else {
        format!(
            "<input type=\"text\" id=\"glue_type\" value=\"{}\" disabled>",
            esc(&current(
                pb::GlueType::try_from(job.glue_type).map(|t| t.as_str_name()),
                "GLUE_TYPE_"
            ))
        )
    };
    let fields = [
        html::field(
            "Group",
            "group_id",
            &html::select("group_id", &group_options, &job.group_id.to_string()),
            err("group_id"),
            "",
        ),
        html::field(
            "Name",
            "name",
            &html::text_input("name", &job.name),
            err("name"),
            "",
        ),
        html::field(
            "Author",
            "author",
            &html::text_input("author", &job.author),
            err("author"),
            "",
        ),
        html::field(
            "Alarm e-mail",
            "alarm_email",
            &html::text_input("alarm_email", &job.alarm_email),
            err("alarm_email"),
            "comma-separated",
        ),
        html::field(
            "Schedule type",
            "schedule_type",
            &html::select("schedule_type", &opts(SCHEDULE_TYPES), &schedule_type),
            err("schedule_type"),
            "",
        ),
        html::field(
            "Schedule",
            "schedule_conf",
            &html::text_input("schedule_conf", &job.schedule_conf),
            err("schedule_conf"),
            "CRON: Quartz, with seconds (<code>0 */5 * * * ?</code>); FIX_RATE / FIX_DELAY: \
             seconds",
        ),
        html::field(
            "Time zone",
            "time_zone",
            &html::text_input("time_zone", &job.time_zone),
            err("time_zone"),
            "IANA name, e.g. Europe/Berlin; empty = the admin's zone",
        ),
        "<div class=\"preview\" id=\"preview\" aria-live=\"polite\"></div>".to_string(),
        html::field(
            "Handler",
            "handler",
            &html::text_input("handler", &job.handler),
            err("handler"),
            "",
        ),
        html::field(
            "Params",
            "params",
            &format!(
                "<textarea name=\"params\" id=\"params\" rows=\"3\">{}</textarea>",
                esc(&job.params)
            ),
            err("params"),
            "",
        ),
        html::field(
            "Route",
            "route_strategy",
            &html::select(
                "route_strategy",
                &opts(ROUTES),
                &current(
                    pb::RouteStrategy::try_from(job.route_strategy).map(|t| t.as_str_name()),
                    "ROUTE_STRATEGY_",
                ),
            ),
            err("route_strategy"),
            "",
        ),
        html::field(
            "Misfire",
            "misfire_strategy",
            &html::select(
                "misfire_strategy",
                &opts(MISFIRE),
                &current(
                    pb::MisfireStrategy::try_from(job.misfire_strategy).map(|t| t.as_str_name()),
                    "MISFIRE_STRATEGY_",
                ),
            ),
            err("misfire_strategy"),
            "",
        ),
        html::field(
            "Block",
            "block_strategy",
            &html::select(
                "block_strategy",
                &opts(BLOCKS),
                &current(
                    pb::BlockStrategy::try_from(job.block_strategy).map(|t| t.as_str_name()),
                    "BLOCK_STRATEGY_",
                ),
            ),
            err("block_strategy"),
            "",
        ),
        html::field(
            "Timeout",
            "timeout_ms",
            &html::text_input("timeout_ms", &form::timeout_text(job.timeout_ms)),
            err("timeout_ms"),
            "<code>30s</code>, <code>5m</code>, <code>1h</code> or plain seconds; 0 = none",
        ),
        html::field(
            "Retries",
            "fail_retry_count",
            &html::text_input("fail_retry_count", &job.fail_retry_count.to_string()),
            err("fail_retry_count"),
            "",
        ),
        html::field(
            "Child jobs",
            "child_job_ids",
            &html::text_input("child_job_ids", &children.join(",")),
            err("child_job_ids"),
            "job ids, comma-separated; started after a success",
        ),
        html::field("Glue type", "glue_type", &glue, err("glue_type"), ""),
    ]
    .concat();
    // A new script job needs its first source here; later versions are saved below the form.
    let fields = if job.id == 0 {
        let source = html::field(
            "Script source",
            "glue_source",
            &format!(
                "<textarea name=\"glue_source\" id=\"glue_source\" rows=\"4\" \
                 spellcheck=\"false\">{}</textarea>",
                esc(&job.glue_source)
            ),
            err("glue_source"),
            "script glue types only (SHELL, PYTHON, …); BEAN jobs run their handler",
        );
        format!("{fields}{source}")
    } else {
        fields
    };
    let fieldset = if editable {
        "<fieldset>"
    } else {
        "<fieldset disabled>"
    };
    let _ = write!(
        body,
        "<form method=\"post\" action=\"{action}\" class=\"card form\" id=\"job-form\">{}\
         {fieldset}<div class=\"fields\">{fields}</div></fieldset>{}</form>",
        html::csrf_field(viewer),
        if editable {
            "<button type=\"submit\" id=\"save-job\">Save</button>"
        } else {
            ""
        }
    );
    if job.id != 0 {
        body.push_str(&job_side(viewer, job, editable, trigger));
    }
    body.push_str(extra);
    let title = if job.id == 0 {
        "New job".to_string()
    } else {
        format!("Job {}: {}", job.id, job.name)
    };
    let mut response = html::page(Some(viewer), &title, Nav::Jobs, &body);
    *response.status_mut() = code;
    response
}

/// The trigger form as posted, with the refusal to show under its field.
struct TriggerForm {
    params: String,
    addresses: String,
    /// (`params` or `addresses`, message); any other refusal shows above the form.
    error: (Option<String>, String),
}

/// State, start/stop, trigger once, copy and delete of a saved job.
fn job_side(
    viewer: &Viewer,
    job: &pb::Job,
    editable: bool,
    trigger: Option<&TriggerForm>,
) -> String {
    let running = job.status == pb::JobStatus::Running as i32;
    let mut out = format!(
        "<section class=\"card\" id=\"job-state\"><h2>State</h2><p>{} next fire {} · last fire {} \
         · <a href=\"/runs?job={}\">runs</a></p>",
        html::badge(if running { "RUNNING" } else { "STOPPED" }),
        html::time(job.next_fire_ms),
        html::time(job.last_fire_ms),
        job.id
    );
    if !editable {
        out.push_str("</section>");
        return out;
    }
    let csrf = html::csrf_field(viewer);
    let (params, addresses) = match trigger {
        Some(posted) => (posted.params.as_str(), posted.addresses.as_str()),
        None => (job.params.as_str(), ""),
    };
    let error_on = |field: &str| {
        trigger
            .filter(|posted| posted.error.0.as_deref() == Some(field))
            .map(|posted| posted.error.1.as_str())
    };
    let form_error = match trigger {
        Some(TriggerForm {
            error: (None, message),
            ..
        }) => html::notice("bad", message),
        _ => String::new(),
    };
    let (action, text) = if running {
        ("stop", "Stop")
    } else {
        ("start", "Start")
    };
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/jobs/{id}/{action}\" class=\"inline\">{csrf}\
         <button id=\"{action}-job\">{text}</button></form> \
         <a class=\"button secondary\" href=\"/jobs/{id}/copy\" id=\"copy-job\">Copy</a> \
         <form method=\"post\" action=\"/jobs/{id}/delete\" class=\"inline\" \
         data-confirm=\"Delete job {id} and all its runs?\">{csrf}\
         <button class=\"danger\" id=\"delete-job\">Delete</button></form></section>\
         <section class=\"card\" id=\"trigger\"><h2>Trigger once</h2>{form_error}\
         <form method=\"post\" action=\"/jobs/{id}/trigger\" id=\"trigger-form\">{csrf}\
         <div class=\"field\"><label for=\"trigger_params\">Params</label>\
         <textarea name=\"params\" id=\"trigger_params\" rows=\"2\">{params}</textarea>\
         <div class=\"hint\">sent instead of the job's params</div>{params_error}</div>\
         <div class=\"field\"><label for=\"trigger_addresses\">Executor addresses</label>\
         <input type=\"text\" name=\"addresses\" id=\"trigger_addresses\" value=\"{addresses}\" \
         placeholder=\"optional: http://10.0.0.5:9999, …\">{addresses_error}</div>\
         <button id=\"trigger-job\">Trigger</button></form></section>",
        id = job.id,
        params = esc(params),
        addresses = esc(addresses),
        params_error = trigger_error_div("params", error_on("params")),
        addresses_error = trigger_error_div("addresses", error_on("addresses")),
    );
    out
}

/// The error line under a trigger field (hidden when there is none).
fn trigger_error_div(field: &str, message: Option<&str>) -> String {
    match message {
        Some(message) => format!(
            "<div class=\"error\" id=\"err-{field}\" role=\"alert\">{}</div>",
            esc(message)
        ),
        None => format!("<div class=\"error\" id=\"err-{field}\" hidden></div>"),
    }
}

/// Where a refused trigger's error belongs, in the user's words: an address the group does
/// not have (`PERMISSION_DENIED` naming the permission) or a malformed one goes under the
/// addresses, too-large params under the params; anything else above the form.
fn trigger_refusal(status: &tonic::Status) -> (Option<String>, String) {
    let message = status.message();
    let after_prefix = |text: &'static str| message.strip_prefix(text);
    if status.code() == tonic::Code::PermissionDenied
        && let Some((_, why)) = message.split_once(": ")
        && why.starts_with("address '")
    {
        // Drop the permission's internal name and the configuration key: say what is wrong.
        let why = why.split(" (admins may").next().unwrap_or(why);
        return (Some("addresses".to_string()), why.to_string());
    }
    if status.code() == tonic::Code::InvalidArgument {
        if let Some(rest) = after_prefix("addresses[")
            && let Some((_, why)) = rest.split_once("]: ")
        {
            return (Some("addresses".to_string()), why.to_string());
        }
        if let Some(why) = after_prefix("params: ") {
            return (Some("params".to_string()), why.to_string());
        }
    }
    (None, message.to_string())
}

/// A script job's source editor (`UpdateGlue`) and its saved versions (`ListGlueVersions`);
/// `version` > 0 loads that version's source into the editor (`GetGlueVersion`).
async fn glue_section(
    console: &Console,
    viewer: &Viewer,
    job: &pb::Job,
    version: i64,
    error: Option<(Option<String>, String)>,
) -> String {
    if job.glue_type == pb::GlueType::Bean as i32 || job.glue_type == 0 {
        return String::new();
    }
    let mut source = job.glue_source.clone();
    let mut remark = String::new();
    if version > 0 {
        let loaded = console
            .api()
            .get_glue_version(request(
                &viewer.caller,
                pb::GetGlueVersionRequest { id: version },
            ))
            .await;
        if let Some(loaded) = loaded.ok().and_then(|answer| answer.into_inner().version) {
            source = loaded.glue_source;
            remark = format!("back to version {version}");
        }
    }
    let versions = console
        .api()
        .list_glue_versions(request(
            &viewer.caller,
            pb::ListGlueVersionsRequest { job_id: job.id },
        ))
        .await
        .map(|answer| answer.into_inner().versions)
        .unwrap_or_default();
    let (error_field, message) = error.unwrap_or((None, String::new()));
    let err = |name: &str| (error_field.as_deref() == Some(name)).then_some(message.as_str());
    let editable = viewer.can_operate(job.group_id);
    let mut out = format!(
        "<section class=\"card\" id=\"glue\"><h2>Script source</h2>\
         <form method=\"post\" action=\"/jobs/{}/glue\" id=\"glue-form\">{}{}{}{}{}</fieldset>{}</form>",
        job.id,
        html::csrf_field(viewer),
        if editable {
            "<fieldset>"
        } else {
            "<fieldset disabled>"
        },
        html::field(
            "Source",
            "glue_source",
            &format!(
                "<textarea name=\"glue_source\" id=\"glue_source\" rows=\"12\" \
                 spellcheck=\"false\">{}</textarea>",
                esc(&source)
            ),
            err("glue_source"),
            "the next run uses the saved source",
        ),
        html::field(
            "What changed",
            "glue_remark",
            &html::text_input("glue_remark", &remark),
            err("glue_remark"),
            "",
        ),
        if error_field.is_none() && !message.is_empty() {
            html::notice("bad", &message)
        } else {
            String::new()
        },
        if editable {
            "<button id=\"save-glue\">Save source</button>"
        } else {
            ""
        },
    );
    if versions.is_empty() {
        out.push_str("<p class=\"empty\">No saved versions yet.</p>");
    } else {
        out.push_str(
            "<table id=\"glue-versions\"><tr><th>Version</th><th>Saved</th><th>Remark</th>\
             <th></th></tr>",
        );
        for saved in &versions {
            let _ = write!(
                out,
                "<tr><td>{id}</td><td>{}</td><td>{}</td>\
                 <td><a href=\"/jobs/{job}?version={id}#glue\">load</a></td></tr>",
                html::time(saved.created_ms),
                esc(&saved.glue_remark),
                id = saved.id,
                job = job.id,
            );
        }
        out.push_str("</table>");
    }
    out.push_str("</section>");
    out
}

pub async fn save_glue(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let answer = console
        .api()
        .update_glue(request(
            &posted.viewer.caller,
            pb::UpdateGlueRequest {
                job_id: id,
                glue_source: posted.fields.raw("glue_source").unwrap_or("").to_string(),
                glue_remark: posted.fields.get("glue_remark").to_string(),
            },
        ))
        .await;
    match answer {
        Ok(_) => see_other(&format!("/jobs/{id}"), "Source saved as a new version."),
        Err(status) => {
            let job = match load(&console, &posted.viewer, id).await {
                Ok(job) => job,
                Err(response) => return response,
            };
            let edited = pb::Job {
                glue_source: posted.fields.raw("glue_source").unwrap_or("").to_string(),
                ..job.clone()
            };
            let glue = glue_section(
                &console,
                &posted.viewer,
                &edited,
                0,
                Some(field_error(&status)),
            )
            .await;
            let code = super::http_status(status.code());
            editor_with(&console, &posted.viewer, &job, None, code, &glue, None).await
        }
    }
}

/// A job from the editor's fields over `base` (the stored job on edit, defaults on create),
/// and the first number field that does not parse (that field then keeps its `base` value).
fn job_from_fields(fields: &Fields, base: pb::Job) -> (pb::Job, Option<FieldRefusal>) {
    let enum_value = |name: &str, prefix: &str, parse: fn(&str) -> Option<i32>| -> i32 {
        parse(&format!("{prefix}{}", fields.get(name))).unwrap_or(0)
    };
    let mut refusal = None;
    let timeout_ms = read_number(
        fields,
        "timeout_ms",
        form::timeout_ms,
        base.timeout_ms,
        &mut refusal,
    );
    let fail_retry_count = read_number(
        fields,
        "fail_retry_count",
        form::count,
        base.fail_retry_count,
        &mut refusal,
    );
    let child_job_ids = read_number(
        fields,
        "child_job_ids",
        form::id_list,
        base.child_job_ids.clone(),
        &mut refusal,
    );
    let job = pb::Job {
        group_id: fields.int("group_id"),
        name: fields.get("name").to_string(),
        author: fields.get("author").to_string(),
        alarm_email: fields.get("alarm_email").to_string(),
        schedule_type: enum_value("schedule_type", "SCHEDULE_TYPE_", |name| {
            pb::ScheduleType::from_str_name(name).map(|value| value as i32)
        }),
        schedule_conf: fields.get("schedule_conf").to_string(),
        time_zone: fields.get("time_zone").to_string(),
        misfire_strategy: enum_value("misfire_strategy", "MISFIRE_STRATEGY_", |name| {
            pb::MisfireStrategy::from_str_name(name).map(|value| value as i32)
        }),
        route_strategy: enum_value("route_strategy", "ROUTE_STRATEGY_", |name| {
            pb::RouteStrategy::from_str_name(name).map(|value| value as i32)
        }),
        block_strategy: enum_value("block_strategy", "BLOCK_STRATEGY_", |name| {
            pb::BlockStrategy::from_str_name(name).map(|value| value as i32)
        }),
        handler: fields.get("handler").to_string(),
        params: fields.raw("params").unwrap_or("").to_string(),
        timeout_ms,
        fail_retry_count,
        child_job_ids,
        glue_source: match fields.raw("glue_source") {
            Some(source) => source.to_string(),
            None => base.glue_source.clone(),
        },
        glue_type: if fields.has("glue_type") {
            enum_value("glue_type", "GLUE_TYPE_", |name| {
                pb::GlueType::from_str_name(name).map(|value| value as i32)
            })
        } else {
            base.glue_type
        },
        ..base
    };
    (job, refusal)
}

/// Reads the number field `name` with `parse`; a refusal is kept (the first one wins) and the
/// field keeps `fallback`, so the form comes back with the error under it.
fn read_number<T>(
    fields: &Fields,
    name: &str,
    parse: fn(&str) -> Result<T, String>,
    fallback: T,
    refusal: &mut Option<FieldRefusal>,
) -> T {
    match parse(fields.get(name)) {
        Ok(value) => value,
        Err(message) => {
            refusal.get_or_insert((name.to_string(), message));
            fallback
        }
    }
}

/// The editor again with a form field the console refused before calling the API.
async fn refused_form(
    console: &Console,
    viewer: &Viewer,
    job: &pb::Job,
    (field, message): FieldRefusal,
) -> Response {
    let error = Some((Some(field), message));
    editor(console, viewer, job, error, StatusCode::BAD_REQUEST).await
}

pub async fn create(State(console): State<Shared>, posted: Posted) -> Response {
    let (job, refusal) = job_from_fields(&posted.fields, new_job(0));
    if let Some(refusal) = refusal {
        return refused_form(&console, &posted.viewer, &job, refusal).await;
    }
    let answer = console
        .api()
        .create_job(request(
            &posted.viewer.caller,
            pb::CreateJobRequest {
                job: Some(job.clone()),
            },
        ))
        .await;
    match answer {
        Ok(answer) => {
            let id = answer.into_inner().job.map_or(0, |job| job.id);
            see_other(
                &format!("/jobs/{id}"),
                "Job created (stopped): start it to schedule it.",
            )
        }
        Err(status) => {
            let code = super::http_status(status.code());
            editor(
                &console,
                &posted.viewer,
                &job,
                Some(field_error(&status)),
                code,
            )
            .await
        }
    }
}

pub async fn update(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let stored = match load(&console, &posted.viewer, id).await {
        Ok(job) => job,
        Err(response) => return response,
    };
    let (job, refusal) = job_from_fields(&posted.fields, stored);
    if let Some(refusal) = refusal {
        return refused_form(&console, &posted.viewer, &job, refusal).await;
    }
    let answer = console
        .api()
        .update_job(request(
            &posted.viewer.caller,
            pb::UpdateJobRequest {
                job: Some(job.clone()),
            },
        ))
        .await;
    match answer {
        Ok(_) => see_other(&format!("/jobs/{id}"), "Job saved."),
        Err(status) => {
            let code = super::http_status(status.code());
            editor(
                &console,
                &posted.viewer,
                &job,
                Some(field_error(&status)),
                code,
            )
            .await
        }
    }
}

pub async fn delete(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let answer = console
        .api()
        .delete_job(request(&posted.viewer.caller, pb::DeleteJobRequest { id }))
        .await;
    match answer {
        Ok(_) => see_other("/jobs", &format!("Job {id} deleted.")),
        Err(status) => status_page(&status),
    }
}

pub async fn start(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
    let answer = console
        .api()
        .start_job(request(&posted.viewer.caller, pb::StartJobRequest { id }))
        .await;
    match answer {
        Ok(_) => see_other(
            &format!("/jobs/{id}"),
            "Job started: it fires in 5 s at the earliest.",
        ),
        Err(status) => status_page(&status),
    }
}

pub async fn stop(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
    let answer = console
        .api()
        .stop_job(request(&posted.viewer.caller, pb::StopJobRequest { id }))
        .await;
    match answer {
        Ok(_) => see_other(&format!("/jobs/{id}"), "Job stopped."),
        Err(status) => status_page(&status),
    }
}

pub async fn trigger(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let params = posted.fields.raw("params").map(str::to_string);
    let addresses_text = posted.fields.get("addresses");
    let addresses: Vec<String> = addresses_text
        .split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|address| !address.is_empty())
        .map(str::to_string)
        .collect();
    let answer = console
        .api()
        .trigger_job(request(
            &posted.viewer.caller,
            pb::TriggerJobRequest {
                id,
                params: params.clone(),
                addresses,
            },
        ))
        .await;
    match answer {
        Ok(answer) => match answer.into_inner().log_ids.first() {
            Some(log_id) => see_other(&format!("/runs/{log_id}"), "Triggered."),
            None => see_other(&format!("/jobs/{id}"), "Triggered: no run was created."),
        },
        Err(status) => {
            let job = match load(&console, &posted.viewer, id).await {
                Ok(job) => job,
                Err(response) => return response,
            };
            let refused = TriggerForm {
                params: params.unwrap_or_default(),
                addresses: addresses_text.to_string(),
                error: trigger_refusal(&status),
            };
            let code = super::http_status(status.code());
            let viewer = &posted.viewer;
            let glue = glue_section(&console, viewer, &job, 0, None).await;
            editor_with(&console, viewer, &job, None, code, &glue, Some(&refused)).await
        }
    }
}

/// `GET /preview?schedule_type=&schedule_conf=&time_zone=`: the next fire times as JSON for
/// the editor's script (`{"times":[ms…]}` or `{"error":"…"}`), computed by PreviewSchedule.
pub async fn preview(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let query = Fields::from_query(uri.query());
    let schedule_type =
        pb::ScheduleType::from_str_name(&format!("SCHEDULE_TYPE_{}", query.get("schedule_type")))
            .map_or(0, |value| value as i32);
    let answer = console
        .api()
        .preview_schedule(request(
            &viewer.caller,
            pb::PreviewScheduleRequest {
                schedule_type,
                schedule_conf: query.get("schedule_conf").to_string(),
                time_zone: query.get("time_zone").to_string(),
                count: 5,
                from_ms: 0,
            },
        ))
        .await;
    let json = match answer {
        Ok(answer) => serde_json::json!({ "times": answer.into_inner().fire_times_ms }),
        Err(status) => {
            let (field, message) = field_error(&status);
            serde_json::json!({ "error": message, "field": field })
        }
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        json.to_string(),
    )
        .into_response()
}
