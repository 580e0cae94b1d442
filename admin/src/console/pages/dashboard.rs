//! The dashboard: today's runs, runs per day (chart), executors online per app, the loops'
//! health, and the jobs that failed today, most failures first.
//!
//! "Today" is one window, the admin's day so far, and the tiles and the failing-jobs card come
//! from one `GetDashboard` answer, itself one count of today's runs per job: the card's
//! failures add up to the "failed today" tile by construction. The whole page is one live
//! region: the script refreshes tiles and card together.

use axum::extract::State;
use axum::response::Response;
use std::collections::BTreeMap;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::frame::{self, Nav};
use super::super::html::tm;
use super::super::html::{self, Markup, markup};
use super::super::i18n::{Lang, t, tf};
use super::super::session::Viewer;
use super::super::shared::{Shared, request};
use super::super::zone;
use super::{jobs_by_id, status_page};

const DAY_MS: i64 = 86_400_000;
/// Days shown in the chart.
const DAYS: i64 = 14;
/// Failing jobs the card lists.
const FAILING_SHOWN: usize = 10;

pub async fn page(State(console): State<Shared>, viewer: Viewer) -> Response {
    let lang = viewer.lang;
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
        Err(status) => return status_page(lang, &status),
    };
    let executors = api
        .list_executors(request(&viewer.caller, pb::ListExecutorsRequest::default()))
        .await
        .map(|answer| answer.into_inner().executors)
        .unwrap_or_default();
    let zone = console.ctx.config.default_time_zone();
    let today_start = dashboard.days.last().map_or(now, |day| day.day_ms);
    let mut body = Markup::literal("<div id=\"dashboard-live\" data-live>");
    body.push(totals(lang, &dashboard, &executors));
    body.push(markup!(
        "<p class=\"hint\" id=\"today-zone\">{}</p>",
        tm(
            lang,
            "dash.today_since",
            &[&html::time(today_start), &zone.name()]
        )
    ));
    body.push(Markup::literal("<div class=\"grid\">"));
    body.push(chart(lang, &dashboard.days));
    body.push(lateness(lang, &dashboard.days));
    body.push(failing_jobs(&console, &viewer, &dashboard).await);
    body.push(executors_per_app(lang, &executors));
    body.push(loops(lang, &dashboard));
    body.push(Markup::literal("</div></div>"));
    frame::page(
        Some(&viewer),
        t(lang, "nav.dashboard"),
        Nav::Dashboard,
        body,
    )
}

fn totals(lang: Lang, dashboard: &pb::GetDashboardResponse, executors: &[pb::Executor]) -> Markup {
    let today = dashboard.days.last().cloned().unwrap_or_default();
    let health = if dashboard.serving {
        html::badge("SERVING")
    } else {
        html::badge("NOT_SERVING")
    };
    let tiles: [(&str, Markup, &str); 9] = [
        ("", markup!("{}", dashboard.job_count), "dash.jobs"),
        ("", markup!("{}", executors.len()), "dash.executors_online"),
        (
            "",
            markup!("{}", today.running + today.success + today.failed),
            "dash.runs_today",
        ),
        (" ok", markup!("{}", today.success), "dash.succeeded_today"),
        (" bad", markup!("{}", today.failed), "dash.failed_today"),
        (" bad", markup!("{}", today.lost), "dash.lost_today"),
        ("", markup!("{}", today.skipped), "dash.skipped_today"),
        ("", markup!("{}", today.running), "dash.running"),
        ("", health, "dash.admin_health"),
    ];
    let mut out = Markup::literal("<section class=\"tiles\" id=\"totals\">");
    for (class, value, key) in tiles {
        out.push(markup!(
            "<div class=\"tile{}\"><b>{}</b><span>{}</span></div>",
            class,
            value,
            t(lang, key)
        ));
    }
    out.push(Markup::literal("</section>"));
    out
}

/// The day of month under a chart's bar.
fn day_label(day_ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(day_ms)
        .map(|at| at.format("%d").to_string())
        .unwrap_or_default()
}

