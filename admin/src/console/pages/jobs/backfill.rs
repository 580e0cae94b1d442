//! A job's backfills on its page: the form that starts one (a range in the job's zone and a
//! concurrency), and each backfill's progress with a cancel button while it runs. Both go
//! through `JobAdmin` like every console action; a refusal shows the API's reason (a reversed
//! range is caught here, to name the times as typed).

use axum::extract::State;
use axum::response::Response;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_server::JobAdmin;

use super::super::super::csrf::Posted;
use super::super::super::frame;
use super::super::super::html::{self, Markup, markup};
use super::super::super::i18n::{t, tf};
use super::super::super::session::Viewer;
use super::super::super::shared::{Console, Shared, request};
use super::super::super::zone;
use super::super::{Path, error_page, see_other, status_page};
use super::load;

/// The backfills card of a saved job: its backfills (newest first) and, for an operator, the
/// form that starts one.
pub async fn section(console: &Console, viewer: &Viewer, job: &pb::Job, editable: bool) -> Markup {
    let lang = viewer.lang;
    let listed = console
        .api()
        .list_backfills(request(
            &viewer.caller,
            pb::ListBackfillsRequest { job_id: job.id },
        ))
        .await
        .map(|answer| answer.into_inner().backfills)
        .unwrap_or_default();
    let zone = zone::of_job(&job.time_zone, console.ctx.config.default_time_zone());
    let mut out = markup!(
        "<section class=\"card\" id=\"backfills\"><h2>{}</h2><p class=\"hint\">{}</p>",
        t(lang, "backfill.title"),
        t(lang, "backfill.hint")
    );
    if editable {
        out.push(markup!(
            "<form method=\"post\" action=\"/jobs/{}/backfill\" id=\"backfill-form\">{}\
             <div class=\"field\"><label for=\"backfill_from\">{}</label>\
             <input type=\"datetime-local\" name=\"from\" id=\"backfill_from\" required></div>\
             <div class=\"field\"><label for=\"backfill_to\">{}</label>\
             <input type=\"datetime-local\" name=\"to\" id=\"backfill_to\" required>\
             <div class=\"hint\">{}</div></div>\
             <div class=\"field\"><label for=\"backfill_concurrency\">{}</label>\
             <input type=\"number\" name=\"concurrency\" id=\"backfill_concurrency\" min=\"1\" \
             max=\"100\" value=\"1\"></div>\
             <button id=\"start-backfill\">{}</button></form>",
            job.id,
            frame::csrf_field(viewer),
            t(lang, "backfill.from"),
            t(lang, "backfill.to"),
            tf(lang, "backfill.zone_hint", &[&zone.name()]),
            t(lang, "backfill.concurrency"),
            t(lang, "backfill.start"),
        ));
    }
    if listed.is_empty() {
        out.push(markup!(
            "<p class=\"empty\">{}</p>",
            t(lang, "backfill.none")
        ));
    } else {
        out.push(table(viewer, job, &listed, editable));
    }
    out.push(Markup::literal("</section>"));
    out
}

