//! Users (admins only): list with roles and grants, create with a console password (the first
//! API token is shown once), delete, grant a group; and the audit trail.

use axum::extract::State;
use axum::http::Uri;
use axum::response::Response;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::csrf::{Fields, Posted};
use super::super::frame::{self, Nav};
use super::super::html::{self, Markup, Tone, markup};
use super::super::i18n::{Lang, t, tf};
use super::super::session::Viewer;
use super::super::shared::{Shared, request};
use super::{
    Path, group_name, no_store, page_token, pager, readable_groups, see_other, status_page,
};
use crate::auth::accounts::MIN_PASSWORD_CHARS;

pub async fn list(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let lang = viewer.lang;
    let query = Fields::from_query(uri.query());
    let users = match console
        .api()
        .list_users(request(&viewer.caller, pb::ListUsersRequest {}))
        .await
    {
        Ok(answer) => answer.into_inner().users,
        Err(status) => return status_page(lang, &status),
    };
    let groups = readable_groups(&console, &viewer).await;
    render(&viewer, &users, &groups, query.get("notice"), "")
}

fn render(
    viewer: &Viewer,
    users: &[pb::User],
    groups: &[pb::Group],
    notice: &str,
    error: &str,
) -> Response {
    let lang = viewer.lang;
    let csrf = frame::csrf_field(viewer);
    let mut body = html::notice(Tone::Ok, notice);
    body.push(html::notice(Tone::Bad, error));
    body.push(Markup::literal(
        "<div class=\"scroll\"><table id=\"users\"><tr>",
    ));
    for key in [
        "users.id",
        "users.name",
        "users.role",
        "users.groups",
        "users.created",
        "users.actions",
    ] {
        body.push(markup!("<th scope=\"col\">{}</th>", t(lang, key)));
    }
    body.push(Markup::literal("</tr>"));
    let group_options: Vec<(String, String)> = groups
        .iter()
        .map(|group| (group.id.to_string(), group_name(lang, groups, group.id)))
        .collect();
    for user in users {
        let mut granted = Markup::new();
        for (index, id) in user.group_ids.iter().enumerate() {
            if index > 0 {
                granted.push(Markup::literal(", "));
            }
            granted.push(markup!(
                "{} <form method=\"post\" action=\"/users/{}/revoke\" class=\"inline\">{}\
                 <input type=\"hidden\" name=\"group\" value=\"{}\">\
                 <button class=\"small secondary\" title=\"{}\" \
                 aria-label=\"{}\">×</button></form>",
                group_name(lang, groups, *id),
                user.id,
                csrf,
                id,
                t(lang, "users.revoke_grant"),
                tf(
                    lang,
                    "users.revoke_named",
                    &[&group_name(lang, groups, *id)]
                )
            ));
        }
        let grant_id = format!("grant-{}", user.id);
        body.push(markup!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>\
             <a href=\"/users/{}/tokens\">{}</a> {} \
             <form method=\"post\" action=\"/users/{}/grant\" class=\"inline\">{}\
             <label class=\"sr-only\" for=\"{}\">{}</label>{}\
             <button class=\"small\">{}</button></form> \
             <form method=\"post\" action=\"/users/{}/delete\" class=\"inline\" \
             data-confirm=\"{}\">{}\
             <button class=\"small danger\">{}</button></form></td></tr>",
            user.id,
            user.name,
            user.role,
            granted,
            html::time(user.created_ms),
            user.id,
            t(lang, "users.tokens"),
            account_actions(viewer, user, &csrf),
            user.id,
            csrf,
            grant_id,
            tf(lang, "users.grant_to", &[&user.name]),
            html::select_with_id("group", &grant_id, &group_options, ""),
            t(lang, "users.grant"),
            user.id,
            tf(lang, "users.delete_confirm", &[&user.name]),
            csrf,
            t(lang, "users.delete"),
        ));
    }
    body.push(Markup::literal("</table></div>"));
    let roles = role_choices(lang);
    body.push(markup!(
        "<form method=\"post\" action=\"/users\" class=\"card form\" id=\"user-form\"><h2>{}</h2>\
         {}<div class=\"fields\">{}{}{}</div><button id=\"create-user\">{}</button></form>",
        t(lang, "users.new"),
        csrf,
        html::field(
            t(lang, "users.name"),
            "name",
            html::text_input("name", ""),
            None,
            Markup::new()
        ),
        html::field(
            t(lang, "users.role"),
            "role",
            html::select("role", &roles, "viewer"),
            None,
            Markup::new()
        ),
        html::field(
            t(lang, "users.password"),
            "password",
            // minlength is only a hint to the browser; create_user enforces the same minimum.
            markup!(
                "<input type=\"password\" name=\"password\" id=\"password\" \
                 autocomplete=\"new-password\" minlength=\"{}\">",
                MIN_PASSWORD_CHARS
            ),
            None,
            html::esc(&tf(lang, "users.password_hint", &[&MIN_PASSWORD_CHARS])),
        ),
        t(lang, "users.create"),
    ));
    frame::page(Some(viewer), t(lang, "users.title"), Nav::Users, body)
}

