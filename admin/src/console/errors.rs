//! Error pages: an API error with its HTTP status, unknown URLs, refusals before a session
//! exists. They need no viewer, so `session.rs` can answer with them without a circle.

use axum::http::StatusCode;
use axum::response::Response;
use tonic::{Code, Status};

use super::html::{self, Markup, markup};

/// The console's 404 page: for unknown URLs and ids that are not numbers.
pub fn not_found_page() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "There is no such page here. Pick a page from the dashboard.",
    )
}

/// A page for an API error with the matching HTTP status.
pub fn status_page(status: &Status) -> Response {
    error_page(http_status(status.code()), status.message())
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
pub fn error_page(code: StatusCode, message: &str) -> Response {
    let body = markup!(
        "<div class=\"notice bad\" id=\"error\" role=\"alert\">{}</div>\
         <p><a href=\"javascript:history.back()\">Back</a> · <a href=\"/\">Dashboard</a></p>",
        message
    );
    let title = format!("Error {}", code.as_u16());
    let mut response = html::document(&title, Markup::new(), body);
    *response.status_mut() = code;
    response
}
