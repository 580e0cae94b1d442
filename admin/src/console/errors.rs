//! Error pages: an API error with its HTTP status, unknown URLs, refusals before a session
//! exists. They need no viewer (only the request's language), so `session.rs` can answer with
//! them without a circle.

use axum::http::StatusCode;
use axum::response::Response;
use tonic::{Code, Status};

use super::html::{self, Markup, markup};
use super::i18n::{Lang, api, t, tf};

/// The console's 404 page: for unknown URLs and ids that are not numbers.
pub fn not_found_page(lang: Lang) -> Response {
    error_page(lang, StatusCode::NOT_FOUND, t(lang, "error.not_found"))
}

/// A page for an API error with the matching HTTP status, its message in `lang`.
pub fn status_page(lang: Lang, status: &Status) -> Response {
    error_page(
        lang,
        http_status(status.code()),
        &api_message(lang, status.message()),
    )
}

/// An API message in `lang`: the whole of it, else what follows the field it names
/// (`job.child_job_ids: job 9 not found`), which stays as the API wrote it.
pub fn api_message(lang: Lang, message: &str) -> String {
    let said = api::say(lang, message);
    if said != message {
        return said;
    }
    match message.split_once(": ") {
        Some((path, rest)) => format!("{path}: {}", api::say(lang, rest)),
        None => said,
    }
}

pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::AlreadyExists | Code::FailedPrecondition | Code::Aborted => StatusCode::CONFLICT,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A bare error page (no navigation: it may be shown without a session).
pub fn error_page(lang: Lang, code: StatusCode, message: &str) -> Response {
    let body = markup!(
        "<div class=\"notice bad\" id=\"error\" role=\"alert\">{}</div>\
         <p><a href=\"javascript:history.back()\">{}</a> · <a href=\"/\">{}</a></p>",
        message,
        t(lang, "error.back"),
        t(lang, "nav.dashboard")
    );
    let title = tf(lang, "error.title", &[&code.as_u16()]);
    let mut response = html::document_in(lang, &title, Markup::new(), body);
    *response.status_mut() = code;
    response
}
