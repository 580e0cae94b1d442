//! A run's detail: every field of its log row, its attempts, and its run log (tailed live by
//! the script); kill and retry, from here or from a row of the list.

use axum::extract::State;
use axum::http::{Uri, header};
use axum::response::{IntoResponse, Response};
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::super::csrf::{Fields, Posted};
use super::super::super::frame::{self, Nav};
use super::super::super::html::{self, Markup, Tone, markup};
use super::super::super::i18n::{t, tf};
use super::super::super::session::Viewer;
use super::super::super::shared::{Shared, request};
use super::super::super::zone;
use super::super::{Path, group_name, jobs_by_id, readable_groups, see_other, status_page};
use super::{Known, back_to, run_header, run_row, status_name, trigger_name};

pub async fn detail(
    State(console): State<Shared>,
    viewer: Viewer,
    Path(id): Path<i64>,
    uri: Uri,
) -> Response {
    let lang = viewer.lang;
    let query = Fields::from_query(uri.query());
    let answer = console
        .api()
        .get_log(request(&viewer.caller, pb::GetLogRequest { id }))
        .await;
    let log = match answer {
        Ok(answer) => answer.into_inner().log.unwrap_or_default(),
        Err(status) => return status_page(lang, &status),
    };
    let groups = readable_groups(&console, &viewer).await;
    let jobs = jobs_by_id(&console, &viewer, vec![log.job_id]).await;
    let known = Known {
        lang,
        groups: &groups,
        jobs: &jobs,
        default_zone: console.ctx.config.default_time_zone(),
    };
    let job_name = jobs.get(&log.job_id).map_or_else(
        || tf(lang, "dash.job_n", &[&log.job_id]),
        |job| job.name.clone(),
    );
    let job_zone = known.zone_of(log.job_id);
    let time = |ms: i64| zone::job_time(ms, job_zone.name());
    let status = status_name(log.status);
    let open = matches!(status.as_str(), "PENDING" | "RUNNING");
    let mut body = html::notice(Tone::Ok, query.get("notice"));
    let lateness = if log.scheduled_at_ms > 0 && log.trigger_time_ms > 0 {
        html::duration(lang, log.trigger_time_ms - log.scheduled_at_ms)
    } else {
        "–".to_string()
    };
    let took = if log.handle_time_ms > 0 && log.trigger_time_ms > 0 {
        html::duration(lang, log.handle_time_ms - log.trigger_time_ms)
    } else {
        "–".to_string()
    };
    let trace = trace_link(
        lang,
        &console.api().config().console_trace_url,
        &log.trace_id,
    );
    let text = |value: &str| html::esc(value);
    let rows: Vec<(&str, Markup)> = vec![
        (
            t(lang, "run.status"),
            markup!("<span id=\"run-status\">{}</span>", html::badge(&status)),
        ),
        (
            t(lang, "run.job"),
            markup!(
                "<a href=\"/jobs/{}\">{}</a> ({})",
                log.job_id,
                job_name,
                log.job_id
            ),
        ),
        (
            t(lang, "run.group"),
            text(&group_name(lang, &groups, log.group_id)),
        ),
        (
            t(lang, "run.trigger_type"),
            text(&trigger_name(log.trigger_type)),
        ),
        (t(lang, "run.scheduled_at"), time(log.scheduled_at_ms)),
        (t(lang, "run.triggered_at"), time(log.trigger_time_ms)),
        (t(lang, "run.lateness"), text(&lateness)),
        (t(lang, "run.finished_at"), time(log.handle_time_ms)),
        (t(lang, "run.took"), text(&took)),
        (t(lang, "run.trigger_code"), markup!("{}", log.trigger_code)),
        (
            t(lang, "run.trigger_message"),
            markup!("<pre class=\"msg\">{}</pre>", log.trigger_msg),
        ),
        (t(lang, "run.handle_code"), markup!("{}", log.handle_code)),
        (
            t(lang, "run.handle_message"),
            markup!("<pre class=\"msg\">{}</pre>", log.handle_msg),
        ),
        (t(lang, "run.executor"), text(&log.executor_address)),
        (t(lang, "run.handler"), text(&log.handler)),
        (
            t(lang, "run.params"),
            markup!("<pre class=\"msg\" id=\"run-params\">{}</pre>", log.params),
        ),
        (
            t(lang, "run.shard"),
            markup!("{} / {}", log.shard_index, log.shard_total),
        ),
        (t(lang, "run.attempt"), markup!("{}", log.attempt)),
        (t(lang, "run.alarm"), text(&log.alarm_delivery)),
        (t(lang, "run.trace"), trace),
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
            "<form method=\"post\" action=\"/runs/{}/kill\" data-confirm=\"{}\">{}\
             <button class=\"danger\" id=\"kill-run\">{}</button></form>",
            log.id,
            tf(lang, "runs.kill_confirm", &[&log.id]),
            frame::csrf_field(&viewer),
            t(lang, "runs.kill"),
        ));
    }
    body.push(markup!(
        "<p><a href=\"/runs?job={}\">{}</a></p></section>",
        log.job_id,
        t(lang, "run.other_runs")
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
        "<section class=\"card\"><h2>{}</h2><p class=\"hint\" id=\"log-note\">{}</p>\
         <pre class=\"log\" id=\"run-log\" data-log-id=\"{}\" data-next-line=\"{}\" \
         data-ended=\"{}\">{}</pre></section>",
        t(lang, "run.log"),
        note,
        id,
        next_line,
        ended,
        content,
    ));
    frame::page(
        Some(&viewer),
        &tf(lang, "run.title", &[&id]),
        Nav::Runs,
        body,
    )
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
    let mut out = markup!(
        "<section class=\"card\" id=\"attempts\" data-live><h2>{}</h2>\
         <div class=\"scroll\"><table>",
        t(known.lang, "run.attempts")
    );
    out.push(run_header(known.lang));
    for run in &runs {
        out.push(run_row(run, known, None));
    }
    out.push(Markup::literal("</table></div></section>"));
    out
}

fn trace_link(lang: super::Lang, template: &str, trace_id: &str) -> Markup {
    if trace_id.is_empty() {
        return markup!("<span class=\"muted\">{}</span>", t(lang, "run.not_traced"));
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
    let lang = posted.viewer.lang;
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
                t(lang, "runs.kill_sent").to_string()
            } else {
                tf(lang, "runs.not_killed", &[&answer.message])
            };
            see_other(&back_to(&posted.fields, format!("/runs/{id}")), &notice)
        }
        Err(status) => status_page(lang, &status),
    }
}

/// `POST /runs/{id}/retry`: triggers the run's job once more with that run's params (a manual
/// trigger, so a new run, not an attempt of the old fire).
pub async fn retry(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
    let lang = posted.viewer.lang;
    let api = console.api();
    let caller = &posted.viewer.caller;
    let log = match api.get_log(request(caller, pb::GetLogRequest { id })).await {
        Ok(answer) => answer.into_inner().log.unwrap_or_default(),
        Err(status) => return status_page(lang, &status),
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
            let notice = tf(lang, "runs.retried", &[&id, &new_runs.join(", ")]);
            see_other(&back_to(&posted.fields, format!("/runs/{id}")), &notice)
        }
        Err(status) => status_page(lang, &status),
    }
}
