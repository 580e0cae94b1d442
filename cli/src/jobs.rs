//! `xjob jobs …`: job definitions. Flags carry the proto field names (`--schedule-conf`,
//! `--route-strategy`, …) with short aliases (`--cron`, `--route`, …); `update` reads the job,
//! changes only the flags given and writes it back.

use std::collections::HashMap;

use clap::{Args, Subcommand};
use xjob_proto::pb;

use super::client::{Client, short};
use super::error::CliError;
use super::group_names::{group_label, group_names, resolve_group};
use super::prompt::confirm;
use super::render::{self, Details, Output, Table};
use super::runs;
use super::view::{self, JobView};

#[derive(Subcommand)]
pub enum JobsCommand {
    /// Lists jobs, filtered.
    List(ListArgs),
    /// Shows every field of a job.
    Show {
        /// Job id.
        id: i64,
    },
    /// Creates a job (stopped; `jobs start` schedules it).
    Create(Box<CreateArgs>),
    /// Changes the given fields of a job, keeping the others.
    Update {
        /// Job id.
        id: i64,
        #[command(flatten)]
        fields: Box<JobFields>,
    },
    /// Deletes a job and its runs' logs.
    Delete {
        /// Job id.
        id: i64,
        /// Do not ask for confirmation (required when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Starts scheduling a job (first fire at least 5 s from now).
    Start {
        /// Job id.
        id: i64,
    },
    /// Stops scheduling a job; runs already dispatched go on.
    Stop {
        /// Job id.
        id: i64,
    },
    /// Runs a job once now.
    Trigger(TriggerArgs),
}

#[derive(Args)]
pub struct ListArgs {
    /// Group id or app name.
    #[arg(long)]
    group: Option<String>,
    /// running or stopped.
    #[arg(long, value_parser = view::parse_job_status)]
    status: Option<i32>,
    /// Substring of the job name.
    #[arg(long)]
    name: Option<String>,
    /// Substring of the handler.
    #[arg(long)]
    handler: Option<String>,
    /// Substring of the author.
    #[arg(long)]
    author: Option<String>,
    /// Most jobs to show.
    #[arg(long, default_value_t = 100)]
    limit: usize,
}

#[derive(Args)]
pub struct CreateArgs {
    #[command(flatten)]
    fields: JobFields,
}

#[derive(Args)]
pub struct TriggerArgs {
    /// Job id.
    id: i64,
    /// Params for this run instead of the job's.
    #[arg(long)]
    params: Option<String>,
    /// Run on this executor address instead of the group's (repeatable).
    #[arg(long = "address", value_name = "ADDRESS")]
    addresses: Vec<String>,
    /// Then print the run's log as it is written, until the run ends.
    #[arg(long, short = 'f')]
    follow: bool,
}

/// The editable fields of a job; `None` = not given (create uses defaults, update keeps).
#[derive(Args, Default)]
pub struct JobFields {
    /// Group id or app name (group_id).
    #[arg(long)]
    group: Option<String>,
    /// The job's name (required by create).
    #[arg(long)]
    name: Option<String>,
    /// Who owns the job.
    #[arg(long)]
    author: Option<String>,
    /// Comma-separated e-mail addresses for alarms.
    #[arg(long)]
    alarm_email: Option<String>,
    /// Alarm on every failed attempt, not only the last retry.
    #[arg(long, value_name = "BOOL")]
    alarm_on_every_failure: Option<bool>,
    /// none, cron, fix-rate or fix-delay (or use --cron / --fix-rate / --fix-delay).
    #[arg(long, value_parser = view::parse_schedule_type)]
    schedule_type: Option<i32>,
    /// Cron expression, or seconds for fix-rate / fix-delay.
    #[arg(long)]
    schedule_conf: Option<String>,
    /// Schedule with a Quartz cron (with seconds), e.g. "0 */5 * * * ?".
    #[arg(long, value_name = "EXPR", conflicts_with_all = ["schedule_type", "schedule_conf", "fix_rate", "fix_delay"])]
    cron: Option<String>,
    /// Fire every N seconds.
    #[arg(long, value_name = "SECONDS", conflicts_with_all = ["schedule_type", "schedule_conf", "fix_delay"])]
    fix_rate: Option<String>,
    /// Fire N seconds after the previous run finished.
    #[arg(long, value_name = "SECONDS", conflicts_with_all = ["schedule_type", "schedule_conf"])]
    fix_delay: Option<String>,
    /// IANA zone of the cron, e.g. Europe/Paris (empty = the admin's zone).
    #[arg(long, visible_alias = "tz")]
    time_zone: Option<String>,
    /// do-nothing or fire-once-now.
    #[arg(long, visible_alias = "misfire", value_parser = view::parse_misfire_strategy)]
    misfire_strategy: Option<i32>,
    /// Hold each scheduled fire back by up to this long (jitter_max_ms), e.g. 30s; 0 = none.
    /// Each occurrence's delay is fixed, so retries and takeovers keep it.
    #[arg(long, value_name = "DURATION", value_parser = parse_ms)]
    jitter: Option<i64>,
    /// Run fires missed (the admin down) no longer ago than this when found
    /// (catch_up_window_ms), e.g. 1h, at most 1d; older ones are skipped. 0 = off: the misfire
    /// strategy decides.
    #[arg(long, value_name = "DURATION", value_parser = parse_ms)]
    catch_up: Option<i64>,
    /// Which missed fires inside the catch-up window run: latest (one) or all (oldest first,
    /// at most 100 at once).
    #[arg(long, value_name = "MODE", value_parser = view::parse_catch_up_mode)]
    catch_up_mode: Option<i32>,
    /// A calendar (by name, see `xjob calendars`) the job's fires are checked against; "" =
    /// none. A fire it keeps out gets a SKIPPED run naming it.
    #[arg(long, value_name = "NAME")]
    calendar: Option<String>,
    /// What the calendar means: skip (its times are a blackout) or only (run only in it).
    #[arg(long, value_name = "MODE", value_parser = view::parse_calendar_mode)]
    calendar_mode: Option<i32>,
    /// A cron time the zone skips when clocks spring forward (dst_gap_policy):
    /// next-valid-time (run at the end of the gap, the default) or skip (not that day).
    #[arg(long, value_name = "POLICY", value_parser = view::parse_dst_gap_policy)]
    dst_gap: Option<i32>,
    /// A cron time the zone repeats when clocks fall back (dst_overlap_policy): first (the
    /// default), second or both.
    #[arg(long, value_name = "POLICY", value_parser = view::parse_dst_overlap_policy)]
    dst_overlap: Option<i32>,
    /// What a scheduled fire does while an earlier run of the job still goes, whatever the
    /// executor: allow-all, skip, buffer-one, buffer-all or cancel-other.
    #[arg(long, value_name = "POLICY", value_parser = view::parse_overlap_policy)]
    overlap: Option<i32>,
    /// first, last, round, random, consistent-hash, least-frequently-used,
    /// least-recently-used, failover, busyover, sharding-broadcast.
    #[arg(long, visible_alias = "route", value_parser = view::parse_route_strategy)]
    route_strategy: Option<i32>,
    /// Handler name (bean jobs).
    #[arg(long)]
    handler: Option<String>,
    /// Text passed to every run (a trigger may replace it).
    #[arg(long)]
    params: Option<String>,
    /// serial-execution, discard-later or cover-early.
    #[arg(long, visible_alias = "block", value_parser = view::parse_block_strategy)]
    block_strategy: Option<i32>,
    /// Run timeout (timeout_ms) like 90s, 5m; 0 = none.
    #[arg(long, value_name = "DURATION", value_parser = parse_ms)]
    timeout: Option<i64>,
    /// Retries of a failed run.
    #[arg(long, visible_alias = "retries")]
    fail_retry_count: Option<i32>,
    /// Delay before the first retry (retry_backoff.initial_delay_ms), e.g. 10s.
    #[arg(long, value_name = "DURATION", value_parser = parse_ms)]
    retry_delay: Option<i64>,
    /// Growth of the retry delay (retry_backoff.factor); 1 = fixed.
    #[arg(long)]
    retry_factor: Option<f64>,
    /// Largest retry delay (retry_backoff.max_delay_ms); 0 = no bound.
    #[arg(long, value_name = "DURATION", value_parser = parse_ms)]
    retry_max_delay: Option<i64>,
    /// bean, shell, python, nodejs, php or powershell (fixed at creation).
    #[arg(long, value_parser = view::parse_glue_type)]
    glue_type: Option<i32>,
    /// Script source, or @FILE to read it from a file.
    #[arg(long)]
    glue_source: Option<String>,
    /// What the script's source is or what changed in it.
    #[arg(long)]
    glue_remark: Option<String>,
    /// Jobs run when a run of this one succeeds, comma-separated ids ("" = none).
    #[arg(long, visible_alias = "children", value_name = "IDS")]
    child_job_ids: Option<String>,
}

/// `90s`, `5m`, `250ms`, `0` as milliseconds.
fn parse_ms(text: &str) -> Result<i64, String> {
    let duration = xjob_proto::duration::parse(text)?;
    i64::try_from(duration.as_millis()).map_err(|_| format!("'{}' is too long", short(text)))
}

pub async fn run(command: JobsCommand, out: Output, mut client: Client) -> Result<(), CliError> {
    match command {
        JobsCommand::List(args) => list(args, &out, &mut client).await,
        JobsCommand::Show { id } => {
            let job = get(&mut client, id).await?;
            let groups = group_names(&mut client).await;
            out.object(&JobView::from(&job), |view| details(view, &groups))
        }
        JobsCommand::Create(args) => create(args.fields, &out, &mut client).await,
        JobsCommand::Update { id, fields } => update(id, *fields, &out, &mut client).await,
        JobsCommand::Delete { id, yes } => delete(id, yes, &out, &mut client).await,
        JobsCommand::Start { id } => {
            let request = pb::StartJobRequest { id };
            let job = client.start_job(request).await?.into_inner().job;
            changed(&out, job, "started")
        }
        JobsCommand::Stop { id } => {
            let request = pb::StopJobRequest { id };
            let job = client.stop_job(request).await?.into_inner().job;
            changed(&out, job, "stopped")
        }
        JobsCommand::Trigger(args) => trigger(args, &out, &mut client).await,
    }
}

async fn list(args: ListArgs, out: &Output, client: &mut Client) -> Result<(), CliError> {
    let group_id = match &args.group {
        Some(group) => resolve_group(client, group).await?,
        None => 0,
    };
    let mut request = pb::ListJobsRequest {
        group_id,
        status: args.status.unwrap_or(0),
        name: args.name.unwrap_or_default(),
        handler: args.handler.unwrap_or_default(),
        author: args.author.unwrap_or_default(),
        page_size: page_size(args.limit),
        page_token: String::new(),
        order_by: String::new(),
    };
    let mut jobs = Vec::new();
    loop {
        let page = client.list_jobs(request.clone()).await?.into_inner();
        jobs.extend(page.jobs.iter().map(JobView::from));
        if page.next_page_token.is_empty() || jobs.len() >= args.limit {
            break;
        }
        request.page_token = page.next_page_token;
    }
    jobs.truncate(args.limit);
    let groups = if out.is_json() {
        HashMap::new()
    } else {
        group_names(client).await
    };
    out.list(
        &jobs,
        "No jobs. Create one with: xjob jobs create --group APP --name NAME --cron EXPR --handler NAME",
        |jobs| {
            let mut table = Table::new(&[
                "ID", "GROUP", "NAME", "SCHEDULE", "HANDLER", "STATUS", "NEXT FIRE",
            ]);
            for job in jobs {
                table.row(vec![
                    job.id.to_string(),
                    group_label(&groups, job.group_id),
                    render::cell(&job.name, 40),
                    render::cell(&schedule_text(job), 32),
                    render::cell(&handler_text(job), 32),
                    job.status.clone(),
                    render::time(job.next_fire_ms),
                ]);
            }
            table
        },
    )
}

/// List calls fetch at most this many per page (the admin's own cap is 1000).
fn page_size(limit: usize) -> i32 {
    i32::try_from(limit.clamp(1, 500)).unwrap_or(500)
}

async fn create(fields: JobFields, out: &Output, client: &mut Client) -> Result<(), CliError> {
    if fields.group.is_none() || fields.name.is_none() {
        return Err(CliError::Usage(
            "jobs create needs --group (id or app name) and --name".into(),
        ));
    }
    let mut job = pb::Job {
        schedule_type: pb::ScheduleType::None as i32,
        misfire_strategy: pb::MisfireStrategy::DoNothing as i32,
        route_strategy: pb::RouteStrategy::First as i32,
        block_strategy: pb::BlockStrategy::SerialExecution as i32,
        glue_type: pb::GlueType::Bean as i32,
        ..Default::default()
    };
    apply(&mut job, fields, client).await?;
    let request = pb::CreateJobRequest { job: Some(job) };
    let job = client.create_job(request).await?.into_inner().job;
    let job = job.ok_or_else(|| CliError::Failed("the admin returned no job".into()))?;
    out.done(
        &JobView::from(&job),
        &format!(
            "Created job {} '{}' (stopped; start it with: xjob jobs start {})",
            job.id, job.name, job.id
        ),
    )
}

/// Read, change what was given, write back: the other fields keep their stored values.
async fn update(
    id: i64,
    fields: JobFields,
    out: &Output,
    client: &mut Client,
) -> Result<(), CliError> {
    let mut job = get(client, id).await?;
    apply(&mut job, fields, client).await?;
    let request = pb::UpdateJobRequest { job: Some(job) };
    let job = client.update_job(request).await?.into_inner().job;
    changed(out, job, "updated")
}

async fn delete(id: i64, yes: bool, out: &Output, client: &mut Client) -> Result<(), CliError> {
    if !yes {
        let job = get(client, id).await?;
        confirm(&format!(
            "Delete job {id} '{}' and the logs of its runs?",
            short(&job.name)
        ))?;
    }
    client.delete_job(pb::DeleteJobRequest { id }).await?;
    out.done(
        &serde_json::json!({ "deleted_job_id": id }),
        &format!("Deleted job {id}"),
    )
}

async fn trigger(args: TriggerArgs, out: &Output, client: &mut Client) -> Result<(), CliError> {
    let request = pb::TriggerJobRequest {
        id: args.id,
        params: args.params,
        addresses: args.addresses,
    };
    let log_ids = client.trigger_job(request).await?.into_inner().log_ids;
    let ids: Vec<String> = log_ids.iter().map(i64::to_string).collect();
    let follow_hint = match log_ids.first() {
        Some(first) => format!(" (see it with: xjob runs log {first} --follow)"),
        None => String::new(),
    };
    if !(args.follow && out.is_json()) {
        out.done(
            &serde_json::json!({ "job_id": args.id, "log_ids": log_ids }),
            &format!(
                "Triggered job {}: run {}{follow_hint}",
                args.id,
                ids.join(", ")
            ),
        )?;
    }
    match (args.follow, log_ids.as_slice()) {
        (true, [only]) => runs::follow(client, out, *only, 1).await,
        (true, _) => Err(CliError::Usage(
            "--follow needs a single run; this trigger made several (a broadcast)".into(),
        )),
        (false, _) => Ok(()),
    }
}

async fn get(client: &mut Client, id: i64) -> Result<pb::Job, CliError> {
    let job = client
        .get_job(pb::GetJobRequest { id })
        .await?
        .into_inner()
        .job;
    job.ok_or_else(|| CliError::Failed(format!("the admin returned no job {id}")))
}

/// Prints a job after start/stop/update: the view in JSON, a sentence otherwise.
fn changed(out: &Output, job: Option<pb::Job>, what: &str) -> Result<(), CliError> {
    let job = job.ok_or_else(|| CliError::Failed("the admin returned no job".into()))?;
    let mut sentence = format!(
        "Job {} '{}' {what}; status {}",
        job.id,
        job.name,
        view::job_status(job.status)
    );
    if job.next_fire_ms > 0 {
        let next = render::time_long(job.next_fire_ms, render::now_ms());
        sentence.push_str(&format!(", next fire {next}"));
    }
    out.done(&JobView::from(&job), &sentence)
}

/// Copies the given flags onto `job`.
async fn apply(job: &mut pb::Job, fields: JobFields, client: &mut Client) -> Result<(), CliError> {
    if let Some(group) = &fields.group {
        job.group_id = resolve_group(client, group).await?;
    }
    set(&mut job.name, fields.name);
    set(&mut job.author, fields.author);
    set(&mut job.alarm_email, fields.alarm_email);
    set(
        &mut job.alarm_on_every_failure,
        fields.alarm_on_every_failure,
    );
    set(&mut job.schedule_type, fields.schedule_type);
    set(&mut job.schedule_conf, fields.schedule_conf);
    for (conf, schedule_type) in [
        (fields.cron, pb::ScheduleType::Cron),
        (fields.fix_rate, pb::ScheduleType::FixRate),
        (fields.fix_delay, pb::ScheduleType::FixDelay),
    ] {
        if let Some(conf) = conf {
            job.schedule_type = schedule_type as i32;
            job.schedule_conf = conf;
        }
    }
    set(&mut job.time_zone, fields.time_zone);
    set(&mut job.misfire_strategy, fields.misfire_strategy);
    set(&mut job.jitter_max_ms, fields.jitter);
    set(&mut job.catch_up_window_ms, fields.catch_up);
    set(&mut job.catch_up_mode, fields.catch_up_mode);
    set(&mut job.calendar, fields.calendar);
    set(&mut job.calendar_mode, fields.calendar_mode);
    set(&mut job.dst_gap_policy, fields.dst_gap);
    set(&mut job.dst_overlap_policy, fields.dst_overlap);
    set(&mut job.overlap_policy, fields.overlap);
    set(&mut job.route_strategy, fields.route_strategy);
    set(&mut job.handler, fields.handler);
    set(&mut job.params, fields.params);
    set(&mut job.block_strategy, fields.block_strategy);
    set(&mut job.timeout_ms, fields.timeout);
    set(&mut job.fail_retry_count, fields.fail_retry_count);
    if fields.retry_delay.is_some()
        || fields.retry_factor.is_some()
        || fields.retry_max_delay.is_some()
    {
        let backoff = job.retry_backoff.get_or_insert_with(Default::default);
        set(&mut backoff.initial_delay_ms, fields.retry_delay);
        set(&mut backoff.factor, fields.retry_factor);
        set(&mut backoff.max_delay_ms, fields.retry_max_delay);
    }
    set(&mut job.glue_type, fields.glue_type);
    if let Some(source) = fields.glue_source {
        job.glue_source = read_source(&source)?;
    }
    set(&mut job.glue_remark, fields.glue_remark);
    if let Some(ids) = fields.child_job_ids {
        job.child_job_ids = parse_ids(&ids)?;
    }
    Ok(())
}

fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *field = value;
    }
}

