//! Runs: the list (filters in the URL, newest first, paged), a run's detail with every field of
//! its log row and its run log (tailed live by the script), kill, and clearing logs.

use std::fmt::Write;

use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::csrf::{Fields, Posted};
use super::super::form;
use super::super::html::{self, Nav, esc};
use super::super::session::Viewer;
use super::super::{Shared, request};
use super::{Path, group_name, next_page_link, readable_groups, see_other, status_page};

const STATUSES: &[&str] = &[
    "PENDING", "RUNNING", "SUCCESS", "FAILED", "TIMEOUT", "KILLED", "LOST", "SKIPPED",
];

/// XXL-JOB's clean-up modes, in its order.
const CLEAR_MODES: &[(&str, &str)] = &[
    ("OLDER_THAN_ONE_MONTH", "older than 1 month"),
    ("OLDER_THAN_THREE_MONTHS", "older than 3 months"),
    ("OLDER_THAN_SIX_MONTHS", "older than 6 months"),
    ("OLDER_THAN_ONE_YEAR", "older than 1 year"),
    ("KEEP_LATEST_1000", "all but the latest 1,000"),
    ("KEEP_LATEST_10000", "all but the latest 10,000"),
    ("KEEP_LATEST_30000", "all but the latest 30,000"),
    ("KEEP_LATEST_100000", "all but the latest 100,000"),
    ("ALL", "all"),
];

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

/// `YYYY-MM-DDTHH:MM` (a `datetime-local` field, read as UTC; seconds allowed) to epoch ms;
/// 0 when empty.
fn parse_time(name: &str, text: &str) -> Result<i64, String> {
    if text.is_empty() {
        return Ok(0);
    }
    ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|format| chrono::NaiveDateTime::parse_from_str(text, format).ok())
        .map(|at| at.and_utc().timestamp_millis())
        .ok_or_else(|| format!("{name}: '{text}' is not a time like 2024-05-01T13:30 (UTC)"))
}

/// The list's filters as the API takes them, or why one of them was refused.
fn read_filters(query: &Fields) -> Result<(i64, i64, i64), String> {
    let job = form::id_filter(query.get("job")).map_err(|message| format!("job: {message}"))?;
    let from_ms = parse_time("from", query.get("from"))?;
    let to_ms = parse_time("to", query.get("to"))?;
    Ok((job, from_ms, to_ms))
}

pub async fn list(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let query = Fields::from_query(uri.query());
    let groups = readable_groups(&console, &viewer).await;
    let status = pb::RunStatus::from_str_name(&format!("RUN_STATUS_{}", query.get("status")))
        .map_or(0, |status| status as i32);
    let (job_id, from_ms, to_ms) = match read_filters(&query) {
        Ok(filters) => filters,
        Err(message) => return refused_filters(&viewer, &query, &groups, &message),
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
                page_size: 50,
                page_token: query.get("page").to_string(),
            },
        ))
        .await;
    let page = match answer {
        Ok(answer) => answer.into_inner(),
        Err(status) => return status_page(&status),
    };
    let mut body = html::notice("ok", query.get("notice"));
    body.push_str(&filters(&query, &groups));
    if page.logs.is_empty() {
        body.push_str(
            "<p class=\"empty\" id=\"no-runs\">No runs match. Runs appear when a started job \
             fires or when you trigger one from its job page.</p>",
        );
    } else {
        body.push_str(
            "<div class=\"scroll\"><table id=\"runs\"><tr><th>Run</th><th>Job</th><th>Group</th>\
             <th>Status</th><th>Trigger</th><th>Triggered</th><th>Took</th><th>Executor</th>\
             <th>Message</th></tr>",
        );
        for log in &page.logs {
            body.push_str(&run_row(log, &groups));
        }
        body.push_str("</table></div>");
    }
    let filters: Vec<(&str, String)> = ["job", "group", "status", "from", "to"]
        .iter()
        .map(|key| (*key, query.get(key).to_string()))
        .collect();
    body.push_str(&next_page_link("/runs", &filters, &page.next_page_token));
    if groups.iter().any(|group| viewer.can_operate(group.id)) {
        body.push_str(&clear_form(&viewer, &query, &groups));
    }
    html::page(Some(&viewer), "Runs", Nav::Runs, &body)
}

