//! The job editor: one form for create, edit and copy (read-only for a viewer), with the live
//! schedule preview; on a saved job also its state card (start/stop, copy, delete) and the
//! trigger-once form.

use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::super::csrf::Fields;
use super::super::super::form;
use super::super::super::frame::{self, Nav};
use super::super::super::html::tm;
use super::super::super::html::{self, Markup, Tone, markup};
use super::super::super::i18n::{Lang, t, tf};
use super::super::super::session::Viewer;
use super::super::super::shared::{Console, Shared, request};
use super::super::super::zone;
use super::super::{Path, field_error, group_name, readable_groups};
use super::glue::glue_section;
use super::{
    block_strategies, calendar_modes, catch_up_modes, dst_gap_policies, dst_overlap_policies,
    editable, glue_types, label, load, misfire_strategies, new_job, overlap_policies,
    route_strategies, schedule_types,
};

/// Fields the editor renders: an API error naming another one is shown above the form.
const FORM_FIELDS: &[&str] = &[
    "group_id",
    "name",
    "author",
    "alarm_email",
    "alarm_on_every_failure",
    "schedule_type",
    "schedule_conf",
    "time_zone",
    "handler",
    "params",
    "route_strategy",
    "misfire_strategy",
    "jitter_max_ms",
    "catch_up_window_ms",
    "catch_up_mode",
    "calendar",
    "calendar_mode",
    "dst_gap_policy",
    "dst_overlap_policy",
    "overlap_policy",
    "block_strategy",
    "timeout_ms",
    "fail_retry_count",
    "retry_delay",
    "retry_factor",
    "retry_max_delay",
    "child_job_ids",
    "glue_type",
    "glue_source",
];

/// A field the editor shows an error under, and the message; `None` field = above the form.
pub type FormError = (Option<String>, String);

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
                name: tf(viewer.lang, "jobs.copy_name", &[&job.name]),
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
            let notice = html::notice(Tone::Ok, query.get("notice"));
            editor_with(
                &console,
                &viewer,
                &job,
                None,
                StatusCode::OK,
                glue,
                None,
                notice,
            )
            .await
        }
        Err(response) => response,
    }
}

/// The job editor; on an existing job also the trigger form and the danger zone. A viewer who
/// may not change the job sees it read-only, without any control.
pub async fn editor(
    console: &Console,
    viewer: &Viewer,
    job: &pb::Job,
    error: Option<FormError>,
    code: StatusCode,
) -> Response {
    editor_with(
        console,
        viewer,
        job,
        error,
        code,
        Markup::new(),
        None,
        Markup::new(),
    )
    .await
}

