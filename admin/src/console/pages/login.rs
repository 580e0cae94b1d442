//! Login and logout. The login form has no session yet, so its CSRF token is a random value in
//! a short-lived cookie that the form posts back (double submit).

use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};

use super::super::cookies::{cookie, set_cookie, with_cookie};
use super::super::csrf::{Fields, Posted, same};
use super::super::frame::{self, Nav};
use super::super::guard::ClientAddress;
use super::super::html::{Markup, markup};
use super::super::i18n::{Lang, t};
use super::super::session;
use super::super::shared::{Console, Shared};
use super::status_page;
use crate::auth::secrets::verify_password;

const LOGIN_COOKIE: &str = "xjob_login";

pub async fn form(State(console): State<Shared>, headers: HeaderMap, uri: Uri) -> Response {
    let next = Fields::from_query(uri.query()).get("next").to_string();
    if let Ok(Some(_)) = session::resolve(&console, &headers).await {
        return Redirect::to(&safe_next(&next)).into_response();
    }
    if console.runs_open().await.unwrap_or(false) {
        // Nothing to log in to: the open console makes its session on the first page.
        return Redirect::to(&safe_next(&next)).into_response();
    }
    login_page(
        &console,
        Lang::of_request(&headers),
        &next,
        "",
        "",
        StatusCode::OK,
    )
}

fn login_page(
    console: &Console,
    lang: Lang,
    next: &str,
    name: &str,
    error: &str,
    code: StatusCode,
) -> Response {
    let token = match session::random() {
        Ok(token) => token,
        Err(status) => return status_page(lang, &status),
    };
    let error = if error.is_empty() {
        Markup::new()
    } else {
        markup!(
            "<div class=\"notice bad\" id=\"login-error\" role=\"alert\">{}</div>",
            error
        )
    };
    // The command stays as is in every language.
    let hint = t(lang, "login.hint");
    let (hint_before, hint_after) = hint.split_once("{}").unwrap_or((hint, ""));
    let body = markup!(
        "<form method=\"post\" action=\"/login\" class=\"card narrow\" id=\"login-form\">{}\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <input type=\"hidden\" name=\"next\" value=\"{}\">\
         <div class=\"field\"><label for=\"name\">{}</label>\
         <input type=\"text\" name=\"name\" id=\"name\" value=\"{}\" autocomplete=\"username\" \
         required autofocus></div>\
         <div class=\"field\"><label for=\"password\">{}</label>\
         <input type=\"password\" name=\"password\" id=\"password\" \
         autocomplete=\"current-password\" required></div>\
         <button type=\"submit\" id=\"login\">{}</button>\
         <p class=\"hint\">{}<code>xjob user create --password-stdin</code>{}</p></form>",
        error,
        token,
        next,
        t(lang, "login.user"),
        name,
        t(lang, "login.password"),
        t(lang, "login.submit"),
        hint_before,
        hint_after
    );
    let title = t(lang, "login.title");
    let mut response = frame::page_in(lang, None, title, Nav::None, body);
    *response.status_mut() = code;
    with_cookie(
        response,
        &set_cookie(LOGIN_COOKIE, &token, 600, console.tls),
    )
}

pub async fn submit(
    State(console): State<Shared>,
    Extension(ClientAddress(client)): Extension<ClientAddress>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let fields = Fields::parse(&body);
    let lang = Lang::of_request(&headers);
    let next = fields.get("next").to_string();
    let name = fields.get("name").to_string();
    let expected = cookie(&headers, LOGIN_COOKIE).unwrap_or_default();
    if !same(fields.get("csrf"), &expected) {
        return super::error_page(lang, StatusCode::FORBIDDEN, t(lang, "error.login_csrf"));
    }
    if let Err(refusal) = console.logins.attempt(&name, client) {
        return login_page(
            &console,
            lang,
            &next,
            &name,
            &refusal.message(lang),
            StatusCode::TOO_MANY_REQUESTS,
        );
    }
    let password = fields.raw("password").unwrap_or("").to_string();
    let user = match console.ctx.store.user_by_name(&name).await {
        Ok(user) => user,
        Err(error) => return status_page(lang, &crate::error::Error::from(error).into()),
    };
    let hash = user
        .as_ref()
        .map(|user| user.password_hash.clone())
        .unwrap_or_default();
    // argon2 takes tens of milliseconds of CPU: off the async threads. An unknown name or a
    // user without a password costs the same hash (see `verify_password`), so the answer's
    // time does not tell which names exist.
    let matches = tokio::task::spawn_blocking(move || verify_password(&password, &hash))
        .await
        .unwrap_or(false);
    let Some(user) = user.filter(|_| matches) else {
        tracing::info!(user = %name.chars().take(64).collect::<String>(), "console login failed");
        return login_page(
            &console,
            lang,
            &next,
            &name,
            t(lang, "login.wrong"),
            StatusCode::UNAUTHORIZED,
        );
    };
    console.logins.succeeded(&name, client);
    match session::start_session(&console, user.id).await {
        Ok(cookie) => {
            tracing::info!(user = %user.name, "console login");
            let response = Redirect::to(&safe_next(&next)).into_response();
            let response = with_cookie(response, &cookie);
            with_cookie(response, &set_cookie(LOGIN_COOKIE, "", 0, console.tls))
        }
        Err(status) => status_page(lang, &status),
    }
}

/// Ends the session (a post with the session's CSRF token, so no other site can log you out).
pub async fn logout(State(console): State<Shared>, headers: HeaderMap, posted: Posted) -> Response {
    tracing::info!(user = %posted.viewer.name(), "console logout");
    let clear = session::end_session(&console, &headers).await;
    with_cookie(Redirect::to("/login").into_response(), &clear)
}

/// Where to go after login: a path on this console only, else `/`. One leading `/` (`//host`
/// is another site), no backslash (browsers read `/\\host` as `//host`), and only visible
/// ASCII: browsers drop tabs and newlines from URLs, so `/\t/host` would become `//host`,
/// and a control character cannot go into a `Location` header at all.
pub fn safe_next(next: &str) -> String {
    let path_only = next.starts_with('/')
        && !next.starts_with("//")
        && !next.contains('\\')
        && next.bytes().all(|byte| byte.is_ascii_graphic());
    if path_only {
        next.to_string()
    } else {
        "/".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_a_path_on_this_console_or_the_dashboard() {
        for kept in ["/", "/jobs?group=1&status=RUNNING", "/runs/5"] {
            assert_eq!(safe_next(kept), kept);
        }
        for refused in [
            "",
            "jobs",
            "//evil.example/",
            "/\\evil.example",
            "/\t/evil.example/",
            "/\n/evil.example/",
            "/jobs\r\nSet-Cookie: x=1",
            "/ /evil.example",
            "/\u{85}/evil.example",
            "/é",
            "https://evil.example/",
        ] {
            assert_eq!(safe_next(refused), "/", "{refused:?}");
        }
    }
}