/// `@path` reads the file; anything else is the source itself.
fn read_source(value: &str) -> Result<String, CliError> {
    match value.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| CliError::Usage(format!("--glue-source @{}: {error}", short(path)))),
        None => Ok(value.to_string()),
    }
}

fn parse_ids(text: &str) -> Result<Vec<i64>, CliError> {
    text.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse().map_err(|_| {
                CliError::Usage(format!(
                    "--child-job-ids: '{}' is not a job id",
                    short(part)
                ))
            })
        })
        .collect()
}

/// `cron 0 * * * * ?`, `every 30s`, `30s after each run`, `manual`.
fn schedule_text(job: &JobView) -> String {
    match job.schedule_type.as_str() {
        "CRON" => format!("cron {}", job.schedule_conf),
        "FIX_RATE" => format!("every {}s", job.schedule_conf),
        "FIX_DELAY" => format!("{}s after each run", job.schedule_conf),
        "NONE" => "manual".into(),
        other => format!("{other} {}", job.schedule_conf),
    }
}

fn handler_text(job: &JobView) -> String {
    if job.glue_type == "BEAN" {
        job.handler.clone()
    } else {
        format!("({} script)", job.glue_type.to_lowercase())
    }
}

fn details(job: &JobView, groups: &HashMap<i64, String>) -> Details {
    let now = render::now_ms();
    let backoff = &job.retry_backoff;
    let mut details = Details::new();
    details
        .add("id", job.id.to_string())
        .add("name", job.name.clone())
        .add("group", group_label(groups, job.group_id))
        .add("status", job.status.clone())
        .add("schedule", schedule_text(job))
        .add("time zone", render::or_dash(&job.time_zone))
        .add("misfire", flag_spelling(&job.misfire_strategy))
        .add(
            "jitter",
            if job.jitter_max_ms > 0 {
                format!("up to {}", render::duration(job.jitter_max_ms))
            } else {
                "none".into()
            },
        )
        .add("catch-up", catch_up_text(job))
        .add("calendar", calendar_text(job))
        .add(
            "dst",
            format!(
                "gap {}, overlap {}",
                flag_spelling(&job.dst_gap_policy),
                flag_spelling(&job.dst_overlap_policy)
            ),
        )
        .add("overlap", flag_spelling(&job.overlap_policy))
        .add("next fire", render::time_long(job.next_fire_ms, now))
        .add("last fire", render::time_long(job.last_fire_ms, now))
        .add("glue type", flag_spelling(&job.glue_type))
        .add("handler", render::or_dash(&job.handler))
        .add("params", render::or_dash(&job.params))
        .add("route", flag_spelling(&job.route_strategy))
        .add("block", flag_spelling(&job.block_strategy))
        .add(
            "timeout",
            if job.timeout_ms > 0 {
                render::duration(job.timeout_ms)
            } else {
                "none".into()
            },
        )
        .add("retries", job.fail_retry_count.to_string())
        .add("retry backoff", backoff_text(backoff))
        .add("children", ids_text(&job.child_job_ids))
        .add("author", render::or_dash(&job.author))
        .add("alarm email", render::or_dash(&job.alarm_email))
        .add(
            "alarm every failure",
            job.alarm_on_every_failure.to_string(),
        );
    if job.glue_type != "BEAN" {
        details
            .add("glue remark", render::or_dash(&job.glue_remark))
            .add("glue updated", render::time_long(job.glue_updated_ms, now))
            .add("glue source", job.glue_source.clone());
    }
    details
        .add("created", render::time_long(job.created_ms, now))
        .add("updated", render::time_long(job.updated_ms, now));
    details
}

