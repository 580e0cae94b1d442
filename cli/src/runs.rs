//! `xjob runs …`: runs (log rows) and their logs, read from the executor through the admin.
//! `log --follow` tails the log as it grows and stops once the run has ended and its last
//! lines are printed.

use std::time::Duration;

use clap::{Args, Subcommand};
use xjob_proto::pb;

use super::client::Client;
use super::error::CliError;
use super::group_names::{group_label, group_names, resolve_group};
use super::render::{self, Details, Output, Table};
use super::view::{self, RunView};

/// Pause between two reads of a growing log.
const FOLLOW_POLL: Duration = Duration::from_millis(500);
/// Reads made after the run is seen ended, waiting for the executor's last lines, before
/// giving up on `is_end` (an executor gone with the run never says it).
const READS_AFTER_END: u32 = 6;
/// How long the run row may stay unfinished after its log ended. The executor ends the log
/// when the handler returns and reports the result separately, so the row turns final a moment
/// later (or later still while the executor retries its report to an admin that restarted).
const RESULT_WAIT: Duration = Duration::from_secs(30);
/// First and longest pause between two reads of the run row while waiting for its result.
const RESULT_POLL_FIRST: Duration = Duration::from_millis(50);
const RESULT_POLL_MAX: Duration = Duration::from_secs(1);

#[derive(Subcommand)]
pub enum RunsCommand {
    /// Lists runs, newest first.
    List(ListArgs),
    /// Shows every field of a run.
    Show {
        /// Run (log) id.
        id: i64,
    },
    /// Asks the run's executor to kill it.
    Kill {
        /// Run (log) id.
        id: i64,
    },
    /// Prints a run's log (from its executor).
    Log(LogArgs),
}

#[derive(Args)]
pub struct ListArgs {
    /// Only runs of this job.
    #[arg(long)]
    job: Option<i64>,
    /// Only runs of this group (id or app name).
    #[arg(long)]
    group: Option<String>,
    /// pending, running, success, failed, timeout, killed, lost or skipped.
    #[arg(long, value_parser = view::parse_run_status)]
    status: Option<i32>,
    /// Only runs triggered within this long before now, e.g. 30m, 24h.
    #[arg(long, value_name = "DURATION")]
    since: Option<String>,
    /// Most runs to show.
    #[arg(long, default_value_t = 50)]
    limit: usize,
}

#[derive(Args)]
pub struct LogArgs {
    /// Run (log) id.
    id: i64,
    /// Keep printing new lines until the run ends; exits 1 when it did not succeed.
    #[arg(long, short = 'f')]
    follow: bool,
    /// First line to print (1-based).
    #[arg(long, default_value_t = 1)]
    from_line: i32,
}

pub async fn run(command: RunsCommand, out: Output, mut client: Client) -> Result<(), CliError> {
    match command {
        RunsCommand::List(args) => list(args, &out, &mut client).await,
        RunsCommand::Show { id } => {
            let run = get(&mut client, id).await?;
            let groups = group_names(&mut client).await;
            out.object(&RunView::from(&run), |view| details(view, &groups))
        }
        RunsCommand::Kill { id } => {
            let answer = client
                .kill_run(pb::KillRunRequest { log_id: id })
                .await?
                .into_inner();
            let sentence = if answer.killed {
                format!("Killed run {id}")
            } else {
                format!("Run {id} was not killed: {}", answer.message)
            };
            out.done(
                &serde_json::json!({ "log_id": id, "killed": answer.killed, "message": answer.message }),
                &sentence,
            )?;
            if answer.killed {
                Ok(())
            } else {
                Err(CliError::Failed(format!("run {id} was not killed")))
            }
        }
        RunsCommand::Log(args) if args.follow => {
            follow(&mut client, &out, args.id, args.from_line).await
        }
        RunsCommand::Log(args) => {
            let chunk = read(&mut client, args.id, args.from_line).await?;
            print_chunk(&out, args.id, &chunk)
        }
    }
}