/// The editor with extra sections below it (a script job's source and versions), the trigger
/// form as posted when a trigger was refused, and a notice above it all.
#[allow(clippy::too_many_arguments)]
pub async fn editor_with(
    console: &Console,
    viewer: &Viewer,
    job: &pb::Job,
    error: Option<FormError>,
    code: StatusCode,
    extra: Markup,
    trigger: Option<&TriggerForm>,
    notice: Markup,
) -> Response {
    let lang = viewer.lang;
    let groups = readable_groups(console, viewer).await;
    let editable = editable(viewer, job);
    let (error_field, error_message) = error.clone().unwrap_or((None, String::new()));
    let mut body = notice;
    let on_form = error_field.as_deref().is_some_and(|field| {
        FORM_FIELDS.contains(&field) && (field != "glue_source" || job.id == 0)
    });
    if error.is_some() && !on_form {
        body.push(markup!(
            "<div class=\"notice bad\" id=\"form-error\" role=\"alert\">{}</div>",
            error_message
        ));
    }
    let group_options: Vec<html::Choice> = groups
        .iter()
        .filter(|group| viewer.can_operate(group.id) || group.id == job.group_id)
        .map(|group| (group.id.to_string(), group_name(lang, &groups, group.id)))
        .collect();
    if !editable {
        body.push(markup!(
            "<p class=\"notice\" id=\"read-only\">{}</p>",
            t(lang, "editor.read_only")
        ));
    } else if group_options.is_empty() {
        body.push(markup!(
            "<p class=\"empty\">{}</p>",
            tm(lang, "editor.no_group", &[])
        ));
    }
    let fields = job_fields(
        lang,
        job,
        &group_options,
        error_field.as_deref(),
        &error_message,
    );
    let action = if job.id == 0 {
        "/jobs/new".to_string()
    } else {
        format!("/jobs/{}", job.id)
    };
    body.push(markup!(
        "<form method=\"post\" action=\"{}\" class=\"card form\" id=\"job-form\">{}\
         {}<div class=\"fields\">{}</div></fieldset>{}</form>",
        action,
        frame::csrf_field(viewer),
        if editable {
            Markup::literal("<fieldset>")
        } else {
            Markup::literal("<fieldset disabled>")
        },
        fields,
        if editable {
            markup!(
                "<button type=\"submit\" id=\"save-job\">{}</button>",
                t(lang, "editor.save")
            )
        } else {
            Markup::new()
        }
    ));
    if job.id != 0 {
        let shown_zone = zone::of_job(&job.time_zone, console.ctx.config.default_time_zone());
        body.push(job_side(viewer, job, editable, trigger, shown_zone));
        body.push(super::backfill::section(console, viewer, job, editable).await);
    }
    body.push(extra);
    let title = if job.id == 0 {
        t(lang, "editor.new_title").to_string()
    } else {
        tf(lang, "editor.title", &[&job.id, &job.name])
    };
    let mut response = frame::page(Some(viewer), &title, Nav::Jobs, body);
    *response.status_mut() = code;
    response
}

/// The name of a job's enum value without its prefix (`ROUTE_STRATEGY_FIRST` → `FIRST`).
fn current(value: Result<&'static str, prost::UnknownEnumValue>, prefix: &str) -> String {
    label(value, prefix)
}

