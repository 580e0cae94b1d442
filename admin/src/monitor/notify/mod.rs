//! Alarm delivery to people: e-mail to the job's `alarm_email` list and a webhook POST, each
//! retried with a doubling pause, behind a per-job rate limit; what happened is returned as the
//! run's `alarm_delivery` text.
//!
//! ```text
//! alarm queue's delivery task ─▶ Notifier::alarm(alarmed run)
//!   no channel for this job (no alarm_email or SMTP server, no webhook) ─▶ Ok("log: …")
//!   rate limit (per job, sliding window) ─▶ held back? ─▶ Err("rate limited: …")
//!   e-mail (job has alarm_email, smtp.host set) ─▶ attempts × (send, pause·2ⁿ)
//!   webhook (webhook_url set)                   ─▶ attempts × (POST, pause·2ⁿ)
//!   ─▶ Ok(lines) when every channel delivered, else Err(lines)
//! ```
//! The follow-up only queues the alarm (monitor::alarm_queue); a hung SMTP server or webhook
//! never holds up retries, child jobs or next fires.

mod email;
mod rate;
mod webhook;

use std::future::Future;
use std::time::Duration;

use serde::Serialize;

use chrono_tz::Tz;

use super::alarm::{Alarm, AlarmFuture, AlarmedRun, LogAlarm};
use crate::config::alarm::AlarmConfig;
use crate::model::SharedClock;
pub use email::Mailer;
pub use rate::RateLimit;
pub use webhook::Webhook;

/// What an alarm says, whatever the channel (the webhook's JSON object, field by field).
#[derive(Debug, Clone, Serialize)]
pub struct AlarmMessage {
    pub job_id: i64,
    pub job_name: String,
    /// The app of the job's group, and the group's title.
    pub app_name: String,
    pub group_title: String,
    pub log_id: i64,
    pub status: String,
    /// The executor's message, else the dispatch's (why it never ran).
    pub message: String,
    pub attempt: i32,
    pub trace_id: String,
    /// `link_base` + log id; empty without `link_base`.
    pub link: String,
    pub executor_address: String,
    pub scheduled_at_ms: i64,
    /// When the run was due (scheduled, else triggered), in the job's time zone, e.g.
    /// `2026-03-01 02:00:00 CET (Europe/Berlin)`.
    pub scheduled_at: String,
}

/// Longest message carried in an alarm: the log row has the rest.
const MAX_MESSAGE_CHARS: usize = 2000;

impl AlarmMessage {
    pub fn of(alarmed: &AlarmedRun, link_base: &str) -> AlarmMessage {
        let AlarmedRun { job, run, .. } = alarmed;
        let due_ms = if run.scheduled_at_ms > 0 {
            run.scheduled_at_ms
        } else {
            run.trigger_time_ms
        };
        let message = if run.handle_msg.is_empty() {
            &run.trigger_msg
        } else {
            &run.handle_msg
        };
        AlarmMessage {
            job_id: job.id.0,
            job_name: job.name.clone(),
            app_name: alarmed.app_name.clone(),
            group_title: alarmed.group_title.clone(),
            log_id: run.id.0,
            status: run.status.to_string(),
            message: message.chars().take(MAX_MESSAGE_CHARS).collect(),
            attempt: run.attempt,
            trace_id: run.trace_id.clone(),
            link: if link_base.is_empty() {
                String::new()
            } else {
                format!("{link_base}{}", run.id)
            },
            executor_address: run.executor_address.clone(),
            scheduled_at_ms: run.scheduled_at_ms,
            scheduled_at: in_zone(due_ms, alarmed.time_zone),
        }
    }

    /// The e-mail subject.
    pub fn subject(&self) -> String {
        format!(
            "[xjob] {}: job {} '{}' run {} {}",
            self.app_name, self.job_id, self.job_name, self.log_id, self.status
        )
    }

    /// One line for chat tools.
    pub fn one_line(&self) -> String {
        let mut line = format!(
            "xjob: {} job {} '{}' run {} {} at {} (attempt {}): {}",
            self.app_name,
            self.job_id,
            self.job_name,
            self.log_id,
            self.status,
            self.scheduled_at,
            self.attempt,
            self.message.chars().take(300).collect::<String>()
        );
        if !self.link.is_empty() {
            line.push_str(&format!(" {}", self.link));
        }
        line
    }

    /// The e-mail body.
    pub fn text(&self) -> String {
        format!(
            "Job {} '{}' of {} ({}) failed.\n\nRun (log id): {}\nStatus: {}\nAttempt: {}\n\
             Executor: {}\nScheduled at: {}\nTrace id: {}\nLink: {}\n\n{}\n",
            self.job_id,
            self.job_name,
            self.app_name,
            self.group_title,
            self.log_id,
            self.status,
            self.attempt,
            self.executor_address,
            self.scheduled_at,
            self.trace_id,
            self.link,
            self.message
        )
    }
}

