//! One run, start to result: prepare the run log with its start line, call the handler
//! (polled inside the job task, a panic caught as FAILED), race it against the timeout and the
//! stop signal, and on timeout/kill give it `kill_grace` to return before dropping it. Builds
//! the `RunResult` and the end line, which the runner hands to the log writer together.
//!
//! The handler is not spawned as a task of its own: a task per run was a measurable share of a
//! short run's CPU, and dropping the handler's future ends it as surely as aborting its task.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use xjob_proto::pb;

use crate::context::JobContext;
use crate::handler::{HandlerFn, JobResult};
use crate::joblog::{JobLogStore, RunLog};

/// Handle codes kept from XXL-JOB.
const CODE_SUCCESS: i32 = 200;
const CODE_FAILED: i32 = 500;
const CODE_TIMEOUT: i32 = 502;
/// Longest handle message reported, in characters (XXL-JOB's cap).
pub(crate) const MAX_MESSAGE_CHARS: usize = 50_000;

/// The outcome forced on a run that is stopped rather than finished.
#[derive(Clone, Debug)]
pub(crate) struct StopReason {
    pub(crate) status: pb::RunStatus,
    pub(crate) code: i32,
    pub(crate) message: String,
}

impl StopReason {
    pub(crate) fn killed(message: impl Into<String>) -> Self {
        Self {
            status: pb::RunStatus::Killed,
            code: CODE_FAILED,
            message: message.into(),
        }
    }

    /// A held run whose start came but whose job's block strategy refused it then.
    pub(crate) fn refused(message: impl Into<String>) -> Self {
        Self {
            status: pb::RunStatus::Failed,
            code: CODE_FAILED,
            message: message.into(),
        }
    }

    fn timeout(timeout_ms: i64) -> Self {
        Self {
            status: pb::RunStatus::Timeout,
            code: CODE_TIMEOUT,
            message: format!("job execute timeout after {timeout_ms} ms"),
        }
    }
}

/// Stops one run taken from its queue: the first reason wins, then the token is cancelled.
/// Whether its handler has started is kept under the same lock, so a stop meant only for a run
/// that has not started (a held-only cancel) and the start cannot both win.
#[derive(Debug, Default)]
pub(crate) struct StopSignal {
    token: CancellationToken,
    state: Mutex<StopState>,
}

#[derive(Debug, Default)]
struct StopState {
    reason: Option<StopReason>,
    started: bool,
}

impl StopSignal {
    fn state(&self) -> std::sync::MutexGuard<'_, StopState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn stop(&self, reason: StopReason) {
        self.state().reason.get_or_insert(reason);
        self.token.cancel();
    }

    /// Stops the run unless its handler has started; returns whether it is stopped unstarted.
    pub(crate) fn stop_before_start(&self, reason: StopReason) -> bool {
        let mut state = self.state();
        if state.started {
            return false;
        }
        state.reason.get_or_insert(reason);
        drop(state);
        self.token.cancel();
        true
    }

    /// Marks the run started, or says why it must not start (it was stopped first).
    pub(crate) fn start(&self) -> Result<(), StopReason> {
        let mut state = self.state();
        match &state.reason {
            Some(reason) => Err(reason.clone()),
            None => {
                state.started = true;
                Ok(())
            }
        }
    }

    /// Completes once the run is stopped.
    pub(crate) async fn stopped(&self) {
        self.token.cancelled().await;
    }

    fn reason(&self) -> Option<StopReason> {
        self.state().reason.clone()
    }
}

/// A panic caught while polling a handler.
type Panic = Box<dyn Any + Send>;

/// The handler's future, polled where it is awaited: a panic while polling becomes
/// `Err(payload)` instead of unwinding through the job task. Dropping it ends the handler.
struct CatchPanic<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, Panic>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.get_mut().0.as_mut();
        // Unwind safety: after a panic the future is never polled again, only dropped.
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(context))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

enum RunWake {
    Finished(Result<JobResult, Panic>),
    Stopped,
    TimedOut,
}

