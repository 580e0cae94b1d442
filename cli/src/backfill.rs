//! `xjob backfill JOB --from … --to …`: runs the occurrences a job's schedule has in a range
//! now, in order, each with the time it stands for; `xjob backfill status|list|cancel` follow
//! and stop it. The admin does the work (the CLI only asks and shows).

use chrono::{NaiveDate, NaiveDateTime, TimeZone};
use clap::{Args, Subcommand};
use serde::Serialize;
use xjob_proto::pb;

use super::client::Client;
use super::error::CliError;
use super::render::{self, Details, Output, Table};

/// `xjob backfill JOB --from … --to … [--concurrency N]`, or one of the verbs.
#[derive(Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    disable_help_subcommand = true
)]
pub struct BackfillArgs {
    #[command(subcommand)]
    verb: Option<BackfillVerb>,
    #[command(flatten)]
    start: StartArgs,
}

#[derive(Args)]
struct StartArgs {
    /// The job whose schedule's occurrences run.
    #[arg(value_name = "JOB_ID", required = true)]
    job: Option<i64>,
    /// Start of the range, included: 2026-03-01, "2026-03-01 08:00", an RFC 3339 time, or
    /// epoch milliseconds (dates and times without an offset are local).
    #[arg(long, value_name = "TIME", required = true, value_parser = parse_typed)]
    from: Option<Typed>,
    /// End of the range, included (same forms as --from).
    #[arg(long, value_name = "TIME", required = true, value_parser = parse_typed)]
    to: Option<Typed>,
    /// Most runs of the backfill unfinished at once (1-100).
    #[arg(long, default_value_t = 1)]
    concurrency: i32,
}

#[derive(Subcommand)]
enum BackfillVerb {
    /// A backfill's progress.
    Status {
        /// The backfill's id (printed when it started).
        id: i64,
    },
    /// A job's backfills, newest first.
    List {
        #[arg(value_name = "JOB_ID")]
        job: i64,
    },
    /// Starts no more of the backfill's runs; the ones started finish.
    Cancel { id: i64 },
}

/// `Backfill` (JSON output).
#[derive(Serialize)]
struct BackfillView {
    id: i64,
    job_id: i64,
    from_ms: i64,
    to_ms: i64,
    max_concurrent: i32,
    state: String,
    total: i64,
    created: i64,
    succeeded: i64,
    failed: i64,
    running: i64,
    cursor_ms: i64,
    created_by: String,
    created_ms: i64,
    updated_ms: i64,
}

impl From<pb::Backfill> for BackfillView {
    fn from(backfill: pb::Backfill) -> BackfillView {
        let state = match pb::BackfillState::try_from(backfill.state) {
            Ok(known) => known
                .as_str_name()
                .trim_start_matches("BACKFILL_STATE_")
                .to_string(),
            Err(_) => backfill.state.to_string(),
        };
        BackfillView {
            id: backfill.id,
            job_id: backfill.job_id,
            from_ms: backfill.from_ms,
            to_ms: backfill.to_ms,
            max_concurrent: backfill.max_concurrent,
            state,
            total: backfill.total,
            created: backfill.created,
            succeeded: backfill.succeeded,
            failed: backfill.failed,
            running: backfill.running,
            cursor_ms: backfill.cursor_ms,
            created_by: backfill.created_by,
            created_ms: backfill.created_ms,
            updated_ms: backfill.updated_ms,
        }
    }
}

pub async fn run(args: BackfillArgs, out: Output, mut client: Client) -> Result<(), CliError> {
    match args.verb {
        Some(BackfillVerb::Status { id }) => {
            let found = client.get_backfill(pb::GetBackfillRequest { id }).await?;
            show(&out, found.into_inner().backfill)
        }
        Some(BackfillVerb::List { job }) => {
            let request = pb::ListBackfillsRequest { job_id: job };
            let listed = client.list_backfills(request).await?.into_inner();
            let views: Vec<BackfillView> = listed
                .backfills
                .into_iter()
                .map(BackfillView::from)
                .collect();
            out.list(&views, "No backfills for this job.", table)
        }
        Some(BackfillVerb::Cancel { id }) => {
            let request = pb::CancelBackfillRequest { id };
            let cancelled = client.cancel_backfill(request).await?.into_inner();
            let view = BackfillView::from(cancelled.backfill.unwrap_or_default());
            let sentence = format!(
                "Backfill {id} cancelled: {} of {} runs were started; {} still running finish \
                 on their own.",
                view.created, view.total, view.running
            );
            out.done(&view, &sentence)
        }
        None => start(args.start, &out, &mut client).await,
    }
}

