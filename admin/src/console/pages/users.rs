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
use super::super::session::Viewer;
use super::super::{Shared, request};
use super::{
    Path, group_name, no_store, page_token, pager, readable_groups, see_other, status_page,
};
use crate::auth::accounts::MIN_PASSWORD_CHARS;

pub async fn list(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let query = Fields::from_query(uri.query());
    let users = match console
        .api()
        .list_users(request(&viewer.caller, pb::ListUsersRequest {}))
        .await
    {
        Ok(answer) => answer.into_inner().users,
        Err(status) => return status_page(&status),
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
    let csrf = frame::csrf_field(viewer);
    let mut body = html::notice(Tone::Ok, notice);
    body.push(html::notice(Tone::Bad, error));
    body.push(Markup::literal(
        "<div class=\"scroll\"><table id=\"users\"><tr><th scope=\"col\">Id</th>\
         <th scope=\"col\">Name</th><th scope=\"col\">Role</th><th scope=\"col\">Groups</th>\
         <th scope=\"col\">Created</th><th scope=\"col\">Actions</th></tr>",
    ));
    let group_options: Vec<(String, String)> = groups
        .iter()
        .map(|group| (group.id.to_string(), group_name(groups, group.id)))
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
                 <button class=\"small secondary\" title=\"revoke this grant\" \
                 aria-label=\"revoke {}\">×</button></form>",
                group_name(groups, *id),
                user.id,
                csrf,
                id,
                group_name(groups, *id)
            ));
        }
        let grant_id = format!("grant-{}", user.id);
        body.push(markup!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>\
             <a href=\"/users/{}/tokens\">tokens</a> \
             <form method=\"post\" action=\"/users/{}/grant\" class=\"inline\">{}\
             <label class=\"sr-only\" for=\"{}\">Group to grant to {}</label>{}\
             <button class=\"small\">Grant</button></form> \
             <form method=\"post\" action=\"/users/{}/delete\" class=\"inline\" \
             data-confirm=\"Delete user {} and its tokens?\">{}\
             <button class=\"small danger\">Delete</button></form></td></tr>",
            user.id,
            user.name,
            user.role,
            granted,
            html::time(user.created_ms),
            user.id,
            user.id,
            csrf,
            grant_id,
            user.name,
            html::select_with_id("group", &grant_id, &group_options, ""),
            user.id,
            user.name,
            csrf,
        ));
    }
    body.push(Markup::literal("</table></div>"));
    let roles = vec![
        ("viewer".to_string(), "viewer: reads its groups".to_string()),
        (
            "operator".to_string(),
            "operator: runs its groups' jobs".to_string(),
        ),
        ("admin".to_string(), "admin: everything".to_string()),
    ];
    body.push(markup!(
        "<form method=\"post\" action=\"/users\" class=\"card form\" id=\"user-form\"><h2>New user</h2>\
         {}<div class=\"fields\">{}{}{}</div><button id=\"create-user\">Create</button></form>",
        csrf,
        html::field(
            "Name",
            "name",
            html::text_input("name", ""),
            None,
            Markup::new()
        ),
        html::field(
            "Role",
            "role",
            html::select("role", &roles, "viewer"),
            None,
            Markup::new()
        ),
        html::field(
            "Password",
            "password",
            // minlength is only a hint to the browser; create_user enforces the same minimum.
            markup!(
                "<input type=\"password\" name=\"password\" id=\"password\" \
                 autocomplete=\"new-password\" minlength=\"{}\">",
                MIN_PASSWORD_CHARS
            ),
            None,
            markup!(
                "for the console, at least {} characters; empty = API token only",
                MIN_PASSWORD_CHARS
            ),
        ),
    ));
    frame::page(Some(viewer), "Users", Nav::Users, body)
}

pub async fn create(State(console): State<Shared>, posted: Posted) -> Response {
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
            let notice = format!(
                "User {} created. Its API token, shown only now: {}",
                answer.user.map(|user| user.name).unwrap_or_default(),
                answer.token
            );
            no_store(render(&posted.viewer, &users, &groups, &notice, ""))
        }
        Err(status) => status_page(&status),
    }
}

pub async fn delete(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    match console
        .api()
        .delete_user(request(&posted.viewer.caller, pb::DeleteUserRequest { id }))
        .await
    {
        Ok(_) => see_other("/users", &format!("User {id} deleted.")),
        Err(status) => status_page(&status),
    }
}

