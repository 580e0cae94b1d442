//! The dashboard: today's runs, runs per day (chart), executors online per app, the loops'
//! health, and the jobs that failed most in the last 24 hours first.

use axum::extract::State;
use axum::response::Response;
use std::collections::BTreeMap;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::frame::{self, Nav};
use super::super::html::{self, Markup, markup};
use super::super::session::Viewer;
use super::super::{Shared, request};
use super::status_page;

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
    let mut body = totals(&dashboard, &executors);
    body.push(Markup::literal("<div class=\"grid\">"));
    body.push(chart(&dashboard.days));
    body.push(lateness(&dashboard.days));
    body.push(failing_jobs(&console, &viewer, now).await);
    body.push(executors_per_app(&executors));
    body.push(loops(&dashboard));
    body.push(Markup::literal("</div>"));
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

/// Jobs with failed, timed-out or lost runs in the last 24 hours, most failures first.
async fn failing_jobs(console: &super::super::Console, viewer: &Viewer, now: i64) -> Markup {
    let mut counts: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for status in [
        pb::RunStatus::Failed,
        pb::RunStatus::Timeout,
        pb::RunStatus::Lost,
    ] {
        let answer = console
            .api()
            .list_logs(request(
                &viewer.caller,
                pb::ListLogsRequest {
                    status: status as i32,
                    from_ms: now - DAY_MS,
                    page_size: 500,
                    ..Default::default()
                },
            ))
            .await;
        for log in answer
            .map(|answer| answer.into_inner().logs)
            .unwrap_or_default()
        {
            let entry = counts.entry(log.job_id).or_insert((0, 0));
            entry.0 += 1;
            entry.1 = entry.1.max(log.trigger_time_ms);
        }
    }
    let mut ranked: Vec<(i64, (i64, i64))> = counts.into_iter().collect();
    ranked.sort_by_key(|entry| std::cmp::Reverse(entry.1));
    let mut out =
        Markup::literal("<section class=\"card\" id=\"failing-jobs\"><h2>Failing jobs (24 h)</h2>");
    if ranked.is_empty() {
        out.push(Markup::literal(
            "<p class=\"empty\">No failed runs in the last 24 hours.</p></section>",
        ));
        return out;
    }
    out.push(Markup::literal(
        "<table><tr><th scope=\"col\">Job</th><th scope=\"col\">Failures</th>\
         <th scope=\"col\">Last</th></tr>",
    ));
    for (job_id, (failures, last)) in ranked.into_iter().take(10) {
        let name = console
            .api()
            .get_job(request(&viewer.caller, pb::GetJobRequest { id: job_id }))
            .await
            .ok()
            .and_then(|answer| answer.into_inner().job)
            .map_or_else(|| format!("job {job_id}"), |job| job.name);
        out.push(markup!(
            "<tr><td><a href=\"/runs?job={}&amp;status=FAILED\">{}</a></td>\
             <td>{}</td><td>{}</td></tr>",
            job_id,
            name,
            failures,
            html::time(last)
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
