//! Handlers several scenarios share: `ok_handler` succeeds at once; `held_handler` holds its
//! run until the test lets it go; `sleeping_handler` sleeps as long as its params say and
//! records when each run started and finished, so a test can check order and overlap.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use xjob_admin::model::now_ms;
use xjob_executor::{JobContext, JobError, JobOutput, JobResult};

/// Succeeds at once with the message "done".
pub async fn ok_handler(_ctx: JobContext) -> JobResult {
    Ok(JobOutput::message("done"))
}

/// Holds its run until `gate` gets a permit, then succeeds with the message "released".
pub fn held_handler(
    gate: Arc<Semaphore>,
) -> impl Fn(JobContext) -> HandlerFuture + Send + Sync + 'static {
    move |_ctx: JobContext| {
        let gate = Arc::clone(&gate);
        Box::pin(async move {
            let _permit = gate.acquire().await.map_err(|_| JobError::new("closed"))?;
            Ok(JobOutput::message("released"))
        })
    }
}

/// One finished run of `sleeping_handler` (ordered by start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RunSpan {
    pub started_ms: i64,
    pub finished_ms: i64,
    pub job_id: i64,
    pub log_id: i64,
}

/// The spans of every finished run, shared by the handler and the test.
pub type RunSpans = Arc<Mutex<Vec<RunSpan>>>;

/// A handler future, as the SDK's builder takes it.
pub type HandlerFuture = Pin<Box<dyn Future<Output = JobResult> + Send>>;

/// Sleeps `params` milliseconds (0 when empty) plus `per_shard_ms` per shard index, then
/// records the run's span in `spans` (before it returns, so before its result reaches the
/// admin).
pub fn sleeping_handler(
    spans: RunSpans,
    per_shard_ms: u64,
) -> impl Fn(JobContext) -> HandlerFuture + Send + Sync + 'static {
    move |ctx: JobContext| {
        let spans = Arc::clone(&spans);
        Box::pin(async move {
            let started_ms = now_ms();
            let shard_extra = u64::try_from(ctx.shard_index()).unwrap_or(0) * per_shard_ms;
            let millis = ctx.params().trim().parse::<u64>().unwrap_or(0) + shard_extra;
            tokio::time::sleep(Duration::from_millis(millis)).await;
            let span = RunSpan {
                started_ms,
                finished_ms: now_ms(),
                job_id: ctx.job_id(),
                log_id: ctx.log_id(),
            };
            spans
                .lock()
                .map_err(|_| JobError::new("span record poisoned"))?
                .push(span);
            Ok(JobOutput::message("done"))
        })
    }
}

/// The spans recorded so far, of `job_id` only when given, in start order.
pub fn spans_of(spans: &RunSpans, job_id: Option<i64>) -> Vec<RunSpan> {
    let mut kept: Vec<RunSpan> = spans
        .lock()
        .map(|spans| {
            spans
                .iter()
                .filter(|span| job_id.is_none_or(|id| span.job_id == id))
                .copied()
                .collect()
        })
        .unwrap_or_default();
    kept.sort_unstable();
    kept
}
