//! Executors and groups: each group with its online executors (heartbeat age, handlers,
//! running runs), and the group editor (admins), manual address lists included.

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use tonic::Status;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::csrf::{Fields, Posted};
use super::super::frame::{self, Nav};
use super::super::html::tm;
use super::super::html::{self, Markup, Tone, markup};
use super::super::i18n::{t, tf};
use super::super::session::Viewer;
use super::super::shared::{Console, Shared, request};
use super::{Path, after_post, field_error, http_status, readable_groups, status_page};

pub async fn list(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let lang = viewer.lang;
    let query = Fields::from_query(uri.query());
    let groups = readable_groups(&console, &viewer).await;
    let executors = match console
        .api()
        .list_executors(request(&viewer.caller, pb::ListExecutorsRequest::default()))
        .await
    {
        Ok(answer) => answer.into_inner().executors,
        Err(status) => return status_page(lang, &status),
    };
    let now = console.ctx.clock.now_ms();
    let mut body = html::notice(Tone::Ok, query.get("notice"));
    if viewer.is_admin() {
        body.push(markup!(
            "<p><a class=\"button\" href=\"/groups/new\" id=\"new-group\">{}</a></p>",
            t(lang, "groups.new")
        ));
    }
    if groups.is_empty() {
        body.push(markup!(
            "<p class=\"empty\">{}</p>",
            tm(
                lang,
                "groups.none",
                &[&Markup::literal("<code>app_name</code>")]
            )
        ));
    }
    for group in &groups {
        let address_type = pb::AddressType::try_from(group.address_type)
            .map(|kind| html::enum_label(kind.as_str_name(), "ADDRESS_TYPE_"))
            .unwrap_or_default();
        body.push(markup!(
            "<section class=\"card\" id=\"group-{}\"><h2>{} <span class=\"muted\">{}</span></h2>\
             <p>{}{}{}</p>",
            group.id,
            group.title,
            group.app_name,
            tf(lang, "groups.addresses_kind", &[&address_type]),
            if group.addresses.is_empty() {
                Markup::new()
            } else {
                markup!(": <code>{}</code>", group.addresses.join(", "))
            },
            if viewer.is_admin() {
                markup!(
                    " · <a href=\"/groups/{}\">{}</a>",
                    group.id,
                    t(lang, "groups.edit")
                )
            } else {
                Markup::new()
            },
        ));
        let online: Vec<&pb::Executor> = executors
            .iter()
            .filter(|executor| executor.app_name == group.app_name)
            .collect();
        if online.is_empty() {
            body.push(markup!(
                "<p class=\"empty\">{}</p>",
                t(lang, "groups.no_executor")
            ));
        } else {
            body.push(markup!(
                "<div class=\"scroll\"><table class=\"executors\"><tr><th scope=\"col\">{}</th>\
                 <th scope=\"col\">{}</th><th scope=\"col\">{}</th>\
                 <th scope=\"col\">{}</th><th scope=\"col\">{}</th></tr>",
                t(lang, "groups.col_address"),
                t(lang, "groups.col_heartbeat"),
                t(lang, "groups.col_running"),
                t(lang, "groups.col_handlers"),
                t(lang, "groups.col_admin")
            ));
            for executor in online {
                body.push(markup!(
                    "<tr><td>{}</td><td title=\"{}\">{}</td><td>{}</td><td>{}</td>\
                     <td translate=\"no\">{}</td></tr>",
                    executor.address,
                    html::utc_text(executor.last_heartbeat_ms),
                    tf(
                        lang,
                        "groups.ago",
                        &[&html::duration(lang, now - executor.last_heartbeat_ms)]
                    ),
                    executor.running_log_ids.len(),
                    executor.handlers.join(", "),
                    executor.admin_node,
                ));
            }
            body.push(Markup::literal("</table></div>"));
        }
        body.push(Markup::literal("</section>"));
    }
    frame::page(Some(&viewer), t(lang, "groups.title"), Nav::Executors, body)
}

pub async fn new_form(State(console): State<Shared>, viewer: Viewer) -> Response {
    let group = pb::Group {
        address_type: pb::AddressType::Auto as i32,
        ..Default::default()
    };
    editor(&console, &viewer, &group, None, StatusCode::OK)
}

pub async fn edit_form(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(id): Path<i64>,
) -> Response {
    let lang = viewer.lang;
    match console
        .api()
        .get_group(request(&viewer.caller, pb::GetGroupRequest { id }))
        .await
    {
        Ok(answer) => {
            let group = answer.into_inner().group.unwrap_or_default();
            editor(&console, &viewer, &group, None, StatusCode::OK)
        }
        Err(status) => status_page(lang, &status),
    }
}

