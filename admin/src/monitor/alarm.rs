//! The alarm hook: called for a run whose failure deserves attention (its final failure, or
//! every failure when the job asks for it), from the alarm queue's delivery task
//! (`alarm_queue`), never from the follow-up loop. One trait so the e-mail and webhook delivery
//! (`notify::Notifier`), the log-only [`LogAlarm`] or a test's counter can stand in.

use std::future::Future;
use std::pin::Pin;

use chrono_tz::Tz;

use crate::model::{Job, RunLog};

/// How an alarm's error starts when the job's rate limit held it back: the queue counts it as
/// `rate_limited`, not as a failed delivery, so an alert on failures does not fire on it.
pub const RATE_LIMITED: &str = "rate limited: ";

/// The future an [`Alarm`] returns: `Ok` says where the alarm went, `Err` why it (or part of
/// it) was not delivered. Either text is stored as the run's `alarm_delivery`.
pub type AlarmFuture<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

/// A run whose alarm is due, with what the alarm names besides the job and the run.
#[derive(Debug, Clone)]
pub struct AlarmedRun {
    pub job: Job,
    pub run: RunLog,
    /// The app of the job's group (empty when the group is gone).
    pub app_name: String,
    /// The group's title (empty when the group is gone).
    pub group_title: String,
    /// The job's time zone (its own, else the admin's): the alarm shows times in it.
    pub time_zone: Tz,
}

/// Tells someone that a run failed. Implementations must not panic; an `Err` is recorded as
/// `AlarmStatus::Failed` on the run. (A boxed future rather than `async fn` keeps the trait usable as
/// `Arc<dyn Alarm>`.)
pub trait Alarm: Send + Sync {
    /// Raises the alarm for `alarmed.run` of `alarmed.job`.
    fn alarm<'a>(&'a self, alarmed: &'a AlarmedRun) -> AlarmFuture<'a>;
}

/// Writes each alarm as a warning to the admin's log.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogAlarm;

impl Alarm for LogAlarm {
    fn alarm<'a>(&'a self, alarmed: &'a AlarmedRun) -> AlarmFuture<'a> {
        let AlarmedRun { job, run, .. } = alarmed;
        Box::pin(async move {
            tracing::warn!(
                job_id = job.id.0,
                job_name = %job.name,
                app = %alarmed.app_name,
                alarm_email = %job.alarm_email,
                log_id = run.id.0,
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
