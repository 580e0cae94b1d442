//! Runs: the list (filters in the URL, newest first, paged), a run's detail with every field of
//! its log row and its run log (tailed live by the script), kill, and clearing logs.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono_tz::Tz;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::csrf::{Fields, Posted};
use super::super::form;
use super::super::frame::{self, Nav};
use super::super::html::{self, Markup, Tone, markup};
use super::super::session::Viewer;
use super::super::zone::{self, reading_zone};
use super::super::{Shared, request};
use super::{
    PAGE_SIZE, Path, group_name, job_named, jobs_by_id, page_token, pager, readable_groups,
    see_other, sortable_header, sorted_url, status_page, total_line,
};

/// A clean-up mode in words (XXL-JOB's modes, in its order, come from `ClearLogsMode`).
fn clear_mode_label(mode: pb::ClearLogsMode) -> &'static str {
    use pb::ClearLogsMode as Mode;
    match mode {
        Mode::Unspecified => "",
        Mode::OlderThanOneMonth => "older than 1 month",
        Mode::OlderThanThreeMonths => "older than 3 months",
        Mode::OlderThanSixMonths => "older than 6 months",
        Mode::OlderThanOneYear => "older than 1 year",
        Mode::KeepLatest1000 => "all but the latest 1,000",
        Mode::KeepLatest10000 => "all but the latest 10,000",
        Mode::KeepLatest30000 => "all but the latest 30,000",
        Mode::KeepLatest100000 => "all but the latest 100,000",
        Mode::All => "all",
    }
}

/// The run statuses a filter offers, from `RunStatus`.
fn status_choices() -> Vec<html::Choice> {
    html::enum_choices(
        "RUN_STATUS_",
        |value| {
            pb::RunStatus::try_from(value)
                .ok()
                .map(|status| status.as_str_name())
        },
        &[],
    )
}

fn status_name(status: i32) -> String {
    pb::RunStatus::try_from(status)
        .map(|status| html::enum_label(status.as_str_name(), "RUN_STATUS_"))
        .unwrap_or_else(|_| "?".to_string())
}

fn trigger_name(trigger: i32) -> String {
    pb::TriggerType::try_from(trigger)
        .map(|trigger| html::enum_label(trigger.as_str_name(), "TRIGGER_TYPE_"))
        .unwrap_or_else(|_| "?".to_string())
}

/// The list's time filters (`from`, `to`) as epoch ms, read in `zone`, or why one was refused.
fn read_times(query: &Fields, zone: Tz) -> Result<(i64, i64), String> {
    let from_ms = zone::parse_local("from", query.get("from"), zone)?;
    let to_ms = zone::parse_local("to", query.get("to"), zone)?;
    Ok((from_ms, to_ms))
}

