//! `xjob serve --demo`: an in-process executor (app `xjob-demo`) and sample jobs that fire every
//! few seconds, so a newcomer sees fires, results and run logs at once. It talks to the admin
//! over gRPC on loopback exactly as a separate executor process would.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio_util::sync::CancellationToken;
use xjob_executor::{Executor, JobContext, JobError, JobOutput, JobResult};

use crate::context::AdminContext;
use crate::model::next_fire::next_fire_after;
use crate::model::{
    AddressType, Group, GroupId, Job, JobStatus, RouteStrategy, ScheduleType, now_ms,
};
use crate::store::{JobFilter, JobScheduleUpdate};

const DEMO_APP: &str = "xjob-demo";

/// Starts the demo executor and makes sure the sample jobs exist and run.
pub async fn run_demo(ctx: Arc<AdminContext>, admin_url: String, cancel: CancellationToken) {
    let log_dir = ctx.config.data_dir.join("demo-executor-logs");
    let executor = Executor::builder()
        .app_name(DEMO_APP)
        .admin_addrs([admin_url])
        .bind("127.0.0.1:0")
        .log_dir(log_dir)
        .handler("demoHello", demo_hello)
        .handler("demoCounter", demo_counter)
        .handler("demoFlaky", demo_flaky)
        .start()
        .await;
    let executor = match executor {
        Ok(executor) => executor,
        Err(error) => {
            tracing::error!(%error, "demo executor failed to start");
            return;
        }
    };
    tracing::info!(address = %executor.address(), "demo executor started");
    if let Err(error) = ensure_sample_jobs(&ctx).await {
        tracing::error!(%error, "creating demo jobs failed");
    }
    cancel.cancelled().await;
    executor.shutdown().await;
}

/// One console line per demo run, so `serve --demo` shows its jobs firing. (The admin itself
/// logs nothing per run: at thousands of runs per second that would cost more than the runs.)
/// The SDK's `handler` span around the line names the job and log ids.
fn announce(handler: &str, outcome: &str) {
    tracing::info!(handler, "demo run: {outcome}");
}

async fn demo_hello(ctx: JobContext) -> JobResult {
    announce("demoHello", &format!("hello, {}!", ctx.params()));
    ctx.log(format!(
        "hello, {}! (log {}, scheduled at {})",
        ctx.params(),
        ctx.log_id(),
        ctx.scheduled_at_ms()
    ));
    Ok(JobOutput::message(format!("greeted {}", ctx.params())))
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

async fn demo_counter(ctx: JobContext) -> JobResult {
    let count = COUNTER.fetch_add(1, Ordering::Relaxed) + 1;
    announce("demoCounter", &format!("count {count}"));
    ctx.log(format!("this demo counter has run {count} times"));
    Ok(JobOutput::message(format!("count {count}")))
}

async fn demo_flaky(ctx: JobContext) -> JobResult {
    if ctx.log_id() % 2 == 0 {
        announce("demoFlaky", "failing on purpose (even log id)");
        ctx.log("even log id: failing on purpose to show a failed run");
        return Err(JobError::new("failed on purpose (even log id)"));
    }
    announce("demoFlaky", "succeeding (odd log id)");
    ctx.log("odd log id: succeeding");
    Ok(JobOutput::default())
}

async fn ensure_sample_jobs(ctx: &AdminContext) -> Result<(), crate::error::Error> {
    let group = match ctx.store.get_group_by_app(DEMO_APP).await? {
        Some(group) => group,
        None => {
            ctx.store
                .insert_group(&Group {
                    id: GroupId(0),
                    app_name: DEMO_APP.to_string(),
                    title: "xjob demo executor".to_string(),
                    address_type: AddressType::Auto,
                    addresses: vec![],
                    access_token: String::new(),
                    updated_ms: now_ms(),
                })
                .await?
        }
    };
    let filter = JobFilter {
        group_id: Some(group.id),
        limit: 100,
        ..JobFilter::default()
    };
    let existing = ctx.store.list_jobs(&filter).await?;
    let samples = [
        (
            "demo: hello every 3 seconds",
            ScheduleType::Cron,
            "*/3 * * * * ?",
            "demoHello",
            "world",
        ),
        (
            "demo: counter at a fixed rate of 5 s",
            ScheduleType::FixRate,
            "5",
            "demoCounter",
            "",
        ),
        (
            "demo: flaky job every 10 seconds",
            ScheduleType::Cron,
            "*/10 * * * * ?",
            "demoFlaky",
            "",
        ),
    ];
    for (name, schedule_type, conf, handler, params) in samples {
        let job = match existing.iter().find(|job| job.name == name) {
            Some(job) => job.clone(),
            None => {
                ctx.store
                    .insert_job(&sample_job(
                        group.id,
                        name,
                        schedule_type,
                        conf,
                        handler,
                        params,
                    ))
                    .await?
            }
        };
        if job.status == JobStatus::Stopped {
            start_job(ctx, &job).await?;
        }
    }
    ctx.schedule_wake.notify_one();
    Ok(())
}

async fn start_job(ctx: &AdminContext, job: &Job) -> Result<(), crate::error::Error> {
    // Like StartJob: the first fire is at least 5 s away, outside the current pre-read window.
    let next = next_fire_after(
        job.schedule_type,
        &job.schedule_conf,
        ctx.config.default_time_zone(),
        job.policy.dst,
        now_ms() + 5000,
    )
    .map_err(crate::error::Error::InvalidArgument)?;
    if let Some(next) = next {
        ctx.store
            .set_job_schedule(JobScheduleUpdate {
                job_id: job.id,
                trigger_last_ms: job.trigger_last_ms,
                trigger_next_ms: next,
                status: JobStatus::Running,
            })
            .await?;
    }
    Ok(())
}

fn sample_job(
    group_id: GroupId,
    name: &str,
    schedule_type: ScheduleType,
    conf: &str,
    handler: &str,
    params: &str,
) -> Job {
    let now = now_ms();
    Job {
        author: "xjob".to_string(),
        schedule_type,
        schedule_conf: conf.to_string(),
        route_strategy: RouteStrategy::Round,
        handler: handler.to_string(),
        params: params.to_string(),
        glue_updated_ms: now,
        created_ms: now,
        updated_ms: now,
        ..Job::new(group_id, name)
    }
}
