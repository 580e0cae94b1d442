//! A scriptable executor process for process tests (SIGKILL mid-run, graceful SIGTERM).
//!
//! ```text
//! test-executor ADMIN_URL APP_NAME BIND_ADDR [LOG_DIR]
//! ```
//! Registers with the admin under `APP_NAME` and serves these handlers until SIGTERM or SIGINT,
//! then shuts down gracefully through the SDK (deregister, let runs finish, flush results):
//! - `ok`: succeeds at once;
//! - `fail`: fails with a message naming its params;
//! - `sleep`: sleeps `params` milliseconds (default 1000), logging a line first; stops early
//!   and fails when the run is cancelled (kill, timeout, shutdown);
//! - `exit`: ends the whole process at once with exit code `params` (default 3), like a crash;
//! - `panic`: panics inside the handler.
//!
//! Tests find the executor's address through `ListExecutors` (bind port 0 is fine).

use std::time::Duration;

use xjob_executor::{Executor, JobContext, JobError, JobOutput, JobResult};

async fn ok(_ctx: JobContext) -> JobResult {
    Ok(JobOutput::message("ok"))
}

async fn fail(ctx: JobContext) -> JobResult {
    Err(JobError::new(format!(
        "failed on purpose (params '{}')",
        ctx.params()
    )))
}

async fn sleep(ctx: JobContext) -> JobResult {
    let millis = ctx.params().trim().parse::<u64>().unwrap_or(1000);
    ctx.log(format!("sleeping {millis} ms"));
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(millis)) => {
            Ok(JobOutput::message(format!("slept {millis} ms")))
        }
        _ = ctx.cancelled() => Err(JobError::new("cancelled while sleeping")),
    }
}

async fn exit(ctx: JobContext) -> JobResult {
    let code = ctx.params().trim().parse::<i32>().unwrap_or(3);
    ctx.log(format!("exiting the process with code {code}"));
    std::process::exit(code)
}

async fn panic(_ctx: JobContext) -> JobResult {
    panic!("handler panicked on purpose")
}

/// Resolves on SIGTERM or SIGINT.
async fn termination() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut terminate), Ok(mut interrupt)) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        }
        // Without signal handlers the process can only be killed; keep serving.
        _ => std::future::pending::<()>().await,
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [admin_url, app_name, bind, rest @ ..] = args.as_slice() else {
        anyhow::bail!("usage: test-executor ADMIN_URL APP_NAME BIND_ADDR [LOG_DIR]");
    };
    let log_dir = match rest.first() {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("xjob-test-executor-{}", std::process::id())),
    };
    Executor::builder()
        .app_name(app_name.as_str())
        .admin_addrs([admin_url.as_str()])
        .bind(bind.as_str())
        .log_dir(log_dir)
        .shutdown_grace(Duration::from_secs(2))
        .handler("ok", ok)
        .handler("fail", fail)
        .handler("sleep", sleep)
        .handler("exit", exit)
        .handler("panic", panic)
        .run(termination())
        .await?;
    Ok(())
}
