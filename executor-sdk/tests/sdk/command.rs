//! The built-in `command` handler over real gRPC: runs dispatched with `Run`, stopped by their
//! timeout or by `Kill`, results observed at the fake admin, output read back with `ReadLog`.
//! Shell scripts write their pids to files, so each stop test checks afterwards that the command
//! and the process it started in the background are gone.

use std::path::{Path, PathBuf};

use xjob_executor::RunningExecutor;

use super::*;

/// A short kill grace keeps the stop tests fast: SIGKILL follows SIGTERM after 500 ms.
const KILL_GRACE: Duration = Duration::from_secs(1);

/// `sleep 60` in the background, both pids written down, then the shell waits for it.
fn sleeper_script(dir: &Path) -> String {
    format!(
        "sleep 60 & echo $! > {child}; echo $$ > {leader}; wait",
        child = dir.join("child").display(),
        leader = dir.join("leader").display(),
    )
}

pub(super) async fn start_executor(
    admin: &AdminHandle,
    log_dir: &Path,
    add_handlers: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
) -> RunningExecutor {
    let builder = Executor::builder()
        .app_name("scripts")
        .admin_addrs([admin.address.clone()])
        .bind("127.0.0.1:0")
        .log_dir(log_dir)
        .kill_grace(KILL_GRACE)
        .shutdown_grace(KILL_GRACE);
    add_handlers(builder).start().await.expect("start executor")
}

pub(super) async fn submit(client: &mut ExecutorServiceClient<Channel>, request: pb::RunRequest) {
    let response = client.run(request).await.expect("run").into_inner();
    assert!(response.accepted, "{response:?}");
}

pub(super) async fn read_whole_log(
    client: &mut ExecutorServiceClient<Channel>,
    log_id: i64,
) -> String {
    let request = pb::ReadLogRequest {
        log_id,
        log_date_ms: now_ms(),
        from_line: 1,
        ..Default::default()
    };
    let response = client
        .read_log(request)
        .await
        .expect("read log")
        .into_inner();
    assert!(response.is_end, "the run is over: {response:?}");
    response.content
}

pub(super) fn has_line(log: &str, line: &str) -> bool {
    log.lines()
        .any(|logged| logged.ends_with(&format!(" {line}")))
}

/// Waits until the pid file holds a pid, and returns it.
async fn read_pid(path: PathBuf) -> i32 {
    xjob_testkit::read_pid(&path, DEADLINE)
        .await
        .expect("the script writes its pid")
}

/// Waits until every process is gone (a signal's delivery is asynchronous).
async fn assert_gone(pids: &[i32]) {
    for &pid in pids {
        xjob_testkit::wait_gone(pid, DEADLINE)
            .await
            .expect("the process dies");
    }
}

/// Asserts the handler stopped its process group itself, before the run's end line: it
/// returned within the grace instead of being aborted.
fn assert_stopped_by_the_handler(log: &str, leader: i32, end_line: &str) {
    let stopped = log.find(&format!("command stopped: process group {leader} killed"));
    let ended = log.find(end_line);
    assert!(
        matches!((stopped, ended), (Some(stopped), Some(ended)) if stopped < ended),
        "{log}"
    );
    assert!(log.contains(&format!("sent SIGTERM to process group {leader}")));
}

