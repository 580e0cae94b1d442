//! The dashboard: today's runs, runs per day (chart), executors online per app, the loops'
//! health, and the jobs that failed today, most failures first.
//!
//! "Today" is one window, the admin's day so far, and both the tiles and the failing-jobs card
//! count it from the runs as they are when the page is asked (`GetDashboard` counts today live;
//! the card lists the same statuses as the tiles' "failed"), so they agree. The whole page is
//! one live region: the script refreshes tiles and card together.

use axum::extract::State;
use axum::response::Response;
use std::collections::BTreeMap;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::frame::{self, Nav};
use super::super::html::{self, Markup, markup};
use super::super::session::Viewer;
use super::super::zone;
use super::super::{Shared, request};
use super::{jobs_by_id, status_page};

const DAY_MS: i64 = 86_400_000;
/// Days shown in the chart.
const DAYS: i64 = 14;

pub async fn page(State(console): State<Shared>, viewer: Viewer) -> Response {
    let now = console.ctx.clock.now_ms();
    let api = console.api();
    let dashboard = api
        .get_dashboard(request(
            &viewer.caller,
            pb::GetDashboardRequest {
                from_ms: now - DAYS * DAY_MS,
                to_ms: now,
            },
        ))
        .await;
    let dashboard = match dashboard {
        Ok(answer) => answer.into_inner(),
        Err(status) => return status_page(&status),
    };
    let executors = api
        .list_executors(request(&viewer.caller, pb::ListExecutorsRequest::default()))
        .await
        .map(|answer| answer.into_inner().executors)
        .unwrap_or_default();
    let zone = console.ctx.config.default_time_zone();
    let today_start = dashboard.days.last().map_or(now, |day| day.day_ms);
    let mut body = Markup::literal("<div id=\"dashboard-live\" data-live>");
    body.push(totals(&dashboard, &executors));
    body.push(markup!(
        "<p class=\"hint\" id=\"today-zone\">Today: since {} (the admin's zone, {}).</p>",
        html::time(today_start),
        zone.name()
    ));
    body.push(Markup::literal("<div class=\"grid\">"));
    body.push(chart(&dashboard.days));
    body.push(lateness(&dashboard.days));
    body.push(failing_jobs(&console, &viewer, today_start).await);
    body.push(executors_per_app(&executors));
    body.push(loops(&dashboard));
    body.push(Markup::literal("</div></div>"));
    frame::page(Some(&viewer), "Dashboard", Nav::Dashboard, body)
}

fn totals(dashboard: &pb::GetDashboardResponse, executors: &[pb::Executor]) -> Markup {
    let today = dashboard.days.last().cloned().unwrap_or_default();
    let health = if dashboard.serving {
        html::badge("SERVING")
    } else {
        html::badge("NOT_SERVING")
    };
    markup!(
        "<section class=\"tiles\" id=\"totals\">\
         <div class=\"tile\"><b>{}</b><span>jobs</span></div>\
         <div class=\"tile\"><b>{}</b><span>executors online</span></div>\
         <div class=\"tile\"><b>{}</b><span>runs today</span></div>\
         <div class=\"tile ok\"><b>{}</b><span>succeeded today</span></div>\
         <div class=\"tile bad\"><b>{}</b><span>failed today</span></div>\
         <div class=\"tile bad\"><b>{}</b><span>lost today</span></div>\
         <div class=\"tile\"><b>{}</b><span>skipped today</span></div>\
         <div class=\"tile\"><b>{}</b><span>running</span></div>\
         <div class=\"tile\"><b>{}</b><span>admin health</span></div></section>",
        dashboard.job_count,
        executors.len(),
        today.running + today.success + today.failed,
        today.success,
        today.failed,
        today.lost,
        today.skipped,
        today.running,
        health,
    )
}

