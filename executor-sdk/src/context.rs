//! `JobContext`: what a handler knows about its run (ids, params, shard, attempt), its run log
//! writer, its cancellation token and the grace it has to return once cancelled. Cloning is
//! cheap, so a handler can hand it to the tasks it spawns; they all log into the same run file.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xjob_proto::pb;

use crate::joblog::RunLog;

/// The context of one run, passed to its handler.
#[derive(Clone, Debug)]
pub struct JobContext {
    inner: Arc<ContextInner>,
}

#[derive(Debug)]
struct ContextInner {
    request: pb::RunRequest,
    log_opt: Option<Arc<RunLog>>,
    cancellation: CancellationToken,
    stop_grace: Duration,
    trace: Option<opentelemetry::Context>,
}

impl JobContext {
    pub(crate) fn new(
        request: pb::RunRequest,
        log_opt: Option<Arc<RunLog>>,
        cancellation: CancellationToken,
        stop_grace: Duration,
        trace: Option<opentelemetry::Context>,
    ) -> Self {
        Self {
            inner: Arc::new(ContextInner {
                request,
                log_opt,
                cancellation,
                stop_grace,
                trace,
            }),
        }
    }

    /// The OpenTelemetry context of the run's `handler` span, when the executor traces: start
    /// your own spans with it as parent (`tracer.start_with_context(name, &cx)`) to nest them
    /// in the run's trace. `None` when tracing is off.
    pub fn trace_context(&self) -> Option<&opentelemetry::Context> {
        self.inner.trace.as_ref()
    }

    /// The W3C `traceparent` to pass to services the handler calls so their spans join the
    /// run's trace: the run's `handler` span when this executor traces, else the admin's
    /// `dispatch` span the run came with; empty when the run has no trace.
    pub fn traceparent(&self) -> String {
        use opentelemetry::trace::TraceContextExt;
        match self.inner.trace.as_ref() {
            Some(trace) => crate::telemetry::traceparent(trace.span().span_context()),
            None => self.inner.request.traceparent.clone(),
        }
    }

    /// Returns the job's id.
    pub fn job_id(&self) -> i64 {
        self.inner.request.job_id
    }

    /// Returns the run's log id: its identity, usable as an idempotency key.
    pub fn log_id(&self) -> i64 {
        self.inner.request.log_id
    }

    /// Returns the BEAN handler name the run was dispatched to.
    pub fn handler_name(&self) -> &str {
        &self.inner.request.handler
    }

    /// Returns the run's glue type (BEAN for a named handler, or a script language).
    pub fn glue_type(&self) -> pb::GlueType {
        pb::GlueType::try_from(self.inner.request.glue_type).unwrap_or(pb::GlueType::Unspecified)
    }

    /// Returns the script source of a glue run (empty for BEAN).
    pub fn glue_source(&self) -> &str {
        &self.inner.request.glue_source
    }

    /// Returns the version stamp of the glue source (when it was last edited, epoch ms).
    pub fn glue_updated_ms(&self) -> i64 {
        self.inner.request.glue_updated_ms
    }

    /// Returns the job parameters (empty when none).
    pub fn params(&self) -> &str {
        &self.inner.request.params
    }

    /// Returns this run's shard index (0 unless broadcast).
    pub fn shard_index(&self) -> i32 {
        self.inner.request.shard_index
    }

    /// Returns the number of shards (1, or 0 when the admin did not set it, unless broadcast).
    pub fn shard_total(&self) -> i32 {
        self.inner.request.shard_total
    }

    /// Returns the instant the schedule planned this fire for, in epoch milliseconds.
    pub fn scheduled_at_ms(&self) -> i64 {
        self.inner.request.scheduled_at_ms
    }

    /// Returns the attempt number: 0 for the first, +1 for each retry.
    pub fn attempt(&self) -> i32 {
        self.inner.request.attempt
    }

    /// Returns why the run was created (cron, manual, retry, ...).
    pub fn trigger_type(&self) -> pb::TriggerType {
        pb::TriggerType::try_from(self.inner.request.trigger_type)
            .unwrap_or(pb::TriggerType::Unspecified)
    }

    /// Returns the path of the run's log file, when it could be created.
    pub fn log_path(&self) -> Option<&Path> {
        self.inner.log_opt.as_deref().map(RunLog::path)
    }

    /// Appends `"yyyy-MM-dd HH:mm:ss.SSS line"` to the run's log file; the line is readable
    /// through `ReadLog` as soon as this returns. Write failures are logged, not raised.
    pub fn log(&self, line: impl AsRef<str>) {
        if let Some(log) = &self.inner.log_opt {
            log.append(line.as_ref());
        }
    }

    /// Returns the token cancelled when the run is killed, times out or is replaced.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancellation
    }

    /// Completes when the run is cancelled (kill, timeout, cover-early, shutdown).
    pub async fn cancelled(&self) {
        self.inner.cancellation.cancelled().await;
    }

    /// Returns whether the run has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancellation.is_cancelled()
    }

    /// Returns how long the handler may take to return once cancelled before the runner aborts
    /// its task (the executor's `kill_grace`): time to clean up, e.g. stop child processes.
    pub fn stop_grace(&self) -> Duration {
        self.inner.stop_grace
    }
}
