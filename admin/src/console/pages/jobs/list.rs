//! The jobs list: filters in the URL, one row per job with its state and actions, paged.

use axum::extract::State;
use axum::http::Uri;
use axum::response::Response;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::super::csrf::Fields;
use super::super::super::frame::{self, Nav};
use super::super::super::html::{self, Markup, Tone, markup};
use super::super::super::i18n::{Lang, t, tf};
use super::super::super::session::Viewer;
use super::super::super::shared::{Shared, request};
use super::super::super::zone;
use super::super::{
    PAGE_SIZE, group_name, page_token, pager, readable_groups, sortable_header, sorted_url,
    status_page, total_line,
};
use super::label;

/// The list's filters, in the order of the query.
const FILTERS: &[&str] = &["group", "status", "name", "handler", "author", "sort"];

/// The table's columns: label key and sort key (`model::JOB_SORT_KEYS`), if it sorts.
const COLUMNS: &[(&str, Option<&str>)] = &[
    ("jobs.col_id", Some("id")),
    ("jobs.col_name", Some("name")),
    ("jobs.col_group", Some("group")),
    ("jobs.col_schedule", None),
    ("jobs.col_handler", Some("handler")),
    ("jobs.col_author", Some("author")),
    ("jobs.col_status", Some("status")),
    ("jobs.col_next_fire", Some("next_fire")),
    ("jobs.col_actions", None),
];

pub async fn list(State(console): State<Shared>, viewer: Viewer, uri: Uri) -> Response {
    let lang = viewer.lang;
    let query = Fields::from_query(uri.query());
    let groups = readable_groups(&console, &viewer).await;
    let status = match query.get("status") {
        "RUNNING" => pb::JobStatus::Running as i32,
        "STOPPED" => pb::JobStatus::Stopped as i32,
        _ => 0,
    };
    let answer = console
        .api()
        .list_jobs(request(
            &viewer.caller,
            pb::ListJobsRequest {
                group_id: query.int("group"),
                status,
                name: query.get("name").to_string(),
                handler: query.get("handler").to_string(),
                author: query.get("author").to_string(),
                page_size: PAGE_SIZE as i32,
                page_token: page_token(&query, PAGE_SIZE),
                order_by: query.get("sort").to_string(),
            },
        ))
        .await;
    let page = match answer {
        Ok(answer) => answer.into_inner(),
        Err(status) => return status_page(lang, &status),
    };
    let mut body = html::notice(Tone::Ok, query.get("notice"));
    body.push(filters(lang, &query, &groups));
    if viewer.can_operate_any() {
        body.push(markup!(
            "<p><a class=\"button\" href=\"/jobs/new\" id=\"new-job\">{}</a></p>",
            t(lang, "jobs.new")
        ));
    }
    if page.jobs.is_empty() {
        body.push(markup!(
            "<p class=\"empty\" id=\"no-jobs\">{}</p>",
            t(lang, "jobs.none")
        ));
    } else {
        let words = ["jobs.total_one", "jobs.total_many", "jobs.total_many"];
        body.push(total_line(
            "jobs-total",
            lang,
            (page.total_size, false),
            words,
        ));
        body.push(Markup::literal(
            "<div class=\"scroll\" id=\"jobs-live\" data-live><table id=\"jobs\">",
        ));
        let link = |sort: &str| sorted_url("/jobs", &query, FILTERS, sort);
        let columns: Vec<(&str, Option<&str>)> = COLUMNS
            .iter()
            .map(|(key, sort)| (t(lang, key), *sort))
            .collect();
        body.push(sortable_header(&columns, query.get("sort"), &link));
        let back = list_state(&uri);
        let default_zone = console.ctx.config.default_time_zone();
        for job in &page.jobs {
            body.push(job_row(&viewer, job, &groups, &back, default_zone));
        }
        body.push(Markup::literal("</table></div>"));
        if page.jobs.iter().any(|job| viewer.can_operate(job.group_id)) {
            body.push(bulk_form(&viewer, &back));
        }
    }
    let filters: Vec<(&str, String)> = FILTERS
        .iter()
        .map(|key| (*key, query.get(key).to_string()))
        .collect();
    body.push(pager(
        lang,
        "/jobs",
        &filters,
        &page_token(&query, PAGE_SIZE),
        &page.next_page_token,
        PAGE_SIZE,
    ));
    frame::page(Some(&viewer), t(lang, "nav.jobs"), Nav::Jobs, body)
}

/// The list's URL as it is now (filters and page, without a notice), so an action taken from
/// a row comes back to the same list.
fn list_state(uri: &Uri) -> String {
    let query = Fields::from_query(uri.query());
    let mut kept: Vec<String> = FILTERS
        .iter()
        .filter(|key| !query.get(key).is_empty())
        .map(|key| format!("{key}={}", html::url(query.get(key))))
        .collect();
    let page = page_token(&query, PAGE_SIZE);
    if !page.is_empty() {
        kept.push(format!("page={}", html::url(&page)));
    }
    if kept.is_empty() {
        return "/jobs".to_string();
    }
    kept.sort();
    format!("/jobs?{}", kept.join("&"))
}