fn ids_text(ids: &[i64]) -> String {
    if ids.is_empty() {
        return "-".into();
    }
    ids.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn backoff_text(backoff: &view::RetryBackoffView) -> String {
    if backoff.initial_delay_ms == 0 {
        return "retry at once".into();
    }
    let most = if backoff.max_delay_ms > 0 {
        render::duration(backoff.max_delay_ms)
    } else {
        "unbounded".into()
    };
    format!(
        "first after {}, factor {}, at most {most}",
        render::duration(backoff.initial_delay_ms),
        backoff.factor.max(1.0),
    )
}

/// The calendar line of `jobs show`: "none", or the calendar and what it means.
fn calendar_text(job: &JobView) -> String {
    match (job.calendar.as_str(), job.calendar_mode.as_str()) {
        ("", _) => "none".into(),
        (name, "ONLY") => format!("{name}, mode only (runs only inside it)"),
        (name, _) => format!("{name}, mode skip (skips its times)"),
    }
}

/// An enum value as its CLI flag spells it (`NEXT_VALID_TIME` → `next-valid-time`), so what
/// `jobs show` prints can be given back to `jobs update` as it is.
fn flag_spelling(name: &str) -> String {
    name.to_lowercase().replace('_', "-")
}

/// The catch-up line of `jobs show`: "off", or the window and the mode.
fn catch_up_text(job: &JobView) -> String {
    if job.catch_up_window_ms > 0 {
        // An unset mode is the latest (the admin's default).
        let mode = match job.catch_up_mode.as_str() {
            "ALL" => "all (runs every fire missed in it, oldest first)",
            _ => "latest (runs the latest fire missed in it)",
        };
        format!(
            "window {}, mode {mode}",
            render::duration(job.catch_up_window_ms)
        )
    } else {
        "off".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flag's value parser.
    type Parse = fn(&str) -> Result<i32, String>;

    /// Every enum `jobs show` prints is spelled as its flag takes it: the printed word, given
    /// back to the flag's parser, is the job's own value.
    #[test]
    fn jobs_show_spells_each_enum_as_its_flag_takes_it() {
        let job = pb::Job {
            misfire_strategy: pb::MisfireStrategy::FireOnceNow as i32,
            catch_up_window_ms: 3_600_000,
            catch_up_mode: pb::CatchUpMode::All as i32,
            calendar: "holidays".into(),
            calendar_mode: pb::CalendarMode::Only as i32,
            dst_gap_policy: pb::DstGapPolicy::NextValidTime as i32,
            dst_overlap_policy: pb::DstOverlapPolicy::Both as i32,
            overlap_policy: pb::OverlapPolicy::BufferOne as i32,
            route_strategy: pb::RouteStrategy::ConsistentHash as i32,
            block_strategy: pb::BlockStrategy::DiscardLater as i32,
            glue_type: pb::GlueType::Shell as i32,
            ..Default::default()
        };
        let shown = details(&JobView::from(&job), &HashMap::new());
        let value = |label| shown.value(label).unwrap_or_default().to_string();
        let single: [(&str, &str, Parse, i32); 5] = [
            (
                "misfire",
                "fire-once-now",
                view::parse_misfire_strategy,
                job.misfire_strategy,
            ),
            (
                "overlap",
                "buffer-one",
                view::parse_overlap_policy,
                job.overlap_policy,
            ),
            (
                "route",
                "consistent-hash",
                view::parse_route_strategy,
                job.route_strategy,
            ),
            (
                "block",
                "discard-later",
                view::parse_block_strategy,
                job.block_strategy,
            ),
            ("glue type", "shell", view::parse_glue_type, job.glue_type),
        ];
        for (label, spelled, parse, wanted) in single {
            assert_eq!(value(label), spelled, "{label}");
            assert_eq!(parse(spelled), Ok(wanted), "{label}");
        }
        assert_eq!(value("dst"), "gap next-valid-time, overlap both");
        assert_eq!(
            view::parse_dst_gap_policy("next-valid-time"),
            Ok(job.dst_gap_policy)
        );
        assert!(
            value("catch-up").starts_with("window 1h00m, mode all "),
            "{}",
            value("catch-up")
        );
        assert_eq!(view::parse_catch_up_mode("all"), Ok(job.catch_up_mode));
        assert!(
            value("calendar").starts_with("holidays, mode only "),
            "{}",
            value("calendar")
        );
        assert_eq!(view::parse_calendar_mode("only"), Ok(job.calendar_mode));
    }
}
