//! The terminal face of `JobAdmin`: `xjob jobs|runs|groups|executors|preview …`, a gRPC client of
//! a running admin (never its database), so it sees and may do exactly what the caller's token
//! allows, like the web console and grpcurl.
//!
//! - [`client`]: where the admin is (`--admin`), the bearer token, TLS / mTLS;
//! - [`error`]: one-line messages and exit codes (0 ok, 1 the admin said no, 2 usage, 3 cannot
//!   connect);
//! - [`render`]: aligned tables and `key: value` details for people, JSON for scripts;
//! - [`view`]: the stable JSON shape of each object and the enum names flags accept;
//! - [`group_names`]: `--group` as an id or an app name, `app (id)` in tables;
//! - [`prompt`]: the confirmation asked before a delete;
//! - one module per noun: [`jobs`], [`runs`], [`groups`], [`users`], [`executors`], [`preview`],
//!   [`backfill`], [`workflows`].
//!
//! Arrows point down only: the nouns use the helpers above; `jobs trigger --follow` uses
//! [`runs`]; `render` imports only `error`, and `error` nothing of the crate.
//!
//! This crate knows the admin only through the wire contract (`xjob-proto`); the `xjob` binary
//! (in the admin's package) flattens [`Command`] into its own commands. docs/cli.md is the
//! user's guide.

mod backfill;
mod calendars;
mod client;
mod error;
mod executors;
mod group_names;
mod groups;
mod jobs;
mod preview;
mod prompt;
mod render;
mod runs;
mod users;
mod view;
mod workflow_runs;
mod workflow_schedule;
mod workflows;

use clap::{Args, Subcommand};

pub use client::ClientOptions;
pub use error::{CliError, EXIT_OK};
use render::Output;

/// The client subcommands, flattened into `xjob`'s own (`xjob jobs …`, not `xjob client jobs …`).
#[derive(Subcommand)]
pub enum Command {
    /// Jobs: list, show, create, update, delete, start, stop, trigger.
    Jobs(Noun<jobs::JobsCommand>),
    /// Runs (log rows): list, show, kill, log [--follow].
    Runs(Noun<runs::RunsCommand>),
    /// Executor groups (apps): list, show, create, update, delete.
    Groups(Noun<groups::GroupsCommand>),
    /// Calendars jobs skip (or run only in): list, show, create, update, delete.
    Calendars(Noun<calendars::CalendarsCommand>),
    /// Users of the admin: list, set-role, reset-password, change-password.
    Users(Noun<users::UsersCommand>),
    /// Workflows (graphs of jobs): list, show, create, update, delete; start, runs, run, cancel,
    /// retry-node, skip-node.
    Workflows(Noun<workflows::WorkflowsCommand>),
    /// Executors with a live session, with their handlers and running runs.
    Executors {
        #[command(flatten)]
        options: ClientOptions,
        #[command(flatten)]
        args: executors::ExecutorsArgs,
    },
    /// Backfill: run a job's occurrences of a past (or future) range now, in order
    /// (`xjob backfill JOB --from … --to …`); `status`, `list` and `cancel` follow it.
    Backfill {
        #[command(flatten)]
        options: ClientOptions,
        #[command(flatten)]
        args: backfill::BackfillArgs,
    },
    /// The next fire times of a schedule (computed by the admin, nothing saved).
    Preview {
        #[command(flatten)]
        options: ClientOptions,
        #[command(flatten)]
        args: preview::PreviewArgs,
    },
}

/// A noun's connection options and its verb; the options are global so they may come before or
/// after the verb (`xjob jobs --output json list` = `xjob jobs list -o json`). No `help` verb:
/// it would show connection options it does not take (`xjob jobs list --help` and
/// `xjob help jobs` remain).
#[derive(Args)]
#[command(disable_help_subcommand = true)]
pub struct Noun<V: Subcommand> {
    #[command(flatten)]
    options: ClientOptions,
    #[command(subcommand)]
    verb: V,
}

/// Runs one client command and returns the process exit code; errors are printed on stderr as
/// one line.
pub async fn run(command: Command) -> i32 {
    let result = match command {
        Command::Jobs(noun) => {
            dispatch(&noun.options, |out, client| {
                Box::pin(jobs::run(noun.verb, out, client))
            })
            .await
        }
        Command::Runs(noun) => {
            dispatch(&noun.options, |out, client| {
                Box::pin(runs::run(noun.verb, out, client))
            })
            .await
        }
        Command::Groups(noun) => {
            dispatch(&noun.options, |out, client| {
                Box::pin(groups::run(noun.verb, out, client))
            })
            .await
        }
        Command::Calendars(noun) => {
            dispatch(&noun.options, |out, client| {
                Box::pin(calendars::run(noun.verb, out, client))
            })
            .await
        }
        Command::Users(noun) => {
            dispatch(&noun.options, |out, client| {
                Box::pin(users::run(noun.verb, out, client))
            })
            .await
        }
        Command::Workflows(noun) => {
            dispatch(&noun.options, |out, client| {
                Box::pin(workflows::run(noun.verb, out, client))
            })
            .await
        }
        Command::Executors { options, args } => {
            dispatch(&options, |out, client| {
                Box::pin(executors::run(args, out, client))
            })
            .await
        }
        Command::Backfill { options, args } => {
            dispatch(&options, |out, client| {
                Box::pin(backfill::run(args, out, client))
            })
            .await
        }
        Command::Preview { options, args } => {
            dispatch(&options, |out, client| {
                Box::pin(preview::run(args, out, client))
            })
            .await
        }
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(error) => error.report(),
    }
}

type Pending<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), CliError>> + 'a>>;

/// Connects, then runs the verb with the chosen output.
async fn dispatch<'a>(
    options: &ClientOptions,
    verb: impl FnOnce(Output, client::Client) -> Pending<'a>,
) -> Result<(), CliError> {
    let client = client::connect(options).await?;
    let out = Output::new(options.output);
    verb(out, client)
        .await
        .map_err(|error| error.with_token_hint(options.token_given()))
}
