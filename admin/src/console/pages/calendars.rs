//! Calendars: the list (every signed-in viewer) and the editor (admins): name, zone, one rule
//! per line, description; a calendar that jobs use cannot be deleted (the API names them).

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use tonic::Status;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::csrf::{Fields, Posted};
use super::super::frame::{self, Nav};
use super::super::html::{self, Markup, Tone, markup};
use super::super::i18n::{t, tf};
use super::super::session::Viewer;
use super::super::shared::{Shared, request};
use super::{Path, after_post, field_error, http_status, status_page};

pub async fn list(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let lang = viewer.lang;
    let query = Fields::from_query(uri.query());
    let calendars = match console
        .api()
        .list_calendars(request(&viewer.caller, pb::ListCalendarsRequest {}))
        .await
    {
        Ok(answer) => answer.into_inner().calendars,
        Err(status) => return status_page(lang, &status),
    };
    let mut body = html::notice(Tone::Ok, query.get("notice"));
    body.push(markup!(
        "<p class=\"muted\">{}</p>",
        t(lang, "calendars.intro")
    ));
    if viewer.is_admin() {
        body.push(markup!(
            "<p><a class=\"button\" href=\"/calendars/new\" id=\"new-calendar\">{}</a></p>",
            t(lang, "calendars.new")
        ));
    }
    if calendars.is_empty() {
        body.push(markup!(
            "<p class=\"empty\">{}</p>",
            t(lang, "calendars.none")
        ));
    }
    for calendar in &calendars {
        let zone = if calendar.time_zone.is_empty() {
            t(lang, "calendars.admin_zone").to_string()
        } else {
            calendar.time_zone.clone()
        };
        let edit = if viewer.is_admin() {
            markup!(
                " · <a href=\"/calendars/{}\">{}</a>",
                calendar.name,
                t(lang, "calendars.edit")
            )
        } else {
            Markup::new()
        };
        body.push(markup!(
            "<section class=\"card\" id=\"calendar-{}\"><h2>{} <span class=\"muted\">{}</span></h2>\
             <p>{}{}</p><pre>{}</pre></section>",
            calendar.name,
            calendar.name,
            zone,
            calendar.description,
            edit,
            calendar.rules.join("\n"),
        ));
    }
    frame::page(
        Some(&viewer),
        t(lang, "calendars.title"),
        Nav::Calendars,
        body,
    )
}

pub async fn new_form(viewer: Viewer) -> Response {
    editor(
        &viewer,
        &pb::Calendar::default(),
        true,
        None,
        StatusCode::OK,
    )
}

pub async fn edit_form(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(name): Path<String>,
) -> Response {
    let asked = pb::GetCalendarRequest { name };
    match console
        .api()
        .get_calendar(request(&viewer.caller, asked))
        .await
    {
        Ok(answer) => {
            let calendar = answer.into_inner().calendar.unwrap_or_default();
            editor(&viewer, &calendar, false, None, StatusCode::OK)
        }
        Err(status) => status_page(viewer.lang, &status),
    }
}