pub async fn list(
    State(console): State<Shared>,
    viewer: Viewer,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let query = Fields::from_query(uri.query());
    let groups = readable_groups(&console, &viewer).await;
    let default_zone = console.ctx.config.default_time_zone();
    let status = pb::RunStatus::from_str_name(&format!("RUN_STATUS_{}", query.get("status")))
        .map_or(0, |status| status as i32);
    let shown = reading_zone(&query, &headers, None);
    let mut job_id = match form::id_filter(query.get("job")) {
        Ok(job_id) => job_id,
        Err(message) => {
            let message = format!("job: {message}");
            return refused_filters(&viewer, &query, &groups, shown, &message);
        }
    };
    let job_name = query.get("job_name");
    if job_id == 0 && !job_name.is_empty() {
        job_id = match job_named(&console, &viewer, job_name).await {
            Ok(id) => id,
            Err(message) => return refused_filters(&viewer, &query, &groups, shown, &message),
        };
    }
    // Under "job's zone", a list of one job reads its times in that job's zone.
    let job_zone = if job_id > 0 {
        jobs_by_id(&console, &viewer, vec![job_id])
            .await
            .get(&job_id)
            .map(|job| zone::of_job(&job.time_zone, default_zone))
    } else {
        None
    };
    let shown = reading_zone(&query, &headers, job_zone);
    let (from_ms, to_ms) = match read_times(&query, shown) {
        Ok(times) => times,
        Err(message) => return refused_filters(&viewer, &query, &groups, shown, &message),
    };
    let answer = console
        .api()
        .list_logs(request(
            &viewer.caller,
            pb::ListLogsRequest {
                group_id: query.int("group"),
                job_id,
                status,
                from_ms,
                to_ms,
                page_size: PAGE_SIZE as i32,
                page_token: page_token(&query, PAGE_SIZE),
                order_by: query.get("sort").to_string(),
            },
        ))
        .await;
    let page = match answer {
        Ok(answer) => answer.into_inner(),
        Err(status) => return status_page(&status),
    };
    let mut body = html::notice(Tone::Ok, query.get("notice"));
    body.push(filters(&query, &groups, shown));
    // Refreshed in place by the live script (a RUNNING row turns SUCCESS without a reload).
    body.push(Markup::literal("<div id=\"runs-live\" data-live>"));
    if page.logs.is_empty() {
        body.push(Markup::literal(
            "<p class=\"empty\" id=\"no-runs\">No runs match. Runs appear when a started job \
             fires or when you trigger one from its job page.</p>",
        ));
    } else {
        body.push(total_line("runs-total", page.total_size, "run", "runs"));
        body.push(Markup::literal("<div class=\"scroll\"><table id=\"runs\">"));
        let link = |sort: &str| sorted_url("/runs", &query, LIST_KEYS, sort);
        body.push(sortable_header(RUN_COLUMNS, query.get("sort"), &link));
        let back = list_state(&query);
        let ids: Vec<i64> = page.logs.iter().map(|log| log.job_id).collect();
        let jobs = jobs_by_id(&console, &viewer, ids).await;
        let known = Known {
            groups: &groups,
            jobs: &jobs,
            default_zone,
        };
        for log in &page.logs {
            body.push(run_row(log, &known, Some((&viewer, &back))));
        }
        body.push(Markup::literal("</table></div>"));
    }
    let filters: Vec<(&str, String)> = LIST_KEYS
        .iter()
        .filter(|key| **key != "page")
        .map(|key| (*key, query.get(key).to_string()))
        .collect();
    body.push(pager(
        "/runs",
        &filters,
        &page_token(&query, PAGE_SIZE),
        &page.next_page_token,
        PAGE_SIZE,
    ));
    body.push(Markup::literal("</div>"));
    if groups.iter().any(|group| viewer.can_operate(group.id)) {
        body.push(clear_form(&viewer, &query, &groups));
    }
    frame::page(Some(&viewer), "Runs", Nav::Runs, body)
}

/// The list page with the filters as typed and why one was refused, instead of the runs: a
/// filter silently dropped would list runs the user did not ask for.
fn refused_filters(
    viewer: &Viewer,
    query: &Fields,
    groups: &[pb::Group],
    shown: Tz,
    message: &str,
) -> Response {
    let mut body = filters(query, groups, shown);
    body.push(markup!(
        "<div class=\"notice bad\" id=\"filter-error\" role=\"alert\">{}</div>",
        message
    ));
    let mut response = frame::page(Some(viewer), "Runs", Nav::Runs, body);
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
}

