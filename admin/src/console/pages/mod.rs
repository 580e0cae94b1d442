//! The console's pages, one module per family, and what they share: error pages, the field an
//! API error names, redirects after a post.

pub mod account;
pub mod calendars;
pub mod dashboard;
pub mod groups;
pub mod jobs;
pub mod login;
pub mod runs;
pub mod users;
pub mod workflow_actions;
pub mod workflow_schedule;
pub mod workflows;

use std::collections::HashMap;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use tonic::{Code, Status};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::csrf::Fields;
pub use super::errors::{error_page, http_status, not_found_page, status_page};
use super::html::{self, Markup, markup};
use super::i18n::{Lang, t, tf};
use super::session::Viewer;
use super::shared::{Console, request};

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
            Err(_) => Err(not_found_page(Lang::of_request(&parts.headers))),
        }
    }
}

/// The form field an API error names (`job.schedule_conf: …` → `schedule_conf`), and the
/// message without that prefix, in `lang`.
pub fn field_error(lang: Lang, status: &Status) -> (Option<String>, String) {
    let (field, message) = field_error_as_sent(status);
    let message = match field {
        Some(_) => super::i18n::api::say(lang, &message),
        None => super::errors::api_message(lang, &message),
    };
    (field, message)
}

fn field_error_as_sent(status: &Status) -> (Option<String>, String) {
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

/// What a page answers once the API answered its post: 303 to `to` with `notice`, or what
/// `refused` makes of the refusal (the form again with the error under its field, or an error
/// page naming the reason, such as the jobs that still use a group or a calendar).
pub fn after_post<T>(
    answer: Result<T, Status>,
    to: &str,
    notice: &str,
    refused: impl FnOnce(Status) -> Response,
) -> Response {
    match answer {
        Ok(_) => see_other(to, notice),
        Err(status) => refused(status),
    }
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

/// The jobs `ids` the viewer may read, by id (a missing one is left out): their names, and
/// the zones their times are shown in under "job's zone".
pub async fn jobs_by_id(
    console: &Console,
    viewer: &Viewer,
    ids: Vec<i64>,
) -> HashMap<i64, pb::Job> {
    let mut jobs = HashMap::new();
    for id in ids {
        if jobs.contains_key(&id) {
            continue;
        }
        let job = console
            .api()
            .get_job(request(&viewer.caller, pb::GetJobRequest { id }))
            .await
            .ok()
            .and_then(|answer| answer.into_inner().job);
        if let Some(job) = job {
            jobs.insert(id, job);
        }
    }
    jobs
}

/// The one job whose name contains `name` (the jobs list's name filter), or why there is not
/// exactly one.
pub async fn job_named(console: &Console, viewer: &Viewer, name: &str) -> Result<i64, String> {
    let lang = viewer.lang;
    let answer = console
        .api()
        .list_jobs(request(
            &viewer.caller,
            pb::ListJobsRequest {
                name: name.to_string(),
                page_size: 6,
                ..Default::default()
            },
        ))
        .await
        .map_err(|status| super::errors::api_message(lang, status.message()))?;
    let jobs = answer.into_inner().jobs;
    match jobs.as_slice() {
        [job] => Ok(job.id),
        [] => Err(tf(lang, "runs.no_job_named", &[&name])),
        several => {
            let listed: Vec<String> = several
                .iter()
                .take(5)
                .map(|job| format!("{} ({})", job.name, job.id))
                .collect();
            let more = if several.len() > 5 { ", …" } else { "" };
            Err(tf(
                lang,
                "runs.several_jobs_named",
                &[&name, &format!("{}{more}", listed.join(", "))],
            ))
        }
    }
}

/// A group's display name (`lang` names a group the viewer may not read by its id).
pub fn group_name(lang: Lang, groups: &[pb::Group], id: i64) -> String {
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
        .unwrap_or_else(|| tf(lang, "groups.group_n", &[&id]))
}

/// Rows per page in the console's lists.
pub const PAGE_SIZE: i64 = 50;

/// The page token to ask the API for: `goto` (a page number typed into the jump field) when
/// given, else the `page` token of a link. The API's token is the offset of the page's first
/// row, so page N starts at (N - 1) × the page size.
pub fn page_token(query: &Fields, page_size: i64) -> String {
    match query.get("goto").parse::<i64>() {
        Ok(number) if number > 1 => number
            .saturating_sub(1)
            .saturating_mul(page_size)
            .to_string(),
        Ok(_) => String::new(),
        Err(_) => query.get("page").to_string(),
    }
}

/// Page links under a list, keeping its filters: previous, which page this is, next, and a
/// field to jump to a page by number.
pub fn pager(
    lang: Lang,
    path: &str,
    filters: &[(&str, String)],
    current: &str,
    next: &str,
    page_size: i64,
) -> Markup {
    let offset = current.parse::<i64>().unwrap_or(0).max(0);
    if offset == 0 && next.is_empty() {
        return Markup::new();
    }
    let kept: Vec<(&str, &str)> = filters
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| (*key, value.as_str()))
        .collect();
    let link = |token: &str| {
        let mut query: Vec<String> = kept
            .iter()
            .map(|(key, value)| format!("{key}={}", html::url(value)))
            .collect();
        if !token.is_empty() {
            query.push(format!("page={}", html::url(token)));
        }
        if query.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{}", query.join("&"))
        }
    };
    let mut out = markup!(
        "<nav class=\"pager\" aria-label=\"{}\">",
        t(lang, "list.pages")
    );
    if offset > 0 {
        let previous = (offset - page_size).max(0);
        let token = if previous == 0 {
            String::new()
        } else {
            previous.to_string()
        };
        out.push(markup!(
            "<a id=\"previous-page\" href=\"{}\">{}</a> ",
            link(&token),
            t(lang, "list.previous")
        ));
    }
    out.push(markup!(
        "<span id=\"page-number\">{}</span>",
        tf(lang, "list.page_n", &[&(offset / page_size.max(1) + 1)])
    ));
    if !next.is_empty() {
        out.push(markup!(
            " <a id=\"next-page\" href=\"{}\">{}</a>",
            link(next),
            t(lang, "list.next")
        ));
    }
    out.push(markup!(
        "<form method=\"get\" action=\"{}\" class=\"inline\">",
        path
    ));
    for (key, value) in &kept {
        out.push(markup!(
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            key,
            value
        ));
    }
    out.push(markup!(
        " <label for=\"goto\">{}</label> \
         <input type=\"number\" name=\"goto\" id=\"goto\" min=\"1\" class=\"narrow\"> \
         <button class=\"small secondary\">{}</button></form></nav>",
        t(lang, "list.goto"),
        t(lang, "list.go")
    ));
    out
}

