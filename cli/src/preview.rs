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
}

#[derive(Serialize)]
struct Fire {
    fire_time_ms: i64,
}

pub async fn run(args: PreviewArgs, out: Output, mut client: Client) -> Result<(), CliError> {
    let request = pb::PreviewScheduleRequest {
        schedule_type: args.schedule_type,
        schedule_conf: args.conf,
        time_zone: args.tz,
        count: args.count,
        from_ms: 0,
    };
    let times = client
        .preview_schedule(request)
        .await?
        .into_inner()
        .fire_times_ms;
    let fires: Vec<Fire> = times
        .iter()
        .map(|&fire_time_ms| Fire { fire_time_ms })
        .collect();
    let now = render::now_ms();
    out.list(&fires, "This schedule never fires.", |fires| {
        let mut table = Table::new(&["FIRE TIME (LOCAL)", "WHEN"]);
        for fire in fires {
            table.row(vec![
                render::time(fire.fire_time_ms),
                render::relative(fire.fire_time_ms, now),
            ]);
        }
        table
    })
}