/// The filter form; its times are read in `shown`, which it names and posts back (`tz`).
fn filters(query: &Fields, groups: &[pb::Group], shown: Tz) -> Markup {
    let mut group_options = vec![(String::new(), "all groups".to_string())];
    group_options.extend(
        groups
            .iter()
            .map(|group| (group.id.to_string(), group_name(groups, group.id))),
    );
    let mut status_options = vec![(String::new(), "any status".to_string())];
    status_options.extend(status_choices());
    markup!(
        "<form method=\"get\" action=\"/runs\" class=\"filters\" id=\"run-filters\">\
         <label class=\"sr-only\" for=\"filter_job\">Job id</label>\
         <input type=\"number\" name=\"job\" id=\"filter_job\" placeholder=\"job id\" value=\"{}\">\
         <label class=\"sr-only\" for=\"filter_job_name\">Job name</label>\
         <input type=\"search\" name=\"job_name\" id=\"filter_job_name\" placeholder=\"job name\" value=\"{}\">\
         <label class=\"sr-only\" for=\"group\">Group</label>{}\
         <label class=\"sr-only\" for=\"status\">Status</label>{}\
         <label>from <input type=\"datetime-local\" name=\"from\" value=\"{}\"></label>\
         <label>to <input type=\"datetime-local\" name=\"to\" value=\"{}\"></label>\
         <span class=\"hint\" id=\"filter-zone\">(times in {})</span>\
         <input type=\"hidden\" name=\"tz\" value=\"{}\">\
         <button type=\"submit\">Filter</button> <a href=\"/runs\">Clear</a></form>",
        query.get("job"),
        query.get("job_name"),
        html::select("group", &group_options, query.get("group")),
        html::select("status", &status_options, query.get("status")),
        query.get("from"),
        query.get("to"),
        shown.name(),
        shown.name(),
    )
}

/// The runs list's filters and sort, as its URL carries them.
const LIST_KEYS: &[&str] = &[
    "job", "job_name", "group", "status", "from", "to", "tz", "sort", "page",
];

/// The runs list's columns: label and sort key (`model::LOG_SORT_KEYS`), if it sorts.
const RUN_COLUMNS: &[(&str, Option<&str>)] = &[
    ("Run", Some("id")),
    ("Job", Some("job")),
    ("Group", Some("group")),
    ("Status", Some("status")),
    ("Trigger", None),
    ("Triggered", Some("triggered")),
    ("Took", None),
    ("Executor", Some("executor")),
    ("Message", None),
    ("Actions", None),
];

/// The runs table's header row (the list and a run's attempts).
static RUN_HEADER: std::sync::LazyLock<Markup> = std::sync::LazyLock::new(|| {
    Markup::literal(
        "<tr><th scope=\"col\">Run</th><th scope=\"col\">Job</th><th scope=\"col\">Group</th>\
         <th scope=\"col\">Status</th><th scope=\"col\">Trigger</th>\
         <th scope=\"col\">Triggered</th><th scope=\"col\">Took</th>\
         <th scope=\"col\">Executor</th><th scope=\"col\">Message</th>\
         <th scope=\"col\">Actions</th></tr>",
    )
});

/// The runs list's URL as it is now (filters and page), so Kill and Retry come back to it.
fn list_state(query: &Fields) -> String {
    let kept: Vec<String> = LIST_KEYS
        .iter()
        .filter(|key| !query.get(key).is_empty())
        .map(|key| format!("{key}={}", html::url(query.get(key))))
        .collect();
    if kept.is_empty() {
        "/runs".to_string()
    } else {
        format!("/runs?{}", kept.join("&"))
    }
}

/// Kill (an open run) or Retry (a run that ended badly) from a row, for who may operate the
/// run's group; each asks first and comes back to `back`.
fn row_actions(log: &pb::Log, viewer: &Viewer, back: &str) -> Markup {
    if !viewer.can_operate(log.group_id) {
        return Markup::new();
    }
    let (action, text, question) = match pb::RunStatus::try_from(log.status) {
        Ok(pb::RunStatus::Pending | pb::RunStatus::Running) => ("kill", "Kill", "Kill run"),
        Ok(
            pb::RunStatus::Failed
            | pb::RunStatus::Timeout
            | pb::RunStatus::Killed
            | pb::RunStatus::Lost,
        ) => ("retry", "Retry", "Run the job again with the params of run"),
        _ => return Markup::new(),
    };
    markup!(
        "<form method=\"post\" action=\"/runs/{}/{}\" class=\"inline\" \
         data-confirm=\"{} {}?\">{}<input type=\"hidden\" name=\"back\" value=\"{}\">\
         <button class=\"small{}\" id=\"{}-run-{}\">{}</button></form>",
        log.id,
        action,
        question,
        log.id,
        frame::csrf_field(viewer),
        back,
        if action == "kill" {
            Markup::literal(" danger")
        } else {
            Markup::new()
        },
        action,
        log.id,
        text
    )
}

