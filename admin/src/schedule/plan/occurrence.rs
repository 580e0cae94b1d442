//! The row of one occurrence of a job's schedule and the fire after it: shared by the scan's
//! plan and its catch-up branch (a file below both, so neither imports the other).

use std::sync::Arc;

use chrono_tz::Tz;

use crate::model::jitter::dispatch_time;
use crate::model::next_fire::{AWAITING_COMPLETION_MS, interval_seconds, next_fire_after};
use crate::model::{CalendarBook, Job, NewRun, RunStatus, ScheduleType, TriggerType};

/// Fixed inputs of one scan.
#[derive(Debug, Clone)]
pub struct ScanParams {
    pub now_ms: i64,
    pub window_ms: i64,
    pub misfire_threshold_ms: i64,
    pub default_tz: Tz,
    /// The node (and its epoch) the fires' rows belong to.
    pub node_id: String,
    pub epoch: i64,
    /// Every calendar, compiled (the scheduler's cache, refreshed when one changes).
    pub calendars: Arc<CalendarBook>,
}

/// The next fire after a fire at `fired_at_ms` found at `now_ms` (`ran`: whether that fire
/// runs, false for a skipped misfire): see the module doc for each schedule type.
pub(super) fn next_after_fire(
    job: &Job,
    tz: Tz,
    fired_at_ms: i64,
    ran: bool,
    now_ms: i64,
) -> Result<Option<i64>, String> {
    let from_ms = fired_at_ms.max(now_ms);
    match job.schedule_type {
        ScheduleType::FixDelay if ran => Ok(Some(AWAITING_COMPLETION_MS)),
        ScheduleType::FixRate => {
            let period_ms = interval_seconds(&job.schedule_conf)? * 1000;
            let periods = (from_ms - fired_at_ms).div_euclid(period_ms) + 1;
            Ok(Some(fired_at_ms + periods * period_ms))
        }
        _ => next_fire_after(
            job.schedule_type,
            &job.schedule_conf,
            tz,
            job.policy.dst,
            from_ms,
        ),
    }
}

/// The row of one occurrence of the schedule (a fire, or a skipped one with its reason).
pub(super) fn new_run(
    job: &Job,
    params: &ScanParams,
    scheduled_at_ms: i64,
    trigger_type: TriggerType,
    status: RunStatus,
    trigger_msg: &str,
) -> NewRun {
    NewRun {
        job_id: job.id,
        group_id: job.group_id,
        fire_key: Some(NewRun::fire_key(job.id, scheduled_at_ms, 0, 0)),
        status,
        trigger_type,
        scheduled_at_ms,
        handler: job.handler.clone(),
        params: job.params.clone(),
        shard_index: 0,
        shard_total: 1,
        attempt: 0,
        trigger_msg: trigger_msg.to_string(),
        owner_node: params.node_id.clone(),
        epoch: params.epoch,
        dispatch_at_ms: jittered_dispatch(job, scheduled_at_ms, trigger_type, status),
        trace_id: String::new(),
    }
}

/// When a fire of the schedule held back by its job's jitter is to be sent (its row's
/// `dispatch_at_ms`); 0 (send at its time, through the ring) when it has no jitter.
fn jittered_dispatch(
    job: &Job,
    scheduled_at_ms: i64,
    trigger_type: TriggerType,
    status: RunStatus,
) -> i64 {
    let max_ms = job.policy.jitter_max_ms;
    if status != RunStatus::Pending || max_ms <= 0 {
        return 0;
    }
    let at = dispatch_time(job.id, trigger_type, 0, scheduled_at_ms, max_ms);
    // A zero delay goes through the ring like an unjittered fire.
    if at > scheduled_at_ms { at } else { 0 }
}