pub async fn grant(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
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
        Ok(_) => see_other("/users", &format!("Group {group_id} granted to user {id}.")),
        Err(status) => status_page(&status),
    }
}

/// Audit entries per page.
const AUDIT_PAGE_SIZE: i64 = 100;

pub async fn audit(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
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
        Err(status) => return status_page(&status),
    };
    let mut body = Markup::new();
    if page.entries.is_empty() {
        body.push(Markup::literal(
            "<p class=\"empty\">No changes recorded yet.</p>",
        ));
    } else {
        body.push(Markup::literal(
            "<div class=\"scroll\"><table id=\"audit\"><tr><th scope=\"col\">When</th>\
             <th scope=\"col\">Who</th><th scope=\"col\">Call</th><th scope=\"col\">Object</th>\
             <th scope=\"col\">Summary</th></tr>",
        ));
        for entry in &page.entries {
            body.push(markup!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"msg\">{}</td></tr>",
                html::time(entry.at_ms),
                entry.actor,
                entry.call,
                entry.object,
                entry.summary
            ));
        }
        body.push(Markup::literal("</table></div>"));
    }
    body.push(pager(
        "/audit",
        &[],
        &page_token(&query, AUDIT_PAGE_SIZE),
        &page.next_page_token,
        AUDIT_PAGE_SIZE,
    ));
    frame::page(Some(&viewer), "Audit trail", Nav::Audit, body)
}

pub async fn revoke(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
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
            &format!("Group {group_id} revoked from user {id}."),
        ),
        Err(status) => status_page(&status),
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
    console: &super::super::Console,
    viewer: &Viewer,
    user_id: i64,
    notice: &str,
) -> Response {
    let tokens = match console
        .api()
        .list_tokens(request(&viewer.caller, pb::ListTokensRequest { user_id }))
        .await
    {
        Ok(answer) => answer.into_inner().tokens,
        Err(status) => return status_page(&status),
    };
    let csrf = frame::csrf_field(viewer);
    let mut body = html::notice(Tone::Ok, notice);
    body.push(Markup::literal(
        "<div class=\"scroll\"><table id=\"tokens\"><tr><th scope=\"col\">Id</th>\
         <th scope=\"col\">Prefix</th><th scope=\"col\">Description</th>\
         <th scope=\"col\">Created</th><th scope=\"col\">Expires</th>\
         <th scope=\"col\">Revoked</th><th scope=\"col\">Actions</th></tr>",
    ));
    for token in &tokens {
        let action = if token.revoked_ms > 0 {
            Markup::new()
        } else {
            markup!(
                "<form method=\"post\" action=\"/users/{}/tokens/{}/revoke\" \
                 class=\"inline\" data-confirm=\"Revoke token {}…?\">{}\
                 <button class=\"small danger\">Revoke</button></form>",
                user_id,
                token.id,
                token.prefix,
                csrf
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
                Markup::literal("never")
            },
            html::time(token.revoked_ms),
            action,
        ));
    }
    body.push(Markup::literal("</table></div>"));
    body.push(markup!(
        "<form method=\"post\" action=\"/users/{}/tokens\" class=\"card form\" \
         id=\"token-form\"><h2>New token</h2>{}<div class=\"fields\">{}{}</div>\
         <button id=\"create-token\">Issue</button></form><p><a href=\"/users\">← Users</a></p>",
        user_id,
        csrf,
        html::field(
            "Description",
            "description",
            html::text_input("description", ""),
            None,
            Markup::new()
        ),
        html::field(
            "Lifetime (days)",
            "ttl_days",
            html::text_input("ttl_days", "90"),
            None,
            Markup::literal("0 = never expires")
        ),
    ));
    frame::page(
        Some(viewer),
        &format!("Tokens of user {user_id}"),
        Nav::Users,
        body,
    )
}

pub async fn create_token(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
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
            let notice = format!(
                "Token issued. Copy it now, it is not shown again: {}",
                answer.into_inner().token
            );
            no_store(tokens_page(&console, &posted.viewer, id, &notice).await)
        }
        Err(status) => status_page(&status),
    }
}

pub async fn revoke_token(
    State(console): State<Shared>,
    Path((user_id, token_id)): Path<(i64, i64)>,
    posted: Posted,
) -> Response {
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
            &format!("Token {token_id} revoked."),
        ),
        Err(status) => status_page(&status),
    }
}