/// A list's header row: each column with a sort key is a link that sorts by it (a second
/// click: the other way); the column sorted by now carries `aria-sort` and an arrow. `current`
/// is the list's `sort` (`key` or `-key`), `link(sort)` the list's URL sorted that way.
pub fn sortable_header(
    columns: &[(&str, Option<&str>)],
    current: &str,
    link: &dyn Fn(&str) -> String,
) -> Markup {
    let (now, descending) = match current.strip_prefix('-') {
        Some(key) => (key, true),
        None => (current, false),
    };
    let mut row = Markup::literal("<tr>");
    for (label, key) in columns {
        let Some(key) = key else {
            row.push(markup!("<th scope=\"col\">{}</th>", *label));
            continue;
        };
        let sorted = now == *key;
        let (aria, arrow, next) = match (sorted, descending) {
            (true, false) => (" aria-sort=\"ascending\"", " ▲", format!("-{key}")),
            (true, true) => (" aria-sort=\"descending\"", " ▼", key.to_string()),
            (false, _) => ("", "", key.to_string()),
        };
        row.push(markup!(
            "<th scope=\"col\"{}><a href=\"{}\" data-sort=\"{}\">{}{}</a></th>",
            Markup::literal(aria),
            link(&next),
            *key,
            *label,
            Markup::literal(arrow)
        ));
    }
    row.push(Markup::literal("</tr>"));
    row
}

