//! Pure scheduling decisions: a job's next fire time, and what one scan does with a due job.
//!
//! For each job read by the scan (`trigger_next_ms <= now + window`):
//! - **A, misfire** (`now > next + misfire_threshold`): DO_NOTHING records a SKIPPED row,
//!   FIRE_ONCE_NOW one MISFIRE run; the next time is computed from *now*.
//! - **B, due** (`now >= next`): one run to dispatch at once; next from *now*.
//! - **C, soon** (`next` inside the window): a run for the ring; next from the *scheduled*
//!   time, so the phase never drifts.
//!
//! After A or B, every further fire still inside the window is planned too (C), so one scan
//! covers the whole pre-read window and nothing waits for the next scan.

use chrono_tz::Tz;

use super::cron::CronExpr;
use crate::model::{Job, JobStatus, MisfireStrategy, NewRun, RunStatus, ScheduleType, TriggerType};
use crate::store::JobScheduleUpdate;

/// Most fires one job gets in one scan (a 1 s job has at most `window` of them).
const MAX_FIRES_PER_JOB: usize = 128;

/// Fixed inputs of one scan.
#[derive(Debug, Clone)]
pub struct ScanParams {
    pub now_ms: i64,
    pub window_ms: i64,
    pub misfire_threshold_ms: i64,
    pub default_tz: Tz,
    pub node_id: String,
    pub epoch: i64,
}

/// What the scan does with one job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPlan {
    pub runs: Vec<NewRun>,
    pub update: JobScheduleUpdate,
}

/// Next fire strictly after `from_ms`: cron in `time_zone`, or FIX_RATE seconds rounded up to a
/// whole second. None for NONE / FIX_DELAY schedules or a cron with no future fire.
pub fn next_fire_after(
    schedule_type: ScheduleType,
    schedule_conf: &str,
    time_zone: Tz,
    from_ms: i64,
) -> Result<Option<i64>, String> {
    match schedule_type {
        ScheduleType::Cron => {
            let cron = CronExpr::parse(schedule_conf)
                .map_err(|error| format!("invalid cron '{schedule_conf}': {error}"))?;
            Ok(cron.next_after(from_ms, time_zone))
        }
        ScheduleType::FixRate => {
            let seconds = fix_rate_seconds(schedule_conf)?;
            Ok(Some(ceil_to_second(from_ms + seconds * 1000)))
        }
        ScheduleType::None | ScheduleType::FixDelay => Ok(None),
    }
}

/// Parses a FIX_RATE period: whole seconds, at least 1.
pub fn fix_rate_seconds(schedule_conf: &str) -> Result<i64, String> {
    match schedule_conf.trim().parse::<i64>() {
        Ok(seconds) if seconds >= 1 => Ok(seconds),
        _ => Err(format!(
            "fix rate must be a whole number of seconds >= 1, got '{schedule_conf}'"
        )),
    }
}

fn ceil_to_second(ms: i64) -> i64 {
    let rem = ms.rem_euclid(1000);
    if rem == 0 { ms } else { ms - rem + 1000 }
}

/// The zone a job's cron is evaluated in.
pub fn job_time_zone(job: &Job, default_tz: Tz) -> Tz {
    if job.time_zone.is_empty() {
        default_tz
    } else {
        super::cron::parse_time_zone(&job.time_zone).unwrap_or(default_tz)
    }
}

/// Decides one job's fires for this scan and its next scheduling state.
pub fn plan_job(job: &Job, params: &ScanParams) -> JobPlan {
    let tz = job_time_zone(job, params.default_tz);
    let next_after =
        |from_ms: i64| next_fire_after(job.schedule_type, &job.schedule_conf, tz, from_ms);
    let now = params.now_ms;
    let window_end = now + params.window_ms;
    let mut runs = Vec::new();
    let mut last = job.trigger_last_ms;
    let scheduled = job.trigger_next_ms;

    let mut next = if now > scheduled + params.misfire_threshold_ms {
        runs.push(misfire_run(job, params, scheduled));
        last = scheduled;
        next_after(now)
    } else if now >= scheduled {
        runs.push(new_run(
            job,
            params,
            scheduled,
            TriggerType::Cron,
            RunStatus::Pending,
            "",
        ));
        last = scheduled;
        next_after(now)
    } else {
        Ok(Some(scheduled))
    };

    while let Ok(Some(at)) = next {
        if at > window_end || runs.len() >= MAX_FIRES_PER_JOB {
            break;
        }
        runs.push(new_run(
            job,
            params,
            at,
            TriggerType::Cron,
            RunStatus::Pending,
            "",
        ));
        last = at;
        next = next_after(at);
    }

    let update = match next {
        Ok(Some(at)) => JobScheduleUpdate {
            job_id: job.id,
            trigger_last_ms: last,
            trigger_next_ms: at,
            status: JobStatus::Running,
        },
        Ok(None) | Err(_) => {
            // No future fire (or a schedule that no longer parses): stop the job, as XXL-JOB does.
            tracing::warn!(job_id = job.id, schedule = %job.schedule_conf, error = ?next.err(),
                "job has no next fire time; stopping it");
            JobScheduleUpdate {
                job_id: job.id,
                trigger_last_ms: last,
                trigger_next_ms: 0,
                status: JobStatus::Stopped,
            }
        }
    };
    JobPlan { runs, update }
}