/// The editor's fields, each with the error that names it.
fn job_fields(
    lang: Lang,
    job: &pb::Job,
    group_options: &[html::Choice],
    error_field: Option<&str>,
    error_message: &str,
) -> Markup {
    let err = |name: &str| (error_field == Some(name)).then_some(error_message);
    let schedule_type = current(
        pb::ScheduleType::try_from(job.schedule_type).map(|t| t.as_str_name()),
        "SCHEDULE_TYPE_",
    );
    let glue_type = current(
        pb::GlueType::try_from(job.glue_type).map(|t| t.as_str_name()),
        "GLUE_TYPE_",
    );
    let script = job.glue_type != pb::GlueType::Bean as i32 && job.glue_type != 0;
    let children: Vec<String> = job.child_job_ids.iter().map(|id| id.to_string()).collect();
    let glue = if job.id == 0 {
        html::select("glue_type", &glue_types(), &glue_type)
    } else {
        markup!(
            "<input type=\"text\" id=\"glue_type\" value=\"{}\" disabled>",
            glue_type
        )
    };
    let backoff = job.retry_backoff.unwrap_or_default();
    let mut fields = vec![
        html::field(
            t(lang, "editor.group"),
            "group_id",
            html::select("group_id", group_options, &job.group_id.to_string()),
            err("group_id"),
            Markup::new(),
        ),
        html::field(
            t(lang, "editor.name"),
            "name",
            html::text_input("name", &job.name),
            err("name"),
            Markup::new(),
        ),
        html::field(
            t(lang, "editor.author"),
            "author",
            html::text_input("author", &job.author),
            err("author"),
            Markup::new(),
        ),
        html::field(
            t(lang, "editor.alarm_email"),
            "alarm_email",
            html::text_input("alarm_email", &job.alarm_email),
            err("alarm_email"),
            tm(lang, "editor.alarm_email_hint", &[]),
        ),
        html::field(
            t(lang, "editor.alarm_on"),
            "alarm_on_every_failure",
            checkbox(
                "alarm_on_every_failure",
                job.alarm_on_every_failure,
                t(lang, "editor.alarm_every"),
            ),
            err("alarm_on_every_failure"),
            Markup::new(),
        ),
        html::field(
            t(lang, "editor.schedule_type"),
            "schedule_type",
            html::select("schedule_type", &schedule_types(), &schedule_type),
            err("schedule_type"),
            Markup::new(),
        ),
        html::field(
            t(lang, "editor.schedule"),
            "schedule_conf",
            html::text_input("schedule_conf", &job.schedule_conf),
            err("schedule_conf"),
            tm(lang, "editor.schedule_hint", &[]),
        ),
        html::field(
            t(lang, "editor.time_zone"),
            "time_zone",
            html::text_input("time_zone", &job.time_zone),
            err("time_zone"),
            tm(lang, "editor.time_zone_hint", &[]),
        ),
        Markup::literal("<div class=\"preview\" id=\"preview\" aria-live=\"polite\"></div>"),
    ];
    // A script job runs its source, not a handler: the field only shows for BEAN jobs (on a
    // new job the script hides it while a script type is picked).
    if !script {
        fields.push(html::field(
            t(lang, "editor.handler"),
            "handler",
            html::text_input("handler", &job.handler),
            err("handler"),
            tm(lang, "editor.handler_hint", &[]),
        ));
    }
    fields.extend([
        html::field(
            t(lang, "editor.params"),
            "params",
            html::textarea("params", 3, &job.params),
            err("params"),
            Markup::new(),
        ),
        html::field(
            t(lang, "editor.route"),
            "route_strategy",
            html::select(
                "route_strategy",
                &route_strategies(),
                &current(
                    pb::RouteStrategy::try_from(job.route_strategy).map(|t| t.as_str_name()),
                    "ROUTE_STRATEGY_",
                ),
            ),
            err("route_strategy"),
            Markup::new(),
        ),
        html::field(
            t(lang, "editor.misfire"),
            "misfire_strategy",
            html::select(
                "misfire_strategy",
                &misfire_strategies(),
                &current(
                    pb::MisfireStrategy::try_from(job.misfire_strategy).map(|t| t.as_str_name()),
                    "MISFIRE_STRATEGY_",
                ),
            ),
            err("misfire_strategy"),
            Markup::new(),
        ),
        html::field(
            t(lang, "editor.jitter"),
            "jitter_max_ms",
            html::text_input("jitter_max_ms", &form::timeout_text(job.jitter_max_ms)),
            err("jitter_max_ms"),
            tm(lang, "editor.jitter_hint", &[]),
        ),
        html::field(
            t(lang, "editor.catch_up"),
            "catch_up_window_ms",
            html::text_input(
                "catch_up_window_ms",
                &form::timeout_text(job.catch_up_window_ms),
            ),
            err("catch_up_window_ms"),
            tm(lang, "editor.catch_up_hint", &[]),
        ),
        html::field(
            t(lang, "editor.catch_up_mode"),
            "catch_up_mode",
            html::select(
                "catch_up_mode",
                &catch_up_modes(),
                &current(
                    pb::CatchUpMode::try_from(job.catch_up_mode).map(|t| t.as_str_name()),
                    "CATCH_UP_MODE_",
                ),
            ),
            err("catch_up_mode"),
            tm(lang, "editor.catch_up_mode_hint", &[]),
        ),
        html::field(
            t(lang, "editor.calendar"),
            "calendar",
            html::text_input("calendar", &job.calendar),
            err("calendar"),
            tm(lang, "editor.calendar_hint", &[]),
        ),
        html::field(
            t(lang, "editor.calendar_mode"),
            "calendar_mode",
            html::select(
                "calendar_mode",
                &calendar_modes(),
                &current(
                    pb::CalendarMode::try_from(job.calendar_mode).map(|t| t.as_str_name()),
                    "CALENDAR_MODE_",
                ),
            ),
            err("calendar_mode"),
            tm(lang, "editor.calendar_mode_hint", &[]),
        ),
        html::field(
            t(lang, "editor.dst_gap"),
            "dst_gap_policy",
            html::select(
                "dst_gap_policy",
                &dst_gap_policies(),
                &current(
                    pb::DstGapPolicy::try_from(job.dst_gap_policy).map(|t| t.as_str_name()),
                    "DST_GAP_POLICY_",
                ),
            ),
            err("dst_gap_policy"),
            tm(lang, "editor.dst_gap_hint", &[]),
        ),
        html::field(
            t(lang, "editor.dst_overlap"),
            "dst_overlap_policy",
            html::select(
                "dst_overlap_policy",
                &dst_overlap_policies(),
                &current(
                    pb::DstOverlapPolicy::try_from(job.dst_overlap_policy).map(|t| t.as_str_name()),
                    "DST_OVERLAP_POLICY_",
                ),
            ),
            err("dst_overlap_policy"),
            tm(lang, "editor.dst_overlap_hint", &[]),
        ),
        html::field(
            t(lang, "editor.overlap"),
            "overlap_policy",
            html::select(
                "overlap_policy",
                &overlap_policies(),
                &current(
                    pb::OverlapPolicy::try_from(job.overlap_policy).map(|t| t.as_str_name()),
                    "OVERLAP_POLICY_",
                ),
            ),
            err("overlap_policy"),
            tm(lang, "editor.overlap_hint", &[]),
        ),
        html::field(
            t(lang, "editor.block"),
            "block_strategy",
            html::select(
                "block_strategy",
                &block_strategies(),
                &current(
                    pb::BlockStrategy::try_from(job.block_strategy).map(|t| t.as_str_name()),
                    "BLOCK_STRATEGY_",
                ),
            ),
            err("block_strategy"),
            Markup::new(),
        ),
        html::field(
            t(lang, "editor.timeout"),
            "timeout_ms",
            html::text_input("timeout_ms", &form::timeout_text(job.timeout_ms)),
            err("timeout_ms"),
            tm(lang, "editor.timeout_hint", &[]),
        ),
        html::field(
            t(lang, "editor.retries"),
            "fail_retry_count",
            html::text_input("fail_retry_count", &job.fail_retry_count.to_string()),
            err("fail_retry_count"),
            Markup::new(),
        ),
        html::field(
            t(lang, "editor.retry_delay"),
            "retry_delay",
            html::text_input("retry_delay", &form::timeout_text(backoff.initial_delay_ms)),
            err("retry_delay"),
            tm(lang, "editor.retry_delay_hint", &[]),
        ),
        html::field(
            t(lang, "editor.factor"),
            "retry_factor",
            html::text_input("retry_factor", &form::factor_text(backoff.factor)),
            err("retry_factor"),
            tm(lang, "editor.factor_hint", &[]),
        ),
        html::field(
            t(lang, "editor.max_delay"),
            "retry_max_delay",
            html::text_input("retry_max_delay", &form::timeout_text(backoff.max_delay_ms)),
            err("retry_max_delay"),
            tm(lang, "editor.max_delay_hint", &[]),
        ),
        html::field(
            t(lang, "editor.children"),
            "child_job_ids",
            html::text_input("child_job_ids", &children.join(",")),
            err("child_job_ids"),
            tm(lang, "editor.children_hint", &[]),
        ),
        html::field(
            t(lang, "editor.glue_type"),
            "glue_type",
            glue,
            err("glue_type"),
            Markup::new(),
        ),
    ]);
    // A new script job needs its first source here; later versions are saved below the form.
    if job.id == 0 {
        fields.push(html::field(
            t(lang, "editor.script_source"),
            "glue_source",
            // Highlighted for the glue type chosen in this form (editor.js reads it).
            html::code_textarea("glue_source", 6, &job.glue_source, ""),
            err("glue_source"),
            tm(lang, "editor.script_source_hint", &[]),
        ));
    }
    fields.into_iter().collect()
}