/// The roles a user may have, with what each may do.
fn role_choices(lang: Lang) -> Vec<(String, String)> {
    [
        ("viewer", t(lang, "users.role_viewer")),
        ("operator", t(lang, "users.role_operator")),
        ("admin", t(lang, "users.role_admin")),
    ]
    .into_iter()
    .map(|(value, label)| (value.to_string(), label.to_string()))
    .collect()
}

/// A user row's role change and password reset (not on the viewer's own row: an admin changes
/// their own password on the Account page, and never their own role).
fn account_actions(viewer: &Viewer, user: &pb::User, csrf: &Markup) -> Markup {
    let lang = viewer.lang;
    let own = matches!(&viewer.caller, crate::auth::Caller::User(me) if me.id == user.id);
    if own {
        return markup!("<a href=\"/account\">{}</a>", t(lang, "users.my_account"));
    }
    let role_id = format!("role-{}", user.id);
    markup!(
        "<form method=\"post\" action=\"/users/{}/role\" class=\"inline\">{}\
         <label class=\"sr-only\" for=\"{}\">{}</label>{}\
         <button class=\"small secondary\">{}</button></form> \
         <a href=\"/users/{}/password\">{}</a>",
        user.id,
        csrf,
        role_id,
        tf(lang, "users.role_of", &[&user.name]),
        html::select_with_id("role", &role_id, &role_choices(lang), &user.role),
        t(lang, "users.set_role"),
        user.id,
        t(lang, "users.reset_link")
    )
}

pub async fn set_role(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
    let role = posted.fields.get("role").to_string();
    match console
        .api()
        .set_user_role(request(
            &posted.viewer.caller,
            pb::SetUserRoleRequest { user_id: id, role },
        ))
        .await
    {
        Ok(answer) => {
            let user = answer.into_inner().user.unwrap_or_default();
            let notice = tf(
                posted.viewer.lang,
                "users.role_set",
                &[&user.name, &user.role],
            );
            see_other("/users", &notice)
        }
        Err(status) => status_page(lang, &status),
    }
}

/// An admin's form to set another user's password (a forgotten one).
pub async fn password_form(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(id): Path<i64>,
) -> Response {
    password_page(&console, &viewer, id, None).await
}