fn editor(
    viewer: &Viewer,
    calendar: &pb::Calendar,
    new: bool,
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
    let (action, name_input) = if new {
        (
            "/calendars/new".to_string(),
            html::text_input("name", &calendar.name),
        )
    } else {
        (
            format!("/calendars/{}", calendar.name),
            markup!(
                "<input type=\"text\" name=\"name\" id=\"name\" value=\"{}\" readonly>",
                calendar.name
            ),
        )
    };
    let fields = [
        html::field(
            t(lang, "calendars.name"),
            "name",
            name_input,
            err("name"),
            Markup::new(),
        ),
        html::field(
            t(lang, "calendars.time_zone"),
            "time_zone",
            html::text_input("time_zone", &calendar.time_zone),
            err("time_zone"),
            markup!("{}", t(lang, "calendars.time_zone_hint")),
        ),
        html::field(
            t(lang, "calendars.rules"),
            "rules",
            html::textarea("rules", 8, &calendar.rules.join("\n")),
            err("rules"),
            html::tm(lang, "calendars.rules_hint", &[]),
        ),
        html::field(
            t(lang, "calendars.description"),
            "description",
            html::text_input("description", &calendar.description),
            err("description"),
            Markup::new(),
        ),
    ]
    .into_iter()
    .collect::<Markup>();
    body.push(markup!(
        "<form method=\"post\" action=\"{}\" class=\"card form\" id=\"calendar-form\">{}\
         <div class=\"fields\">{}</div><button id=\"save-calendar\">{}</button></form>",
        action,
        frame::csrf_field(viewer),
        fields,
        t(lang, "calendars.save")
    ));
    if !new {
        body.push(markup!(
            "<form method=\"post\" action=\"/calendars/{}/delete\" class=\"inline\" \
             id=\"delete-calendar\" data-confirm=\"{}\">{}\
             <button class=\"small danger\">{}</button></form>",
            calendar.name,
            tf(lang, "calendars.delete_confirm", &[&calendar.name]),
            frame::csrf_field(viewer),
            t(lang, "calendars.delete")
        ));
    }
    let title = if new {
        t(lang, "calendars.new").to_string()
    } else {
        tf(lang, "calendars.calendar_title", &[&calendar.name])
    };
    let mut response = frame::page(Some(viewer), &title, Nav::Calendars, body);
    *response.status_mut() = code;
    response
}

fn calendar_from_fields(fields: &Fields, name: &str) -> pb::Calendar {
    pb::Calendar {
        name: name.to_string(),
        time_zone: fields.get("time_zone").to_string(),
        rules: fields
            .get("rules")
            .lines()
            .map(str::trim)
            .filter(|rule| !rule.is_empty())
            .map(str::to_string)
            .collect(),
        description: fields.get("description").to_string(),
        ..Default::default()
    }
}

pub async fn create(State(console): State<Shared>, posted: Posted) -> Response {
    let calendar = calendar_from_fields(&posted.fields, posted.fields.get("name"));
    let asked = pb::CreateCalendarRequest {
        calendar: Some(calendar.clone()),
    };
    let answer = console
        .api()
        .create_calendar(request(&posted.viewer.caller, asked))
        .await;
    let lang = posted.viewer.lang;
    after_post(
        answer,
        "/calendars",
        t(lang, "calendars.created"),
        |status| refused_form(&posted.viewer, &calendar, true, &status),
    )
}

pub async fn update(
    State(console): State<Shared>,
    Path(name): Path<String>,
    posted: Posted,
) -> Response {
    let calendar = calendar_from_fields(&posted.fields, &name);
    let asked = pb::UpdateCalendarRequest {
        calendar: Some(calendar.clone()),
    };
    let answer = console
        .api()
        .update_calendar(request(&posted.viewer.caller, asked))
        .await;
    let lang = posted.viewer.lang;
    after_post(answer, "/calendars", t(lang, "calendars.saved"), |status| {
        refused_form(&posted.viewer, &calendar, false, &status)
    })
}

/// The editor again, with the API's refusal under the field it names.
fn refused_form(viewer: &Viewer, calendar: &pb::Calendar, new: bool, status: &Status) -> Response {
    let error = Some(field_error(viewer.lang, status));
    editor(viewer, calendar, new, error, http_status(status.code()))
}

/// Deletes a calendar no job uses; otherwise the API's refusal (naming the jobs) is shown.
pub async fn delete(
    State(console): State<Shared>,
    Path(name): Path<String>,
    posted: Posted,
) -> Response {
    let asked = pb::DeleteCalendarRequest { name: name.clone() };
    let answer = console
        .api()
        .delete_calendar(request(&posted.viewer.caller, asked))
        .await;
    let lang = posted.viewer.lang;
    let notice = tf(lang, "calendars.deleted", &[&name]);
    after_post(answer, "/calendars", &notice, |status| {
        status_page(lang, &status)
    })
}
