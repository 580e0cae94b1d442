//! Runs: the list (filters in the URL, newest first, paged) and clearing logs; a run's detail
//! with every field of its log row and its run log, kill and retry are in `detail`.

mod detail;

pub use detail::{detail, kill, log_chunk, retry};

use std::collections::HashMap;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use chrono_tz::Tz;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::csrf::{Fields, Posted};
use super::super::form;
use super::super::frame::{self, Nav};
use super::super::html::{self, Markup, Tone, markup};
use super::super::i18n::{Lang, t, tf};
use super::super::session::Viewer;
use super::super::shared::{Shared, request};
use super::super::zone::{self, reading_zone};
use super::{
    PAGE_SIZE, group_name, job_named, jobs_by_id, page_token, pager, readable_groups, see_other,
    sortable_header, sorted_url, status_page, total_line,
};

/// Most matching runs the list counts: its total stops there ("over 10,000 runs"), so a list
/// refreshed every few seconds does not count a table of millions each time.
const COUNT_LIMIT: i64 = 10_000;

/// A clean-up mode in words (XXL-JOB's modes, in its order, come from `ClearLogsMode`).
fn clear_mode_label(lang: Lang, mode: pb::ClearLogsMode) -> &'static str {
    use pb::ClearLogsMode as Mode;
    let key = match mode {
        Mode::Unspecified => return "",
        Mode::OlderThanOneMonth => "runs.clear_1_month",
        Mode::OlderThanThreeMonths => "runs.clear_3_months",
        Mode::OlderThanSixMonths => "runs.clear_6_months",
        Mode::OlderThanOneYear => "runs.clear_1_year",
        Mode::KeepLatest1000 => "runs.clear_keep_1000",
        Mode::KeepLatest10000 => "runs.clear_keep_10000",
        Mode::KeepLatest30000 => "runs.clear_keep_30000",
        Mode::KeepLatest100000 => "runs.clear_keep_100000",
        Mode::All => "runs.clear_all",
    };
    t(lang, key)
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
fn read_times(lang: Lang, query: &Fields, zone: Tz) -> Result<(i64, i64), String> {
    let from_ms = zone::parse_local(lang, "filter.from", query.get("from"), zone)?;
    let to_ms = zone::parse_local(lang, "filter.to", query.get("to"), zone)?;
    Ok((from_ms, to_ms))
}