async fn start(args: StartArgs, out: &Output, client: &mut Client) -> Result<(), CliError> {
    let (Some(job_id), Some(from), Some(to)) = (args.job, args.from, args.to) else {
        return Err(CliError::Usage(
            "xjob backfill JOB_ID --from TIME --to TIME [--concurrency N]".to_string(),
        ));
    };
    // Said here, in the words typed: the admin's own refusal can only name instants.
    if from.ms > to.ms {
        return Err(CliError::Usage(format!(
            "--from {} is after --to {}: the range runs from the earlier time to the later",
            from.text, to.text
        )));
    }
    let request = pb::BackfillJobRequest {
        job_id,
        from_ms: from.ms,
        to_ms: to.ms,
        max_concurrent: args.concurrency,
    };
    let started = client.backfill_job(request).await?.into_inner();
    let view = BackfillView::from(started.backfill.unwrap_or_default());
    let sentence = format!(
        "Backfill {} started: {} occurrences of job {job_id}, {} at a time. Follow it with: \
         xjob backfill status {}",
        view.id, view.total, view.max_concurrent, view.id
    );
    out.done(&view, &sentence)
}

fn show(out: &Output, backfill: Option<pb::Backfill>) -> Result<(), CliError> {
    let view = BackfillView::from(backfill.unwrap_or_default());
    out.object(&view, |view| {
        let mut details = Details::new();
        details
            .add("id", view.id.to_string())
            .add("job", view.job_id.to_string())
            .add("state", view.state.clone())
            .add(
                "range",
                format!(
                    "{} to {}",
                    render::time(view.from_ms),
                    render::time(view.to_ms)
                ),
            )
            .add("concurrency", view.max_concurrent.to_string())
            .add("created", format!("{} of {}", view.created, view.total))
            .add("succeeded", view.succeeded.to_string())
            .add("failed", view.failed.to_string())
            .add("running", view.running.to_string())
            .add("last started", render::time(view.cursor_ms))
            .add("started by", render::or_dash(&view.created_by));
        details
    })
}

fn table(views: &[BackfillView]) -> Table {
    let mut table = Table::new(&[
        "ID", "STATE", "FROM", "TO", "CREATED", "OK", "FAILED", "RUNNING",
    ]);
    for view in views {
        table.row(vec![
            view.id.to_string(),
            view.state.clone(),
            render::time(view.from_ms),
            render::time(view.to_ms),
            format!("{}/{}", view.created, view.total),
            view.succeeded.to_string(),
            view.failed.to_string(),
            view.running.to_string(),
        ]);
    }
    table
}

/// An instant as typed on the command line and as read.
#[derive(Clone)]
struct Typed {
    text: String,
    ms: i64,
}

fn parse_typed(text: &str) -> Result<Typed, String> {
    parse_instant(text).map(|ms| Typed {
        text: text.trim().to_string(),
        ms,
    })
}

/// An instant from the command line: epoch milliseconds, RFC 3339, or a local date / date and
/// time.
fn parse_instant(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
        return text
            .parse::<i64>()
            .map_err(|_| format!("'{text}' is too large for epoch milliseconds"));
    }
    if let Ok(zoned) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(zoned.timestamp_millis());
    }
    let naive = [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
    ]
    .iter()
    .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
    .or_else(|| {
        NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|date| date.and_hms_opt(0, 0, 0))
    })
    .ok_or_else(|| {
        format!(
            "'{text}' is not a time: use 2026-03-01, \"2026-03-01 08:00\", an RFC 3339 \
                 time or epoch milliseconds"
        )
    })?;
    chrono::Local
        .from_local_datetime(&naive)
        .earliest()
        .map(|local| local.timestamp_millis())
        .ok_or_else(|| format!("'{text}' does not exist in the local time zone"))
}

#[cfg(test)]
mod tests {
    use super::parse_instant;

    #[test]
    fn instants_in_every_accepted_form() {
        assert_eq!(parse_instant("1700000000000"), Ok(1_700_000_000_000));
        assert_eq!(parse_instant("2026-03-01T08:00:00Z"), Ok(1_772_352_000_000));
        assert!(parse_instant("2026-03-01").is_ok());
        assert!(parse_instant("2026-03-01 08:00").is_ok());
        assert!(
            parse_instant("yesterday")
                .unwrap_err()
                .contains("is not a time")
        );
    }
}