async fn list(args: ListArgs, out: &Output, client: &mut Client) -> Result<(), CliError> {
    let group_id = match &args.group {
        Some(group) => resolve_group(client, group).await?,
        None => 0,
    };
    let from_ms = match &args.since {
        Some(text) => {
            let since = xjob_proto::duration::parse(text)
                .map_err(|error| CliError::Usage(format!("--since: {error}")))?;
            render::now_ms() - i64::try_from(since.as_millis()).unwrap_or(i64::MAX / 2)
        }
        None => 0,
    };
    let mut request = pb::ListLogsRequest {
        group_id,
        job_id: args.job.unwrap_or(0),
        status: args.status.unwrap_or(0),
        from_ms,
        to_ms: 0,
        page_size: i32::try_from(args.limit.clamp(1, 500)).unwrap_or(500),
        page_token: String::new(),
        order_by: String::new(),
        // The list prints no total: spare the admin counting every matching run per page.
        count_limit: 1,
    };
    let mut runs = Vec::new();
    loop {
        let page = client.list_logs(request.clone()).await?.into_inner();
        runs.extend(page.logs.iter().map(RunView::from));
        if page.next_page_token.is_empty() || runs.len() >= args.limit {
            break;
        }
        request.page_token = page.next_page_token;
    }
    runs.truncate(args.limit);
    out.list(
        &runs,
        "No runs. Trigger one with: xjob jobs trigger JOB_ID",
        |runs| {
            let mut table = Table::new(&[
                "ID",
                "JOB",
                "STATUS",
                "TRIGGER",
                "SCHEDULED",
                "DURATION",
                "EXECUTOR",
                "ATTEMPT",
                "MESSAGE",
            ]);
            for run in runs {
                table.row(vec![
                    run.id.to_string(),
                    run.job_id.to_string(),
                    run.status.clone(),
                    run.trigger_type.clone(),
                    render::time(run.scheduled_at_ms),
                    took(run),
                    render::or_dash(&run.executor_address),
                    run.attempt.to_string(),
                    render::cell(message(run), 48),
                ]);
            }
            table
        },
    )
}

