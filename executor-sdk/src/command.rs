//! The built-in `command` handler: each run executes a program, and a stopped run really stops it.
//!
//! ```text
//! CommandSpec: argv + params split on whitespace, working dir, extra env
//!     ─spawn: own process group, XJOB_* env, stdin null─▶ child
//! child stdout + stderr ─line by line, as they arrive─▶ run log (JobContext::log)
//! exit 0 ─▶ success · exit N / signal S ─▶ failure "command exited with status N"
//! cancelled (job timeout, kill, cover-early, shutdown) or the spec's own timeout
//!     ─▶ SIGTERM the group ─(stop_grace / 2)─▶ SIGKILL the group ─▶ reap ─▶ return
//! handler dropped or aborted first ─▶ the group's drop guard SIGKILLs it
//! ```
//!
//! Script (GLUE) jobs run through here too (`glue.rs`): the interpreter and the script file are
//! the argv.
//!
//! The command leads its own process group, so a stop reaches the processes it started too
//! (`sh -c 'sleep 60 & sleep 60'`), not only the direct child. The whole stop takes at most
//! three quarters of the run's `stop_grace` (the executor's `kill_grace`), so the handler
//! returns, with its processes gone and reaped, before the runner would abort it.
//!
//! After a normal exit the run is over: processes the command left running in the background
//! are not signalled (starting a daemon is the command's choice), and output they still hold
//! open is read for at most [`OUTPUT_DRAIN`] more.
//!
//! Environment given to the command, besides the executor's own: `XJOB_JOB_ID`, `XJOB_LOG_ID`,
//! `XJOB_PARAMS` (the raw params), `XJOB_SHARD_INDEX`, `XJOB_SHARD_TOTAL`,
//! `XJOB_SCHEDULED_AT_MS`, `XJOB_ATTEMPT` and `XJOB_TRIGGER_TYPE` (`CRON`, `MANUAL`, `RETRY`,
//! `PARENT`, `API`, `MISFIRE`), and `TRACEPARENT` when the run is traced (its W3C trace
//! context: a script that passes it on joins the run's trace).
//!
//! Unix only: elsewhere every run fails with a clear message.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use xjob_proto::pb;

use crate::context::JobContext;
use crate::handler::{HandlerFn, JobError, JobResult, boxed_handler};

#[cfg(unix)]
mod process_group;

/// How long output is still read after the command exited (background processes may hold the
/// pipes open forever).
#[cfg(unix)]
const OUTPUT_DRAIN: Duration = Duration::from_secs(1);
/// Longest run of bytes logged as one line; longer lines are split.
#[cfg(unix)]
const MAX_LINE_BYTES: u64 = 64 * 1024;

/// What the `command` handler runs: a program with leading arguments, and optionally a working
/// directory, extra environment variables and a timeout of its own.
///
/// Each run executes `argv` followed by the run's params split on whitespace. The handler's
/// timeout stops the command like a kill does (its whole process group), independently of the
/// job's `timeout_ms`, whichever comes first.
///
/// ```
/// # use std::time::Duration;
/// # use xjob_executor::CommandSpec;
/// let backup = CommandSpec::new(["/usr/local/bin/backup.sh", "--quiet"])
///     .working_dir("/var/backups")
///     .env("BACKUP_TARGET", "s3")
///     .timeout(Duration::from_secs(600));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandSpec {
    argv: Vec<String>,
    working_dir_opt: Option<PathBuf>,
    env: Vec<(String, String)>,
    timeout_opt: Option<Duration>,
}

impl CommandSpec {
    /// Returns a spec running `argv` (may be empty: then the params are the whole command line).
    pub fn new<I>(argv: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Sets the directory the command starts in (default: the executor's own).
    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir_opt = Some(dir.into());
        self
    }

    /// Adds an environment variable (the `XJOB_*` run variables are set after these and win).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Sets how long one run may take before the command is stopped (and the run fails with
    /// "command timed out"); zero means no timeout of its own.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout_opt = (!timeout.is_zero()).then_some(timeout);
        self
    }
}

/// Returns the handler that runs `spec.argv` followed by each run's params.
pub(crate) fn command_handler(spec: CommandSpec) -> HandlerFn {
    let spec = Arc::new(spec);
    boxed_handler(move |context: JobContext| run_spec(Arc::clone(&spec), context))
}

/// Returns `argv` followed by `params` split on whitespace, or `None` when that is empty.
fn command_line(argv: &[String], params: &str) -> Option<Vec<String>> {
    let command_line: Vec<String> = argv
        .iter()
        .cloned()
        .chain(params.split_whitespace().map(str::to_owned))
        .collect();
    (!command_line.is_empty()).then_some(command_line)
}

