//! A standalone demo executor: registers app `xjob-demo` with an admin and serves the same
//! handlers as `xjob serve --demo` (plus `demoSharding` and `demoSleep`), from its own process,
//! so it can share the demo's runs with the in-process executor.
//!
//! ```text
//! cargo run -p xjob-examples --bin demo_executor -- http://127.0.0.1:8080 127.0.0.1:9999
//! ```

use xjob_executor::{Executor, JobContext, JobError, JobOutput, JobResult};

async fn demo_hello(ctx: JobContext) -> JobResult {
    ctx.log(format!("hello, {}! (log {})", ctx.params(), ctx.log_id()));
    Ok(JobOutput::message(format!("greeted {}", ctx.params())))
}

async fn demo_counter(ctx: JobContext) -> JobResult {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    ctx.log(format!("this executor's counter has run {count} times"));
    Ok(JobOutput::message(format!("count {count}")))
}

async fn demo_flaky(ctx: JobContext) -> JobResult {
    if ctx.log_id() % 2 == 0 {
        ctx.log("even log id: failing on purpose to show a failed run");
        return Err(JobError::new("failed on purpose (even log id)"));
    }
    Ok(JobOutput::default())
}

async fn demo_sharding(ctx: JobContext) -> JobResult {
    ctx.log(format!(
        "shard {} of {}",
        ctx.shard_index(),
        ctx.shard_total()
    ));
    Ok(JobOutput::message(format!(
        "shard {}/{}",
        ctx.shard_index(),
        ctx.shard_total()
    )))
}

async fn demo_sleep(ctx: JobContext) -> JobResult {
    let millis: u64 = ctx.params().trim().parse().unwrap_or(1000);
    ctx.log(format!("sleeping {millis} ms (cancellable)"));
    tokio::select! {
        _ = tokio::time::sleep(std::time::Duration::from_millis(millis)) => Ok(JobOutput::message("slept")),
        _ = ctx.cancelled() => Err(JobError::new("cancelled while sleeping")),
    }
}

#[tokio::main]
async fn main() -> Result<(), xjob_executor::Error> {
    // Colours on a terminal only (and never with NO_COLOR): piped or collected logs stay plain.
    let colours = std::io::IsTerminal::is_terminal(&std::io::stdout())
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    tracing_subscriber::fmt()
        .with_target(false)
        .with_ansi(colours)
        .init();
    let mut args = std::env::args().skip(1);
    let admin = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:8080".to_string());
    let bind = args.next().unwrap_or_else(|| "127.0.0.1:9999".to_string());
    Executor::builder()
        .app_name("xjob-demo")
        .admin_addrs([admin])
        .bind(bind)
        .handler("demoHello", demo_hello)
        .handler("demoCounter", demo_counter)
        .handler("demoFlaky", demo_flaky)
        .handler("demoSharding", demo_sharding)
        .handler("demoSleep", demo_sleep)
        .run(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}