/// The list page with the filters as typed and why one was refused, instead of the runs: a
/// filter silently dropped would list runs the user did not ask for.
fn refused_filters(
    viewer: &Viewer,
    query: &Fields,
    groups: &[pb::Group],
    message: &str,
) -> Response {
    let mut body = filters(query, groups);
    body.push_str(&format!(
        "<div class=\"notice bad\" id=\"filter-error\" role=\"alert\">{}</div>",
        esc(message)
    ));
    let mut response = html::page(Some(viewer), "Runs", Nav::Runs, &body);
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
}

fn filters(query: &Fields, groups: &[pb::Group]) -> String {
    let mut group_options = vec![(String::new(), "all groups".to_string())];
    group_options.extend(
        groups
            .iter()
            .map(|group| (group.id.to_string(), group_name(groups, group.id))),
    );
    let mut status_options = vec![(String::new(), "any status".to_string())];
    status_options.extend(
        STATUSES
            .iter()
            .map(|status| (status.to_string(), status.to_string())),
    );
    format!(
        "<form method=\"get\" action=\"/runs\" class=\"filters\" id=\"run-filters\">\
         <input type=\"number\" name=\"job\" placeholder=\"job id\" value=\"{}\">{}{}\
         <label>from <input type=\"datetime-local\" name=\"from\" value=\"{}\"></label>\
         <label>to <input type=\"datetime-local\" name=\"to\" value=\"{}\"></label>\
         <span class=\"hint\">(UTC)</span>\
         <button type=\"submit\">Filter</button> <a href=\"/runs\">Clear</a></form>",
        esc(query.get("job")),
        html::select("group", &group_options, query.get("group")),
        html::select("status", &status_options, query.get("status")),
        esc(query.get("from")),
        esc(query.get("to")),
    )
}

fn run_row(log: &pb::Log, groups: &[pb::Group]) -> String {
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
    format!(
        "<tr data-run-id=\"{id}\"><td><a href=\"/runs/{id}\">{id}</a></td>\
         <td><a href=\"/jobs/{job}\">{job}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
         <td>{took}</td><td>{}</td><td class=\"msg\">{}</td></tr>",
        esc(&group_name(groups, log.group_id)),
        html::badge(&status_name(log.status)),
        trigger_name(log.trigger_type),
        html::time(log.trigger_time_ms),
        esc(&log.executor_address),
        esc(&short),
        id = log.id,
        job = log.job_id,
    )
}