/// Returns the `XJOB_*` variables describing the run, and `TRACEPARENT` (the W3C trace
/// context, under the name OpenTelemetry's tools read from the environment) when it has one.
fn run_environment(context: &JobContext) -> Vec<(&'static str, String)> {
    let traceparent = context.traceparent();
    let mut environment = vec![
        ("XJOB_JOB_ID", context.job_id().to_string()),
        ("XJOB_LOG_ID", context.log_id().to_string()),
        ("XJOB_PARAMS", context.params().to_owned()),
        ("XJOB_SHARD_INDEX", context.shard_index().to_string()),
        ("XJOB_SHARD_TOTAL", context.shard_total().to_string()),
        (
            "XJOB_SCHEDULED_AT_MS",
            context.scheduled_at_ms().to_string(),
        ),
        ("XJOB_ATTEMPT", context.attempt().to_string()),
        (
            "XJOB_TRIGGER_TYPE",
            trigger_type_name(context.trigger_type()).to_owned(),
        ),
    ];
    if !traceparent.is_empty() {
        environment.push(("TRACEPARENT", traceparent));
    }
    environment
}

/// Returns the trigger type without its proto prefix (`TRIGGER_TYPE_CRON` → `CRON`).
fn trigger_type_name(trigger_type: pb::TriggerType) -> &'static str {
    let name = trigger_type.as_str_name();
    name.strip_prefix("TRIGGER_TYPE_").unwrap_or(name)
}

fn no_command_error() -> JobError {
    JobError::new("no command to run: the handler has no argv and the run has no params")
}

/// Runs `argv` followed by the run's params with no other settings (unit tests).
#[cfg(test)]
async fn run_command(argv: Arc<[String]>, context: JobContext) -> JobResult {
    run_spec(Arc::new(CommandSpec::new(argv.iter().cloned())), context).await
}

/// Runs one command as `spec` says, until it exits or the run is stopped.
#[cfg(not(unix))]
pub(crate) async fn run_spec(spec: Arc<CommandSpec>, context: JobContext) -> JobResult {
    let _ = (spec, context);
    Err(JobError::new(
        "the command handler needs a unix system (process groups and signals)",
    ))
}

/// Runs one command as `spec` says, until it exits or the run is stopped.
#[cfg(unix)]
pub(crate) async fn run_spec(spec: Arc<CommandSpec>, context: JobContext) -> JobResult {
    unix::run_command(&spec, &context).await
}

#[cfg(unix)]
mod unix {
    //! Spawning, output forwarding, waiting and stopping, on unix.

    use std::future::Future;
    use std::io;
    use std::pin::Pin;
    use std::process::{ExitStatus, Stdio};

    use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
    use tokio::process::{Child, Command};
    use tokio::time::Instant;

    use super::process_group::{ProcessGroup, describe_exit};
    use super::*;

    /// The output forwarder of one run, polled until it completes and never after.
    struct Output {
        forwarder_opt: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    }

    impl Output {
        fn new(child: &mut Child, context: &JobContext) -> Self {
            let stdout_opt = child.stdout.take();
            let stderr_opt = child.stderr.take();
            let context = context.clone();
            let forwarder = async move {
                tokio::join!(
                    forward_lines(stdout_opt, &context),
                    forward_lines(stderr_opt, &context)
                );
            };
            Self {
                forwarder_opt: Some(Box::pin(forwarder)),
            }
        }

        fn is_closed(&self) -> bool {
            self.forwarder_opt.is_none()
        }

        /// Completes once both pipes are closed; cancel-safe (no line is lost).
        async fn closed(&mut self) {
            if let Some(forwarder) = &mut self.forwarder_opt {
                forwarder.await;
                self.forwarder_opt = None;
            }
        }
    }

    /// Why a command is being stopped.
    enum Stop {
        /// The run was cancelled (kill, job timeout, cover-early, shutdown).
        Cancelled,
        /// The handler's own timeout elapsed.
        TimedOut(Duration),
    }

    /// Completes when the run is cancelled or the handler's own timeout elapses.
    async fn stop_requested(context: &JobContext, timeout_opt: Option<Duration>) -> Stop {
        match timeout_opt {
            Some(timeout) => tokio::select! {
                () = context.cancelled() => Stop::Cancelled,
                () = tokio::time::sleep(timeout) => Stop::TimedOut(timeout),
            },
            None => {
                context.cancelled().await;
                Stop::Cancelled
            }
        }
    }