pub async fn list(
    State(console): State<Shared>,
    viewer: Viewer,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let lang = viewer.lang;
    let query = Fields::from_query(uri.query());
    let groups = readable_groups(&console, &viewer).await;
    let default_zone = console.ctx.config.default_time_zone();
    let status = pb::RunStatus::from_str_name(&format!("RUN_STATUS_{}", query.get("status")))
        .map_or(0, |status| status as i32);
    let shown = reading_zone(&query, &headers, None);
    let mut job_id = match form::id_filter(lang, query.get("job")) {
        Ok(job_id) => job_id,
        Err(message) => {
            let message = tf(lang, "filter.refused", &[&t(lang, "filter.job"), &message]);
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
    let (from_ms, to_ms) = match read_times(lang, &query, shown) {
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
                count_limit: COUNT_LIMIT,
            },
        ))
        .await;
    let page = match answer {
        Ok(answer) => answer.into_inner(),
        Err(status) => return status_page(lang, &status),
    };
    let mut body = html::notice(Tone::Ok, query.get("notice"));
    body.push(filters(lang, &query, &groups, shown));
    // Refreshed in place by the live script (a RUNNING row turns SUCCESS without a reload).
    body.push(Markup::literal("<div id=\"runs-live\" data-live>"));
    if page.logs.is_empty() {
        body.push(markup!(
            "<p class=\"empty\" id=\"no-runs\">{}</p>",
            t(lang, "runs.none")
        ));
    } else {
        let words = ["runs.total_one", "runs.total_many", "runs.total_over"];
        let total = (page.total_size, page.total_capped);
        body.push(total_line("runs-total", lang, total, words));
        body.push(Markup::literal("<div class=\"scroll\"><table id=\"runs\">"));
        let link = |sort: &str| sorted_url("/runs", &query, LIST_KEYS, sort);
        body.push(sortable_header(
            &run_columns(lang),
            query.get("sort"),
            &link,
        ));
        let back = list_state(&query);
        let ids: Vec<i64> = page.logs.iter().map(|log| log.job_id).collect();
        let jobs = jobs_by_id(&console, &viewer, ids).await;
        let known = Known {
            lang,
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
        lang,
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
    frame::page(Some(&viewer), t(lang, "nav.runs"), Nav::Runs, body)
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
    let lang = viewer.lang;
    let mut body = filters(lang, query, groups, shown);
    body.push(markup!(
        "<div class=\"notice bad\" id=\"filter-error\" role=\"alert\">{}</div>",
        message
    ));
    let mut response = frame::page(Some(viewer), t(lang, "nav.runs"), Nav::Runs, body);
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
}

/// The filter form; its times are read in `shown`, which it names and posts back (`tz`).
fn filters(lang: Lang, query: &Fields, groups: &[pb::Group], shown: Tz) -> Markup {
    let mut group_options = vec![(String::new(), t(lang, "runs.all_groups").to_string())];
    group_options.extend(
        groups
            .iter()
            .map(|group| (group.id.to_string(), group_name(lang, groups, group.id))),
    );
    let mut status_options = vec![(String::new(), t(lang, "runs.any_status").to_string())];
    status_options.extend(status_choices());
    markup!(
        "<form method=\"get\" action=\"/runs\" class=\"filters\" id=\"run-filters\">\
         <label class=\"sr-only\" for=\"filter_job\">{}</label>\
         <input type=\"number\" name=\"job\" id=\"filter_job\" placeholder=\"{}\" value=\"{}\">\
         <label class=\"sr-only\" for=\"filter_job_name\">{}</label>\
         <input type=\"search\" name=\"job_name\" id=\"filter_job_name\" placeholder=\"{}\" \
         value=\"{}\">\
         <label class=\"sr-only\" for=\"group\">{}</label>{}\
         <label class=\"sr-only\" for=\"status\">{}</label>{}\
         <label>{} <input type=\"datetime-local\" name=\"from\" value=\"{}\"></label>\
         <label>{} <input type=\"datetime-local\" name=\"to\" value=\"{}\"></label>\
         <span class=\"hint\" id=\"filter-zone\">{}</span>\
         <input type=\"hidden\" name=\"tz\" value=\"{}\">\
         <button type=\"submit\">{}</button> <a href=\"/runs\">{}</a></form>",
        t(lang, "runs.job_id"),
        t(lang, "runs.job_id_placeholder"),
        query.get("job"),
        t(lang, "runs.job_name"),
        t(lang, "runs.job_name_placeholder"),
        query.get("job_name"),
        t(lang, "runs.group"),
        html::select("group", &group_options, query.get("group")),
        t(lang, "runs.status"),
        html::select("status", &status_options, query.get("status")),
        t(lang, "runs.from"),
        query.get("from"),
        t(lang, "runs.to"),
        query.get("to"),
        tf(lang, "runs.times_in", &[&shown.name()]),
        shown.name(),
        t(lang, "runs.filter"),
        t(lang, "runs.clear_filters"),
    )
}

/// The runs list's filters and sort, as its URL carries them.
const LIST_KEYS: &[&str] = &[
    "job", "job_name", "group", "status", "from", "to", "tz", "sort", "page",
];

/// The runs list's columns: label key and sort key (`model::LOG_SORT_KEYS`), if it sorts.
const RUN_COLUMNS: &[(&str, Option<&str>)] = &[
    ("runs.col_run", Some("id")),
    ("runs.col_job", Some("job")),
    ("runs.col_group", Some("group")),
    ("runs.col_status", Some("status")),
    ("runs.col_trigger", None),
    ("runs.col_triggered", Some("triggered")),
    ("runs.col_took", None),
    ("runs.col_executor", Some("executor")),
    ("runs.col_message", None),
    ("runs.col_actions", None),
];

/// [`RUN_COLUMNS`] with their labels in `lang`.
fn run_columns(lang: Lang) -> Vec<(&'static str, Option<&'static str>)> {
    RUN_COLUMNS
        .iter()
        .map(|(key, sort)| (t(lang, key), *sort))
        .collect()
}

/// The runs table's header row without sort links (a run's attempts).
fn run_header(lang: Lang) -> Markup {
    let mut row = Markup::literal("<tr>");
    for (label, _) in run_columns(lang) {
        row.push(markup!("<th scope=\"col\">{}</th>", label));
    }
    row.push(Markup::literal("</tr>"));
    row
}

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
    let lang = viewer.lang;
    let (action, text, question) = match pb::RunStatus::try_from(log.status) {
        Ok(pb::RunStatus::Pending | pb::RunStatus::Running) => {
            ("kill", "runs.kill", "runs.kill_confirm")
        }
        Ok(
            pb::RunStatus::Failed
            | pb::RunStatus::Timeout
            | pb::RunStatus::Killed
            | pb::RunStatus::Lost,
        ) => ("retry", "runs.retry", "runs.retry_confirm"),
        _ => return Markup::new(),
    };
    let (text, question) = (t(lang, text), tf(lang, question, &[&log.id]));
    markup!(
        "<form method=\"post\" action=\"/runs/{}/{}\" class=\"inline\" \
         data-confirm=\"{}\">{}<input type=\"hidden\" name=\"back\" value=\"{}\">\
         <button class=\"small{}\" id=\"{}-run-{}\">{}</button></form>",
        log.id,
        action,
        question,
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
    lang: Lang,
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
    let lang = known.lang;
    let job = match known.jobs.get(&log.job_id) {
        Some(job) => markup!("{} <span class=\"muted\">({})</span>", job.name, log.job_id),
        None => markup!("{}", log.job_id),
    };
    let took = if log.handle_time_ms > 0 && log.trigger_time_ms > 0 {
        html::duration(lang, log.handle_time_ms - log.trigger_time_ms)
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
         <td>{}</td><td>{}</td><td class=\"msg\" translate=\"no\">{}</td><td>{}</td></tr>",
        log.id,
        log.id,
        log.id,
        log.job_id,
        job,
        group_name(lang, known.groups, log.group_id),
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
    let lang = viewer.lang;
    let mut group_options = Vec::new();
    if viewer.is_admin() {
        group_options.push((String::new(), t(lang, "runs.every_group").to_string()));
    }
    group_options.extend(
        groups
            .iter()
            .filter(|group| viewer.can_operate(group.id))
            .map(|group| (group.id.to_string(), group_name(lang, groups, group.id))),
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
        Some((value, clear_mode_label(lang, mode).to_string()))
    })
    .collect();
    markup!(
        "<details class=\"card\" id=\"clear-logs\"><summary>{}</summary>\
         <form method=\"post\" action=\"/runs/clear\" id=\"clear-form\" \
         data-confirm=\"{}\">{}\
         <div class=\"fields\">\
         <div class=\"field\"><label for=\"clear_group\">{}</label>{}</div>\
         <div class=\"field\"><label for=\"clear_job\">{}</label>\
         <input type=\"number\" name=\"job\" id=\"clear_job\" value=\"{}\">\
         <div class=\"hint\">{}</div></div>\
         <div class=\"field\"><label for=\"mode\">{}</label>{}</div></div>\
         <p class=\"hint\">{}</p>\
         <button class=\"danger\" id=\"clear-logs-button\">{}</button></form></details>",
        t(lang, "runs.clear_title"),
        t(lang, "runs.clear_confirm"),
        frame::csrf_field(viewer),
        t(lang, "runs.group"),
        html::select_with_id("group", "clear_group", &group_options, query.get("group")),
        t(lang, "runs.job_id"),
        query.get("job"),
        t(lang, "runs.clear_job_hint"),
        t(lang, "runs.clear_delete"),
        html::select("mode", &modes, "KEEP_LATEST_1000"),
        t(lang, "runs.clear_never_open"),
        t(lang, "runs.clear_title"),
    )
}

pub async fn clear(State(console): State<Shared>, posted: Posted) -> Response {
    let lang = posted.viewer.lang;
    let fields = &posted.fields;
    let mode = pb::ClearLogsMode::from_str_name(&format!("CLEAR_LOGS_MODE_{}", fields.get("mode")))
        .map_or(0, |mode| mode as i32);
    // A mistyped job id must not widen the deletion to every job of the group.
    let job_id = match form::id_filter(lang, fields.get("job")) {
        Ok(job_id) => job_id,
        Err(message) => {
            let message = tf(lang, "filter.refused", &[&t(lang, "filter.job"), &message]);
            return super::error_page(lang, StatusCode::BAD_REQUEST, &message);
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
            &tf(lang, "runs.cleared", &[&answer.into_inner().deleted]),
        ),
        Err(status) => status_page(lang, &status),
    }
}
