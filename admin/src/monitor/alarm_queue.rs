//! The alarm queue: alarms are delivered by their own task, never by the follow-up loop, so a
//! hung SMTP server or webhook holds up no retry, child job or next fire.
//!
//! ```text
//! follow-up ─▶ AlarmQueue::reserve ─┬─ slot ─▶ write_followup(alarm_status 4 "queued") ─▶ send
//!                                   └─ full ─▶ write_followup(alarm_status 3 "not sent: …"),
//!                                              xjob_alarms_dropped_total{reason}, a warning
//! delivery task ─▶ up to CONCURRENT_DELIVERIES at once, each bounded by the config's deadline
//!   ─▶ Alarm::alarm ─▶ store.record_alarm_delivery (4 → 2 sent / 3 failed)
//! ```
//! The slot is reserved before the follow-up is written and used only once it is committed, so
//! the delivery's record never races ahead of the "queued" one. An alarm still queued when its
//! admin stops stays recorded as queued: it is not sent.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::alarm::{Alarm, AlarmedRun};
use crate::context::AdminContext;
use crate::model::{AlarmStatus, Job, LogId, RunLog, job_time_zone};

/// Alarms waiting for delivery, at most; one more is dropped (counted and logged).
pub const QUEUE_CAPACITY: usize = 1000;
/// Alarms delivered at once: a hung channel holds this many slots, the rest keep flowing.
const CONCURRENT_DELIVERIES: usize = 4;

/// Why an alarm was not queued (the `reason` label of `xjob_alarms_dropped_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// `QUEUE_CAPACITY` alarms are waiting already.
    QueueFull,
    /// The delivery task has stopped (the admin is shutting down).
    Stopped,
}

impl DropReason {
    pub const ALL: [DropReason; 2] = [DropReason::QueueFull, DropReason::Stopped];

    pub fn label(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::Stopped => "stopped",
        }
    }

    /// The run's `alarm_delivery` when its alarm was dropped.
    fn delivery(self) -> String {
        match self {
            DropReason::QueueFull => format!(
                "not sent: the alarm queue is full ({QUEUE_CAPACITY} alarms waiting for delivery)"
            ),
            DropReason::Stopped => "not sent: the admin is shutting down".to_string(),
        }
    }
}

/// The follow-up's end of the queue.
#[derive(Clone)]
pub struct AlarmQueue {
    sender: mpsc::Sender<(Job, RunLog)>,
}

/// A reserved place in the queue, or why there is none.
pub enum Reservation<'a> {
    Slot(mpsc::Permit<'a, (Job, RunLog)>),
    Dropped(DropReason),
}

impl Reservation<'_> {
    /// What the follow-up records before the alarm is delivered.
    pub fn recorded(&self) -> (AlarmStatus, String) {
        match self {
            Reservation::Slot(_) => (AlarmStatus::Queued, "queued for delivery".to_string()),
            Reservation::Dropped(reason) => (AlarmStatus::Failed, reason.delivery()),
        }
    }

    /// Hands the alarm to the delivery task (once the follow-up is written).
    pub fn send(self, job: Job, run: RunLog) {
        if let Reservation::Slot(permit) = self {
            permit.send((job, run));
            crate::metrics::alarm_queue_depth().inc();
        }
    }
}

impl AlarmQueue {
    /// A queue holding `capacity` alarms and the receiving end its delivery task reads.
    pub fn new(capacity: usize) -> (AlarmQueue, AlarmDeliveries) {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        (AlarmQueue { sender }, AlarmDeliveries { receiver })
    }

    /// Reserves a place for the alarm of `run`; a full or closed queue drops it, counted in
    /// `xjob_alarms_dropped_total` and logged with the reason.
    pub fn reserve(&self, run: &RunLog) -> Reservation<'_> {
        let reason = match self.sender.try_reserve() {
            Ok(permit) => return Reservation::Slot(permit),
            Err(mpsc::error::TrySendError::Full(())) => DropReason::QueueFull,
            Err(mpsc::error::TrySendError::Closed(())) => DropReason::Stopped,
        };
        crate::metrics::alarms_dropped(reason.label()).inc();
        crate::metrics::alarms("failed").inc();
        tracing::warn!(
            log_id = run.id.0,
            job_id = run.job_id.0,
            reason = reason.label(),
            "alarm dropped, not sent: {}",
            reason.delivery()
        );
        Reservation::Dropped(reason)
    }
}

/// The delivery task's end of the queue.
pub struct AlarmDeliveries {
    receiver: mpsc::Receiver<(Job, RunLog)>,
}

impl AlarmDeliveries {
    /// Delivers queued alarms until `cancel`, a few at once.
    pub async fn run(
        mut self,
        ctx: Arc<AdminContext>,
        alarm: Arc<dyn Alarm>,
        cancel: CancellationToken,
    ) {
        let deadline = ctx.config.alarm.delivery_deadline();
        let mut in_flight = JoinSet::new();
        loop {
            if in_flight.len() >= CONCURRENT_DELIVERIES {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = in_flight.join_next() => {}
                }
                continue;
            }
            let next = tokio::select! {
                _ = cancel.cancelled() => break,
                Some(_) = in_flight.join_next() => continue,
                next = self.receiver.recv() => next,
            };
            let Some((job, run)) = next else { break };
            crate::metrics::alarm_queue_depth().dec();
            let (ctx, alarm) = (Arc::clone(&ctx), Arc::clone(&alarm));
            in_flight.spawn(async move { deliver(&ctx, alarm.as_ref(), job, run, deadline).await });
        }
        // Closing the queue makes a follow-up that comes later record its alarm as dropped.
        self.receiver.close();
        in_flight.abort_all();
    }
}