/// `ms` as a wall-clock time in `zone`, with the zone's abbreviation and name.
fn in_zone(ms: i64, zone: Tz) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(at) => format!(
            "{} ({})",
            at.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S %Z"),
            zone.name()
        ),
        None => format!("{ms} ms"),
    }
}

/// The alarm hook the admin runs with: e-mail and webhook delivery (and the log line).
pub struct Notifier {
    config: AlarmConfig,
    mailer: Option<Mailer>,
    webhook: Option<Webhook>,
    limit: RateLimit,
    clock: SharedClock,
}

impl Notifier {
    /// Builds the channels the config names; an unusable one is a start-up error.
    pub fn new(config: &AlarmConfig, clock: SharedClock) -> Result<Notifier, String> {
        let mailer = if config.smtp.host.is_empty() {
            None
        } else {
            Some(Mailer::new(&config.smtp, config.timeout)?)
        };
        let webhook = if config.webhook_url.is_empty() {
            None
        } else {
            Some(Webhook::new(
                &config.webhook_url,
                config.webhook_template,
                &config.webhook_ca_file,
            )?)
        };
        Ok(Notifier {
            limit: RateLimit::new(config.max_per_job, config.rate_window.as_millis() as i64),
            config: config.clone(),
            mailer,
            webhook,
            clock,
        })
    }

    async fn deliver(&self, alarmed: &AlarmedRun) -> Result<String, String> {
        // The log line stays: it is the record when every channel is down.
        let _ = LogAlarm.alarm(alarmed).await;
        let job = &alarmed.job;
        let mails = self.mailer.is_some() && !job.alarm_email.trim().is_empty();
        if !mails && self.webhook.is_none() {
            // Nothing leaves the admin, so nothing counts against the rate limit.
            return Ok(if job.alarm_email.trim().is_empty() {
                "log: no alarm_email on the job and no webhook configured".to_string()
            } else {
                "log: alarm_email not mailed, no SMTP server configured (alarm.smtp.host)"
                    .to_string()
            });
        }
        if !self.limit.allow(job.id.0, self.clock.now_ms()) {
            crate::metrics::alarms_rate_limited().inc();
            return Err(format!(
                "{}job {} raised more than {} alarms within {:?}; not sent",
                super::alarm::RATE_LIMITED,
                job.id,
                self.config.max_per_job,
                self.config.rate_window
            ));
        }
        let message = AlarmMessage::of(alarmed, &self.config.link_base);
        let mut lines = Vec::new();
        let mut all_sent = true;
        if let Some(mailer) = &self.mailer
            && mails
        {
            let outcome = self
                .with_retries("email", || mailer.send(&job.alarm_email, &message))
                .await
                .map(|count| format!("email: sent to {count} recipient(s)"));
            all_sent &= outcome.is_ok();
            lines.push(outcome.unwrap_or_else(|error| format!("email: {error}")));
        }
        if self.mailer.is_none() && !job.alarm_email.trim().is_empty() {
            lines.push("email: not sent, no SMTP server configured (alarm.smtp.host)".to_string());
        }
        if let Some(webhook) = &self.webhook {
            let body = webhook.body(&message);
            let outcome = self
                .with_retries("webhook", || webhook.post(body.clone()))
                .await
                .map(|status| format!("webhook: sent (HTTP {status})"));
            all_sent &= outcome.is_ok();
            lines.push(outcome.unwrap_or_else(|error| format!("webhook: {error}")));
        }
        let summary = lines.join("\n");
        if all_sent { Ok(summary) } else { Err(summary) }
    }

    /// Up to `attempts` tries of `send`, each bounded by `timeout`, pausing `retry_delay`
    /// (doubling) between them; the error says how many were made and the last failure.
    async fn with_retries<T, F, Fut>(&self, channel: &'static str, mut send: F) -> Result<T, String>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let attempts = self.config.attempts.max(1);
        let mut pause = self.config.retry_delay;
        let mut last_error = String::new();
        for attempt in 1..=attempts {
            match tokio::time::timeout(self.config.timeout, send()).await {
                Ok(Ok(value)) => {
                    crate::metrics::alarm_deliveries(channel, "sent").inc();
                    return Ok(value);
                }
                Ok(Err(error)) => last_error = error,
                Err(_) => last_error = format!("no answer within {:?}", self.config.timeout),
            }
            tracing::debug!(channel, attempt, error = %last_error, "alarm delivery failed");
            if attempt < attempts {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(60));
            }
        }
        crate::metrics::alarm_deliveries(channel, "failed").inc();
        Err(format!("failed after {attempts} attempt(s): {last_error}"))
    }
}

impl Alarm for Notifier {
    fn alarm<'a>(&'a self, alarmed: &'a AlarmedRun) -> AlarmFuture<'a> {
        Box::pin(self.deliver(alarmed))
    }
}
