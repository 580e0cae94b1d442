//! A workflow's own schedule, as pure rules: which schedules a workflow may have, its first
//! occurrence, and what an admin does with an occurrence it finds due (start one run, or, when
//! the occurrence was missed while every admin was down, what the misfire strategy says).
//!
//! Each occurrence starts at most one workflow run: the store writes the run keyed by
//! (workflow, occurrence) in the transaction that moves the workflow's next occurrence on
//! (`store::shared::workflow_schedule`). The rules here only decide *which* occurrence and
//! *what* next time; two admins evaluating them on the same row decide the same.

use chrono_tz::Tz;

use super::next_fire::{interval_seconds, next_fire_after};
use super::validate::{Refusal, check_params_size, resolve_time_zone, validate_schedule};
use super::{DstPolicy, MisfireStrategy, OverlapPolicy, ScheduleType, TriggerType};

/// The most bytes of a workflow's (or a workflow run's) params.
pub const MAX_WORKFLOW_PARAMS_BYTES: usize = 64 * 1024;

/// When a workflow starts on its own. `schedule_type` NONE: only through StartWorkflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowSchedule {
    pub schedule_type: ScheduleType,
    pub schedule_conf: String,
    /// IANA zone of the cron; empty = the admin's zone.
    pub time_zone: String,
    pub misfire: MisfireStrategy,
    /// The next occurrence to start, epoch ms; 0 = none (no schedule, or a cron with no
    /// future time).
    pub next_fire_ms: i64,
    /// What an occurrence does while an earlier scheduled run is still RUNNING (decided in
    /// the claim's transaction, `store::shared::workflow_schedule`).
    pub overlap: OverlapPolicy,
}

/// What an admin's won claim of a due occurrence wrote (`store.claim_workflow_occurrence`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OccurrenceClaim {
    /// A missed occurrence dropped (DO_NOTHING): the schedule moved on, no run.
    Dropped,
    /// Run `run_id` started; `cancelled` are the earlier scheduled runs it ended CANCELLED
    /// (overlap policy CANCEL_OTHER), whose node runs are still to be killed.
    Started { run_id: i64, cancelled: Vec<i64> },
    /// Run `run_id` was written SKIPPED (overlap policy SKIP, or BUFFER_ONE with one waiting
    /// already): run `running` was going.
    Skipped { run_id: i64, running: i64 },
    /// Run `run_id` was written WAITING (BUFFER_ONE, BUFFER_ALL) behind run `behind`.
    Waiting { run_id: i64, behind: i64 },
}

/// The reason a SKIPPED occurrence's run records.
pub fn skip_reason(running: i64) -> String {
    format!("scheduled run {running} of this workflow was still running (overlap policy SKIP)")
}

/// The reason an occurrence skipped because one waits already (BUFFER_ONE) records.
pub fn buffer_full_reason(waiting: i64) -> String {
    format!("scheduled run {waiting} of this workflow already waits (overlap policy BUFFER_ONE)")
}

/// The reason an earlier run cancelled by an occurrence records.
pub fn cancel_reason(run_id: i64, scheduled_at_ms: i64) -> String {
    format!(
        "cancelled by scheduled run {run_id} (occurrence at {scheduled_at_ms} ms; overlap \
         policy CANCEL_OTHER)"
    )
}

impl Default for WorkflowSchedule {
    fn default() -> Self {
        WorkflowSchedule {
            schedule_type: ScheduleType::None,
            schedule_conf: String::new(),
            time_zone: String::new(),
            misfire: MisfireStrategy::DoNothing,
            next_fire_ms: 0,
            overlap: OverlapPolicy::AllowAll,
        }
    }
}

impl WorkflowSchedule {
    /// Whether `other` fires at the same times (type, conf and zone alike): an edit that keeps
    /// them keeps the next occurrence instead of counting again from now.
    pub fn same_times(&self, other: &WorkflowSchedule) -> bool {
        self.schedule_type == other.schedule_type
            && self.schedule_conf == other.schedule_conf
            && self.time_zone == other.time_zone
    }

    /// The zone the schedule is read in.
    pub fn zone(&self, default_tz: Tz) -> Tz {
        resolve_time_zone(&self.time_zone, default_tz, "time_zone").unwrap_or(default_tz)
    }

    /// The next occurrence strictly after `after_ms`; 0 when there is none.
    pub fn next_after(&self, default_tz: Tz, after_ms: i64) -> i64 {
        let zone = self.zone(default_tz);
        let next = next_fire_after(
            self.schedule_type,
            &self.schedule_conf,
            zone,
            DstPolicy::default(),
            after_ms,
        );
        next.ok().flatten().unwrap_or(0)
    }
}

/// Checks a workflow's schedule and params; errors name the field (`workflow.schedule_conf:
/// invalid cron '…': …`, `workflow.time_zone: unknown time zone '…'`).
pub fn validate_workflow_schedule(
    schedule: &WorkflowSchedule,
    params: &str,
    default_tz: Tz,
) -> Result<(), Refusal> {
    if schedule.schedule_type == ScheduleType::FixDelay {
        return Err(Refusal::invalid(
            "workflow.schedule_type",
            "FIX_DELAY is not offered for workflows (a run has no single end to count the \
             delay from); use FIX_RATE or CRON",
        ));
    }
    validate_schedule(schedule.schedule_type, &schedule.schedule_conf, "workflow")?;
    resolve_time_zone(&schedule.time_zone, default_tz, "workflow.time_zone")?;
    check_params_size(params, MAX_WORKFLOW_PARAMS_BYTES, "workflow.params")
}