/// Where Kill or Retry from the list returns: the runs list it was pressed on (posted as
/// `back`), else `fallback`. Only a path of the runs list is followed.
fn back_to(fields: &Fields, fallback: String) -> String {
    let back = fields.get("back");
    let runs_list = back == "/runs"
        || (back.starts_with("/runs?") && back.bytes().all(|byte| byte.is_ascii_graphic()));
    if runs_list {
        back.to_string()
    } else {
        fallback
    }
}

/// What a run row shows besides the run: group and job names, the jobs' zones.
struct Known<'a> {
    groups: &'a [pb::Group],
    jobs: &'a HashMap<i64, pb::Job>,
    default_zone: Tz,
}

impl Known<'_> {
    /// The zone a run's times are shown in under "job's zone".
    fn zone_of(&self, job_id: i64) -> Tz {
        self.jobs.get(&job_id).map_or(self.default_zone, |job| {
            zone::of_job(&job.time_zone, self.default_zone)
        })
    }
}

fn run_row(log: &pb::Log, known: &Known<'_>, controls: Option<(&Viewer, &str)>) -> Markup {
    let job = match known.jobs.get(&log.job_id) {
        Some(job) => markup!("{} <span class=\"muted\">({})</span>", job.name, log.job_id),
        None => markup!("{}", log.job_id),
    };
    let took = if log.handle_time_ms > 0 && log.trigger_time_ms > 0 {
        html::duration(log.handle_time_ms - log.trigger_time_ms)
    } else {
        String::new()
    };
    let message = if log.handle_msg.is_empty() {
        &log.trigger_msg
    } else {
        &log.handle_msg
    };
    let short: String = message.chars().take(80).collect();
    markup!(
        "<tr data-run-id=\"{}\"><td><a href=\"/runs/{}\">{}</a></td>\
         <td><a href=\"/jobs/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
         <td>{}</td><td>{}</td><td class=\"msg\">{}</td><td>{}</td></tr>",
        log.id,
        log.id,
        log.id,
        log.job_id,
        job,
        group_name(known.groups, log.group_id),
        html::badge(&status_name(log.status)),
        trigger_name(log.trigger_type),
        zone::job_time(log.trigger_time_ms, known.zone_of(log.job_id).name()),
        took,
        log.executor_address,
        short,
        controls
            .map(|(viewer, back)| row_actions(log, viewer, back))
            .unwrap_or_default(),
    )
}

fn clear_form(viewer: &Viewer, query: &Fields, groups: &[pb::Group]) -> Markup {
    let mut group_options = Vec::new();
    if viewer.is_admin() {
        group_options.push((String::new(), "every group".to_string()));
    }
    group_options.extend(
        groups
            .iter()
            .filter(|group| viewer.can_operate(group.id))
            .map(|group| (group.id.to_string(), group_name(groups, group.id))),
    );
    let modes: Vec<html::Choice> = html::enum_choices(
        "CLEAR_LOGS_MODE_",
        |value| {
            pb::ClearLogsMode::try_from(value)
                .ok()
                .map(|mode| mode.as_str_name())
        },
        &[],
    )
    .into_iter()
    .filter_map(|(value, _)| {
        let mode = pb::ClearLogsMode::from_str_name(&format!("CLEAR_LOGS_MODE_{value}"))?;
        Some((value, clear_mode_label(mode).to_string()))
    })
    .collect();
    markup!(
        "<details class=\"card\" id=\"clear-logs\"><summary>Clear logs</summary>\
         <form method=\"post\" action=\"/runs/clear\" id=\"clear-form\" \
         data-confirm=\"Delete these finished runs? This cannot be undone.\">{}\
         <div class=\"fields\">\
         <div class=\"field\"><label for=\"clear_group\">Group</label>{}</div>\
         <div class=\"field\"><label for=\"clear_job\">Job id</label>\
         <input type=\"number\" name=\"job\" id=\"clear_job\" value=\"{}\">\
         <div class=\"hint\">empty = every job of the group</div></div>\
         <div class=\"field\"><label for=\"mode\">Delete</label>{}</div></div>\
         <p class=\"hint\">Running and pending runs are never deleted.</p>\
         <button class=\"danger\" id=\"clear-logs-button\">Clear logs</button></form></details>",
        frame::csrf_field(viewer),
        html::select_with_id("group", "clear_group", &group_options, query.get("group")),
        query.get("job"),
        html::select("mode", &modes, "KEEP_LATEST_1000"),
    )
}