/// Runs per day as stacked bars (SVG: no inline styles, which the page's policy forbids).
fn chart(lang: Lang, days: &[pb::DayReport]) -> Markup {
    let mut out = markup!(
        "<section class=\"card\" id=\"runs-per-day\"><h2>{}</h2>",
        t(lang, "dash.runs_per_day")
    );
    if days.is_empty() {
        out.push(markup!(
            "<p class=\"empty\">{}</p></section>",
            t(lang, "dash.no_runs")
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
        "<svg class=\"chart\" viewBox=\"0 0 {} 130\" role=\"img\" aria-label=\"{}\">",
        width,
        t(lang, "dash.chart_label")
    ));
    for (index, day) in days.iter().enumerate() {
        let x = index as i64 * 36 + 6;
        let mut y = 110;
        for (count, class, key) in [
            (day.success, "ok", "dash.k_succeeded"),
            (day.failed - day.lost, "bad", "dash.k_failed"),
            (day.lost, "lost", "dash.k_lost"),
            (day.running, "run", "dash.k_running"),
            (day.skipped, "skip", "dash.k_skipped"),
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
                    t(lang, key)
                ));
            }
        }
        out.push(markup!(
            "<text x=\"{}\" y=\"125\">{}</text>",
            x + 5,
            day_label(day.day_ms)
        ));
    }
    out.push(markup!(
        "</svg><p class=\"legend\"><span class=\"k ok\"></span>{} \
         <span class=\"k bad\"></span>{} <span class=\"k lost\"></span>{} \
         <span class=\"k run\"></span>{} <span class=\"k skip\"></span>{}</p></section>",
        t(lang, "dash.k_succeeded"),
        t(lang, "dash.k_failed"),
        t(lang, "dash.k_lost"),
        t(lang, "dash.k_running"),
        t(lang, "dash.k_skipped")
    ));
    out
}

/// Scheduled fires sent more than 1 s late, per day, with the latest send of each day.
fn lateness(lang: Lang, days: &[pb::DayReport]) -> Markup {
    let mut out = markup!(
        "<section class=\"card\" id=\"lateness\"><h2>{}</h2>",
        t(lang, "dash.late_title")
    );
    let max = days.iter().map(|day| day.late_fires).max().unwrap_or(0);
    if max == 0 {
        out.push(markup!(
            "<p class=\"empty\">{}</p></section>",
            t(lang, "dash.late_none")
        ));
        return out;
    }
    let width = 36 * days.len() as i64;
    out.push(markup!(
        "<svg class=\"chart\" viewBox=\"0 0 {} 130\" role=\"img\" aria-label=\"{}\">",
        width,
        t(lang, "dash.late_label")
    ));
    for (index, day) in days.iter().enumerate() {
        let x = index as i64 * 36 + 6;
        let height = day.late_fires * 100 / max;
        if height > 0 {
            out.push(markup!(
                "<rect class=\"run\" x=\"{}\" y=\"{}\" width=\"24\" height=\"{}\">\
                 <title>{}</title></rect>",
                x,
                110 - height,
                height,
                tf(
                    lang,
                    "dash.late_bar",
                    &[&day.late_fires, &html::duration(lang, day.max_lateness_ms)]
                )
            ));
        }
        out.push(markup!(
            "<text x=\"{}\" y=\"125\">{}</text>",
            x + 5,
            day_label(day.day_ms)
        ));
    }
    let worst = days
        .iter()
        .map(|day| day.max_lateness_ms)
        .max()
        .unwrap_or(0);
    out.push(markup!(
        "</svg><p class=\"legend\">{}</p></section>",
        tf(lang, "dash.late_legend", &[&html::duration(lang, worst)])
    ));
    out
}