fn clear_form(viewer: &Viewer, query: &Fields, groups: &[pb::Group]) -> String {
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
    let modes: Vec<(String, String)> = CLEAR_MODES
        .iter()
        .map(|(value, label)| (value.to_string(), label.to_string()))
        .collect();
    format!(
        "<details class=\"card\" id=\"clear-logs\"><summary>Clear logs</summary>\
         <form method=\"post\" action=\"/runs/clear\" id=\"clear-form\" \
         data-confirm=\"Delete these finished runs? This cannot be undone.\">{}\
         <div class=\"fields\">\
         <div class=\"field\"><label for=\"group\">Group</label>{}</div>\
         <div class=\"field\"><label for=\"clear_job\">Job id</label>\
         <input type=\"number\" name=\"job\" id=\"clear_job\" value=\"{}\">\
         <div class=\"hint\">empty = every job of the group</div></div>\
         <div class=\"field\"><label for=\"mode\">Delete</label>{}</div></div>\
         <p class=\"hint\">Running and pending runs are never deleted.</p>\
         <button class=\"danger\" id=\"clear-logs-button\">Clear logs</button></form></details>",
        html::csrf_field(viewer),
        html::select("group", &group_options, query.get("group")),
        esc(query.get("job")),
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
    let job_name = console
        .api()
        .get_job(request(
            &viewer.caller,
            pb::GetJobRequest { id: log.job_id },
        ))
        .await
        .ok()
        .and_then(|answer| answer.into_inner().job)
        .map_or_else(|| format!("job {}", log.job_id), |job| job.name);
    let status = status_name(log.status);
    let open = matches!(status.as_str(), "PENDING" | "RUNNING");
    let mut body = html::notice("ok", query.get("notice"));
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
    let rows: Vec<(&str, String)> = vec![
        (
            "Status",
            format!("<span id=\"run-status\">{}</span>", html::badge(&status)),
        ),
        (
            "Job",
            format!(
                "<a href=\"/jobs/{}\">{}</a> ({})",
                log.job_id,
                esc(&job_name),
                log.job_id
            ),
        ),
        ("Group", esc(&group_name(&groups, log.group_id))),
        ("Trigger type", trigger_name(log.trigger_type)),
        ("Scheduled at", html::time(log.scheduled_at_ms)),
        ("Triggered at", html::time(log.trigger_time_ms)),
        ("Lateness", lateness),
        ("Finished at", html::time(log.handle_time_ms)),
        ("Took", took),
        ("Trigger code", log.trigger_code.to_string()),
        (
            "Trigger message",
            format!("<pre class=\"msg\">{}</pre>", esc(&log.trigger_msg)),
        ),
        ("Handle code", log.handle_code.to_string()),
        (
            "Handle message",
            format!("<pre class=\"msg\">{}</pre>", esc(&log.handle_msg)),
        ),
        ("Executor", esc(&log.executor_address)),
        ("Handler", esc(&log.handler)),
        (
            "Params",
            format!(
                "<pre class=\"msg\" id=\"run-params\">{}</pre>",
                esc(&log.params)
            ),
        ),
        (
            "Shard",
            format!("{} / {}", log.shard_index, log.shard_total),
        ),
        ("Attempt", log.attempt.to_string()),
        ("Alarm", esc(&log.alarm_delivery)),
        ("Trace", trace),
    ];
    body.push_str("<section class=\"card\" id=\"run-fields\"><dl class=\"fields-list\">");
    for (name, value) in rows {
        let _ = write!(body, "<dt>{name}</dt><dd>{value}</dd>");
    }
    body.push_str("</dl>");
    if open && viewer.can_operate(log.group_id) {
        let _ = write!(
            body,
            "<form method=\"post\" action=\"/runs/{id}/kill\" data-confirm=\"Kill run {id}?\">{}\
             <button class=\"danger\" id=\"kill-run\">Kill</button></form>",
            html::csrf_field(&viewer),
            id = log.id
        );
    }
    let _ = write!(
        body,
        "<p><a href=\"/runs?job={}\">Other runs of this job</a></p></section>",
        log.job_id
    );
    body.push_str(&attempts(&console, &viewer, &log, &groups).await);
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
    let _ = write!(
        body,
        "<section class=\"card\"><h2>Run log</h2><p class=\"hint\" id=\"log-note\">{}</p>\
         <pre class=\"log\" id=\"run-log\" data-log-id=\"{id}\" data-next-line=\"{next_line}\" \
         data-ended=\"{ended}\">{}</pre></section>",
        esc(&note),
        esc(&content),
    );
    html::page(Some(&viewer), &format!("Run {id}"), Nav::Runs, &body)
}

/// The retry history of the run's occurrence: every attempt of the same fire (same job,
/// scheduled time and shard), when there is more than this one.
async fn attempts(
    console: &super::super::Console,
    viewer: &Viewer,
    log: &pb::Log,
    groups: &[pb::Group],
) -> String {
    if log.scheduled_at_ms <= 0 {
        return String::new();
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
        return String::new();
    }
    runs.sort_by_key(|run| run.attempt);
    let mut out = String::from(
        "<section class=\"card\" id=\"attempts\"><h2>Attempts of this fire</h2>\
         <div class=\"scroll\"><table><tr><th>Run</th><th>Job</th><th>Group</th><th>Status</th>\
         <th>Trigger</th><th>Triggered</th><th>Took</th><th>Executor</th><th>Message</th></tr>",
    );
    for run in &runs {
        out.push_str(&run_row(run, groups));
    }
    out.push_str("</table></div></section>");
    out
}

fn trace_link(template: &str, trace_id: &str) -> String {
    if trace_id.is_empty() {
        return "<span class=\"muted\">not traced</span>".to_string();
    }
    if template.is_empty() {
        return format!("<code>{}</code>", esc(trace_id));
    }
    let href = template.replace("{trace_id}", &html::url(trace_id));
    format!(
        "<a href=\"{}\" id=\"trace-link\" rel=\"noopener\">{}</a>",
        esc(&href),
        esc(trace_id)
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
            see_other(&format!("/runs/{id}"), &notice)
        }
        Err(status) => status_page(&status),
    }
}
