//! What the job forms post: create and update (the editor's fields read strictly), start,
//! stop, delete, trigger once, and a script job's new source version. A refusal comes back
//! as the form with the error under its field.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::super::csrf::{Fields, Posted};
use super::super::super::errors::api_message;
use super::super::super::form::{self, FieldRefusal};
use super::super::super::html::Markup;
use super::super::super::i18n::{Lang, api, t, tf};
use super::super::super::session::Viewer;
use super::super::super::shared::{Console, Shared, request};
use super::super::{Path, field_error, http_status, see_other, status_page};
use super::editor::{FormError, TriggerForm, editor, editor_with};
use super::glue::glue_section;
use super::{load, new_job};

pub async fn save_glue(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
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
        Ok(_) => see_other(
            &format!("/jobs/{id}"),
            t(posted.viewer.lang, "jobs.glue_saved"),
        ),
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
                Some(field_error(lang, &status)),
            )
            .await;
            let code = http_status(status.code());
            editor_with(
                &console,
                &posted.viewer,
                &job,
                None,
                code,
                glue,
                None,
                Markup::new(),
            )
            .await
        }
    }
}

/// A job from the editor's fields over `base` (the stored job on edit, defaults on create),
/// and the first number field that does not parse (that field then keeps its `base` value).
fn job_from_fields(lang: Lang, fields: &Fields, base: pb::Job) -> (pb::Job, Option<FieldRefusal>) {
    let enum_value = |name: &str, prefix: &str, parse: fn(&str) -> Option<i32>| -> i32 {
        parse(&format!("{prefix}{}", fields.get(name))).unwrap_or(0)
    };
    let mut refusal = None;
    let timeout_ms = read_number(
        lang,
        fields,
        "timeout_ms",
        form::timeout_ms,
        base.timeout_ms,
        &mut refusal,
    );
    let fail_retry_count = read_number(
        lang,
        fields,
        "fail_retry_count",
        form::count,
        base.fail_retry_count,
        &mut refusal,
    );
    let child_job_ids = read_number(
        lang,
        fields,
        "child_job_ids",
        form::id_list,
        base.child_job_ids.clone(),
        &mut refusal,
    );
    let jitter_max_ms = read_number(
        lang,
        fields,
        "jitter_max_ms",
        form::timeout_ms,
        base.jitter_max_ms,
        &mut refusal,
    );
    let catch_up_window_ms = read_number(
        lang,
        fields,
        "catch_up_window_ms",
        form::timeout_ms,
        base.catch_up_window_ms,
        &mut refusal,
    );
    let stored_backoff = base.retry_backoff.unwrap_or_default();
    let retry_backoff = pb::RetryBackoff {
        initial_delay_ms: read_number(
            lang,
            fields,
            "retry_delay",
            form::timeout_ms,
            stored_backoff.initial_delay_ms,
            &mut refusal,
        ),
        factor: read_number(
            lang,
            fields,
            "retry_factor",
            form::factor,
            stored_backoff.factor,
            &mut refusal,
        ),
        max_delay_ms: read_number(
            lang,
            fields,
            "retry_max_delay",
            form::timeout_ms,
            stored_backoff.max_delay_ms,
            &mut refusal,
        ),
    };
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
        // Script jobs have no handler field: keep what is stored.
        handler: if fields.has("handler") {
            fields.get("handler").to_string()
        } else {
            base.handler.clone()
        },
        alarm_on_every_failure: fields.get("alarm_on_every_failure") == "on",
        retry_backoff: Some(retry_backoff),
        params: fields.raw("params").unwrap_or("").to_string(),
        timeout_ms,
        jitter_max_ms,
        catch_up_window_ms,
        catch_up_mode: enum_value("catch_up_mode", "CATCH_UP_MODE_", |name| {
            pb::CatchUpMode::from_str_name(name).map(|value| value as i32)
        }),
        calendar: fields.get("calendar").to_string(),
        calendar_mode: enum_value("calendar_mode", "CALENDAR_MODE_", |name| {
            pb::CalendarMode::from_str_name(name).map(|value| value as i32)
        }),
        dst_gap_policy: enum_value("dst_gap_policy", "DST_GAP_POLICY_", |name| {
            pb::DstGapPolicy::from_str_name(name).map(|value| value as i32)
        }),
        dst_overlap_policy: enum_value("dst_overlap_policy", "DST_OVERLAP_POLICY_", |name| {
            pb::DstOverlapPolicy::from_str_name(name).map(|value| value as i32)
        }),
        overlap_policy: enum_value("overlap_policy", "OVERLAP_POLICY_", |name| {
            pb::OverlapPolicy::from_str_name(name).map(|value| value as i32)
        }),
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
    lang: Lang,
    fields: &Fields,
    name: &str,
    parse: fn(Lang, &str) -> Result<T, String>,
    fallback: T,
    refusal: &mut Option<FieldRefusal>,
) -> T {
    match parse(lang, fields.get(name)) {
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
    let lang = posted.viewer.lang;
    let (job, refusal) = job_from_fields(posted.viewer.lang, &posted.fields, new_job(0));
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
                t(posted.viewer.lang, "jobs.created"),
            )
        }
        Err(status) => {
            let code = http_status(status.code());
            editor(
                &console,
                &posted.viewer,
                &job,
                Some(field_error(lang, &status)),
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
    let lang = posted.viewer.lang;
    let stored = match load(&console, &posted.viewer, id).await {
        Ok(job) => job,
        Err(response) => return response,
    };
    let (job, refusal) = job_from_fields(posted.viewer.lang, &posted.fields, stored);
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
        Ok(_) => see_other(&format!("/jobs/{id}"), t(posted.viewer.lang, "jobs.saved")),
        Err(status) => {
            let code = http_status(status.code());
            editor(
                &console,
                &posted.viewer,
                &job,
                Some(field_error(lang, &status)),
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
    let lang = posted.viewer.lang;
    let answer = console
        .api()
        .delete_job(request(&posted.viewer.caller, pb::DeleteJobRequest { id }))
        .await;
    match answer {
        Ok(_) => see_other("/jobs", &tf(posted.viewer.lang, "jobs.deleted", &[&id])),
        Err(status) => status_page(lang, &status),
    }
}

/// Where an action returns: the list it was taken from (its filters and page, posted as
/// `back`), or the job's page (`id` 0: the list). Only a path of the jobs list is followed, never another site.
fn back_to(fields: &Fields, id: i64) -> String {
    let back = fields.get("back");
    let jobs_list = back == "/jobs"
        || (back.starts_with("/jobs?") && back.bytes().all(|byte| byte.is_ascii_graphic()));
    match (jobs_list, id) {
        (true, _) => back.to_string(),
        (false, 0) => "/jobs".to_string(),
        (false, id) => format!("/jobs/{id}"),
    }
}

pub async fn start(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
    let lang = posted.viewer.lang;
    let answer = console
        .api()
        .start_job(request(&posted.viewer.caller, pb::StartJobRequest { id }))
        .await;
    match answer {
        Ok(_) => see_other(
            &back_to(&posted.fields, id),
            &tf(posted.viewer.lang, "jobs.started", &[&id]),
        ),
        Err(status) => status_page(lang, &status),
    }
}

pub async fn stop(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
    let lang = posted.viewer.lang;
    let answer = console
        .api()
        .stop_job(request(&posted.viewer.caller, pb::StopJobRequest { id }))
        .await;
    match answer {
        Ok(_) => see_other(
            &back_to(&posted.fields, id),
            &tf(posted.viewer.lang, "jobs.stopped_notice", &[&id]),
        ),
        Err(status) => status_page(lang, &status),
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
            Some(log_id) => see_other(
                &format!("/runs/{log_id}"),
                t(posted.viewer.lang, "jobs.triggered"),
            ),
            None => see_other(
                &format!("/jobs/{id}"),
                t(posted.viewer.lang, "jobs.triggered_no_run"),
            ),
        },
        Err(status) => {
            let job = match load(&console, &posted.viewer, id).await {
                Ok(job) => job,
                Err(response) => return response,
            };
            let refused = TriggerForm {
                params: params.unwrap_or_default(),
                addresses: addresses_text.to_string(),
                error: trigger_refusal(posted.viewer.lang, &status),
            };
            let code = http_status(status.code());
            let viewer = &posted.viewer;
            let glue = glue_section(&console, viewer, &job, 0, None).await;
            editor_with(
                &console,
                viewer,
                &job,
                None,
                code,
                glue,
                Some(&refused),
                Markup::new(),
            )
            .await
        }
    }
}

/// Where a refused trigger's error belongs, in the user's words: an address the group does
/// not have (`PERMISSION_DENIED` naming the permission) or a malformed one goes under the
/// addresses, too-large params under the params; anything else above the form.
fn trigger_refusal(lang: Lang, status: &tonic::Status) -> FormError {
    let message = status.message();
    let after_prefix = |text: &'static str| message.strip_prefix(text);
    if status.code() == tonic::Code::PermissionDenied
        && let Some((_, why)) = message.split_once(": ")
        && why.starts_with("address '")
    {
        // Drop the permission's internal name and the configuration key: say what is wrong.
        let why = why.split(" (admins may").next().unwrap_or(why);
        return (Some("addresses".to_string()), api::say(lang, why));
    }
    if status.code() == tonic::Code::InvalidArgument {
        if let Some(rest) = after_prefix("addresses[")
            && let Some((_, why)) = rest.split_once("]: ")
        {
            return (Some("addresses".to_string()), api::say(lang, why));
        }
        if let Some(why) = after_prefix("params: ") {
            return (Some("params".to_string()), api::say(lang, why));
        }
    }
    (None, api_message(lang, message))
}

/// `POST /jobs/bulk`: start, stop or trigger once every ticked job (`ids`), each through the
/// API as if its own button were pressed; the list comes back with what happened to each.
pub async fn bulk(State(console): State<Shared>, posted: Posted) -> Response {
    let lang = posted.viewer.lang;
    let action = posted.fields.get("action");
    let mut done = Vec::new();
    let mut refused = Vec::new();
    let ids = posted.fields.all("ids");
    if ids.is_empty() {
        return see_other(&back_to(&posted.fields, 0), t(lang, "jobs.none_ticked"));
    }
    for text in ids {
        let Ok(id) = form::id_filter(lang, text) else {
            refused.push(tf(lang, "jobs.not_an_id", &[&text]));
            continue;
        };
        match bulk_one(&console, &posted.viewer, action, id).await {
            Ok(()) => done.push(id.to_string()),
            Err(why) => refused.push(tf(lang, "jobs.refused_one", &[&id, &why])),
        }
    }
    let (none, some) = match action {
        "start" => ("jobs.none_started", "jobs.bulk_started"),
        "stop" => ("jobs.none_stopped", "jobs.bulk_stopped"),
        _ => ("jobs.none_triggered", "jobs.bulk_triggered"),
    };
    let mut notice = if done.is_empty() {
        t(lang, none).to_string()
    } else {
        tf(lang, some, &[&done.join(", ")])
    };
    if !refused.is_empty() {
        notice.push_str(&tf(lang, "jobs.bulk_refused", &[&refused.join("; ")]));
    }
    see_other(&back_to(&posted.fields, 0), &notice)
}

async fn bulk_one(console: &Console, viewer: &Viewer, action: &str, id: i64) -> Result<(), String> {
    let api = console.api();
    let answer = match action {
        "start" => api
            .start_job(request(&viewer.caller, pb::StartJobRequest { id }))
            .await
            .map(drop),
        "stop" => api
            .stop_job(request(&viewer.caller, pb::StopJobRequest { id }))
            .await
            .map(drop),
        "trigger" => api
            .trigger_job(request(
                &viewer.caller,
                pb::TriggerJobRequest {
                    id,
                    params: None,
                    addresses: Vec::new(),
                },
            ))
            .await
            .map(drop),
        other => return Err(tf(viewer.lang, "jobs.bad_action", &[&other])),
    };
    answer.map_err(|status| api_message(viewer.lang, status.message()))
}