pub async fn clear(State(console): State<Shared>, posted: Posted) -> Response {
    let fields = &posted.fields;
    let mode = pb::ClearLogsMode::from_str_name(&format!("CLEAR_LOGS_MODE_{}", fields.get("mode")))
        .map_or(0, |mode| mode as i32);
    // A mistyped job id must not widen the deletion to every job of the group.
    let job_id = match form::id_filter(fields.get("job")) {
        Ok(job_id) => job_id,
        Err(message) => {
            return super::error_page(StatusCode::BAD_REQUEST, &format!("job: {message}"));
        }
    };
    let answer = console
        .api()
        .clear_logs(request(
            &posted.viewer.caller,
            pb::ClearLogsRequest {
                group_id: fields.int("group"),
                job_id,
                mode,
            },
        ))
        .await;
    match answer {
        Ok(answer) => see_other(
            "/runs",
            &format!("{} finished runs deleted.", answer.into_inner().deleted),
        ),
        Err(status) => status_page(&status),
    }
}

pub async fn detail(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(id): Path<i64>,
    uri: Uri,
) -> Response {
    let query = Fields::from_query(uri.query());
    let answer = console
        .api()
        .get_log(request(&viewer.caller, pb::GetLogRequest { id }))
        .await;
    let log = match answer {
        Ok(answer) => answer.into_inner().log.unwrap_or_default(),
        Err(status) => return status_page(&status),
    };
    let groups = readable_groups(&console, &viewer).await;
    let jobs = jobs_by_id(&console, &viewer, vec![log.job_id]).await;
    let known = Known {
        groups: &groups,
        jobs: &jobs,
        default_zone: console.ctx.config.default_time_zone(),
    };
    let job_name = jobs
        .get(&log.job_id)
        .map_or_else(|| format!("job {}", log.job_id), |job| job.name.clone());
    let job_zone = known.zone_of(log.job_id);
    let time = |ms: i64| zone::job_time(ms, job_zone.name());
    let status = status_name(log.status);
    let open = matches!(status.as_str(), "PENDING" | "RUNNING");
    let mut body = html::notice(Tone::Ok, query.get("notice"));
    let lateness = if log.scheduled_at_ms > 0 && log.trigger_time_ms > 0 {
        html::duration(log.trigger_time_ms - log.scheduled_at_ms)
    } else {
        "–".to_string()
    };
    let took = if log.handle_time_ms > 0 && log.trigger_time_ms > 0 {
        html::duration(log.handle_time_ms - log.trigger_time_ms)
    } else {
        "–".to_string()
    };
    let trace = trace_link(&console.api().config().console_trace_url, &log.trace_id);
    let text = |value: &str| html::esc(value);
    let rows: Vec<(&str, Markup)> = vec![
        (
            "Status",
            markup!("<span id=\"run-status\">{}</span>", html::badge(&status)),
        ),
        (
            "Job",
            markup!(
                "<a href=\"/jobs/{}\">{}</a> ({})",
                log.job_id,
                job_name,
                log.job_id
            ),
        ),
        ("Group", text(&group_name(&groups, log.group_id))),
        ("Trigger type", text(&trigger_name(log.trigger_type))),
        ("Scheduled at", time(log.scheduled_at_ms)),
        ("Triggered at", time(log.trigger_time_ms)),
        ("Lateness", text(&lateness)),
        ("Finished at", time(log.handle_time_ms)),
        ("Took", text(&took)),
        ("Trigger code", markup!("{}", log.trigger_code)),
        (
            "Trigger message",
            markup!("<pre class=\"msg\">{}</pre>", log.trigger_msg),
        ),
        ("Handle code", markup!("{}", log.handle_code)),
        (
            "Handle message",
            markup!("<pre class=\"msg\">{}</pre>", log.handle_msg),
        ),
        ("Executor", text(&log.executor_address)),
        ("Handler", text(&log.handler)),
        (
            "Params",
            markup!("<pre class=\"msg\" id=\"run-params\">{}</pre>", log.params),
        ),
        (
            "Shard",
            markup!("{} / {}", log.shard_index, log.shard_total),
        ),
        ("Attempt", markup!("{}", log.attempt)),
        ("Alarm", text(&log.alarm_delivery)),
        ("Trace", trace),
    ];
    body.push(Markup::literal(
        "<section class=\"card\" id=\"run-fields\" data-live><dl class=\"fields-list\">",
    ));
    for (name, value) in rows {
        body.push(markup!("<dt>{}</dt><dd>{}</dd>", name, value));
    }
    body.push(Markup::literal("</dl>"));
    if open && viewer.can_operate(log.group_id) {
        body.push(markup!(
            "<form method=\"post\" action=\"/runs/{}/kill\" data-confirm=\"Kill run {}?\">{}\
             <button class=\"danger\" id=\"kill-run\">Kill</button></form>",
            log.id,
            log.id,
            frame::csrf_field(&viewer),
        ));
    }
    body.push(markup!(
        "<p><a href=\"/runs?job={}\">Other runs of this job</a></p></section>",
        log.job_id
    ));
    body.push(attempts(&console, &viewer, &log, &known).await);
    // The first read is server-side, so the log shows without the script; the script then
    // polls for more lines while the run is open.
    let first = console
        .api()
        .read_run_log(request(
            &viewer.caller,
            pb::ReadRunLogRequest {
                log_id: id,
                from_line: 1,
            },
        ))
        .await;
    let (content, next_line, ended, note) = match first {
        Ok(answer) => {
            let answer = answer.into_inner();
            (
                answer.content,
                answer.to_line + 1,
                answer.is_end,
                String::new(),
            )
        }
        Err(status) => (String::new(), 1, !open, status.message().to_string()),
    };
    body.push(markup!(
        "<section class=\"card\"><h2>Run log</h2><p class=\"hint\" id=\"log-note\">{}</p>\
         <pre class=\"log\" id=\"run-log\" data-log-id=\"{}\" data-next-line=\"{}\" \
         data-ended=\"{}\">{}</pre></section>",
        note,
        id,
        next_line,
        ended,
        content,
    ));
    frame::page(Some(&viewer), &format!("Run {id}"), Nav::Runs, body)
}