fn misfire_run(job: &Job, params: &ScanParams, scheduled: i64) -> NewRun {
    let late_ms = params.now_ms - scheduled;
    match job.misfire_strategy {
        MisfireStrategy::DoNothing => {
            let reason = format!(
                "misfire: fire at {scheduled} found {late_ms} ms late; DO_NOTHING skips it \
                 (and any later fire before now)"
            );
            new_run(
                job,
                params,
                scheduled,
                TriggerType::Cron,
                RunStatus::Skipped,
                &reason,
            )
        }
        MisfireStrategy::FireOnceNow => new_run(
            job,
            params,
            scheduled,
            TriggerType::Misfire,
            RunStatus::Pending,
            "",
        ),
    }
}

fn new_run(
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
        dispatch_at_ms: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BlockStrategy, GlueType, RetryBackoff, RouteStrategy};

    const T0: i64 = 1_800_000_000_000; // a whole second

    fn job(schedule_type: ScheduleType, conf: &str, next: i64) -> Job {
        Job {
            id: 7,
            group_id: 1,
            name: "j".into(),
            author: String::new(),
            alarm_email: String::new(),
            alarm_on_every_failure: false,
            schedule_type,
            schedule_conf: conf.into(),
            time_zone: String::new(),
            misfire_strategy: MisfireStrategy::DoNothing,
            route_strategy: RouteStrategy::First,
            handler: "h".into(),
            params: "p".into(),
            block_strategy: BlockStrategy::SerialExecution,
            timeout_ms: 0,
            fail_retry_count: 0,
            retry_backoff: RetryBackoff::default(),
            glue_type: GlueType::Bean,
            glue_source: String::new(),
            glue_remark: String::new(),
            glue_updated_ms: 0,
            child_job_ids: vec![],
            status: JobStatus::Running,
            trigger_last_ms: 0,
            trigger_next_ms: next,
            created_ms: 0,
            updated_ms: 0,
        }
    }

    fn params(now_ms: i64) -> ScanParams {
        ScanParams {
            now_ms,
            window_ms: 5000,
            misfire_threshold_ms: 5000,
            default_tz: chrono_tz::UTC,
            node_id: "n".into(),
            epoch: 3,
        }
    }

    fn times(plan: &JobPlan) -> Vec<i64> {
        plan.runs
            .iter()
            .map(|run| run.scheduled_at_ms - T0)
            .collect()
    }

    #[test]
    fn branch_c_plans_every_fire_in_the_window_from_the_scheduled_time() {
        let plan = plan_job(
            &job(ScheduleType::Cron, "*/1 * * * * ?", T0 + 1000),
            &params(T0 + 200),
        );
        assert_eq!(times(&plan), vec![1000, 2000, 3000, 4000, 5000]);
        assert_eq!(plan.update.trigger_next_ms, T0 + 6000);
        assert_eq!(plan.update.trigger_last_ms, T0 + 5000);
        assert!(plan.runs.iter().all(|run| run.status == RunStatus::Pending));
        assert_eq!(
            plan.runs[0].fire_key.as_deref(),
            Some(&*format!("7:{}:0:0", T0 + 1000))
        );
        assert_eq!(plan.runs[0].epoch, 3);
    }

    #[test]
    fn branch_b_fires_the_due_time_and_continues_from_now() {
        // FIX_RATE keeps the phase from now: 3.5 s later rounds up to a whole second.
        let plan = plan_job(&job(ScheduleType::FixRate, "10", T0), &params(T0 + 1500));
        assert_eq!(times(&plan), vec![0]);
        assert_eq!(plan.update.trigger_next_ms, T0 + 12_000);
        assert_eq!(plan.runs[0].trigger_type, TriggerType::Cron);
    }

    #[test]
    fn branch_a_do_nothing_records_a_skipped_fire_and_restarts_from_now() {
        let plan = plan_job(
            &job(ScheduleType::Cron, "0 * * * * ?", T0),
            &params(T0 + 70_300),
        );
        assert_eq!(plan.runs.len(), 1);
        assert_eq!(plan.runs[0].status, RunStatus::Skipped);
        assert!(plan.runs[0].trigger_msg.contains("70300 ms late"));
        assert_eq!(plan.update.trigger_next_ms, T0 + 120_000);
    }

    #[test]
    fn branch_a_fire_once_now_dispatches_one_misfire_run() {
        let mut late = job(ScheduleType::FixRate, "60", T0);
        late.misfire_strategy = MisfireStrategy::FireOnceNow;
        let plan = plan_job(&late, &params(T0 + 600_000));
        assert_eq!(plan.runs.len(), 1);
        assert_eq!(plan.runs[0].trigger_type, TriggerType::Misfire);
        assert_eq!(plan.runs[0].status, RunStatus::Pending);
        assert_eq!(plan.update.trigger_next_ms, T0 + 660_000);
    }

    #[test]
    fn a_cron_without_future_fires_stops_the_job() {
        let plan = plan_job(
            &job(ScheduleType::Cron, "0 0 0 1 1 ? 2026", T0),
            &params(T0 + 100),
        );
        assert_eq!(times(&plan), vec![0]);
        assert_eq!(plan.update.status, JobStatus::Stopped);
        assert_eq!(plan.update.trigger_next_ms, 0);
    }

    #[test]
    fn fix_rate_rounds_up_to_whole_seconds_and_rejects_bad_periods() {
        assert_eq!(
            next_fire_after(ScheduleType::FixRate, "5", chrono_tz::UTC, T0 + 1),
            Ok(Some(T0 + 6000))
        );
        assert_eq!(
            next_fire_after(ScheduleType::FixRate, "5", chrono_tz::UTC, T0),
            Ok(Some(T0 + 5000))
        );
        assert!(next_fire_after(ScheduleType::FixRate, "0", chrono_tz::UTC, T0).is_err());
        assert_eq!(
            next_fire_after(ScheduleType::None, "", chrono_tz::UTC, T0),
            Ok(None)
        );
    }
}