/// Runs per day as stacked bars (SVG: no inline styles, which the page's policy forbids).
fn chart(days: &[pb::DayReport]) -> Markup {
    let mut out =
        Markup::literal("<section class=\"card\" id=\"runs-per-day\"><h2>Runs per day</h2>");
    if days.is_empty() {
        out.push(Markup::literal(
            "<p class=\"empty\">No runs yet. Create a job and start it.</p></section>",
        ));
        return out;
    }
    let max = days
        .iter()
        .map(|day| day.running + day.success + day.failed + day.skipped)
        .max()
        .unwrap_or(0)
        .max(1);
    let width = 36 * days.len() as i64;
    out.push(markup!(
        "<svg class=\"chart\" viewBox=\"0 0 {} 130\" role=\"img\" \
         aria-label=\"runs per day: succeeded, failed, running\">",
        width
    ));
    for (index, day) in days.iter().enumerate() {
        let x = index as i64 * 36 + 6;
        let mut y = 110;
        for (count, class) in [
            (day.success, "ok"),
            (day.failed - day.lost, "bad"),
            (day.lost, "lost"),
            (day.running, "run"),
            (day.skipped, "skip"),
        ] {
            let height = count * 100 / max;
            if height > 0 {
                y -= height;
                out.push(markup!(
                    "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"24\" height=\"{}\">\
                     <title>{} {}</title></rect>",
                    class,
                    x,
                    y,
                    height,
                    count,
                    class
                ));
            }
        }
        let label = chrono::DateTime::from_timestamp_millis(day.day_ms)
            .map(|at| at.format("%d").to_string())
            .unwrap_or_default();
        out.push(markup!("<text x=\"{}\" y=\"125\">{}</text>", x + 5, label));
    }
    out.push(Markup::literal(
        "</svg><p class=\"legend\"><span class=\"k ok\"></span>succeeded \
         <span class=\"k bad\"></span>failed <span class=\"k lost\"></span>lost \
         <span class=\"k run\"></span>running <span class=\"k skip\"></span>skipped</p></section>",
    ));
    out
}

/// Scheduled fires sent more than 1 s late, per day, with the latest send of each day.
fn lateness(days: &[pb::DayReport]) -> Markup {
    let mut out =
        Markup::literal("<section class=\"card\" id=\"lateness\"><h2>Late fires per day</h2>");
    let max = days.iter().map(|day| day.late_fires).max().unwrap_or(0);
    if max == 0 {
        out.push(Markup::literal(
            "<p class=\"empty\">No scheduled fire was sent more than 1 s after its time.</p>\
             </section>",
        ));
        return out;
    }
    let width = 36 * days.len() as i64;
    out.push(markup!(
        "<svg class=\"chart\" viewBox=\"0 0 {} 130\" role=\"img\" \
         aria-label=\"scheduled fires sent more than 1 s late, per day\">",
        width
    ));
    for (index, day) in days.iter().enumerate() {
        let x = index as i64 * 36 + 6;
        let height = day.late_fires * 100 / max;
        if height > 0 {
            out.push(markup!(
                "<rect class=\"run\" x=\"{}\" y=\"{}\" width=\"24\" height=\"{}\">\
                 <title>{} late, the latest {}</title></rect>",
                x,
                110 - height,
                height,
                day.late_fires,
                html::duration(day.max_lateness_ms)
            ));
        }
        let label = chrono::DateTime::from_timestamp_millis(day.day_ms)
            .map(|at| at.format("%d").to_string())
            .unwrap_or_default();
        out.push(markup!("<text x=\"{}\" y=\"125\">{}</text>", x + 5, label));
    }
    let worst = days
        .iter()
        .map(|day| day.max_lateness_ms)
        .max()
        .unwrap_or(0);
    out.push(markup!(
        "</svg><p class=\"legend\">first attempts of CRON fires sent more than 1 s after their \
         time; the latest: {}</p></section>",
        html::duration(worst)
    ));
    out
}

/// The statuses the "failed today" tile counts (`GetDashboard`'s `failed`).
const FAILED: [pb::RunStatus; 4] = [
    pb::RunStatus::Failed,
    pb::RunStatus::Timeout,
    pb::RunStatus::Killed,
    pb::RunStatus::Lost,
];
/// Most failed runs the card reads (pages of 500); beyond, it says it stopped counting.
const MAX_COUNTED: usize = 20_000;

/// Per job: failed runs triggered since `since_ms` and the latest trigger time, and the total
/// (whether it hit [`MAX_COUNTED`]).
async fn failures_by_job(
    console: &super::super::Console,
    viewer: &Viewer,
    since_ms: i64,
) -> (BTreeMap<i64, (i64, i64)>, usize, bool) {
    let mut counts: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    let mut total = 0;
    for status in FAILED {
        let mut page_token = String::new();
        loop {
            let answer = console
                .api()
                .list_logs(request(
                    &viewer.caller,
                    pb::ListLogsRequest {
                        status: status as i32,
                        from_ms: since_ms,
                        page_size: 500,
                        page_token: page_token.clone(),
                        ..Default::default()
                    },
                ))
                .await;
            let Ok(answer) = answer else { break };
            let page = answer.into_inner();
            for log in &page.logs {
                let entry = counts.entry(log.job_id).or_insert((0, 0));
                entry.0 += 1;
                entry.1 = entry.1.max(log.trigger_time_ms);
            }
            total += page.logs.len();
            if total >= MAX_COUNTED {
                return (counts, total, true);
            }
            if page.next_page_token.is_empty() {
                break;
            }
            page_token = page.next_page_token;
        }
    }
    (counts, total, false)
}