/// Jobs with runs that failed today (the tile's statuses and window: the same answer),
/// most failures first.
async fn failing_jobs(
    console: &super::super::shared::Console,
    viewer: &Viewer,
    dashboard: &pb::GetDashboardResponse,
) -> Markup {
    let lang = viewer.lang;
    let mut out = markup!(
        "<section class=\"card\" id=\"failing-jobs\"><h2>{}</h2>",
        t(lang, "dash.failing_title")
    );
    let ranked = &dashboard.failing_jobs;
    if ranked.is_empty() {
        out.push(markup!(
            "<p class=\"empty\">{}</p></section>",
            t(lang, "dash.failing_none")
        ));
        return out;
    }
    let total: i64 = ranked.iter().map(|job| job.failures).sum();
    out.push(markup!(
        "<p class=\"hint\" id=\"failed-total\">{}</p>",
        tf(lang, "dash.failed_total", &[&total, &ranked.len()])
    ));
    out.push(markup!(
        "<table><tr><th scope=\"col\">{}</th><th scope=\"col\">{}</th>\
         <th scope=\"col\">{}</th></tr>",
        t(lang, "dash.col_job"),
        t(lang, "dash.col_failures"),
        t(lang, "dash.col_last")
    ));
    let shown = &ranked[..ranked.len().min(FAILING_SHOWN)];
    let ids = shown.iter().map(|job| job.job_id).collect();
    let jobs = jobs_by_id(console, viewer, ids).await;
    let default_zone = console.ctx.config.default_time_zone();
    for failing in shown {
        let (name, zone) = match jobs.get(&failing.job_id) {
            Some(job) => (job.name.clone(), zone::of_job(&job.time_zone, default_zone)),
            None => (tf(lang, "dash.job_n", &[&failing.job_id]), default_zone),
        };
        out.push(markup!(
            "<tr><td><a href=\"/runs?job={}\">{}</a></td>\
             <td>{}</td><td>{}</td></tr>",
            failing.job_id,
            name,
            failing.failures,
            zone::job_time(failing.last_failure_ms, zone.name())
        ));
    }
    out.push(Markup::literal("</table></section>"));
    out
}

fn executors_per_app(lang: Lang, executors: &[pb::Executor]) -> Markup {
    let mut apps: BTreeMap<&str, usize> = BTreeMap::new();
    for executor in executors {
        *apps.entry(executor.app_name.as_str()).or_default() += 1;
    }
    let mut out = markup!(
        "<section class=\"card\" id=\"executors-online\"><h2>{}</h2>",
        t(lang, "dash.executors_title")
    );
    if apps.is_empty() {
        out.push(markup!(
            "<p class=\"empty\">{}</p></section>",
            tm(
                lang,
                "dash.no_executors",
                &[&Markup::literal("<code>xjob serve --demo</code>")]
            )
        ));
        return out;
    }
    out.push(markup!(
        "<table><tr><th scope=\"col\">{}</th><th scope=\"col\">{}</th></tr>",
        t(lang, "dash.col_app"),
        t(lang, "dash.col_online")
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

fn loops(lang: Lang, dashboard: &pb::GetDashboardResponse) -> Markup {
    let mut out = markup!(
        "<section class=\"card\" id=\"loops\"><h2>{}</h2><table>\
         <tr><th scope=\"col\">{}</th><th scope=\"col\">{}</th>\
         <th scope=\"col\">{}</th></tr>",
        t(lang, "dash.loops_title"),
        t(lang, "dash.col_loop"),
        t(lang, "dash.col_state"),
        t(lang, "dash.col_last_round")
    );
    for entry in &dashboard.loops {
        let state = if entry.healthy {
            html::badge("OK")
        } else {
            markup!(
                "{} <span class=\"muted\" translate=\"no\">{}</span>",
                html::badge("FAILING"),
                entry.last_error
            )
        };
        out.push(markup!(
            // A loop's name is its id (the same in logs and metrics), not a word to translate.
            "<tr><td translate=\"no\">{}</td><td>{}</td><td>{}</td></tr>",
            entry.name,
            state,
            html::time(entry.last_success_ms)
        ));
    }
    out.push(Markup::literal("</table></section>"));
    out
}