    pub(super) async fn run_command(spec: &CommandSpec, context: &JobContext) -> JobResult {
        let command_line =
            command_line(&spec.argv, context.params()).ok_or_else(no_command_error)?;
        if context.is_cancelled() {
            return Err(JobError::new("run cancelled before the command started"));
        }
        let mut child = spawn(&command_line, spec, context)?;
        let leader_pid = child.id().unwrap_or_default();
        let Some(mut group) = ProcessGroup::led_by(leader_pid) else {
            let _ = child.start_kill();
            return Err(JobError::new(format!(
                "command started with an unusable pid {leader_pid}"
            )));
        };
        context.log(format!(
            "command started: pid={leader_pid} argv={command_line:?}"
        ));
        let mut output = Output::new(&mut child, context);
        let exited = tokio::select! {
            exited = wait_for_exit(&mut child, &mut output) => exited,
            stop = stop_requested(context, spec.timeout_opt) => {
                let stopped = stop_group(&mut child, &mut group, &mut output, context).await;
                return match stop {
                    Stop::Cancelled => stopped,
                    Stop::TimedOut(timeout) => Err(JobError::new(format!(
                        "command timed out after {timeout:?} (handler timeout)"
                    ))),
                };
            }
        };
        let status = exited.map_err(|error| {
            // The group stays armed: dropping it on return kills whatever is left.
            JobError::new(format!("failed to wait for the command: {error}"))
        })?;
        group.disarm();
        drain_output(&mut output, context).await;
        describe_exit(status)
            .map(crate::handler::JobOutput::message)
            .map_err(JobError::new)
    }

    fn spawn(
        command_line: &[String],
        spec: &CommandSpec,
        context: &JobContext,
    ) -> Result<Child, JobError> {
        let (program, arguments) = command_line.split_first().ok_or_else(no_command_error)?;
        let mut command = Command::new(program);
        if let Some(dir) = &spec.working_dir_opt {
            command.current_dir(dir);
        }
        command
            .args(arguments)
            // The executor's own trace context (if it was started inside one) is not the run's.
            .env_remove("TRACEPARENT")
            .envs(spec.env.iter().map(|(key, value)| (key, value)))
            .envs(run_environment(context))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|error| JobError::new(format!("failed to start command {program:?}: {error}")))
    }

    /// Waits for the command to exit while forwarding its output (a full pipe would block it).
    async fn wait_for_exit(child: &mut Child, output: &mut Output) -> io::Result<ExitStatus> {
        loop {
            tokio::select! {
                status = child.wait() => return status,
                () = output.closed(), if !output.is_closed() => {}
            }
        }
    }

    /// Reads what is left of the output for at most [`OUTPUT_DRAIN`], or until cancelled.
    async fn drain_output(output: &mut Output, context: &JobContext) {
        tokio::select! {
            drained = tokio::time::timeout(OUTPUT_DRAIN, output.closed()) => {
                if drained.is_err() {
                    context.log(format!(
                        "command exited but its output is still open after {OUTPUT_DRAIN:?} \
                         (a background process holds it): no longer read"
                    ));
                }
            }
            () = context.cancelled() => {}
        }
    }

    /// Stops a cancelled run: SIGTERM to the group, up to half the stop grace for the command to
    /// exit, SIGKILL to the group (stragglers included), then reaps the command and reads the
    /// rest of its output, all within three quarters of the stop grace.
    async fn stop_group(
        child: &mut Child,
        group: &mut ProcessGroup,
        output: &mut Output,
        context: &JobContext,
    ) -> JobResult {
        let grace = context.stop_grace();
        let deadline = Instant::now() + grace * 3 / 4;
        group.terminate();
        context.log(format!(
            "run stopped: sent SIGTERM to process group {}",
            group.id()
        ));
        let mut reaped = false;
        match tokio::time::timeout(grace / 2, wait_for_exit(child, output)).await {
            Ok(Ok(status)) => {
                reaped = true;
                let ended = describe_exit(status).unwrap_or_else(|failure| failure);
                context.log(format!("after SIGTERM: {ended}"));
            }
            Ok(Err(error)) => context.log(format!("failed to wait for the command: {error}")),
            Err(_) => context.log(format!(
                "command still running {:?} after SIGTERM: sending SIGKILL",
                grace / 2
            )),
        }
        // Always: processes of the group may outlive its leader, or ignore SIGTERM.
        group.kill();
        group.disarm();
        if !reaped
            && tokio::time::timeout_at(deadline, child.wait())
                .await
                .is_err()
        {
            context.log("command not reaped in time after SIGKILL");
        }
        let _ = tokio::time::timeout_at(deadline, output.closed()).await;
        context.log(format!(
            "command stopped: process group {} killed",
            group.id()
        ));
        Err(JobError::new("command stopped"))
    }

    /// Logs each line of one pipe as it arrives, until it closes.
    async fn forward_lines<R: AsyncRead + Unpin>(reader_opt: Option<R>, context: &JobContext) {
        let Some(reader) = reader_opt else {
            return;
        };
        let mut reader = BufReader::new(reader);
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut reader)
                .take(MAX_LINE_BYTES)
                .read_until(b'\n', &mut line)
                .await
            {
                Ok(0) => return,
                Ok(_) => context.log(String::from_utf8_lossy(trim_line_end(&line))),
                Err(error) => {
                    context.log(format!("failed to read command output: {error}"));
                    return;
                }
            }
        }
    }

    fn trim_line_end(line: &[u8]) -> &[u8] {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        line.strip_suffix(b"\r").unwrap_or(line)
    }
}

#[cfg(test)]
mod tests;
