//! The alarm hook: called by the follow-up when a run's failure deserves attention (its final
//! failure, or every failure when the job asks for it). One trait so the e-mail and webhook
//! delivery (`notify::Notifier`), the log-only [`LogAlarm`] or a test's counter can stand in.

use std::future::Future;
use std::pin::Pin;

use crate::model::{Job, RunLog};

/// The future an [`Alarm`] returns: `Ok` says where the alarm went, `Err` why it (or part of
/// it) was not delivered. Either text is stored as the run's `alarm_delivery`.
pub type AlarmFuture<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

/// Tells someone that a run failed. Implementations must not panic; an `Err` is recorded as
/// `AlarmStatus::Failed` on the run. (A boxed future rather than `async fn` keeps the trait usable as
/// `Arc<dyn Alarm>`.)
pub trait Alarm: Send + Sync {
    /// Raises the alarm for `run` of `job`.
    fn alarm<'a>(&'a self, job: &'a Job, run: &'a RunLog) -> AlarmFuture<'a>;
}

/// Writes each alarm as a warning to the admin's log.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogAlarm;

impl Alarm for LogAlarm {
    fn alarm<'a>(&'a self, job: &'a Job, run: &'a RunLog) -> AlarmFuture<'a> {
        Box::pin(async move {
            tracing::warn!(
                job_id = job.id,
                job_name = %job.name,
                alarm_email = %job.alarm_email,
                log_id = run.id,
                status = %run.status,
                attempt = run.attempt,
                executor = %run.executor_address,
                trigger_msg = %run.trigger_msg,
                handle_msg = %run.handle_msg,
                "job run failed"
            );
            Ok("log: written to the admin's log".to_string())
        })
    }
}
