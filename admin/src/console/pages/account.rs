//! The signed-in user's own account: name, role, groups, and a password change that needs the
//! current password. A change ends every console session of the user (the store does it with
//! the new hash), so this answer starts a fresh one for the browser that made it.

use axum::extract::State;
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::cookies;
use super::super::csrf::{Fields, Posted};
use super::super::frame::{self, Nav};
use super::super::html::{self, Markup, Tone, markup};
use super::super::i18n::{self, Lang, t, tf};
use super::super::session::{self, Viewer};
use super::super::shared::{Shared, request};
use super::users::new_password_input;
use super::{field_error, see_other, status_page};
use crate::auth::Caller;

pub async fn page(State(_console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let query = Fields::from_query(uri.query());
    render(&viewer, query.get("notice"), None)
}

/// Which field an error belongs to: the current password or the new one.
enum Problem<'a> {
    Current(&'a str),
    New(&'a str),
}

fn render(viewer: &Viewer, notice: &str, problem: Option<Problem>) -> Response {
    let lang = viewer.lang;
    let title = t(lang, "frame.account_title");
    let mut body = html::notice(Tone::Ok, notice);
    let Caller::User(user) = &viewer.caller else {
        body.push(markup!(
            "<p class=\"empty\">{}</p>",
            t(lang, "account.open")
        ));
        return frame::page(Some(viewer), title, Nav::None, body);
    };
    body.push(markup!(
        "<dl class=\"card\"><dt>{}</dt><dd>{}</dd><dt>{}</dt><dd>{}</dd></dl>",
        t(lang, "account.name"),
        user.name,
        t(lang, "account.role"),
        user.role.as_str()
    ));
    let (current_error, new_error) = match problem {
        Some(Problem::Current(message)) => (Some(message), None),
        Some(Problem::New(message)) => (None, Some(message)),
        None => (None, None),
    };
    body.push(markup!(
        "<form method=\"post\" action=\"/account/password\" class=\"card form\" \
         id=\"password-form\"><h2>{}</h2>{}<div class=\"fields\">{}{}</div>\
         <button id=\"change-password\">{}</button></form>",
        t(lang, "account.change"),
        frame::csrf_field(viewer),
        html::field(
            t(lang, "account.current"),
            "current_password",
            Markup::literal(
                "<input type=\"password\" name=\"current_password\" id=\"current_password\" \
                 autocomplete=\"current-password\">"
            ),
            current_error,
            Markup::new()
        ),
        html::field(
            t(lang, "account.new"),
            "new_password",
            new_password_input(),
            new_error,
            html::esc(&tf(
                lang,
                "account.new_hint",
                &[&crate::auth::accounts::MIN_PASSWORD_CHARS]
            ))
        ),
        t(lang, "account.change"),
    ));
    frame::page(Some(viewer), title, Nav::None, body)
}

pub async fn change_password(State(console): State<Shared>, posted: Posted) -> Response {
    let lang = posted.viewer.lang;
    let fields = &posted.fields;
    let answer = console
        .api()
        .change_password(request(
            &posted.viewer.caller,
            pb::ChangePasswordRequest {
                current_password: fields.raw("current_password").unwrap_or("").to_string(),
                new_password: fields.raw("new_password").unwrap_or("").to_string(),
            },
        ))
        .await;
    match answer {
        Ok(_) => {
            let Caller::User(user) = &posted.viewer.caller else {
                return see_other("/account", "");
            };
            // The change ended every session of this user, this one too: start a new one.
            match session::start_session(&console, user.id).await {
                Ok(cookie) => cookies::with_cookie(
                    see_other("/account", t(posted.viewer.lang, "account.changed")),
                    &cookie,
                ),
                Err(status) => status_page(lang, &status),
            }
        }
        Err(status) => {
            let (current, message) = match field_error(lang, &status) {
                (Some(field), message) => (field == "current_password", message),
                (None, _) => return status_page(lang, &status),
            };
            let problem = if current {
                Problem::Current(&message)
            } else {
                Problem::New(&message)
            };
            let mut page = render(&posted.viewer, "", Some(problem));
            *page.status_mut() = super::http_status(status.code());
            page
        }
    }
}

/// How long the language cookie is kept: a year.
const LANGUAGE_COOKIE_S: i64 = 365 * 86_400;

/// Remembers the language picked in the header (a cookie, no session needed: the login page
/// has the switch too) and goes back to the page it was picked on, when the browser says which
/// (`Referer`, a page of this console only); else the dashboard.
pub async fn language(State(console): State<Shared>, headers: HeaderMap, uri: Uri) -> Response {
    let query = Fields::from_query(uri.query());
    let Some(lang) = Lang::parse(query.get("lang")) else {
        let lang = Lang::of_request(&headers);
        return super::error_page(
            lang,
            axum::http::StatusCode::BAD_REQUEST,
            t(lang, "error.bad_lang"),
        );
    };
    let back = headers
        .get(header::REFERER)
        .and_then(|value| value.to_str().ok())
        .map(referer_path)
        .unwrap_or_else(|| "/".to_string());
    let cookie = cookies::set_cookie(i18n::COOKIE, lang.code(), LANGUAGE_COOKIE_S, console.tls);
    cookies::with_cookie(Redirect::to(&back).into_response(), &cookie)
}

/// The path of a `Referer` URL (`http://host/jobs?x` → `/jobs?x`), kept only if it is a safe
/// path on this console (see `login::safe_next`); `/` otherwise.
fn referer_path(referer: &str) -> String {
    let path = match referer.split_once("://") {
        Some((_, rest)) => rest.find('/').map(|at| &rest[at..]).unwrap_or("/"),
        None => referer,
    };
    if path.starts_with("/language") {
        return "/".to_string();
    }
    super::login::safe_next(path)
}

#[cfg(test)]
mod tests {
    use super::referer_path;

    #[test]
    fn the_language_switch_returns_to_a_page_of_this_console_only() {
        assert_eq!(
            referer_path("http://127.0.0.1:8081/jobs?group=1"),
            "/jobs?group=1"
        );
        assert_eq!(referer_path("https://console.example/runs/5"), "/runs/5");
        assert_eq!(referer_path("http://127.0.0.1:8081"), "/");
        assert_eq!(referer_path("http://h//evil.example/"), "/");
        assert_eq!(referer_path("http://h/language?lang=zh"), "/");
        assert_eq!(referer_path("garbage"), "/");
    }
}
