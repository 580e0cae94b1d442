//! The console's pages, one module per family, and what they share: error pages, the field an
//! API error names, redirects after a post.

pub mod dashboard;
pub mod groups;
pub mod jobs;
pub mod login;
pub mod runs;
pub mod users;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use tonic::{Code, Status};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

pub use super::errors::{error_page, http_status, not_found_page, status_page};
use super::html::{self, Markup, markup};
use super::session::Viewer;
use super::{Console, request};

/// The console's path extractor: axum's `Path`, except that a part that does not parse
/// (`/runs/abc`) answers the console's 404 page instead of axum's plain-text parse error.
pub struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(_) => Err(not_found_page()),
        }
    }
}

/// The form field an API error names (`job.schedule_conf: …` → `schedule_conf`), and the
/// message without that prefix.
pub fn field_error(status: &Status) -> (Option<String>, String) {
    let message = status.message();
    let named = matches!(status.code(), Code::InvalidArgument | Code::NotFound);
    if named && let Some((path, rest)) = message.split_once(": ") {
        let field = path.rsplit('.').next().unwrap_or(path);
        let simple = !field.is_empty()
            && field
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if simple {
            return (Some(field.to_string()), rest.to_string());
        }
    }
    (None, message.to_string())
}

/// Marks an answer that shows a secret (a new API token, a group's access token as typed):
/// browsers and proxies must not keep a copy (the back button, a shared cache, a disk cache).
pub fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}

/// 303 to a page after a post, with a one-line notice in its query.
pub fn see_other(path: &str, notice: &str) -> Response {
    let separator = if path.contains('?') { '&' } else { '?' };
    let target = if notice.is_empty() {
        path.to_string()
    } else {
        format!("{path}{separator}notice={}", html::url(notice))
    };
    Redirect::to(&target).into_response()
}

/// Every group the viewer may read (for selects and names), by id.
pub async fn readable_groups(console: &Console, viewer: &Viewer) -> Vec<pb::Group> {
    let answer = console
        .api()
        .list_groups(request(
            &viewer.caller,
            pb::ListGroupsRequest {
                app_name: String::new(),
                page_size: 1000,
                page_token: String::new(),
            },
        ))
        .await;
    answer
        .map(|answer| answer.into_inner().groups)
        .unwrap_or_default()
}

/// A group's display name.
pub fn group_name(groups: &[pb::Group], id: i64) -> String {
    groups
        .iter()
        .find(|group| group.id == id)
        .map(|group| {
            if group.title.is_empty() {
                group.app_name.clone()
            } else {
                group.title.clone()
            }
        })
        .unwrap_or_else(|| format!("group {id}"))
}

/// A "Next page" link keeping the current filters.
pub fn next_page_link(path: &str, filters: &[(&str, String)], token: &str) -> Markup {
    if token.is_empty() {
        return Markup::new();
    }
    let mut query: Vec<String> = filters
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| format!("{key}={}", html::url(value)))
        .collect();
    query.push(format!("page={}", html::url(token)));
    markup!(
        "<p class=\"pager\"><a id=\"next-page\" href=\"{}?{}\">Next page →</a></p>",
        path,
        query.join("&")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_name_their_field() {
        let status = Status::invalid_argument("job.schedule_conf: cron needs 6 or 7 fields");
        assert_eq!(
            field_error(&status),
            (
                Some("schedule_conf".to_string()),
                "cron needs 6 or 7 fields".to_string()
            )
        );
        let status = Status::failed_precondition("job 3 has schedule type NONE");
        assert_eq!(field_error(&status).0, None);
    }
}