fn editor(
    _console: &Console,
    viewer: &Viewer,
    group: &pb::Group,
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
    let kind = pb::AddressType::try_from(group.address_type)
        .map(|kind| html::enum_label(kind.as_str_name(), "ADDRESS_TYPE_"))
        .unwrap_or_default();
    let kinds: Vec<html::Choice> = html::enum_choices(
        "ADDRESS_TYPE_",
        |value| {
            pb::AddressType::try_from(value)
                .ok()
                .map(|kind| kind.as_str_name())
        },
        &[],
    )
    .into_iter()
    .map(|(value, label)| {
        let meaning = if value == "MANUAL" {
            t(lang, "groups.manual_meaning")
        } else {
            t(lang, "groups.auto_meaning")
        };
        (value, format!("{label}: {meaning}"))
    })
    .collect();
    let action = if group.id == 0 {
        "/groups/new".to_string()
    } else {
        format!("/groups/{}", group.id)
    };
    let app_input = if group.id == 0 {
        html::text_input("app_name", &group.app_name)
    } else {
        markup!(
            "<input type=\"text\" name=\"app_name\" id=\"app_name\" value=\"{}\" readonly>",
            group.app_name
        )
    };
    let fields = [
        html::field(
            t(lang, "groups.app_name"),
            "app_name",
            app_input,
            err("app_name"),
            markup!("{}", t(lang, "groups.app_name_hint")),
        ),
        html::field(
            t(lang, "groups.field_title"),
            "title",
            html::text_input("title", &group.title),
            err("title"),
            Markup::new(),
        ),
        html::field(
            t(lang, "groups.addresses"),
            "address_type",
            html::select("address_type", &kinds, &kind),
            err("address_type"),
            Markup::new(),
        ),
        html::field(
            t(lang, "groups.manual_addresses"),
            "addresses",
            html::textarea("addresses", 3, &group.addresses.join("\n")),
            err("addresses"),
            markup!("{}", t(lang, "groups.manual_hint")),
        ),
        html::field(
            t(lang, "groups.access_token"),
            "access_token",
            markup!(
                "<input type=\"password\" name=\"access_token\" id=\"access_token\" value=\"{}\" \
                 autocomplete=\"off\">",
                group.access_token
            ),
            err("access_token"),
            markup!("{}", t(lang, "groups.access_token_hint")),
        ),
    ]
    .into_iter()
    .collect::<Markup>();
    body.push(markup!(
        "<form method=\"post\" action=\"{}\" class=\"card form\" id=\"group-form\">{}\
         <div class=\"fields\">{}</div><button id=\"save-group\">{}</button></form>",
        action,
        frame::csrf_field(viewer),
        fields,
        t(lang, "groups.save")
    ));
    if group.id != 0 {
        // The API refuses while jobs use the group; the answer page says how many.
        body.push(markup!(
            "<form method=\"post\" action=\"/groups/{}/delete\" class=\"inline\" \
             id=\"delete-group\" data-confirm=\"{}\">{}\
             <button class=\"small danger\">{}</button></form>",
            group.id,
            tf(lang, "groups.delete_confirm", &[&group.app_name]),
            frame::csrf_field(viewer),
            t(lang, "groups.delete")
        ));
    }
    let title = if group.id == 0 {
        t(lang, "groups.new").to_string()
    } else {
        tf(lang, "groups.group_title", &[&group.app_name])
    };
    let mut response = frame::page(Some(viewer), &title, Nav::Executors, body);
    *response.status_mut() = code;
    // After a refused save the form holds the access token as typed.
    super::no_store(response)
}

fn group_from_fields(fields: &Fields, id: i64) -> pb::Group {
    pb::Group {
        id,
        app_name: fields.get("app_name").to_string(),
        title: fields.get("title").to_string(),
        address_type: pb::AddressType::from_str_name(&format!(
            "ADDRESS_TYPE_{}",
            fields.get("address_type")
        ))
        .map_or(0, |kind| kind as i32),
        addresses: fields
            .get("addresses")
            .split(['\n', ',', ' '])
            .map(str::trim)
            .filter(|address| !address.is_empty())
            .map(str::to_string)
            .collect(),
        online: Vec::new(),
        access_token: fields.get("access_token").to_string(),
    }
}

pub async fn create(State(console): State<Shared>, posted: Posted) -> Response {
    let group = group_from_fields(&posted.fields, 0);
    let answer = console
        .api()
        .create_group(request(
            &posted.viewer.caller,
            pb::CreateGroupRequest {
                group: Some(group.clone()),
            },
        ))
        .await;
    let lang = posted.viewer.lang;
    after_post(answer, "/executors", t(lang, "groups.created"), |status| {
        refused_form(&console, &posted.viewer, &group, &status)
    })
}

pub async fn update(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let group = group_from_fields(&posted.fields, id);
    let answer = console
        .api()
        .update_group(request(
            &posted.viewer.caller,
            pb::UpdateGroupRequest {
                group: Some(group.clone()),
            },
        ))
        .await;
    let lang = posted.viewer.lang;
    after_post(answer, "/executors", t(lang, "groups.saved"), |status| {
        refused_form(&console, &posted.viewer, &group, &status)
    })
}

/// The editor again, with the API's refusal under the field it names.
fn refused_form(
    console: &Console,
    viewer: &Viewer,
    group: &pb::Group,
    status: &Status,
) -> Response {
    let error = Some(field_error(viewer.lang, status));
    editor(console, viewer, group, error, http_status(status.code()))
}

/// Deletes a group that no job uses; with jobs, the API's refusal names their count.
pub async fn delete(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let answer = console
        .api()
        .delete_group(request(
            &posted.viewer.caller,
            pb::DeleteGroupRequest { id },
        ))
        .await;
    let lang = posted.viewer.lang;
    let notice = tf(lang, "groups.deleted", &[&id]);
    after_post(answer, "/executors", &notice, |status| {
        status_page(lang, &status)
    })
}