/// Jobs with runs that failed today (the tile's statuses and window), most failures first.
async fn failing_jobs(console: &super::super::Console, viewer: &Viewer, since_ms: i64) -> Markup {
    let (counts, total, capped) = failures_by_job(console, viewer, since_ms).await;
    let mut ranked: Vec<(i64, (i64, i64))> = counts.into_iter().collect();
    ranked.sort_by_key(|entry| std::cmp::Reverse(entry.1));
    let mut out =
        Markup::literal("<section class=\"card\" id=\"failing-jobs\"><h2>Failing jobs today</h2>");
    if ranked.is_empty() {
        out.push(Markup::literal(
            "<p class=\"empty\">No failed runs today.</p></section>",
        ));
        return out;
    }
    out.push(markup!(
        "<p class=\"hint\" id=\"failed-total\">Runs failed today: {}{} (failed, timed out, \
         killed or lost); jobs: {}.</p>",
        if capped { "over " } else { "" },
        total,
        ranked.len()
    ));
    out.push(Markup::literal(
        "<table><tr><th scope=\"col\">Job</th><th scope=\"col\">Failures</th>\
         <th scope=\"col\">Last</th></tr>",
    ));
    let shown: Vec<(i64, (i64, i64))> = ranked.into_iter().take(10).collect();
    let ids = shown.iter().map(|(job_id, _)| *job_id).collect();
    let jobs = jobs_by_id(console, viewer, ids).await;
    let default_zone = console.ctx.config.default_time_zone();
    for (job_id, (failures, last)) in shown {
        let (name, zone) = match jobs.get(&job_id) {
            Some(job) => (job.name.clone(), zone::of_job(&job.time_zone, default_zone)),
            None => (format!("job {job_id}"), default_zone),
        };
        out.push(markup!(
            "<tr><td><a href=\"/runs?job={}\">{}</a></td>\
             <td>{}</td><td>{}</td></tr>",
            job_id,
            name,
            failures,
            zone::job_time(last, zone.name())
        ));
    }
    out.push(Markup::literal("</table></section>"));
    out
}

fn executors_per_app(executors: &[pb::Executor]) -> Markup {
    let mut apps: BTreeMap<&str, usize> = BTreeMap::new();
    for executor in executors {
        *apps.entry(executor.app_name.as_str()).or_default() += 1;
    }
    let mut out = Markup::literal(
        "<section class=\"card\" id=\"executors-online\"><h2>Executors online</h2>",
    );
    if apps.is_empty() {
        out.push(Markup::literal(
            "<p class=\"empty\">No executor is connected. Start one with the SDK (see \
             docs/executors.md) or run <code>xjob serve --demo</code>.</p></section>",
        ));
        return out;
    }
    out.push(Markup::literal(
        "<table><tr><th scope=\"col\">App</th><th scope=\"col\">Online</th></tr>",
    ));
    for (app, count) in apps {
        out.push(markup!(
            "<tr><td><a href=\"/executors\">{}</a></td><td>{}</td></tr>",
            app,
            count
        ));
    }
    out.push(Markup::literal("</table></section>"));
    out
}

fn loops(dashboard: &pb::GetDashboardResponse) -> Markup {
    let mut out = Markup::literal(
        "<section class=\"card\" id=\"loops\"><h2>Admin loops</h2><table>\
         <tr><th scope=\"col\">Loop</th><th scope=\"col\">State</th>\
         <th scope=\"col\">Last round</th></tr>",
    );
    for entry in &dashboard.loops {
        let state = if entry.healthy {
            html::badge("OK")
        } else {
            markup!(
                "{} <span class=\"muted\">{}</span>",
                html::badge("FAILING"),
                entry.last_error
            )
        };
        out.push(markup!(
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            entry.name,
            state,
            html::time(entry.last_success_ms)
        ));
    }
    out.push(Markup::literal("</table></section>"));
    out
}