/// The retry history of the run's occurrence: every attempt of the same fire (same job,
/// scheduled time and shard), when there is more than this one.
async fn attempts(
    console: &super::super::Console,
    viewer: &Viewer,
    log: &pb::Log,
    known: &Known<'_>,
) -> Markup {
    if log.scheduled_at_ms <= 0 {
        return Markup::new();
    }
    // Retries keep the fire's scheduled time and are triggered after it (backoff is capped well
    // below a day).
    let answer = console
        .api()
        .list_logs(request(
            &viewer.caller,
            pb::ListLogsRequest {
                job_id: log.job_id,
                from_ms: log.scheduled_at_ms - 60_000,
                to_ms: log.scheduled_at_ms + 86_400_000,
                page_size: 200,
                ..Default::default()
            },
        ))
        .await;
    let mut runs: Vec<pb::Log> = answer
        .map(|answer| answer.into_inner().logs)
        .unwrap_or_default()
        .into_iter()
        .filter(|run| {
            run.scheduled_at_ms == log.scheduled_at_ms && run.shard_index == log.shard_index
        })
        .collect();
    if runs.len() < 2 {
        return Markup::new();
    }
    runs.sort_by_key(|run| run.attempt);
    let mut out = Markup::literal(
        "<section class=\"card\" id=\"attempts\" data-live><h2>Attempts of this fire</h2>\
         <div class=\"scroll\"><table>",
    );
    out.push(RUN_HEADER.clone());
    for run in &runs {
        out.push(run_row(run, known, None));
    }
    out.push(Markup::literal("</table></div></section>"));
    out
}