/// A checkbox with its own label text (the field's label names the setting).
fn checkbox(name: &str, checked: bool, text: &str) -> Markup {
    markup!(
        "<span class=\"check\"><input type=\"checkbox\" name=\"{}\" id=\"{}\" value=\"on\"{}> {}</span>",
        name,
        name,
        if checked {
            Markup::literal(" checked")
        } else {
            Markup::new()
        },
        text
    )
}

/// The trigger form as posted, with the refusal to show under its field.
pub struct TriggerForm {
    pub params: String,
    pub addresses: String,
    /// (`params` or `addresses`, message); any other refusal shows above the form.
    pub error: FormError,
}

/// State, start/stop, trigger once, copy and delete of a saved job.
fn job_side(
    viewer: &Viewer,
    job: &pb::Job,
    editable: bool,
    trigger: Option<&TriggerForm>,
    shown_zone: chrono_tz::Tz,
) -> Markup {
    let lang = viewer.lang;
    let running = job.status == pb::JobStatus::Running as i32;
    // A live region: the script refreshes the state (next and last fire) in place.
    let mut out = markup!(
        "<section class=\"card\" id=\"job-state\" data-live><h2>{}</h2><p>{}</p>",
        t(lang, "editor.state"),
        tm(
            lang,
            "editor.state_line",
            &[
                &html::badge(if running { "RUNNING" } else { "STOPPED" }),
                &zone::job_time(job.next_fire_ms, shown_zone.name()),
                &zone::job_time(job.last_fire_ms, shown_zone.name()),
                &job.id,
            ],
        )
    );
    if !editable {
        out.push(Markup::literal("</section>"));
        return out;
    }
    let csrf = frame::csrf_field(viewer);
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
        }) => html::notice(Tone::Bad, message),
        _ => Markup::new(),
    };
    let (action, text, confirm) = if running {
        ("stop", "jobs.stop", "jobs.stop_confirm")
    } else {
        ("start", "jobs.start", "jobs.start_confirm")
    };
    let text = t(lang, text);
    out.push(markup!(
        "<form method=\"post\" action=\"/jobs/{}/{}\" class=\"inline\" \
         data-confirm=\"{}\">{}\
         <button id=\"{}-job\">{}</button></form> \
         <a class=\"button secondary\" href=\"/jobs/{}/copy\" id=\"copy-job\">{}</a> \
         <form method=\"post\" action=\"/jobs/{}/delete\" class=\"inline\" \
         data-confirm=\"{}\">{}\
         <button class=\"danger\" id=\"delete-job\">{}</button></form></section>",
        job.id,
        action,
        tf(lang, confirm, &[&job.id, &job.name]),
        csrf,
        action,
        text,
        job.id,
        t(lang, "editor.copy"),
        job.id,
        tf(lang, "editor.delete_confirm", &[&job.id]),
        csrf,
        t(lang, "editor.delete"),
    ));
    out.push(markup!(
        "<section class=\"card\" id=\"trigger\"><h2>{}</h2>{}\
         <form method=\"post\" action=\"/jobs/{}/trigger\" id=\"trigger-form\">{}\
         <div class=\"field\"><label for=\"trigger_params\">{}</label>\
         <textarea name=\"params\" id=\"trigger_params\" rows=\"2\">{}</textarea>\
         <div class=\"hint\">{}</div>{}</div>\
         <div class=\"field\"><label for=\"trigger_addresses\">{}</label>\
         <input type=\"text\" name=\"addresses\" id=\"trigger_addresses\" value=\"{}\" \
         placeholder=\"{}\">\
         <div class=\"hint\">{}</div>{}</div>\
         <button id=\"trigger-job\">{}</button></form></section>",
        t(lang, "jobs.trigger_once"),
        form_error,
        job.id,
        csrf,
        t(lang, "editor.params"),
        params,
        t(lang, "editor.trigger_params_hint"),
        trigger_error_div("params", error_on("params")),
        t(lang, "editor.addresses"),
        addresses,
        t(lang, "editor.addresses_placeholder"),
        t(lang, "editor.addresses_hint"),
        trigger_error_div("addresses", error_on("addresses")),
        t(lang, "editor.trigger"),
    ));
    out
}