/// Prints the log as it grows until the run has ended and every line is out. Returns an error
/// (exit 1) when the run ended other than SUCCESS, so `&&` chains stop.
pub async fn follow(
    client: &mut Client,
    out: &Output,
    log_id: i64,
    from_line: i32,
) -> Result<(), CliError> {
    let mut next_line = from_line.max(1);
    let mut reads_after_end = 0;
    loop {
        // Status first: a run not yet on an executor has no log to read.
        let run = get(client, log_id).await?;
        let ended = is_final(run.status);
        if run.executor_address.is_empty() && !ended {
            tokio::time::sleep(FOLLOW_POLL).await;
            continue;
        }
        let chunk = match read(client, log_id, next_line).await {
            Ok(chunk) => chunk,
            // The executor may be gone with the run (lost, restarted): nothing more to read.
            Err(_) if ended => break,
            Err(error) => return Err(error),
        };
        if !chunk.content.is_empty() {
            print_chunk(out, log_id, &chunk)?;
        }
        next_line = next_line.max(chunk.to_line + 1);
        if chunk.is_end {
            break;
        }
        if ended {
            reads_after_end += 1;
            if reads_after_end >= READS_AFTER_END {
                break;
            }
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
    let run = wait_result(client, log_id).await?;
    outcome(&run)
}

/// Reads the run row until its status is final, with backoff, for at most [`RESULT_WAIT`];
/// returns the last row read (still unfinished when the result never came).
async fn wait_result(client: &mut Client, log_id: i64) -> Result<pb::Log, CliError> {
    let deadline = tokio::time::Instant::now() + RESULT_WAIT;
    let mut pause = RESULT_POLL_FIRST;
    loop {
        let run = get(client, log_id).await?;
        if is_final(run.status) || tokio::time::Instant::now() >= deadline {
            return Ok(run);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RESULT_POLL_MAX);
    }
}

/// Whether a run's status is final.
fn is_final(status: i32) -> bool {
    !matches!(
        pb::RunStatus::try_from(status),
        Ok(pb::RunStatus::Pending | pb::RunStatus::Running | pb::RunStatus::Unspecified)
    )
}

/// How a followed run ended: one line on stderr, and exit 1 unless it succeeded.
fn outcome(run: &pb::Log) -> Result<(), CliError> {
    let status = view::run_status(run.status);
    let view = RunView::from(run);
    if run.status == pb::RunStatus::Success as i32 {
        eprintln!("run {} ended {status} after {}", run.id, took(&view));
        return Ok(());
    }
    if !is_final(run.status) {
        return Err(CliError::Failed(format!(
            "run {} is still {status} {}s after its log ended: its result has not reached the \
             admin (see it later with: xjob runs show {})",
            run.id,
            RESULT_WAIT.as_secs(),
            run.id
        )));
    }
    Err(CliError::Failed(format!(
        "run {} ended {status}: {}",
        run.id,
        render::cell(message(&view), 300)
    )))
}

async fn read(
    client: &mut Client,
    log_id: i64,
    from_line: i32,
) -> Result<pb::ReadRunLogResponse, CliError> {
    let request = pb::ReadRunLogRequest { log_id, from_line };
    Ok(client.read_run_log(request).await?.into_inner())
}

/// The log text as it is; in JSON, one object per chunk read (JSON lines while following).
fn print_chunk(out: &Output, log_id: i64, chunk: &pb::ReadRunLogResponse) -> Result<(), CliError> {
    if out.is_json() {
        let value = serde_json::json!({
            "log_id": log_id,
            "from_line": chunk.from_line,
            "to_line": chunk.to_line,
            "content": chunk.content,
            "is_end": chunk.is_end,
        });
        return out.text(&format!("{value}\n"));
    }
    let mut text = chunk.content.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    out.text(&text)
}

async fn get(client: &mut Client, id: i64) -> Result<pb::Log, CliError> {
    let log = client
        .get_log(pb::GetLogRequest { id })
        .await?
        .into_inner()
        .log;
    log.ok_or_else(|| CliError::Failed(format!("the admin returned no run {id}")))
}

/// How long the run took (handled − dispatched), or how long it has been running.
fn took(run: &RunView) -> String {
    if run.trigger_time_ms <= 0 {
        return "-".into();
    }
    if run.handle_time_ms > 0 {
        return render::duration(run.handle_time_ms - run.trigger_time_ms);
    }
    if run.status == "RUNNING" {
        return format!(
            "{}…",
            render::duration(render::now_ms() - run.trigger_time_ms)
        );
    }
    "-".into()
}

/// The handler's message when there is one, else the trigger's.
fn message(run: &RunView) -> &str {
    if run.handle_msg.is_empty() {
        &run.trigger_msg
    } else {
        &run.handle_msg
    }
}

fn details(run: &RunView, groups: &std::collections::HashMap<i64, String>) -> Details {
    let now = render::now_ms();
    let mut details = Details::new();
    details
        .add("id", run.id.to_string())
        .add("job", run.job_id.to_string())
        .add("group", group_label(groups, run.group_id))
        .add("status", run.status.clone())
        .add("trigger", run.trigger_type.clone())
        .add("attempt", run.attempt.to_string())
        .add(
            "shard",
            format!("{} of {}", run.shard_index, run.shard_total.max(1)),
        )
        .add("scheduled", render::time_long(run.scheduled_at_ms, now))
        .add("dispatched", render::time_long(run.trigger_time_ms, now))
        .add(
            "lateness",
            if run.scheduled_at_ms > 0 && run.trigger_time_ms > 0 {
                render::duration(run.trigger_time_ms - run.scheduled_at_ms)
            } else {
                "-".into()
            },
        )
        .add("handled", render::time_long(run.handle_time_ms, now))
        .add("duration", took(run))
        .add("executor", render::or_dash(&run.executor_address))
        .add("handler", render::or_dash(&run.handler))
        .add("params", render::or_dash(&run.params))
        .add("trigger code", run.trigger_code.to_string())
        .add("trigger message", render::or_dash(&run.trigger_msg))
        .add("handle code", run.handle_code.to_string())
        .add("handle message", render::or_dash(&run.handle_msg))
        .add("trace id", render::or_dash(&run.trace_id))
        .add("alarm", render::or_dash(&run.alarm_delivery));
    details
}
