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
    /// Start after this instant (RFC 3339, e.g. 2027-10-30T12:00:00Z) instead of now: see a
    /// schedule around a date, such as a daylight-saving change.
    #[arg(long, value_name = "TIME", value_parser = parse_instant)]
    from: Option<i64>,
    /// A cron time the zone skips (spring forward): next-valid-time (default) or skip.
    #[arg(long, value_name = "POLICY", value_parser = view::parse_dst_gap_policy)]
    dst_gap: Option<i32>,
    /// A cron time the zone repeats (fall back): first (default), second or both.
    #[arg(long, value_name = "POLICY", value_parser = view::parse_dst_overlap_policy)]
    dst_overlap: Option<i32>,
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

/// An RFC 3339 instant as epoch milliseconds (not before 1970: the admin reads 0 as now).
fn parse_instant(text: &str) -> Result<i64, String> {
    let at = chrono::DateTime::parse_from_rfc3339(text.trim()).map_err(|error| {
        format!("'{text}' is not an RFC 3339 time (2027-10-30T12:00:00Z): {error}")
    })?;
    match at.timestamp_millis() {
        ms if ms > 0 => Ok(ms),
        _ => Err(format!("'{text}' is before 1970")),
    }
}

pub async fn run(args: PreviewArgs, out: Output, mut client: Client) -> Result<(), CliError> {
    // With --tz, each time is also shown in that zone with its abbreviation, so a time the zone
    // repeats (02:30 CEST, then 02:30 CET) reads as the two instants it is.
    let zone: Option<chrono_tz::Tz> = args.tz.trim().parse().ok();
    let request = pb::PreviewScheduleRequest {
        schedule_type: args.schedule_type,
        schedule_conf: args.conf,
        time_zone: args.tz,
        count: args.count,
        from_ms: args.from.unwrap_or(0),
        jitter_max_ms: args.jitter,
        job_id: args.job,
        calendar: args.calendar.clone(),
        calendar_mode: args.calendar_mode,
        dst_gap_policy: args.dst_gap.unwrap_or(0),
        dst_overlap_policy: args.dst_overlap.unwrap_or(0),
        workflow_id: 0,
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
        if zone.is_some() {
            headers.push("IN ZONE");
        }
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
            if let Some(zone) = zone {
                row.push(in_zone(fire.fire_time_ms, zone));
            }
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

/// `ms` as a wall time in `zone` with the zone's abbreviation (`2027-10-31 02:30:00 CET`).
fn in_zone(ms: i64, zone: chrono_tz::Tz) -> String {
    use chrono::TimeZone;
    match zone.timestamp_millis_opt(ms).single() {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S %Z").to_string(),
        None => ms.to_string(),
    }
}