/// The error line under a trigger field (hidden when there is none).
fn trigger_error_div(field: &str, message: Option<&str>) -> Markup {
    match message {
        Some(message) => markup!(
            "<div class=\"error\" id=\"err-{}\" role=\"alert\">{}</div>",
            field,
            message
        ),
        None => markup!("<div class=\"error\" id=\"err-{}\" hidden></div>", field),
    }
}

/// What the job's overlap policy does to those fires, under the preview ("" for ALLOW_ALL).
fn overlap_note(lang: Lang, policy: &str) -> String {
    let key = match policy {
        "SKIP" => "editor.overlap_note_skip",
        "BUFFER_ONE" => "editor.overlap_note_buffer_one",
        "BUFFER_ALL" => "editor.overlap_note_buffer_all",
        "CANCEL_OTHER" => "editor.overlap_note_cancel_other",
        _ => return String::new(),
    };
    t(lang, key).to_string()
}

/// `GET /preview?schedule_type=&schedule_conf=&time_zone=&jitter=&job_id=&calendar=&calendar_mode=&dst_gap=&dst_overlap=&overlap=`:
/// the next fire times as JSON for the editor's script (`{"times":[ms…],"sent":[ms…],
/// "skipped":[reason…],"overlap":"…"}`, `sent` with the job's jitter, `skipped` with its
/// calendar, `overlap` what its overlap policy does to a fire due while an earlier run goes; or
/// `{"error":"…"}`), computed by PreviewSchedule with the job's DST policy.
pub async fn preview(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let lang = viewer.lang;
    let query = Fields::from_query(uri.query());
    let schedule_type =
        pb::ScheduleType::from_str_name(&format!("SCHEDULE_TYPE_{}", query.get("schedule_type")))
            .map_or(0, |value| value as i32);
    // The zone the schedule runs in, for "job's zone" (the preview names it).
    let job_zone = crate::model::parse_time_zone(query.get("time_zone"))
        .unwrap_or_else(|_| console.ctx.config.default_time_zone());
    let jitter_max_ms = match form::timeout_ms(viewer.lang, query.get("jitter")) {
        Ok(ms) => ms,
        Err(message) => {
            let json = serde_json::json!({ "error": message, "field": "jitter_max_ms" });
            return (
                [(header::CONTENT_TYPE, "application/json")],
                json.to_string(),
            )
                .into_response();
        }
    };
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
                jitter_max_ms,
                job_id: query.int("job_id"),
                calendar: query.get("calendar").to_string(),
                calendar_mode: crate::api::calendar_convert::calendar_mode_from_name(
                    query.get("calendar_mode"),
                ),
                dst_gap_policy: pb::DstGapPolicy::from_str_name(&format!(
                    "DST_GAP_POLICY_{}",
                    query.get("dst_gap")
                ))
                .map_or(0, |value| value as i32),
                dst_overlap_policy: pb::DstOverlapPolicy::from_str_name(&format!(
                    "DST_OVERLAP_POLICY_{}",
                    query.get("dst_overlap")
                ))
                .map_or(0, |value| value as i32),
                workflow_id: 0,
            },
        ))
        .await;
    let json = match answer {
        Ok(answer) => {
            let answer = answer.into_inner();
            serde_json::json!({
                "times": answer.fire_times_ms,
                "sent": answer.dispatch_times_ms,
                "skipped": answer.skip_reasons,
                "zone": job_zone.name(),
                "overlap": overlap_note(viewer.lang, query.get("overlap")),
            })
        }
        Err(status) => {
            let (field, message) = field_error(lang, &status);
            serde_json::json!({ "error": message, "field": field })
        }
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        json.to_string(),
    )
        .into_response()
}
