//! A workflow's schedule on the command line: the flags `workflows create|update` take (spelled
//! as `jobs create`'s), its line in `workflows show`, and `workflows preview`.

use clap::Args;
use serde::Serialize;
use xjob_proto::pb;

use super::client::Client;
use super::error::CliError;
use super::render::{self, Output, Table};
use super::view;

/// Schedule flags; each one given replaces the file's (or, for `update` without a file, the
/// saved) value.
#[derive(Args, Default)]
pub struct ScheduleFlags {
    /// none, cron or fix-rate (or use --cron / --fix-rate).
    #[arg(long, value_parser = view::parse_schedule_type)]
    schedule_type: Option<i32>,
    /// Cron expression, or seconds for fix-rate.
    #[arg(long)]
    schedule_conf: Option<String>,
    /// Start a run at each time of a Quartz cron (with seconds), e.g. "0 0 2 * * ?".
    #[arg(long, value_name = "EXPR", conflicts_with_all = ["schedule_type", "schedule_conf", "fix_rate"])]
    cron: Option<String>,
    /// Start a run every N seconds.
    #[arg(long, value_name = "SECONDS", conflicts_with_all = ["schedule_type", "schedule_conf"])]
    fix_rate: Option<String>,
    /// IANA zone of the cron, e.g. Europe/Paris (empty = the admin's zone).
    #[arg(long, visible_alias = "tz")]
    time_zone: Option<String>,
    /// A time missed while no admin ran: do-nothing or fire-once-now.
    #[arg(long, visible_alias = "misfire", value_parser = view::parse_misfire_strategy)]
    misfire_strategy: Option<i32>,
    /// Params of runs started without any (scheduled runs; `start` without --params).
    #[arg(long)]
    params: Option<String>,
    /// What an occurrence does while an earlier scheduled run still goes: allow-all, skip,
    /// buffer-one, buffer-all or cancel-other.
    #[arg(long, visible_alias = "overlap", value_name = "POLICY", value_parser = view::parse_overlap_policy)]
    overlap_policy: Option<i32>,
}

impl ScheduleFlags {
    /// Writes the flags given into `workflow`.
    pub fn apply(self, workflow: &mut pb::Workflow) {
        let set = |field: &mut String, value: Option<String>| {
            if let Some(value) = value {
                *field = value;
            }
        };
        if let Some(schedule_type) = self.schedule_type {
            workflow.schedule_type = schedule_type;
        }
        set(&mut workflow.schedule_conf, self.schedule_conf);
        for (conf, schedule_type) in [
            (self.cron, pb::ScheduleType::Cron),
            (self.fix_rate, pb::ScheduleType::FixRate),
        ] {
            if let Some(conf) = conf {
                workflow.schedule_type = schedule_type as i32;
                workflow.schedule_conf = conf;
            }
        }
        set(&mut workflow.time_zone, self.time_zone);
        if let Some(misfire) = self.misfire_strategy {
            workflow.misfire_strategy = misfire;
        }
        set(&mut workflow.params, self.params);
        if let Some(overlap) = self.overlap_policy {
            workflow.overlap_policy = overlap;
        }
    }
}

/// The schedule line of `workflows show`: "none", "cron 0 0 2 * * ?", "every 60s".
pub fn schedule_text(schedule_type: &str, conf: &str) -> String {
    match schedule_type {
        "CRON" => format!("cron {conf}"),
        "FIX_RATE" => format!("every {conf}s"),
        "" | "NONE" | "UNSPECIFIED" => "none (started by `xjob workflows start`)".to_string(),
        other => format!("{other} {conf}"),
    }
}

#[derive(Serialize)]
struct Occurrence {
    fire_time_ms: i64,
}

/// `xjob workflows preview ID`: the next times the workflow's schedule starts a run.
pub async fn preview(
    client: &mut Client,
    out: Output,
    id: i64,
    count: i32,
) -> Result<(), CliError> {
    let request = pb::PreviewScheduleRequest {
        workflow_id: id,
        count,
        ..Default::default()
    };
    let preview = client.preview_schedule(request).await?.into_inner();
    let times: Vec<Occurrence> = (preview.fire_times_ms.iter())
        .map(|&fire_time_ms| Occurrence { fire_time_ms })
        .collect();
    let now = render::now_ms();
    out.list(&times, "This schedule never fires.", |times| {
        let mut table = Table::new(&["RUN AT (LOCAL)", "WHEN"]);
        for time in times {
            table.row(vec![
                render::time(time.fire_time_ms),
                render::relative(time.fire_time_ms, now),
            ]);
        }
        table
    })
}