/// Runs one run to its result: log file, start line, handler task, timeout/kill; the end line
/// is left to the caller.
pub(crate) async fn execute_run(
    joblog: &JobLogStore,
    kill_grace: Duration,
    request: pb::RunRequest,
    start_line: String,
    handler: HandlerFn,
    stop: &StopSignal,
    handler_trace: Option<opentelemetry::Context>,
) -> Ended {
    let started_at_ms = now_ms();
    crate::metrics::run_started();
    // What the result needs once the request has moved into the handler's context (moved, not
    // cloned: its strings can be large).
    let (log_id, log_date_ms, timeout_ms) =
        (request.log_id, request.log_date_ms, request.timeout_ms);
    // The start line waits in memory; the file appears with the first line written after it.
    let log = Arc::new(joblog.lazy(log_id, log_date_ms, start_line));
    let span = tracing::info_span!("handler", job_id = request.job_id, log_id);
    if let Some(trace) = &handler_trace {
        // A `tracing` subscriber with an OpenTelemetry layer nests the handler's own spans
        // under the run's `handler` span; without one this does nothing.
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let _ = span.set_parent(trace.clone());
    }
    let context = JobContext::new(
        request,
        Some(Arc::clone(&log)),
        stop.token.child_token(),
        kill_grace,
        handler_trace,
    );
    // The handler is called inside its task, so even a panic while building its future is caught.
    let handler_future = async move { handler(context).await }.instrument(span);
    let mut handler_task = CatchPanic(Box::pin(handler_future));
    let timeout = async {
        match u64::try_from(timeout_ms) {
            Ok(millis) if millis > 0 => tokio::time::sleep(Duration::from_millis(millis)).await,
            _ => std::future::pending().await,
        }
    };
    let wake = tokio::select! {
        biased;
        joined = &mut handler_task => RunWake::Finished(joined),
        () = stop.token.cancelled() => RunWake::Stopped,
        () = timeout => RunWake::TimedOut,
    };
    let (status, code, message) = match wake {
        // A handler that returned after being stopped (it saw the cancellation) reports the stop.
        RunWake::Finished(joined) => match stop.reason() {
            Some(reason) => (reason.status, reason.code, reason.message),
            None => finished_outcome(joined),
        },
        RunWake::Stopped | RunWake::TimedOut => {
            if matches!(wake, RunWake::TimedOut) {
                stop.stop(StopReason::timeout(timeout_ms));
            }
            end_handler(&mut handler_task, kill_grace, log_id).await;
            let reason = stop
                .reason()
                .unwrap_or_else(|| StopReason::killed("killed"));
            (reason.status, reason.code, reason.message)
        }
    };
    // Ends a handler that ignored its cancellation: nothing of it outlives its run.
    drop(handler_task);
    crate::metrics::observe_handler(Duration::from_millis(
        u64::try_from(now_ms() - started_at_ms).unwrap_or(0),
    ));
    let result = run_result(log_id, log_date_ms, (status, code, &message), started_at_ms);
    let end_line = format!(
        "run end: status={} code={code} message={}",
        status.as_str_name(),
        result.message
    );
    Ended {
        result,
        log,
        end_line,
    }
}

/// A run that ended: its result, to report once its log holds `end_line` (`Runner` hands both
/// to the log writer).
pub(crate) struct Ended {
    pub(crate) result: pb::RunResult,
    pub(crate) log: Arc<RunLog>,
    pub(crate) end_line: String,
}

/// Gives a cancelled handler `grace` to return; past it, the handler is dropped by the caller.
async fn end_handler<F: Future>(handler_task: &mut CatchPanic<F>, grace: Duration, log_id: i64) {
    if tokio::time::timeout(grace, handler_task).await.is_err() {
        tracing::warn!(log_id, ?grace, "handler ignored cancellation, aborting it");
    }
}

fn finished_outcome(joined: Result<JobResult, Panic>) -> (pb::RunStatus, i32, String) {
    match joined {
        Ok(Ok(output)) => (
            pb::RunStatus::Success,
            CODE_SUCCESS,
            output.as_message().to_owned(),
        ),
        Ok(Err(error)) => (
            pb::RunStatus::Failed,
            CODE_FAILED,
            error.message().to_owned(),
        ),
        Err(payload) => {
            let text = if let Some(text) = payload.downcast_ref::<&str>() {
                (*text).to_owned()
            } else if let Some(text) = payload.downcast_ref::<String>() {
                text.clone()
            } else {
                "non-string panic payload".to_owned()
            };
            (
                pb::RunStatus::Failed,
                CODE_FAILED,
                format!("handler panicked: {text}"),
            )
        }
    }
}

/// The run's first log line, `run start: …` (built before a run queued early waits for its
/// start, off the second's burst of starts).
pub(crate) fn start_line(request: &pb::RunRequest) -> String {
    let trigger = pb::TriggerType::try_from(request.trigger_type)
        .map_or("TRIGGER_TYPE_UNKNOWN", |trigger| trigger.as_str_name());
    // The run's trace id (from the admin's dispatch span), so a log line leads to its trace.
    let trace_id = xjob_proto::traceparent::Traceparent::parse(&request.traceparent)
        .map(|parent| format!(" trace_id={:032x}", parent.trace_id))
        .unwrap_or_default();
    format!(
        "run start: job_id={} log_id={} handler={} params={} shard={}/{} attempt={} trigger={trigger} timeout_ms={}{trace_id}",
        request.job_id,
        request.log_id,
        crate::glue::languages::run_handler_name(request),
        request.params,
        request.shard_index,
        request.shard_total,
        request.attempt,
        request.timeout_ms,
    )
}

/// The result of run `log_id`: `outcome` is its status, handle code and message.
pub(crate) fn run_result(
    log_id: i64,
    log_date_ms: i64,
    outcome: (pb::RunStatus, i32, &str),
    started_at_ms: i64,
) -> pb::RunResult {
    let (status, code, message) = outcome;
    pb::RunResult {
        log_id,
        log_date_ms,
        status: status as i32,
        code,
        message: truncate_message(message),
        finished_at_ms: now_ms(),
        traceparent: String::new(),
        started_at_ms,
    }
}

/// Cuts a message to [`MAX_MESSAGE_CHARS`] characters, marking the cut with "...".
pub(crate) fn truncate_message(message: &str) -> String {
    cut_message(message, MAX_MESSAGE_CHARS)
}

/// Cuts a message to `max_chars` characters, marking the cut with "...".
pub(crate) fn cut_message(message: &str, max_chars: usize) -> String {
    match message.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}...", &message[..cut]),
        None => message.to_owned(),
    }
}

/// Returns the wall clock in epoch milliseconds.
pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Returns the wall clock in epoch microseconds.
pub(crate) fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_truncated_to_50_000_chars() {
        let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
        let truncated = truncate_message(&long);
        assert_eq!(truncated.chars().count(), MAX_MESSAGE_CHARS + 3);
        assert!(truncated.ends_with("é..."));
        assert_eq!(truncate_message("short"), "short");
    }
}
