//! `xjob preview`: the next fire times of a schedule, computed by the admin (its cron parser
//! and default zone), nothing saved. Try a cron before putting it in a job.

use clap::Args;
use serde::Serialize;
use xjob_proto::pb;

use super::client::Client;
use super::error::CliError;
use super::render::{self, Output, Table};
use super::view;

#[derive(Args)]
pub struct PreviewArgs {
    /// A cron expression, or seconds for fix-rate / fix-delay.
    conf: String,
    /// cron, fix-rate or fix-delay.
    #[arg(long = "type", default_value = "cron", value_parser = view::parse_schedule_type)]
    schedule_type: i32,
    /// IANA zone of the cron (empty = the admin's zone).
    #[arg(long, visible_alias = "time-zone", default_value = "")]
    tz: String,
    /// How many fire times (at most 100).
    #[arg(short = 'n', long, default_value_t = 5)]
    count: i32,
    /// The job's jitter (e.g. 30s): also show when each fire is sent.
    #[arg(long, value_name = "DURATION", value_parser = parse_ms, default_value = "0")]
    jitter: i64,
    /// The job the jitter is for (each job spreads its fires its own way); 0 = a new job.
    #[arg(long, value_name = "ID", default_value_t = 0)]
    job: i64,
    /// A calendar to check each fire against: fires it keeps out are shown as skipped.
    #[arg(long, value_name = "NAME", default_value = "")]
    calendar: String,
    /// What the calendar means: skip (its times are a blackout) or only (run only in it).
    #[arg(long, value_name = "MODE", value_parser = view::parse_calendar_mode, default_value = "skip")]
    calendar_mode: i32,
}

#[derive(Serialize)]
struct Fire {
    fire_time_ms: i64,
    dispatch_time_ms: i64,
    /// Why the calendar skips the fire; empty when it runs.
    #[serde(skip_serializing_if = "String::is_empty")]
    skipped: String,
}

/// `90s`, `5m`, `250ms`, `0` as milliseconds.
fn parse_ms(text: &str) -> Result<i64, String> {
    let duration = xjob_proto::duration::parse(text)?;
    i64::try_from(duration.as_millis()).map_err(|_| format!("'{text}' is too long"))
}

pub async fn run(args: PreviewArgs, out: Output, mut client: Client) -> Result<(), CliError> {
    let request = pb::PreviewScheduleRequest {
        schedule_type: args.schedule_type,
        schedule_conf: args.conf,
        time_zone: args.tz,
        count: args.count,
        from_ms: 0,
        jitter_max_ms: args.jitter,
        job_id: args.job,
        calendar: args.calendar.clone(),
        calendar_mode: args.calendar_mode,
    };
    let preview = client.preview_schedule(request).await?.into_inner();
    let fires: Vec<Fire> = preview
        .fire_times_ms
        .iter()
        .enumerate()
        .map(|(index, &fire_time_ms)| Fire {
            fire_time_ms,
            dispatch_time_ms: preview
                .dispatch_times_ms
                .get(index)
                .copied()
                .unwrap_or(fire_time_ms),
            skipped: preview.skip_reasons.get(index).cloned().unwrap_or_default(),
        })
        .collect();
    let now = render::now_ms();
    let jittered = args.jitter > 0;
    let with_calendar = !args.calendar.is_empty();
    out.list(&fires, "This schedule never fires.", |fires| {
        let mut headers = vec!["FIRE TIME (LOCAL)"];
        if jittered {
            headers.push("SENT AT (JITTER)");
        }
        headers.push("WHEN");
        if with_calendar {
            headers.push("CALENDAR");
        }
        let mut table = Table::new(&headers);
        for fire in fires {
            let mut row = vec![render::time(fire.fire_time_ms)];
            if jittered {
                row.push(render::time(fire.dispatch_time_ms));
            }
            row.push(render::relative(fire.fire_time_ms, now));
            if with_calendar {
                row.push(if fire.skipped.is_empty() {
                    "runs".to_string()
                } else {
                    fire.skipped.clone()
                });
            }
            table.row(row);
        }
        table
    })
}
