//! `xjob calendars …`: named sets of dates and times jobs skip (or run only in).

use clap::{Args, Subcommand};
use serde::Serialize;
use xjob_proto::pb;

use super::client::Client;
use super::error::CliError;
use super::prompt::confirm;
use super::render::{self, Details, Output, Table};

#[derive(Subcommand)]
pub enum CalendarsCommand {
    /// Lists calendars.
    List,
    /// Shows a calendar, its rules and the jobs using it.
    Show { name: String },
    /// Creates a calendar.
    Create {
        name: String,
        #[command(flatten)]
        fields: CalendarFields,
    },
    /// Changes the given fields of a calendar, keeping the others.
    Update {
        name: String,
        #[command(flatten)]
        fields: CalendarFields,
    },
    /// Deletes a calendar; refused while jobs use it.
    Delete {
        name: String,
        /// Do not ask for confirmation (required when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

#[derive(Args)]
pub struct CalendarFields {
    /// A rule, repeated for each: 2026-12-25, 2026-12-24..2026-12-31, "weekly sat,sun",
    /// "weekly mon-fri 09:00-17:00" or "cron 0 0 12 * * ?". Replaces every rule on update.
    #[arg(long = "rule", value_name = "RULE")]
    rules: Vec<String>,
    /// Remove every rule (update).
    #[arg(long, conflicts_with = "rules")]
    clear_rules: bool,
    /// IANA zone the rules are in, e.g. Asia/Shanghai (empty = the admin's zone).
    #[arg(long, visible_alias = "tz")]
    time_zone: Option<String>,
    #[arg(long)]
    description: Option<String>,
}

/// `Calendar` as `--output json` shows it.
#[derive(Serialize)]
struct CalendarView {
    name: String,
    time_zone: String,
    rules: Vec<String>,
    description: String,
    created_ms: i64,
    updated_ms: i64,
    job_ids: Vec<i64>,
}

impl From<&pb::Calendar> for CalendarView {
    fn from(calendar: &pb::Calendar) -> CalendarView {
        CalendarView {
            name: calendar.name.clone(),
            time_zone: calendar.time_zone.clone(),
            rules: calendar.rules.clone(),
            description: calendar.description.clone(),
            created_ms: calendar.created_ms,
            updated_ms: calendar.updated_ms,
            job_ids: calendar.job_ids.clone(),
        }
    }
}

pub async fn run(
    command: CalendarsCommand,
    out: Output,
    mut client: Client,
) -> Result<(), CliError> {
    match command {
        CalendarsCommand::List => {
            let request = pb::ListCalendarsRequest {};
            let calendars = client.list_calendars(request).await?.into_inner().calendars;
            let views: Vec<CalendarView> = calendars.iter().map(CalendarView::from).collect();
            out.list(
                &views,
                "No calendars. Create one with: xjob calendars create NAME --rule 2026-12-25",
                |calendars| {
                    let mut table = Table::new(&["NAME", "ZONE", "RULES", "DESCRIPTION"]);
                    for calendar in calendars {
                        table.row(vec![
                            calendar.name.clone(),
                            render::or_dash(&calendar.time_zone),
                            calendar.rules.len().to_string(),
                            render::cell(&calendar.description, 40),
                        ]);
                    }
                    table
                },
            )
        }
        CalendarsCommand::Show { name } => {
            let calendar = get(&mut client, &name).await?;
            out.object(&CalendarView::from(&calendar), details)
        }
        CalendarsCommand::Create { name, fields } => {
            let mut calendar = pb::Calendar {
                name,
                ..Default::default()
            };
            apply(&mut calendar, fields);
            let request = pb::CreateCalendarRequest {
                calendar: Some(calendar),
            };
            let calendar = client.create_calendar(request).await?.into_inner().calendar;
            let calendar = calendar
                .ok_or_else(|| CliError::Failed("the admin returned no calendar".into()))?;
            let sentence = format!(
                "Created calendar '{}' ({} rule(s))",
                calendar.name,
                calendar.rules.len()
            );
            out.done(&CalendarView::from(&calendar), &sentence)
        }
        CalendarsCommand::Update { name, fields } => {
            let mut calendar = get(&mut client, &name).await?;
            apply(&mut calendar, fields);
            let request = pb::UpdateCalendarRequest {
                calendar: Some(calendar),
            };
            let calendar = client.update_calendar(request).await?.into_inner().calendar;
            let calendar = calendar
                .ok_or_else(|| CliError::Failed("the admin returned no calendar".into()))?;
            let sentence = format!(
                "Updated calendar '{}' ({} rule(s))",
                calendar.name,
                calendar.rules.len()
            );
            out.done(&CalendarView::from(&calendar), &sentence)
        }
        CalendarsCommand::Delete { name, yes } => {
            if !yes {
                confirm(&format!("Delete calendar '{name}'?"))?;
            }
            let request = pb::DeleteCalendarRequest { name: name.clone() };
            client.delete_calendar(request).await?;
            out.done(
                &serde_json::json!({ "deleted_calendar": name }),
                &format!("Deleted calendar '{name}'"),
            )
        }
    }
}

fn apply(calendar: &mut pb::Calendar, fields: CalendarFields) {
    if !fields.rules.is_empty() || fields.clear_rules {
        calendar.rules = fields.rules;
    }
    if let Some(zone) = fields.time_zone {
        calendar.time_zone = zone;
    }
    if let Some(description) = fields.description {
        calendar.description = description;
    }
    calendar.job_ids.clear();
}

async fn get(client: &mut Client, name: &str) -> Result<pb::Calendar, CliError> {
    let request = pb::GetCalendarRequest {
        name: name.to_string(),
    };
    let calendar = client.get_calendar(request).await?.into_inner().calendar;
    calendar.ok_or_else(|| CliError::Failed(format!("the admin returned no calendar '{name}'")))
}

fn details(calendar: &CalendarView) -> Details {
    let now = render::now_ms();
    let jobs: Vec<String> = calendar.job_ids.iter().map(i64::to_string).collect();
    let mut details = Details::new();
    details
        .add("name", calendar.name.clone())
        .add("time zone", render::or_dash(&calendar.time_zone))
        .add("description", render::or_dash(&calendar.description))
        .add("rules", render::or_dash(&calendar.rules.join("\n")))
        .add("jobs", render::or_dash(&jobs.join(", ")))
        .add("created", render::time_long(calendar.created_ms, now))
        .add("updated", render::time_long(calendar.updated_ms, now));
    details
}