/// A list's URL with its filters `keys` from `query`, sorted by `sort`, from its first page (a
/// new order starts over).
pub fn sorted_url(path: &str, query: &Fields, keys: &[&str], sort: &str) -> String {
    let mut kept: Vec<String> = keys
        .iter()
        .filter(|key| **key != "sort" && **key != "page" && !query.get(key).is_empty())
        .map(|key| format!("{key}={}", html::url(query.get(key))))
        .collect();
    if !sort.is_empty() {
        kept.push(format!("sort={}", html::url(sort)));
    }
    if kept.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

/// How many rows a list has over all its pages, e.g. "10,000 jobs": `total` is the count and
/// whether it stopped at a bound (then "over 10,000 runs"); `words` the keys of the text for
/// one row, for several, and for over a bound, each with a `{}` for the number.
pub fn total_line(id: &str, lang: Lang, total: (i64, bool), words: [&'static str; 3]) -> Markup {
    let (total, capped) = total;
    let digits = total.max(0).to_string();
    let mut grouped = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let [one, many, over] = words;
    let key = match (capped, total) {
        (true, _) => over,
        (false, 1) => one,
        (false, _) => many,
    };
    markup!(
        "<p class=\"total muted\" id=\"{}\">{}</p>",
        id,
        tf(lang, key, &[&grouped])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_numbered_from_the_offset_token() {
        let jump = Fields::from_query(Some("goto=3&page=50"));
        assert_eq!(page_token(&jump, 50), "100");
        assert_eq!(page_token(&Fields::from_query(Some("goto=1")), 50), "");
        assert_eq!(page_token(&Fields::from_query(Some("page=50")), 50), "50");
        let filters = [("name", "a b".to_string())];
        let links = pager(Lang::En, "/jobs", &filters, "100", "150", 50).into_string();
        assert!(links.contains("page 3"), "{links}");
        assert!(
            links.contains("href=\"/jobs?name=a+b&amp;page=50\""),
            "{links}"
        );
        assert!(
            links.contains("href=\"/jobs?name=a+b&amp;page=150\""),
            "{links}"
        );
        assert!(pager(Lang::En, "/jobs", &filters, "", "", 50).is_empty());
    }

    #[test]
    fn headers_sort_by_their_column_and_flip_on_the_second_click() {
        let query = Fields::from_query(Some("name=a&sort=name&page=50"));
        let link = |sort: &str| sorted_url("/jobs", &query, &["name", "sort", "page"], sort);
        let row = sortable_header(&[("Name", Some("name")), ("Actions", None)], "name", &link)
            .into_string();
        assert!(row.contains("aria-sort=\"ascending\""), "{row}");
        assert!(
            row.contains("href=\"/jobs?name=a&amp;sort=-name\""),
            "{row}"
        );
        assert!(row.contains("<th scope=\"col\">Actions</th>"), "{row}");
        let row = sortable_header(&[("Name", Some("name"))], "-name", &link).into_string();
        assert!(row.contains("aria-sort=\"descending\""), "{row}");
        assert!(row.contains("href=\"/jobs?name=a&amp;sort=name\""), "{row}");
        let words = ["runs.total_one", "runs.total_many", "runs.total_over"];
        assert_eq!(
            total_line("t", Lang::En, (10_000, false), words).into_string(),
            "<p class=\"total muted\" id=\"t\">10,000 runs</p>"
        );
        assert_eq!(
            total_line("t", Lang::En, (10_000, true), words).into_string(),
            "<p class=\"total muted\" id=\"t\">over 10,000 runs</p>"
        );
        assert_eq!(
            total_line("t", Lang::Zh, (1, false), words).into_string(),
            "<p class=\"total muted\" id=\"t\">共 1 条运行记录</p>"
        );
    }

    #[test]
    fn api_errors_name_their_field() {
        let status = Status::invalid_argument("job.schedule_conf: cron needs 6 or 7 fields");
        assert_eq!(
            field_error(Lang::En, &status),
            (
                Some("schedule_conf".to_string()),
                "cron needs 6 or 7 fields".to_string()
            )
        );
        let status = Status::failed_precondition("job 3 has schedule type NONE");
        assert_eq!(field_error(Lang::En, &status).0, None);
    }
}