fn filters(lang: Lang, query: &Fields, groups: &[pb::Group]) -> Markup {
    let mut group_options = vec![(String::new(), t(lang, "runs.all_groups").to_string())];
    group_options.extend(
        groups
            .iter()
            .map(|group| (group.id.to_string(), group_name(lang, groups, group.id))),
    );
    let status_options: Vec<html::Choice> = [
        ("", "runs.any_status"),
        ("RUNNING", "jobs.running"),
        ("STOPPED", "jobs.stopped"),
    ]
    .iter()
    .map(|(value, key)| (value.to_string(), t(lang, key).to_string()))
    .collect();
    markup!(
        "<form method=\"get\" action=\"/jobs\" class=\"filters\" id=\"job-filters\">\
         <label class=\"sr-only\" for=\"group\">{}</label>{}\
         <label class=\"sr-only\" for=\"status\">{}</label>{}\
         <label class=\"sr-only\" for=\"filter_name\">{}</label>\
         <input type=\"search\" name=\"name\" id=\"filter_name\" placeholder=\"{}\" value=\"{}\">\
         <label class=\"sr-only\" for=\"filter_handler\">{}</label>\
         <input type=\"search\" name=\"handler\" id=\"filter_handler\" placeholder=\"{}\" \
         value=\"{}\">\
         <label class=\"sr-only\" for=\"filter_author\">{}</label>\
         <input type=\"search\" name=\"author\" id=\"filter_author\" placeholder=\"{}\" \
         value=\"{}\">\
         <button type=\"submit\">{}</button> <a href=\"/jobs\">{}</a></form>",
        t(lang, "runs.group"),
        html::select("group", &group_options, query.get("group")),
        t(lang, "runs.status"),
        html::select("status", &status_options, query.get("status")),
        t(lang, "jobs.col_name"),
        t(lang, "jobs.name_placeholder"),
        query.get("name"),
        t(lang, "jobs.col_handler"),
        t(lang, "jobs.handler_placeholder"),
        query.get("handler"),
        t(lang, "jobs.col_author"),
        t(lang, "jobs.author_placeholder"),
        query.get("author"),
        t(lang, "runs.filter"),
        t(lang, "runs.clear_filters"),
    )
}

fn job_row(
    viewer: &Viewer,
    job: &pb::Job,
    groups: &[pb::Group],
    back: &str,
    default_zone: chrono_tz::Tz,
) -> Markup {
    let lang = viewer.lang;
    let running = job.status == pb::JobStatus::Running as i32;
    let status = if running { "RUNNING" } else { "STOPPED" };
    let schedule = format!(
        "{} {}",
        label(
            pb::ScheduleType::try_from(job.schedule_type).map(|t| t.as_str_name()),
            "SCHEDULE_TYPE_"
        ),
        job.schedule_conf
    );
    let operate = viewer.can_operate(job.group_id);
    // The bulk form's checkbox: outside the form in the markup, tied to it by `form=`.
    let select = if operate {
        markup!(
            "<input type=\"checkbox\" name=\"ids\" value=\"{}\" form=\"bulk-form\" \
             id=\"select-{}\" aria-label=\"{}\"> ",
            job.id,
            job.id,
            tf(lang, "jobs.select", &[&job.id])
        )
    } else {
        Markup::new()
    };
    let mut actions = markup!(
        "<a href=\"/jobs/{}\">{}</a> <a href=\"/runs?job={}\">{}</a>",
        job.id,
        t(lang, if operate { "jobs.edit" } else { "jobs.view" }),
        job.id,
        t(lang, "jobs.runs")
    );
    if operate {
        let (action, text, question) = if running {
            ("stop", "jobs.stop", "jobs.stop_confirm")
        } else {
            ("start", "jobs.start", "jobs.start_confirm")
        };
        let text = t(lang, text);
        actions.push(markup!(
            " <a href=\"/jobs/{}/copy\">{}</a>\
             <form method=\"post\" action=\"/jobs/{}/{}\" class=\"inline\" \
             data-confirm=\"{}\">{}\
             <input type=\"hidden\" name=\"back\" value=\"{}\">\
             <button class=\"small\" id=\"{}-{}\">{}</button></form>",
            job.id,
            t(lang, "jobs.copy"),
            job.id,
            action,
            tf(lang, question, &[&job.id, &job.name]),
            frame::csrf_field(viewer),
            back,
            action,
            job.id,
            text,
        ));
    }
    markup!(
        "<tr data-job-id=\"{}\"><td>{}{}</td><td><a href=\"/jobs/{}\">{}</a></td><td>{}</td>\
         <td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        job.id,
        select,
        job.id,
        job.id,
        job.name,
        group_name(lang, groups, job.group_id),
        schedule,
        job.handler,
        job.author,
        html::badge(status),
        zone::job_time(
            job.next_fire_ms,
            zone::of_job(&job.time_zone, default_zone).name()
        ),
        actions,
    )
}

/// Start, stop or trigger the jobs ticked in the list, after a confirmation; the answer comes
/// back to the same list.
fn bulk_form(viewer: &Viewer, back: &str) -> Markup {
    let lang = viewer.lang;
    markup!(
        "<form method=\"post\" action=\"/jobs/bulk\" id=\"bulk-form\" class=\"filters\" \
         data-confirm=\"{}\">{}\
         <input type=\"hidden\" name=\"back\" value=\"{}\">\
         <span class=\"hint\">{}</span>\
         <button name=\"action\" value=\"start\" class=\"small\" id=\"bulk-start\">{}</button>\
         <button name=\"action\" value=\"stop\" class=\"small secondary\" id=\"bulk-stop\">{}</button>\
         <button name=\"action\" value=\"trigger\" class=\"small secondary\" id=\"bulk-trigger\">{}</button>\
         </form>",
        t(lang, "jobs.bulk_confirm"),
        frame::csrf_field(viewer),
        back,
        t(lang, "jobs.ticked"),
        t(lang, "jobs.start"),
        t(lang, "jobs.stop"),
        t(lang, "jobs.trigger_once")
    )
}
