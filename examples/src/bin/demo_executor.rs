//! A standalone demo executor: registers app `xjob-demo` with an admin and serves the same
//! handlers as `xjob serve --demo`, from its own process.
//!
//! ```text
//! cargo run -p xjob-examples --bin demo_executor -- http://127.0.0.1:8080 127.0.0.1:9999
//! ```

use xjob_executor::{Executor, JobContext, JobError, JobOutput, JobResult};

async fn demo_hello(ctx: JobContext) -> JobResult {
    ctx.log(format!("hello, {}! (log {})", ctx.params(), ctx.log_id()));
    Ok(JobOutput::message(format!("greeted {}", ctx.params())))
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
    tracing_subscriber::fmt().with_target(false).init();
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
        .handler("demoSharding", demo_sharding)
        .handler("demoSleep", demo_sleep)
        .run(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}