async fn password_page(
    console: &super::super::shared::Console,
    viewer: &Viewer,
    id: i64,
    error: Option<&str>,
) -> Response {
    let lang = viewer.lang;
    let users = match console
        .api()
        .list_users(request(&viewer.caller, pb::ListUsersRequest {}))
        .await
    {
        Ok(answer) => answer.into_inner().users,
        Err(status) => return status_page(lang, &status),
    };
    let Some(user) = users.into_iter().find(|user| user.id == id) else {
        return super::not_found_page(lang);
    };
    let body = markup!(
        "<form method=\"post\" action=\"/users/{}/password\" class=\"card form\" \
         id=\"reset-form\">{}<div class=\"fields\">{}</div>\
         <button id=\"reset-password\">{}</button></form>\
         <p><a href=\"/users\">{}</a></p>",
        id,
        frame::csrf_field(viewer),
        html::field(
            t(lang, "users.new_password"),
            "new_password",
            new_password_input(),
            error,
            html::esc(&tf(lang, "users.reset_hint", &[&MIN_PASSWORD_CHARS])),
        ),
        t(lang, "users.reset_submit"),
        t(lang, "users.back"),
    );
    let title = tf(lang, "users.password_title", &[&user.name]);
    frame::page(Some(viewer), &title, Nav::Users, body)
}

/// A new-password input; `minlength` is only a hint, the API enforces the same minimum.
pub fn new_password_input() -> Markup {
    markup!(
        "<input type=\"password\" name=\"new_password\" id=\"new_password\" \
         autocomplete=\"new-password\" minlength=\"{}\">",
        MIN_PASSWORD_CHARS
    )
}

pub async fn reset_password(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
    let new_password = posted.fields.raw("new_password").unwrap_or("").to_string();
    match console
        .api()
        .reset_password(request(
            &posted.viewer.caller,
            pb::ResetPasswordRequest {
                user_id: id,
                new_password,
            },
        ))
        .await
    {
        Ok(_) => see_other(
            "/users",
            &tf(posted.viewer.lang, "users.password_set", &[&id]),
        ),
        Err(status) => match super::field_error(lang, &status) {
            (Some(_), message) => {
                let mut page = password_page(&console, &posted.viewer, id, Some(&message)).await;
                *page.status_mut() = super::http_status(status.code());
                page
            }
            (None, _) => status_page(lang, &status),
        },
    }
}

pub async fn create(State(console): State<Shared>, posted: Posted) -> Response {
    let lang = posted.viewer.lang;
    let fields = &posted.fields;
    let answer = console
        .api()
        .create_user(request(
            &posted.viewer.caller,
            pb::CreateUserRequest {
                name: fields.get("name").to_string(),
                role: fields.get("role").to_string(),
                password: fields.raw("password").unwrap_or("").to_string(),
                token_ttl_ms: 0,
            },
        ))
        .await;
    match answer {
        Ok(answer) => {
            let answer = answer.into_inner();
            let users = console
                .api()
                .list_users(request(&posted.viewer.caller, pb::ListUsersRequest {}))
                .await
                .map(|answer| answer.into_inner().users)
                .unwrap_or_default();
            let groups = readable_groups(&console, &posted.viewer).await;
            // The token is shown this once, on this answer (never in a URL).
            let name = answer.user.map(|user| user.name).unwrap_or_default();
            let lang = posted.viewer.lang;
            let notice = tf(lang, "users.created_notice", &[&name, &answer.token]);
            no_store(render(&posted.viewer, &users, &groups, &notice, ""))
        }
        Err(status) => status_page(lang, &status),
    }
}

pub async fn delete(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
    match console
        .api()
        .delete_user(request(&posted.viewer.caller, pb::DeleteUserRequest { id }))
        .await
    {
        Ok(_) => see_other("/users", &tf(posted.viewer.lang, "users.deleted", &[&id])),
        Err(status) => status_page(lang, &status),
    }
}

pub async fn grant(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
    let lang = posted.viewer.lang;
    let group_id = posted.fields.int("group");
    match console
        .api()
        .grant_group(request(
            &posted.viewer.caller,
            pb::GrantGroupRequest {
                user_id: id,
                group_id,
            },
        ))
        .await
    {
        Ok(_) => see_other(
            "/users",
            &tf(posted.viewer.lang, "users.granted", &[&group_id, &id]),
        ),
        Err(status) => status_page(lang, &status),
    }
}