fn trace_link(template: &str, trace_id: &str) -> Markup {
    if trace_id.is_empty() {
        return Markup::literal("<span class=\"muted\">not traced</span>");
    }
    if template.is_empty() {
        return markup!("<code>{}</code>", trace_id);
    }
    let href = template.replace("{trace_id}", &html::url(trace_id));
    markup!(
        "<a href=\"{}\" id=\"trace-link\" rel=\"noopener\">{}</a>",
        href,
        trace_id
    )
}

/// `GET /runs/{id}/log?from=N`: lines from N as JSON for the live tail
/// (`{"content","next_line","ended","status"}` or `{"error"}`).
pub async fn log_chunk(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(id): Path<i64>,
    uri: Uri,
) -> Response {
    let query = Fields::from_query(uri.query());
    let from_line = query.int("from").max(1) as i32;
    let api = console.api();
    let status = api
        .get_log(request(&viewer.caller, pb::GetLogRequest { id }))
        .await
        .ok()
        .and_then(|answer| answer.into_inner().log)
        .map(|log| status_name(log.status))
        .unwrap_or_default();
    let answer = api
        .read_run_log(request(
            &viewer.caller,
            pb::ReadRunLogRequest {
                log_id: id,
                from_line,
            },
        ))
        .await;
    let json = match answer {
        Ok(answer) => {
            let answer = answer.into_inner();
            let next_line = if answer.to_line >= from_line {
                answer.to_line + 1
            } else {
                from_line
            };
            serde_json::json!({
                "content": answer.content,
                "next_line": next_line,
                "ended": answer.is_end,
                "status": status,
            })
        }
        Err(error) => serde_json::json!({ "error": error.message(), "status": status }),
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        json.to_string(),
    )
        .into_response()
}

pub async fn kill(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
    let answer = console
        .api()
        .kill_run(request(
            &posted.viewer.caller,
            pb::KillRunRequest { log_id: id },
        ))
        .await;
    match answer {
        Ok(answer) => {
            let answer = answer.into_inner();
            let notice = if answer.killed {
                "Kill sent: the executor stops the run.".to_string()
            } else {
                format!("Not killed: {}", answer.message)
            };
            see_other(&back_to(&posted.fields, format!("/runs/{id}")), &notice)
        }
        Err(status) => status_page(&status),
    }
}

/// `POST /runs/{id}/retry`: triggers the run's job once more with that run's params (a manual
/// trigger, so a new run, not an attempt of the old fire).
pub async fn retry(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
    let api = console.api();
    let caller = &posted.viewer.caller;
    let log = match api.get_log(request(caller, pb::GetLogRequest { id })).await {
        Ok(answer) => answer.into_inner().log.unwrap_or_default(),
        Err(status) => return status_page(&status),
    };
    let answer = api
        .trigger_job(request(
            caller,
            pb::TriggerJobRequest {
                id: log.job_id,
                params: Some(log.params),
                addresses: Vec::new(),
            },
        ))
        .await;
    match answer {
        Ok(answer) => {
            let new_runs: Vec<String> = answer
                .into_inner()
                .log_ids
                .iter()
                .map(i64::to_string)
                .collect();
            let notice = format!("Run {id} retried as run {}.", new_runs.join(", "));
            see_other(&back_to(&posted.fields, format!("/runs/{id}")), &notice)
        }
        Err(status) => status_page(&status),
    }
}
