//! The job's calendar over a planned scan: fires it keeps out become SKIPPED rows naming it.

use chrono_tz::Tz;

use super::occurrence::{ScanParams, next_after_fire};
use crate::model::next_fire::AWAITING_COMPLETION_MS;
use crate::model::{Job, NewRun, RunStatus, ScheduleType};

/// Turns each planned fire (PENDING) of `job` that its calendar keeps out into a SKIPPED row
/// whose message names the calendar and the rule. A job without a calendar, or naming one the
/// scan has not loaded (it cannot be deleted while named, so only a hand-edited database gets
/// there), keeps every fire. Returns whether a fire was skipped.
pub(super) fn skip_kept_out(job: &Job, params: &ScanParams, runs: &mut [NewRun]) -> bool {
    if job.calendar.is_empty() {
        return false;
    }
    let Some(calendar) = params.calendars.get(&job.calendar) else {
        tracing::warn!(job_id = job.id.0, calendar = %job.calendar,
            "job names a calendar that is not loaded; its fires run");
        return false;
    };
    let mut skipped = false;
    for run in runs
        .iter_mut()
        .filter(|run| run.status == RunStatus::Pending)
    {
        if let Some(reason) = calendar.skip_reason(job.calendar_mode, run.scheduled_at_ms) {
            run.status = RunStatus::Skipped;
            run.trigger_msg = reason;
            run.dispatch_at_ms = 0;
            skipped = true;
        }
    }
    skipped
}

/// A FIX_DELAY job waits for its fire's completion before its next one; when the calendar
/// skipped that fire there is no completion to wait for, so the delay restarts from now (as a
/// skipped misfire does).
pub(super) fn next_after_skipped_fix_delay(
    job: &Job,
    tz: Tz,
    params: &ScanParams,
    runs: &[NewRun],
    next: i64,
) -> Option<i64> {
    let waits = job.schedule_type == ScheduleType::FixDelay && next == AWAITING_COMPLETION_MS;
    if !waits || runs.iter().any(|run| run.status == RunStatus::Pending) {
        return None;
    }
    let last = runs.last()?.scheduled_at_ms;
    next_after_fire(job, tz, last, false, params.now_ms)
        .ok()
        .flatten()
}