/// Audit entries per page.
const AUDIT_PAGE_SIZE: i64 = 100;

pub async fn audit(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let lang = viewer.lang;
    let query = Fields::from_query(uri.query());
    let page = match console
        .api()
        .list_audit(request(
            &viewer.caller,
            pb::ListAuditRequest {
                page_size: AUDIT_PAGE_SIZE as i32,
                page_token: page_token(&query, AUDIT_PAGE_SIZE),
            },
        ))
        .await
    {
        Ok(answer) => answer.into_inner(),
        Err(status) => return status_page(lang, &status),
    };
    let lang = viewer.lang;
    let mut body = Markup::new();
    if page.entries.is_empty() {
        body.push(markup!("<p class=\"empty\">{}</p>", t(lang, "audit.empty")));
    } else {
        body.push(Markup::literal(
            "<div class=\"scroll\"><table id=\"audit\"><tr>",
        ));
        for key in [
            "audit.when",
            "audit.who",
            "audit.call",
            "audit.object",
            "audit.summary",
        ] {
            body.push(markup!("<th scope=\"col\">{}</th>", t(lang, key)));
        }
        body.push(Markup::literal("</tr>"));
        // The call and the summary are the record as the API wrote it (a method's name, the
        // values it changed): shown as recorded, and marked so for translators.
        for entry in &page.entries {
            body.push(markup!(
                "<tr><td>{}</td><td>{}</td><td translate=\"no\">{}</td><td>{}</td>\
                 <td class=\"msg\" translate=\"no\">{}</td></tr>",
                html::time(entry.at_ms),
                audit_actor(lang, &entry.actor),
                entry.call,
                audit_object(lang, &entry.object),
                entry.summary
            ));
        }
        body.push(Markup::literal("</table></div>"));
    }
    body.push(pager(
        lang,
        "/audit",
        &[],
        &page_token(&query, AUDIT_PAGE_SIZE),
        &page.next_page_token,
        AUDIT_PAGE_SIZE,
    ));
    frame::page(Some(&viewer), t(lang, "audit.title"), Nav::Audit, body)
}

pub async fn revoke(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
    let group_id = posted.fields.int("group");
    match console
        .api()
        .revoke_group(request(
            &posted.viewer.caller,
            pb::RevokeGroupRequest {
                user_id: id,
                group_id,
            },
        ))
        .await
    {
        Ok(_) => see_other(
            "/users",
            &tf(posted.viewer.lang, "users.revoked", &[&group_id, &id]),
        ),
        Err(status) => status_page(lang, &status),
    }
}

/// A user's API tokens: prefix, description, expiry, revocation; issue and revoke.
pub async fn tokens(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(id): Path<i64>,
    uri: Uri,
) -> Response {
    let query = Fields::from_query(uri.query());
    tokens_page(&console, &viewer, id, query.get("notice")).await
}

