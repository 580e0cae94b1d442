//! The command handler driven directly with a `JobContext`, on real processes. Shell scripts
//! write their pids to files so the tests can check afterwards that every process is gone.
//! Every wait is bounded.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use xjob_testkit::is_gone;

use super::*;
use crate::joblog::JobLogStore;

const DEADLINE: Duration = Duration::from_secs(20);

struct Run {
    context: JobContext,
    cancellation: CancellationToken,
    dir: tempfile::TempDir,
}

impl Run {
    fn new(params: &str, stop_grace: Duration) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let request = pb::RunRequest {
            job_id: 3,
            log_id: 30,
            params: params.to_owned(),
            shard_total: 1,
            trigger_type: pb::TriggerType::Cron as i32,
            log_date_ms: crate::runner::execution::now_ms(),
            ..Default::default()
        };
        let log = JobLogStore::new(dir.path().join("logs"))
            .create(request.log_id, request.log_date_ms)
            .expect("run log");
        let cancellation = CancellationToken::new();
        let context = JobContext::new(
            request,
            Some(Arc::new(log)),
            cancellation.clone(),
            stop_grace,
            None,
        );
        Self {
            context,
            cancellation,
            dir,
        }
    }

    fn pid_file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn log_text(&self) -> String {
        let path = self.context.log_path().expect("log path");
        std::fs::read_to_string(path).expect("read run log")
    }
}

/// `sh -c script` as the handler's argv; the script's pid files go to the run's dir.
fn shell(script: &str) -> Vec<String> {
    vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()]
}

/// Waits until the pid file holds a pid, and returns it.
async fn read_pid(path: &Path) -> i32 {
    xjob_testkit::read_pid(path, DEADLINE)
        .await
        .expect("the script writes its pid")
}

/// Waits until the process is gone: signals are delivered asynchronously, so a process is
/// never checked once right after it was signalled.
async fn wait_gone(pid: i32) {
    xjob_testkit::wait_gone(pid, DEADLINE)
        .await
        .expect("the process dies");
}

#[test]
fn command_line_is_argv_then_params_split_on_whitespace() {
    let argv = vec!["backup".to_owned(), "--to".to_owned()];
    assert_eq!(
        command_line(&argv, "  /srv\t/mnt \n"),
        Some(vec![
            "backup".into(),
            "--to".into(),
            "/srv".into(),
            "/mnt".into()
        ])
    );
    assert_eq!(command_line(&argv, ""), Some(argv.clone()));
    assert_eq!(
        command_line(&[], "echo hi"),
        Some(vec!["echo".into(), "hi".into()])
    );
    assert_eq!(command_line(&[], "   "), None);
}

#[test]
fn trigger_types_are_named_without_their_proto_prefix() {
    assert_eq!(trigger_type_name(pb::TriggerType::Cron), "CRON");
    assert_eq!(trigger_type_name(pb::TriggerType::Retry), "RETRY");
    assert_eq!(
        trigger_type_name(pb::TriggerType::Unspecified),
        "UNSPECIFIED"
    );
}

#[tokio::test]
async fn nothing_to_run_or_a_missing_program_is_a_failure() {
    let run = Run::new("", Duration::from_secs(1));
    let error = run_command(Arc::from([]), run.context.clone())
        .await
        .expect_err("nothing to run");
    assert_eq!(
        error.message(),
        "no command to run: the handler has no argv and the run has no params"
    );

    let run = Run::new("--flag", Duration::from_secs(1));
    let missing: Arc<[String]> = Arc::from(["/nonexistent/xjob-test-program".to_owned()]);
    let error = run_command(missing, run.context.clone())
        .await
        .expect_err("missing program");
    assert!(
        error
            .message()
            .starts_with("failed to start command \"/nonexistent/xjob-test-program\": "),
        "{error}"
    );
}

#[tokio::test]
async fn a_command_ignoring_sigterm_is_killed_after_half_the_grace() {
    let grace = Duration::from_secs(1);
    let run = Run::new("", grace);
    let script = format!(
        "trap '' TERM; sleep 60 & echo $! > {child}; echo $$ > {leader}; wait; wait",
        child = run.pid_file("child").display(),
        leader = run.pid_file("leader").display(),
    );
    let handler = tokio::spawn(run_command(Arc::from(shell(&script)), run.context.clone()));
    let leader = read_pid(&run.pid_file("leader")).await;
    let child = read_pid(&run.pid_file("child")).await;

    let cancelled_at = Instant::now();
    run.cancellation.cancel();
    let outcome = tokio::time::timeout(DEADLINE, handler)
        .await
        .expect("handler returns")
        .expect("handler task");
    let took = cancelled_at.elapsed();

    assert_eq!(outcome, Err(JobError::new("command stopped")));
    assert!(took >= grace / 2, "SIGKILL came before the grace: {took:?}");
    assert!(
        took < grace,
        "the handler must return within its grace: {took:?}"
    );
    // SIGKILL is delivered asynchronously: the orphaned child may still be on its way out
    // when the handler returns, so its death is awaited, not checked once.
    wait_gone(leader).await;
    wait_gone(child).await;
    let log = run.log_text();
    assert!(log.contains(&format!("sent SIGTERM to process group {leader}")));
    assert!(log.contains("after SIGTERM: sending SIGKILL"), "{log}");
    assert!(log.contains(&format!("command stopped: process group {leader} killed")));
}

#[tokio::test]
async fn dropping_the_handler_kills_its_process_group() {
    let run = Run::new("", Duration::from_secs(1));
    let script = format!(
        "sleep 60 & echo $! > {child}; echo $$ > {leader}; wait",
        child = run.pid_file("child").display(),
        leader = run.pid_file("leader").display(),
    );
    let handler = tokio::spawn(run_command(Arc::from(shell(&script)), run.context.clone()));
    let leader = read_pid(&run.pid_file("leader")).await;
    let child = read_pid(&run.pid_file("child")).await;

    handler.abort();
    let aborted = tokio::time::timeout(DEADLINE, handler)
        .await
        .expect("abort completes");
    assert!(aborted.is_err_and(|error| error.is_cancelled()));
    wait_gone(child).await;
    wait_gone(leader).await;
}

#[tokio::test]
async fn background_output_is_drained_for_a_bounded_time_after_a_normal_exit() {
    let run = Run::new("", Duration::from_secs(1));
    // The background sleep keeps stdout open after the shell exited.
    let script = format!(
        "sleep 60 & echo $! > {child}; echo shell done",
        child = run.pid_file("child").display(),
    );
    let started = Instant::now();
    let outcome = tokio::time::timeout(
        DEADLINE,
        run_command(Arc::from(shell(&script)), run.context.clone()),
    )
    .await
    .expect("handler returns");
    assert_eq!(
        outcome,
        Ok(crate::handler::JobOutput::message(
            "command exited with status 0"
        ))
    );
    assert!(
        started.elapsed() < OUTPUT_DRAIN * 3,
        "{:?}",
        started.elapsed()
    );
    let log = run.log_text();
    assert!(log.contains(" shell done\n"), "{log}");
    assert!(log.contains("output is still open after"), "{log}");

    // A normal exit leaves background processes alone; this test stops the one it started.
    let child = read_pid(&run.pid_file("child")).await;
    assert!(!is_gone(child), "a normal exit must not signal the group");
    let child_pid = nix::unistd::Pid::from_raw(child);
    nix::sys::signal::kill(child_pid, nix::sys::signal::Signal::SIGKILL).expect("kill sleep");
    wait_gone(child).await;
}