/// Delivers one alarm within `deadline` and records how it went on the run.
async fn deliver(ctx: &AdminContext, alarm: &dyn Alarm, job: Job, run: RunLog, deadline: Duration) {
    let alarmed = alarmed_run(ctx, job, run).await;
    let outcome = match tokio::time::timeout(deadline, alarm.alarm(&alarmed)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(format!("no delivery within {deadline:?}; given up")),
    };
    let (status, delivery) = match outcome {
        Ok(delivery) => {
            crate::metrics::alarms("sent").inc();
            (AlarmStatus::Sent, delivery)
        }
        Err(error) if error.starts_with(super::alarm::RATE_LIMITED) => {
            crate::metrics::alarms("rate_limited").inc();
            (AlarmStatus::Failed, error)
        }
        Err(error) => {
            crate::metrics::alarms("failed").inc();
            tracing::warn!(log_id = alarmed.run.id.0, job_id = alarmed.job.id.0, %error,
                "sending alarm failed");
            (AlarmStatus::Failed, error)
        }
    };
    record(ctx, alarmed.run.id, status, &bounded(delivery)).await;
}

/// The job and run with their group's names and the job's zone; a group gone meanwhile (or a
/// database error) leaves the names empty rather than holding the alarm back.
async fn alarmed_run(ctx: &AdminContext, job: Job, run: RunLog) -> AlarmedRun {
    let group = ctx.store.get_group(job.group_id).await.ok().flatten();
    let time_zone = job_time_zone(&job, ctx.config.default_time_zone());
    AlarmedRun {
        app_name: group
            .as_ref()
            .map(|g| g.app_name.clone())
            .unwrap_or_default(),
        group_title: group.map(|g| g.title).unwrap_or_default(),
        time_zone,
        job,
        run,
    }
}

/// Writes the outcome, retrying a failed write a few times: the alarm itself went out (or
/// not) already, only its record is at stake.
async fn record(ctx: &AdminContext, log_id: LogId, status: AlarmStatus, delivery: &str) {
    for attempt in 1..=3 {
        match ctx
            .store
            .record_alarm_delivery(log_id, status, delivery)
            .await
        {
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(log_id = log_id.0, attempt, %error, "recording an alarm's delivery failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// The `alarm_delivery` column holds at most 2048 characters (MySQL's VARCHAR).
fn bounded(delivery: String) -> String {
    const MAX_DELIVERY_CHARS: usize = 2000;
    if delivery.chars().count() <= MAX_DELIVERY_CHARS {
        delivery
    } else {
        delivery.chars().take(MAX_DELIVERY_CHARS).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GroupId, JobId};
    use crate::model::{RunStatus, TriggerType};

    fn run(id: i64) -> RunLog {
        RunLog {
            id: LogId(id),
            job_id: JobId(7),
            group_id: GroupId(1),
            fire_key: None,
            status: RunStatus::Failed,
            trigger_type: TriggerType::Manual,
            scheduled_at_ms: 0,
            trigger_time_ms: 0,
            trigger_code: 0,
            trigger_msg: String::new(),
            handle_time_ms: 0,
            handle_code: 500,
            handle_msg: String::new(),
            executor_address: String::new(),
            handler: String::new(),
            params: String::new(),
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            trace_id: String::new(),
            owner_node: String::new(),
            epoch: 0,
            dispatch_at_ms: 0,
            alarm_delivery: String::new(),
        }
    }

    fn dropped(reason: DropReason) -> f64 {
        crate::metrics::alarms_dropped(reason.label()).get() as f64
    }

    #[test]
    fn every_drop_reason_is_a_series_from_the_start() {
        let labels = DropReason::ALL.map(DropReason::label);
        assert_eq!(labels, crate::metrics::ALARM_DROP_REASONS);
    }

    #[test]
    fn a_full_queue_drops_the_alarm_with_a_counted_reason() {
        let (queue, deliveries) = AlarmQueue::new(2);
        let before = dropped(DropReason::QueueFull);
        let held: Vec<_> = (1..=2).map(|id| queue.reserve(&run(id))).collect();
        assert!(held.iter().all(|r| matches!(r, Reservation::Slot(_))));
        let third = queue.reserve(&run(3));
        assert!(matches!(third, Reservation::Dropped(DropReason::QueueFull)));
        let (status, delivery) = third.recorded();
        assert_eq!(status, AlarmStatus::Failed);
        assert!(delivery.contains("alarm queue is full"), "{delivery}");
        // Other tests in this process may drop too; this one dropped at least its own.
        assert!(dropped(DropReason::QueueFull) >= before + 1.0);
        drop(held);
        assert!(matches!(queue.reserve(&run(4)), Reservation::Slot(_)));
        drop(deliveries);
        assert!(matches!(
            queue.reserve(&run(5)),
            Reservation::Dropped(DropReason::Stopped)
        ));
    }
}