/// The backfills in a table that scrolls sideways on a phone (its eight columns are wider).
fn table(viewer: &Viewer, job: &pb::Job, backfills: &[pb::Backfill], editable: bool) -> Markup {
    let lang = viewer.lang;
    let mut rows = Markup::new();
    for backfill in backfills {
        let state = pb::BackfillState::try_from(backfill.state)
            .map(|state| html::enum_label(state.as_str_name(), "BACKFILL_STATE_"))
            .unwrap_or_default();
        let cancel = if editable && backfill.state == pb::BackfillState::Running as i32 {
            markup!(
                "<form method=\"post\" action=\"/backfills/{}/cancel\" class=\"inline\" \
                 data-confirm=\"{}\">{}<button class=\"danger\" id=\"cancel-backfill-{}\">{}</button></form>",
                backfill.id,
                tf(lang, "backfill.cancel_confirm", &[&backfill.id]),
                frame::csrf_field(viewer),
                backfill.id,
                t(lang, "backfill.cancel")
            )
        } else {
            Markup::new()
        };
        rows.push(markup!(
            "<tr id=\"backfill-{}\"><td>{}</td><td>{}</td><td>{} – {}</td><td>{}/{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            backfill.id,
            backfill.id,
            html::badge(&state),
            zone::job_time(backfill.from_ms, &job.time_zone),
            zone::job_time(backfill.to_ms, &job.time_zone),
            backfill.created,
            backfill.total,
            backfill.succeeded,
            backfill.failed,
            backfill.running,
            cancel
        ));
    }
    markup!(
        "<div class=\"scroll\"><table><thead><tr><th>ID</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th>\
         <th>{}</th><th></th></tr></thead><tbody>{}</tbody></table></div>",
        t(lang, "backfill.col_state"),
        t(lang, "backfill.col_range"),
        t(lang, "backfill.col_created"),
        t(lang, "backfill.col_succeeded"),
        t(lang, "backfill.col_failed"),
        t(lang, "backfill.col_running"),
        rows
    )
}

/// `POST /jobs/{id}/backfill`: starts a backfill of the range, read in the job's zone.
pub async fn start(State(console): State<Shared>, Path(id): Path<i64>, posted: Posted) -> Response {
    let lang = posted.viewer.lang;
    let job = match load(&console, &posted.viewer, id).await {
        Ok(job) => job,
        Err(response) => return response,
    };
    let zone = zone::of_job(&job.time_zone, console.ctx.config.default_time_zone());
    let fields = &posted.fields;
    let range =
        zone::parse_local(lang, "backfill.from", fields.get("from"), zone).and_then(|from| {
            zone::parse_local(lang, "backfill.to", fields.get("to"), zone).map(|to| (from, to))
        });
    let (from_ms, to_ms) = match range {
        Ok(range) => range,
        Err(message) => return error_page(lang, axum::http::StatusCode::BAD_REQUEST, &message),
    };
    if from_ms > to_ms {
        // Named as typed, in the job's zone: the API's refusal could only name instants.
        let typed = |name: &str| fields.get(name).replace('T', " ");
        let message = tf(
            lang,
            "backfill.reversed",
            &[&typed("from"), &typed("to"), &zone.name()],
        );
        return error_page(lang, axum::http::StatusCode::BAD_REQUEST, &message);
    }
    let max_concurrent = match fields.get("concurrency").trim() {
        "" => 1,
        text => match text.parse::<i32>() {
            Ok(value) => value,
            Err(_) => {
                let message = format!(
                    "{}: {}",
                    t(lang, "backfill.concurrency"),
                    tf(lang, "form.not_a_count", &[&text])
                );
                return error_page(lang, axum::http::StatusCode::BAD_REQUEST, &message);
            }
        },
    };
    let answer = console
        .api()
        .backfill_job(request(
            &posted.viewer.caller,
            pb::BackfillJobRequest {
                job_id: id,
                from_ms,
                to_ms,
                max_concurrent,
            },
        ))
        .await;
    match answer {
        Ok(answer) => {
            let backfill = answer.into_inner().backfill.unwrap_or_default();
            let notice = tf(lang, "backfill.started", &[&backfill.id, &backfill.total]);
            see_other(&format!("/jobs/{id}"), &notice)
        }
        Err(status) => status_page(lang, &status),
    }
}

/// `POST /backfills/{id}/cancel`: no more runs of the backfill start.
pub async fn cancel(
    State(console): State<Shared>,
    Path(id): Path<i64>,
    posted: Posted,
) -> Response {
    let answer = console
        .api()
        .cancel_backfill(request(
            &posted.viewer.caller,
            pb::CancelBackfillRequest { id },
        ))
        .await;
    match answer {
        Ok(answer) => {
            let backfill = answer.into_inner().backfill.unwrap_or_default();
            let notice = tf(posted.viewer.lang, "backfill.cancelled", &[&id]);
            see_other(&format!("/jobs/{}", backfill.job_id), &notice)
        }
        Err(status) => status_page(posted.viewer.lang, &status),
    }
}