/// What an admin does with a workflow whose next occurrence (`schedule.next_fire_ms`) is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueOccurrence {
    /// The occurrence a run is started for (the run's key with the workflow), and why; `None`
    /// when the occurrence is dropped (missed, DO_NOTHING).
    pub start: Option<(i64, TriggerType)>,
    /// The workflow's next occurrence after this one (0: none).
    pub next_fire_ms: i64,
}

/// The decision for a due occurrence at `now_ms`, or `None` when nothing is due yet. An
/// occurrence found at most `threshold_ms` late (the admin's `misfire_threshold`, as for jobs;
/// the loop looks every second, so a live admin finds one within about a second) starts a CRON
/// run for it; the next
/// occurrence follows it (a later one already past is found on the next look). One found later
/// was missed: every missed occurrence up to now is passed over at once, and FIRE_ONCE_NOW
/// starts one MISFIRE run for them (keyed by the first missed one), DO_NOTHING none.
pub fn due_occurrence(
    schedule: &WorkflowSchedule,
    default_tz: Tz,
    threshold_ms: i64,
    now_ms: i64,
) -> Option<DueOccurrence> {
    let due = schedule.next_fire_ms;
    if schedule.schedule_type == ScheduleType::None || due <= 0 || due > now_ms {
        return None;
    }
    if now_ms - due <= threshold_ms {
        return Some(DueOccurrence {
            start: Some((due, TriggerType::Cron)),
            next_fire_ms: schedule.next_after(default_tz, due),
        });
    }
    let start = match schedule.misfire {
        MisfireStrategy::FireOnceNow => Some((due, TriggerType::Misfire)),
        MisfireStrategy::DoNothing => None,
    };
    Some(DueOccurrence {
        start,
        next_fire_ms: next_after_missed(schedule, default_tz, now_ms),
    })
}

/// The first occurrence after `now_ms` once `schedule.next_fire_ms` was missed. A FIX_RATE
/// schedule keeps its phase (the missed time plus whole intervals), as a job's does.
fn next_after_missed(schedule: &WorkflowSchedule, default_tz: Tz, now_ms: i64) -> i64 {
    if schedule.schedule_type == ScheduleType::FixRate
        && let Ok(seconds) = interval_seconds(&schedule.schedule_conf)
    {
        let interval = seconds.saturating_mul(1000);
        let missed = (now_ms - schedule.next_fire_ms) / interval + 1;
        return (schedule.next_fire_ms).saturating_add(missed.saturating_mul(interval));
    }
    schedule.next_after(default_tz, now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000; // a whole second

    fn every(seconds: &str, misfire: MisfireStrategy, next_fire_ms: i64) -> WorkflowSchedule {
        WorkflowSchedule {
            schedule_type: ScheduleType::FixRate,
            schedule_conf: seconds.to_string(),
            time_zone: String::new(),
            misfire,
            next_fire_ms,
            overlap: OverlapPolicy::AllowAll,
        }
    }

    #[test]
    fn an_occurrence_found_in_time_starts_one_run_and_the_next_follows_it() {
        let schedule = every("2", MisfireStrategy::DoNothing, T0);
        assert_eq!(
            due_occurrence(&schedule, chrono_tz::UTC, 5_000, T0 - 1),
            None
        );
        let due = due_occurrence(&schedule, chrono_tz::UTC, 5_000, T0 + 300).expect("due");
        assert_eq!(due.start, Some((T0, TriggerType::Cron)));
        assert_eq!(due.next_fire_ms, T0 + 2_000);
    }

    #[test]
    fn a_missed_occurrence_follows_the_misfire_strategy() {
        let late = T0 + 60_500;
        let dropped = every("2", MisfireStrategy::DoNothing, T0);
        let due = due_occurrence(&dropped, chrono_tz::UTC, 5_000, late).expect("due");
        assert_eq!(due.start, None);
        assert_eq!(due.next_fire_ms, T0 + 62_000, "the next one after now");
        let once = every("2", MisfireStrategy::FireOnceNow, T0);
        let due = due_occurrence(&once, chrono_tz::UTC, 5_000, late).expect("due");
        assert_eq!(due.start, Some((T0, TriggerType::Misfire)));
        assert_eq!(due.next_fire_ms, T0 + 62_000);
    }

    #[test]
    fn bad_schedules_are_refused_naming_the_field() {
        let refuse = |schedule: &WorkflowSchedule| {
            validate_workflow_schedule(schedule, "", chrono_tz::UTC)
                .expect_err("refused")
                .to_string()
        };
        let mut cron = every("x", MisfireStrategy::DoNothing, 0);
        cron.schedule_type = ScheduleType::Cron;
        assert!(
            refuse(&cron).starts_with("workflow.schedule_conf: invalid cron 'x'"),
            "{}",
            refuse(&cron)
        );
        let mut zone = every("2", MisfireStrategy::DoNothing, 0);
        zone.time_zone = "Mars/Base".to_string();
        assert_eq!(
            refuse(&zone),
            "workflow.time_zone: unknown time zone 'Mars/Base'"
        );
        let mut delay = every("2", MisfireStrategy::DoNothing, 0);
        delay.schedule_type = ScheduleType::FixDelay;
        assert!(refuse(&delay).starts_with("workflow.schedule_type: FIX_DELAY"));
    }
}