async fn tokens_page(
    console: &super::super::shared::Console,
    viewer: &Viewer,
    user_id: i64,
    notice: &str,
) -> Response {
    let lang = viewer.lang;
    let tokens = match console
        .api()
        .list_tokens(request(&viewer.caller, pb::ListTokensRequest { user_id }))
        .await
    {
        Ok(answer) => answer.into_inner().tokens,
        Err(status) => return status_page(lang, &status),
    };
    let lang = viewer.lang;
    let csrf = frame::csrf_field(viewer);
    let mut body = html::notice(Tone::Ok, notice);
    body.push(Markup::literal(
        "<div class=\"scroll\"><table id=\"tokens\"><tr>",
    ));
    for key in [
        "users.id",
        "tokens.prefix",
        "tokens.description",
        "users.created",
        "tokens.expires",
        "tokens.revoked",
        "users.actions",
    ] {
        body.push(markup!("<th scope=\"col\">{}</th>", t(lang, key)));
    }
    body.push(Markup::literal("</tr>"));
    for token in &tokens {
        let action = if token.revoked_ms > 0 {
            Markup::new()
        } else {
            markup!(
                "<form method=\"post\" action=\"/users/{}/tokens/{}/revoke\" \
                 class=\"inline\" data-confirm=\"{}\">{}\
                 <button class=\"small danger\">{}</button></form>",
                user_id,
                token.id,
                tf(lang, "tokens.revoke_confirm", &[&token.prefix]),
                csrf,
                t(lang, "tokens.revoke")
            )
        };
        body.push(markup!(
            "<tr><td>{}</td><td><code>{}…</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td></tr>",
            token.id,
            token.prefix,
            token.description,
            html::time(token.created_ms),
            if token.expires_ms > 0 {
                html::time(token.expires_ms)
            } else {
                html::esc(t(lang, "tokens.never"))
            },
            html::time(token.revoked_ms),
            action,
        ));
    }
    body.push(Markup::literal("</table></div>"));
    body.push(markup!(
        "<form method=\"post\" action=\"/users/{}/tokens\" class=\"card form\" \
         id=\"token-form\"><h2>{}</h2>{}<div class=\"fields\">{}{}</div>\
         <button id=\"create-token\">{}</button></form><p><a href=\"/users\">{}</a></p>",
        user_id,
        t(lang, "tokens.new"),
        csrf,
        html::field(
            t(lang, "tokens.description"),
            "description",
            html::text_input("description", ""),
            None,
            Markup::new()
        ),
        html::field(
            t(lang, "tokens.lifetime"),
            "ttl_days",
            html::text_input("ttl_days", "90"),
            None,
            html::esc(t(lang, "tokens.lifetime_hint"))
        ),
        t(lang, "tokens.issue"),
        t(lang, "users.back"),
    ));
    let title = tf(lang, "tokens.title", &[&user_id]);
    frame::page(Some(viewer), &title, Nav::Users, body)
}

pub async fn create_token(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
    let ttl_days = posted.fields.int("ttl_days").max(0);
    let answer = console
        .api()
        .create_token(request(
            &posted.viewer.caller,
            pb::CreateTokenRequest {
                user_id: id,
                ttl_ms: ttl_days.saturating_mul(86_400_000),
                description: posted.fields.get("description").to_string(),
            },
        ))
        .await;
    match answer {
        // Shown this once, on this answer (never in a URL).
        Ok(answer) => {
            let token = answer.into_inner().token;
            let notice = tf(posted.viewer.lang, "tokens.issued", &[&token]);
            no_store(tokens_page(&console, &posted.viewer, id, &notice).await)
        }
        Err(status) => status_page(lang, &status),
    }
}

pub async fn revoke_token(
    State(console): State<Shared>,
    Path((user_id, token_id)): Path<(i64, i64)>,
    posted: Posted,
) -> Response {
    let lang = posted.viewer.lang;
    match console
        .api()
        .revoke_token(request(
            &posted.viewer.caller,
            pb::RevokeTokenRequest { id: token_id },
        ))
        .await
    {
        Ok(_) => see_other(
            &format!("/users/{user_id}/tokens"),
            &tf(posted.viewer.lang, "tokens.revoked_notice", &[&token_id]),
        ),
        Err(status) => status_page(lang, &status),
    }
}

/// Who made an audited change: a user's name, or the open console (no users yet).
fn audit_actor(lang: Lang, actor: &str) -> String {
    match actor {
        "(open)" => t(lang, "frame.open_console").to_string(),
        name => name.to_string(),
    }
}

/// What an audited change was made to (`job:3`, `group:1`), its kind in `lang`.
fn audit_object(lang: Lang, object: &str) -> String {
    let Some((kind, id)) = object.split_once(':') else {
        return object.to_string();
    };
    let key = match kind {
        "job" => "audit.kind_job",
        "group" => "audit.kind_group",
        "user" => "audit.kind_user",
        "token" => "audit.kind_token",
        "log" => "audit.kind_log",
        _ => return object.to_string(),
    };
    tf(lang, key, &[&id])
}
