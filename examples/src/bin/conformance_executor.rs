//! The Rust SDK's executor for the executor conformance suite (tests/tests/executor_conformance.rs).
//! Every language's example serves the same handlers and reads the same environment; see
//! docs/executors.md.
//!
//! ```text
//! XJOB_ADMIN_ADDR=http://127.0.0.1:8080 XJOB_APP_NAME=conformance XJOB_EXECUTOR_PORT=9999 \
//!   XJOB_LOG_DIR=/tmp/xjob-logs [XJOB_ACCESS_TOKEN=secret] cargo run -p xjob-examples --bin conformance_executor
//! ```
//! Handlers:
//! - `succeed`: logs a line and succeeds with `ok params=<params> shard=<i>/<n>`;
//! - `fail`: fails with `failed on purpose: <params>`;
//! - `sleep`: sleeps `params` ms (default 1000), logging `tick <n>` every 100 ms; stops at once
//!   when the run is cancelled (kill, timeout, COVER_EARLY, shutdown);
//! - `log`: writes `line 1` … `line <params>` (default 3) and succeeds;
//! - `command`: the SDK's built-in command handler, the params being the command line.
//!
//! TLS (all optional): `XJOB_TLS_CERT`/`XJOB_TLS_KEY` serve its port over TLS (and are presented
//! to admins that ask for a client certificate), `XJOB_TLS_CA` verifies the admins,
//! `XJOB_TLS_REQUIRE_CLIENT_CERT=1` accepts only callers with a certificate from that CA.
//!
//! `XJOB_GLUE_SHELL=1` enables shell script (GLUE) jobs, run with bash.
//!
//! SIGTERM or SIGINT shuts it down gracefully (deregister, finish or kill runs, flush results).

use std::time::Duration;

use xjob_executor::{Executor, GlueType, JobContext, JobError, JobOutput, JobResult};

async fn succeed(ctx: JobContext) -> JobResult {
    let message = format!(
        "ok params={} shard={}/{}",
        ctx.params(),
        ctx.shard_index(),
        ctx.shard_total()
    );
    ctx.log(&message);
    Ok(JobOutput::message(message))
}

async fn fail(ctx: JobContext) -> JobResult {
    ctx.log("failing on purpose");
    Err(JobError::new(format!(
        "failed on purpose: {}",
        ctx.params()
    )))
}

async fn sleep(ctx: JobContext) -> JobResult {
    let millis = ctx.params().trim().parse::<u64>().unwrap_or(1000);
    ctx.log(format!("sleeping {millis} ms"));
    let deadline = tokio::time::Instant::now() + Duration::from_millis(millis);
    let mut tick = 0u64;
    loop {
        let next = (tokio::time::Instant::now() + Duration::from_millis(100)).min(deadline);
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = ctx.cancelled() => return Err(JobError::new("cancelled while sleeping")),
        }
        if next >= deadline {
            return Ok(JobOutput::message(format!("slept {millis} ms")));
        }
        tick += 1;
        ctx.log(format!("tick {tick}"));
    }
}

async fn log(ctx: JobContext) -> JobResult {
    let lines = ctx.params().trim().parse::<u32>().unwrap_or(3);
    for line in 1..=lines {
        ctx.log(format!("line {line}"));
    }
    Ok(JobOutput::message(format!("wrote {lines} lines")))
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
        _ => std::future::pending::<()>().await,
    }
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} must be set"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    tracing_subscriber::fmt()
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_ansi(colours)
        .init();
    let admin_addrs: Vec<String> = env("XJOB_ADMIN_ADDR")?
        .split(',')
        .map(|addr| addr.trim().to_string())
        .filter(|addr| !addr.is_empty())
        .collect();
    let port = env("XJOB_EXECUTOR_PORT")?;
    let tls_cert_opt = std::env::var("XJOB_TLS_CERT")
        .ok()
        .filter(|cert| !cert.is_empty());
    let scheme = if tls_cert_opt.is_some() {
        "https"
    } else {
        "http"
    };
    let mut builder = Executor::builder()
        .app_name(env("XJOB_APP_NAME")?)
        .admin_addrs(admin_addrs)
        .bind(format!("127.0.0.1:{port}"))
        .advertise_address(format!("{scheme}://127.0.0.1:{port}"))
        .log_dir(env("XJOB_LOG_DIR")?)
        .shutdown_grace(Duration::from_secs(2))
        .handler("succeed", succeed)
        .handler("fail", fail)
        .handler("sleep", sleep)
        .handler("log", log)
        // The built-in command handler: the params are the whole command line.
        .command_handler("command", Vec::<String>::new());
    // Session dispatch: no port; the admin's calls come down the session. The port only makes
    // the name unique (the suite expects session://APP-PORT).
    if std::env::var("XJOB_DISPATCH").is_ok_and(|mode| mode == "session") {
        builder = builder
            .session_dispatch(true)
            .advertise_address(format!("session://{}-{port}", env("XJOB_APP_NAME")?));
    }
    if let Ok(token) = std::env::var("XJOB_ACCESS_TOKEN")
        && !token.is_empty()
    {
        builder = builder.access_token(token);
    }
    // TLS: the executor's own port serves this certificate; the CA verifies the admins (and, when
    // required, their client certificates); the same certificate is presented to the admins.
    if let Some(cert) = tls_cert_opt {
        builder = builder.tls(cert, env("XJOB_TLS_KEY")?);
    }
    if let Ok(ca) = std::env::var("XJOB_TLS_CA")
        && !ca.is_empty()
    {
        builder = builder.tls_ca(ca);
    }
    if std::env::var("XJOB_TLS_REQUIRE_CLIENT_CERT").is_ok_and(|value| value == "1") {
        builder = builder.require_client_cert(true);
    }
    // Script (GLUE) jobs are off unless enabled: XJOB_GLUE_SHELL=1 enables shell scripts (bash).
    if std::env::var("XJOB_GLUE_SHELL").is_ok_and(|value| value == "1") {
        builder = builder.enable_glue(GlueType::Shell);
    }
    builder.run(termination()).await?;
    Ok(())
}