/// A W3C trace context, as an admin that traces sends it.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_handler_runs_argv_with_params_and_env_and_logs_output() {
    let mut admin = AdminHandle::start().await;
    let log_dir = tempfile::tempdir().expect("tempdir");
    let script = concat!(
        r#"echo "args=$*"; "#,
        r#"echo "job=$XJOB_JOB_ID log=$XJOB_LOG_ID params=$XJOB_PARAMS "#,
        r#"shard=$XJOB_SHARD_INDEX/$XJOB_SHARD_TOTAL at=$XJOB_SCHEDULED_AT_MS "#,
        r#"attempt=$XJOB_ATTEMPT trigger=$XJOB_TRIGGER_TYPE"; "#,
        r#"echo "traceparent=[$TRACEPARENT]"; "#,
        r#"echo "to stderr" >&2"#,
    );
    let executor = start_executor(&admin, log_dir.path(), |builder| {
        builder
            .command_handler("report", ["sh", "-c", script, "report"])
            .command_handler("command", Vec::<String>::new())
    })
    .await;
    let mut client = client(executor.address()).await;

    let mut request = run_request(21, 211, "report", " one  two ");
    request.shard_index = 1;
    request.shard_total = 3;
    request.scheduled_at_ms = 1_700_000_000_000;
    request.attempt = 2;
    request.trigger_type = pb::TriggerType::Retry as i32;
    // The admin's dispatch span: an executor that does not trace hands it on as is.
    request.traceparent = TRACEPARENT.to_owned();
    submit(&mut client, request).await;
    let result = admin.wait_for_result(211).await;
    assert_eq!(
        (result.status, result.code, result.message.as_str()),
        (
            pb::RunStatus::Success as i32,
            200,
            "command exited with status 0"
        )
    );
    let log = read_whole_log(&mut client, 211).await;
    assert!(has_line(&log, "args=one two"), "{log}");
    let environment = "job=21 log=211 params= one  two  shard=1/3 at=1700000000000 \
                       attempt=2 trigger=RETRY";
    assert!(has_line(&log, environment), "{log}");
    assert!(has_line(&log, "to stderr"), "{log}");
    assert!(
        has_line(&log, &format!("traceparent=[{TRACEPARENT}]")),
        "{log}"
    );
    assert!(
        log.contains("trace_id=4bf92f3577b34da6a3ce929d0e0e4736"),
        "the start line names the trace: {log}"
    );

    // Without argv, the params are the whole command line.
    submit(
        &mut client,
        run_request(22, 221, "command", "echo hello   world"),
    )
    .await;
    let result = admin.wait_for_result(221).await;
    assert_eq!(result.status, pb::RunStatus::Success as i32);
    let log = read_whole_log(&mut client, 221).await;
    assert!(has_line(&log, "hello world"), "{log}");

    executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonzero_exit_is_a_failure_with_the_status() {
    let mut admin = AdminHandle::start().await;
    let log_dir = tempfile::tempdir().expect("tempdir");
    let executor = start_executor(&admin, log_dir.path(), |builder| {
        builder
            .command_handler("exits", ["sh", "-c", "echo about to fail; exit 3"])
            .command_handler("signalled", ["sh", "-c", "kill -9 $$"])
    })
    .await;
    let mut client = client(executor.address()).await;

    submit(&mut client, run_request(31, 311, "exits", "")).await;
    let result = admin.wait_for_result(311).await;
    assert_eq!(
        (result.status, result.code, result.message.as_str()),
        (
            pb::RunStatus::Failed as i32,
            500,
            "command exited with status 3"
        )
    );
    let log = read_whole_log(&mut client, 311).await;
    assert!(has_line(&log, "about to fail"), "{log}");

    submit(&mut client, run_request(32, 321, "signalled", "")).await;
    let result = admin.wait_for_result(321).await;
    assert_eq!(
        (result.status, result.code, result.message.as_str()),
        (
            pb::RunStatus::Failed as i32,
            500,
            "command killed by signal 9 (SIGKILL)"
        )
    );

    executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_command_and_its_process_group_are_gone() {
    let mut admin = AdminHandle::start().await;
    let log_dir = tempfile::tempdir().expect("tempdir");
    let pid_dir = tempfile::tempdir().expect("tempdir");
    let script = sleeper_script(pid_dir.path());
    let executor = start_executor(&admin, log_dir.path(), |builder| {
        builder.command_handler("sleeper", ["sh", "-c", script.as_str()])
    })
    .await;
    let mut client = client(executor.address()).await;

    let mut request = run_request(41, 411, "sleeper", "");
    request.timeout_ms = 1500;
    submit(&mut client, request).await;
    let leader = read_pid(pid_dir.path().join("leader")).await;
    let child = read_pid(pid_dir.path().join("child")).await;
    let result = admin.wait_for_result(411).await;
    assert_eq!(
        (result.status, result.code, result.message.as_str()),
        (
            pb::RunStatus::Timeout as i32,
            502,
            "job execute timeout after 1500 ms"
        )
    );
    assert_gone(&[leader, child]).await;
    let log = read_whole_log(&mut client, 411).await;
    assert_stopped_by_the_handler(&log, leader, "run end: status=RUN_STATUS_TIMEOUT code=502");

    executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_stops_a_running_command_and_its_children() {
    let mut admin = AdminHandle::start().await;
    let log_dir = tempfile::tempdir().expect("tempdir");
    let pid_dir = tempfile::tempdir().expect("tempdir");
    let script = sleeper_script(pid_dir.path());
    let executor = start_executor(&admin, log_dir.path(), |builder| {
        builder.command_handler("sleeper", ["sh", "-c", script.as_str()])
    })
    .await;
    let mut client = client(executor.address()).await;

    submit(&mut client, run_request(51, 511, "sleeper", "")).await;
    let leader = read_pid(pid_dir.path().join("leader")).await;
    let child = read_pid(pid_dir.path().join("child")).await;
    let kill = pb::KillRequest {
        job_id: 51,
        log_id: 511,
        held_only: false,
    };
    let killed = client.kill(kill).await.expect("kill").into_inner();
    assert!(killed.killed, "{killed:?}");
    let result = admin.wait_for_result(511).await;
    assert_eq!(
        (result.status, result.code, result.message.as_str()),
        (pb::RunStatus::Killed as i32, 500, "killed by admin")
    );
    assert_gone(&[leader, child]).await;
    let log = read_whole_log(&mut client, 511).await;
    assert_stopped_by_the_handler(&log, leader, "run end: status=RUN_STATUS_KILLED code=500");

    executor.shutdown().await;
}
