//! Pure scheduling decisions: what one scan does with a due job (a job's next fire time by its
//! schedule type is `model::next_fire`).
//!
//! For each job read by the scan (`trigger_next_ms <= now + window`):
//! - **A, misfire** (`now > next + misfire_threshold`): DO_NOTHING records a SKIPPED row,
//!   FIRE_ONCE_NOW one MISFIRE run; the next time is the first one after *now*. Every later
//!   fire missed before now gets a SKIPPED row with the reason (the scan could not run: admin
//!   down, a full disk, a lost database), so no missed occurrence is silently absent.
//! - **B, due** (`now >= next`): one run to dispatch at once; the next time is the first one
//!   after *now*. Fires between the due one and now (a scan late by more than a period, after a
//!   database outage or a stall) are not run again: each gets a SKIPPED row saying the late fire
//!   covered it, so every scheduled occurrence keeps its row.
//! - **C, soon** (`next` inside the window): a run for the ring; next from the *scheduled*
//!   time, so the phase never drifts.
//!
//! After A or B, every further fire still inside the window is planned too (C), so one scan
//! covers the whole pre-read window and nothing waits for the next scan.
//!
//! Per schedule type, "the first time after now" means:
//! - `CRON`: the expression's next match after now, in the job's zone (DST rules in `cron.rs`).
//! - `FIX_RATE`: the next point of the job's own grid (`scheduled + k * period`), so a misfire,
//!   a late scan or an admin restart never shifts the phase (XXL-JOB re-anchors it to now).
//! - `FIX_DELAY`: a planned fire sets the next time to [`AWAITING_COMPLETION_MS`] while the job
//!   stays running: the scan never reads it again until the follow-up of the fire's final
//!   outcome (after its last retry) writes `finished + delay` (`monitor::followup`). So a
//!   FIX_DELAY job never overlaps itself. A skipped fire (DO_NOTHING) restarts from now.

mod calendar;
mod catch_up;
mod occurrence;

use std::sync::Arc;

use chrono_tz::Tz;

use crate::model::{
    Job, JobStatus, MisfireStrategy, NewRun, RunStatus, TriggerType, UnwrittenFire, job_time_zone,
};
use crate::store::JobScheduleUpdate;

pub use occurrence::ScanParams;
use occurrence::{new_run, next_after_fire};

/// Most fires one job gets in one scan (a 1 s job has at most `window` of them).
const MAX_FIRES_PER_JOB: usize = 128;

/// What the scan does with one job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPlan {
    /// Every row to write: the fires (PENDING) and the skipped occurrences, in time order.
    pub runs: Vec<NewRun>,
    pub update: JobScheduleUpdate,
}

impl JobPlan {
    /// The fire each row of the plan stands for, aligned with `runs`: a PENDING row is a fire
    /// of `job` to dispatch once written; a skipped occurrence is none, and neither is a fire
    /// its jitter holds back (the follow-up loop sends it at its `dispatch_at_ms`).
    pub fn fire_of_each_run(&self, job: &Arc<Job>) -> Vec<Option<UnwrittenFire>> {
        self.runs
            .iter()
            .map(|run| {
                (run.status == RunStatus::Pending && run.dispatch_at_ms == 0).then(|| {
                    UnwrittenFire::scheduled(Arc::clone(job), run.scheduled_at_ms, run.trigger_type)
                })
            })
            .collect()
    }
}

/// Decides one job's fires for this scan and its next scheduling state.
pub fn plan_job(job: &Job, params: &ScanParams) -> JobPlan {
    let tz = job_time_zone(job, params.default_tz);
    let now = params.now_ms;
    let window_end = now + params.window_ms;
    let mut runs = Vec::new();
    let mut last = job.trigger_last_ms;
    let scheduled = job.trigger_next_ms;

    let mut next =
        if now > scheduled + params.misfire_threshold_ms && job.policy.catch_up_window_ms > 0 {
            let (caught_up, next) = catch_up::plan(job, params, tz, scheduled);
            if let Some(latest) = caught_up.last() {
                last = last.max(latest.scheduled_at_ms);
            }
            runs.extend(caught_up);
            next
        } else if now > scheduled + params.misfire_threshold_ms {
            let run = misfire_run(job, params, scheduled);
            let ran = run.status == RunStatus::Pending;
            runs.push(run);
            last = scheduled;
            let next = next_after_fire(job, tz, scheduled, ran, now);
            // Every occurrence the misfire stands for keeps its own row, so none of the fires
            // missed while the admin could not write (down, a full disk, a lost database) is
            // silently absent.
            let late_ms = now - scheduled;
            let reason = format!(
                "misfire: not fired while the schedule could not run (found {late_ms} ms late); \
             the misfire rule applied to the fire at {scheduled} covers it"
            );
            runs.extend(covered_fires(job, params, tz, scheduled, &next, &reason));
            next
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
            let next = next_after_fire(job, tz, scheduled, true, now);
            let late_ms = now - scheduled;
            let reason = format!(
                "skipped: the fire at {scheduled} ran {late_ms} ms late and stands for this one"
            );
            runs.extend(covered_fires(job, params, tz, scheduled, &next, &reason));
            next
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
        next = next_after_fire(job, tz, at, true, now);
    }

    if calendar::skip_kept_out(job, params, &mut runs)
        && let Ok(Some(at)) = next
        && let Some(restart) = calendar::next_after_skipped_fix_delay(job, tz, params, &runs, at)
    {
        next = Ok(Some(restart));
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
            tracing::warn!(job_id = job.id.0, schedule = %job.schedule_conf, error = ?next.err(),
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

/// SKIPPED rows, with `reason`, for the fires strictly between a late fire at `scheduled`
/// (branch B: it runs; branch A: the misfire rule handles it) and the job's next fire: the late
/// fire stands for them (XXL-JOB runs a late schedule once). At most [`MAX_FIRES_PER_JOB`].
fn covered_fires(
    job: &Job,
    params: &ScanParams,
    tz: Tz,
    scheduled: i64,
    next: &Result<Option<i64>, String>,
    reason: &str,
) -> Vec<NewRun> {
    let Ok(Some(next)) = *next else {
        return Vec::new();
    };
    let mut covered = Vec::new();
    let mut at = scheduled;
    // A fire's successor regardless of now: the next cron match, or the next FIX_RATE grid
    // point (a FIX_DELAY job has no successor before its run completes).
    while let Ok(Some(following)) = next_after_fire(job, tz, at, true, at) {
        if following >= next || covered.len() >= MAX_FIRES_PER_JOB {
            break;
        }
        covered.push(new_run(
            job,
            params,
            following,
            TriggerType::Cron,
            RunStatus::Skipped,
            reason,
        ));
        at = following;
    }
    covered
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::next_fire::{AWAITING_COMPLETION_MS, next_fire_after};
    use crate::model::{DstGapPolicy, DstOverlapPolicy, DstPolicy, GroupId, JobId, ScheduleType};

    const T0: i64 = 1_800_000_000_000; // a whole second

    fn job(schedule_type: ScheduleType, conf: &str, next: i64) -> Job {
        Job {
            id: JobId(7),
            schedule_type,
            schedule_conf: conf.into(),
            handler: "h".into(),
            params: "p".into(),
            status: JobStatus::Running,
            trigger_next_ms: next,
            ..Job::new(GroupId(1), "j")
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
            calendars: Arc::default(),
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
    fn branch_b_fires_the_due_time_and_continues_on_the_fix_rate_grid() {
        // Found 1.5 s late: XXL-JOB would re-anchor to now (T0 + 12 s); the grid says T0 + 10 s.
        let plan = plan_job(&job(ScheduleType::FixRate, "10", T0), &params(T0 + 1500));
        assert_eq!(times(&plan), vec![0]);
        assert_eq!(plan.update.trigger_next_ms, T0 + 10_000);
        assert_eq!(plan.runs[0].trigger_type, TriggerType::Cron);
    }

    #[test]
    fn fix_rate_keeps_its_phase_after_a_misfire() {
        // Down for 7.5 s with a 3 s period: the next fire is on the grid (T0 + 9 s), not
        // now + period rounded (T0 + 11 s).
        let plan = plan_job(&job(ScheduleType::FixRate, "3", T0), &params(T0 + 7_500));
        assert_eq!(plan.runs[0].status, RunStatus::Skipped);
        // The missed T0 + 3 s and T0 + 6 s keep skipped rows; the window (now + 5 s) holds
        // T0 + 9 s and T0 + 12 s.
        assert_eq!(times(&plan), vec![0, 3_000, 6_000, 9_000, 12_000]);
        assert_eq!(plan.runs[2].status, RunStatus::Skipped);
        assert_eq!(plan.runs[3].status, RunStatus::Pending);
        assert_eq!(plan.update.trigger_next_ms, T0 + 15_000);
        assert!(
            plan.runs
                .iter()
                .all(|run| (run.scheduled_at_ms - T0) % 3_000 == 0)
        );
    }

    #[test]
    fn fix_rate_grid_holds_for_any_lateness() {
        for late_ms in [1, 999, 1_000, 2_999, 3_000, 3_001, 59_999, 600_000] {
            let now = T0 + late_ms;
            let mut scanned = job(ScheduleType::FixRate, "3", T0);
            scanned.misfire_strategy = MisfireStrategy::FireOnceNow;
            let plan = plan_job(&scanned, &params(now));
            let next = plan.update.trigger_next_ms;
            assert_eq!(
                (next - T0) % 3_000,
                0,
                "late {late_ms}: next {next} off the grid"
            );
            assert!(
                next > now + 5_000 - 3_000,
                "late {late_ms}: next {next} too early"
            );
            assert!(
                plan.runs
                    .iter()
                    .skip(1)
                    .filter(|run| run.status == RunStatus::Pending)
                    .all(|run| run.scheduled_at_ms > now)
            );
        }
    }

    #[test]
    fn fix_delay_plans_one_fire_and_waits_for_its_completion() {
        let plan = plan_job(
            &job(ScheduleType::FixDelay, "1", T0 + 1000),
            &params(T0 + 200),
        );
        // One fire only, although a 1 s delay would fit more into the window.
        assert_eq!(times(&plan), vec![1000]);
        assert_eq!(plan.update.trigger_next_ms, AWAITING_COMPLETION_MS);
        assert_eq!(plan.update.status, JobStatus::Running);
        assert_eq!(plan.update.trigger_last_ms, T0 + 1000);

        let due = plan_job(&job(ScheduleType::FixDelay, "1", T0), &params(T0 + 300));
        assert_eq!(times(&due), vec![0]);
        assert_eq!(due.update.trigger_next_ms, AWAITING_COMPLETION_MS);
    }

    #[test]
    fn fix_delay_misfire_do_nothing_restarts_the_delay_from_now() {
        let plan = plan_job(&job(ScheduleType::FixDelay, "10", T0), &params(T0 + 60_300));
        assert_eq!(plan.runs.len(), 1);
        assert_eq!(plan.runs[0].status, RunStatus::Skipped);
        assert_eq!(plan.update.trigger_next_ms, T0 + 71_000);

        let mut fire_once = job(ScheduleType::FixDelay, "10", T0);
        fire_once.misfire_strategy = MisfireStrategy::FireOnceNow;
        let plan = plan_job(&fire_once, &params(T0 + 60_300));
        assert_eq!(plan.runs[0].trigger_type, TriggerType::Misfire);
        assert_eq!(plan.update.trigger_next_ms, AWAITING_COMPLETION_MS);
    }

    /// Runs scans the way the scan loop does (each a little before the next due fire) from
    /// `from` until `until`, in `zone`; returns every planned fire time.
    fn fires_across(conf: &str, zone: &str, from: i64, until: i64) -> Vec<i64> {
        fires_across_with(conf, zone, DstPolicy::default(), from, until)
    }

    /// [`fires_across`] for a job with the daylight-saving policy `dst`.
    fn fires_across_with(
        conf: &str,
        zone: &str,
        dst: DstPolicy,
        from: i64,
        until: i64,
    ) -> Vec<i64> {
        let mut scanned = job(ScheduleType::Cron, conf, 0);
        scanned.time_zone = zone.to_string();
        scanned.policy.dst = dst;
        let tz = job_time_zone(&scanned, chrono_tz::UTC);
        scanned.trigger_next_ms = next_fire_after(ScheduleType::Cron, conf, tz, dst, from)
            .ok()
            .flatten()
            .unwrap_or(i64::MAX);
        let mut fired = Vec::new();
        while scanned.trigger_next_ms <= until {
            let plan = plan_job(&scanned, &params(scanned.trigger_next_ms - 2_000));
            fired.extend(plan.runs.iter().map(|run| run.scheduled_at_ms));
            scanned.trigger_last_ms = plan.update.trigger_last_ms;
            scanned.trigger_next_ms = plan.update.trigger_next_ms;
        }
        fired
    }

    fn utc_ms(text: &str) -> i64 {
        chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
            .map(|wall| wall.and_utc().timestamp_millis())
            .unwrap_or_else(|error| panic!("bad test time {text}: {error}"))
    }

    #[test]
    fn the_scan_plans_each_occurrence_the_jobs_dst_policy_gives() {
        // Berlin 2027: 02:00 CET jumps to 03:00 CEST on 03-28, 03:00 CEST falls back to
        // 02:00 CET on 10-31. Skip leaves the day of the gap out; both runs 02:30 twice.
        let skip = DstPolicy {
            gap: DstGapPolicy::Skip,
            overlap: DstOverlapPolicy::First,
        };
        let spring = fires_across_with(
            "0 30 2 * * ?",
            "Europe/Berlin",
            skip,
            utc_ms("2027-03-27 12:00:00"),
            utc_ms("2027-03-29 12:00:00"),
        );
        assert_eq!(spring, ["2027-03-29 00:30:00"].map(utc_ms).to_vec());
        let both = DstPolicy {
            gap: DstGapPolicy::NextValidTime,
            overlap: DstOverlapPolicy::Both,
        };
        let fall = fires_across_with(
            "0 30 2 * * ?",
            "Europe/Berlin",
            both,
            utc_ms("2027-10-30 12:00:00"),
            utc_ms("2027-11-01 12:00:00"),
        );
        let expected = [
            "2027-10-31 00:30:00",
            "2027-10-31 01:30:00",
            "2027-11-01 01:30:00",
        ];
        assert_eq!(fall, expected.map(utc_ms).to_vec());
    }

    #[test]
    fn a_cron_in_a_named_zone_fires_once_across_each_dst_transition() {
        // Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist and fires
        // once at the end of the gap (01:00 UTC). 2026-10-25: 03:00 CEST falls back to 02:00 CET,
        // so 02:30 happens twice and fires once, at its first occurrence (00:30 UTC).
        let spring = fires_across(
            "0 30 2 * * ?",
            "Europe/Berlin",
            utc_ms("2026-03-27 12:00:00"),
            utc_ms("2026-03-31 12:00:00"),
        );
        let expected_spring = [
            "2026-03-28 01:30:00",
            "2026-03-29 01:00:00",
            "2026-03-30 00:30:00",
            "2026-03-31 00:30:00",
        ];
        assert_eq!(spring, expected_spring.map(utc_ms).to_vec());

        let fall = fires_across(
            "0 30 2 * * ?",
            "Europe/Berlin",
            utc_ms("2026-10-23 12:00:00"),
            utc_ms("2026-10-27 12:00:00"),
        );
        let expected_fall = [
            "2026-10-24 00:30:00",
            "2026-10-25 00:30:00",
            "2026-10-26 01:30:00",
            "2026-10-27 01:30:00",
        ];
        assert_eq!(fall, expected_fall.map(utc_ms).to_vec());

        // Every 10 minutes through New York's fall-back hour: 01:00-01:50 EDT run, the repeated
        // 01:00-01:50 EST do not, then 02:00 EST continues (six fires in the two UTC hours).
        let hourly = fires_across(
            "0 */10 1 * * ?",
            "America/New_York",
            utc_ms("2026-11-01 04:00:00"),
            utc_ms("2026-11-01 07:00:00"),
        );
        let expected_hourly: Vec<i64> = (0..6)
            .map(|index| utc_ms("2026-11-01 05:00:00") + index * 600_000)
            .collect();
        assert_eq!(hourly, expected_hourly);
    }

    #[test]
    fn branch_b_records_the_fires_a_late_fire_stands_for() {
        // Every second, found 3.4 s late (within the 5 s misfire threshold): the due fire runs
        // now, the 3 fires between it and now get SKIPPED rows, and planning resumes after now.
        let plan = plan_job(
            &job(ScheduleType::Cron, "* * * * * ?", T0),
            &params(T0 + 3_400),
        );
        let statuses: Vec<(i64, RunStatus)> = plan
            .runs
            .iter()
            .map(|run| (run.scheduled_at_ms - T0, run.status))
            .collect();
        assert_eq!(
            &statuses[..5],
            &[
                (0, RunStatus::Pending),
                (1_000, RunStatus::Skipped),
                (2_000, RunStatus::Skipped),
                (3_000, RunStatus::Skipped),
                (4_000, RunStatus::Pending),
            ]
        );
        assert!(plan.runs[1].trigger_msg.contains("3400 ms late"));
        assert_eq!(
            plan.runs[1].fire_key.as_deref(),
            Some(&*format!("7:{}:0:0", T0 + 1_000))
        );
        // Found less than a period late: nothing in between.
        let on_time = plan_job(
            &job(ScheduleType::Cron, "* * * * * ?", T0),
            &params(T0 + 900),
        );
        assert!(
            on_time
                .runs
                .iter()
                .all(|run| run.status == RunStatus::Pending)
        );
        // FIX_DELAY waits for its run; nothing stands in for anything.
        let delay = plan_job(&job(ScheduleType::FixDelay, "1", T0), &params(T0 + 3_400));
        assert_eq!(times(&delay), vec![0]);
    }

    #[test]
    fn branch_a_do_nothing_records_a_skipped_fire_and_restarts_from_now() {
        let plan = plan_job(
            &job(ScheduleType::Cron, "0 * * * * ?", T0),
            &params(T0 + 70_300),
        );
        // The first missed fire and every later one before now have a skipped row each.
        assert_eq!(times(&plan), vec![0, 60_000]);
        assert!(plan.runs.iter().all(|run| run.status == RunStatus::Skipped));
        assert!(plan.runs[0].trigger_msg.contains("70300 ms late"));
        assert!(plan.runs[1].trigger_msg.starts_with("misfire: not fired"));
        assert_eq!(plan.update.trigger_next_ms, T0 + 120_000);
    }

    #[test]
    fn branch_a_fire_once_now_dispatches_one_misfire_run() {
        let mut late = job(ScheduleType::FixRate, "60", T0);
        late.misfire_strategy = MisfireStrategy::FireOnceNow;
        let plan = plan_job(&late, &params(T0 + 600_000));
        // One run for the first missed fire; the ten after it (T0 + 60 s … now) are accounted
        // for as skipped.
        assert_eq!(plan.runs.len(), 11);
        assert_eq!(plan.runs[0].trigger_type, TriggerType::Misfire);
        assert_eq!(plan.runs[0].status, RunStatus::Pending);
        assert!(
            plan.runs[1..]
                .iter()
                .all(|run| run.status == RunStatus::Skipped)
        );
        let fires = plan.fire_of_each_run(&Arc::new(late.clone()));
        assert_eq!(fires.len(), plan.runs.len(), "one entry per row");
        assert!(fires[0].is_some(), "the misfire run is the one fire");
        assert!(fires[1..].iter().all(Option::is_none));
        assert_eq!(plan.update.trigger_next_ms, T0 + 660_000);
    }

    #[test]
    fn jitter_holds_each_fire_back_by_its_own_delay_and_leaves_it_to_the_followup() {
        let mut jittered = job(ScheduleType::Cron, "*/1 * * * * ?", T0 + 1000);
        jittered.policy.jitter_max_ms = 30_000;
        let plan = plan_job(&jittered, &params(T0 + 200));
        // The same occurrences as without jitter, each sent at its scheduled time plus its delay.
        assert_eq!(times(&plan), vec![1000, 2000, 3000, 4000, 5000]);
        for run in &plan.runs {
            let delay = crate::model::jitter::jitter_ms(JobId(7), run.scheduled_at_ms, 30_000);
            let expected = if delay > 0 {
                run.scheduled_at_ms + delay
            } else {
                0
            };
            assert_eq!(run.dispatch_at_ms, expected);
            assert_eq!(run.status, RunStatus::Pending);
        }
        // Held-back fires are not the scan's to dispatch: the follow-up sends them when due.
        let fires = plan.fire_of_each_run(&Arc::new(jittered.clone()));
        for (run, fire) in plan.runs.iter().zip(&fires) {
            assert_eq!(fire.is_some(), run.dispatch_at_ms == 0);
        }
        // Skipped occurrences and FIRE_ONCE_NOW's misfire run are not jittered.
        jittered.misfire_strategy = MisfireStrategy::FireOnceNow;
        jittered.trigger_next_ms = T0;
        let late = plan_job(&jittered, &params(T0 + 9_500));
        assert_eq!(late.runs[0].trigger_type, TriggerType::Misfire);
        assert_eq!(late.runs[0].dispatch_at_ms, 0);
        assert!(
            late.runs
                .iter()
                .filter(|run| run.status == RunStatus::Skipped)
                .all(|run| run.dispatch_at_ms == 0)
        );
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

    fn catch_up_job(mode: crate::model::CatchUpMode) -> Job {
        let mut late = job(ScheduleType::Cron, "0 * * * * ?", T0);
        late.policy.catch_up_window_ms = 150_000;
        late.policy.catch_up_mode = mode;
        late
    }

    fn statuses(plan: &JobPlan) -> Vec<(i64, RunStatus, TriggerType)> {
        plan.runs
            .iter()
            .map(|run| (run.scheduled_at_ms - T0, run.status, run.trigger_type))
            .collect()
    }

    #[test]
    fn catch_up_latest_runs_the_newest_missed_fire_inside_the_window() {
        use crate::model::CatchUpMode;
        // A minute job down for 5 min 10 s with a 2.5 min window: the fires at 0-2 min are
        // older than the window, 3-5 min inside it, and only 5 min runs.
        let plan = plan_job(&catch_up_job(CatchUpMode::Latest), &params(T0 + 310_000));
        let (skip, run) = (RunStatus::Skipped, RunStatus::Pending);
        let (cron, misfire) = (TriggerType::Cron, TriggerType::Misfire);
        assert_eq!(
            statuses(&plan),
            vec![
                (0, skip, cron),
                (60_000, skip, cron),
                (120_000, skip, cron),
                (180_000, skip, cron),
                (240_000, skip, cron),
                (300_000, run, misfire),
            ]
        );
        assert!(
            plan.runs[0]
                .trigger_msg
                .contains("catch-up window of 150000 ms")
        );
        assert!(plan.runs[3].trigger_msg.starts_with("catch-up LATEST"));
        assert_eq!(plan.update.trigger_next_ms, T0 + 360_000);
        assert_eq!(plan.update.trigger_last_ms, T0 + 300_000);
        // The run goes at once, through the ring.
        let fires = plan.fire_of_each_run(&Arc::new(catch_up_job(CatchUpMode::Latest)));
        assert!(fires[5].is_some() && fires[..5].iter().all(Option::is_none));
    }

    #[test]
    fn catch_up_all_runs_every_missed_fire_inside_the_window_in_order() {
        let plan = plan_job(
            &catch_up_job(crate::model::CatchUpMode::All),
            &params(T0 + 310_000),
        );
        let ran: Vec<i64> = plan
            .runs
            .iter()
            .filter(|run| run.status == RunStatus::Pending)
            .map(|run| run.scheduled_at_ms - T0)
            .collect();
        assert_eq!(ran, vec![180_000, 240_000, 300_000]);
        assert_eq!(
            times(&plan),
            vec![0, 60_000, 120_000, 180_000, 240_000, 300_000]
        );
        // Found past the threshold but inside the window: the first missed fire itself runs.
        let short = plan_job(
            &catch_up_job(crate::model::CatchUpMode::All),
            &params(T0 + 70_000),
        );
        assert!(
            short
                .runs
                .iter()
                .all(|run| run.status == RunStatus::Pending)
        );
        assert_eq!(times(&short), vec![0, 60_000]);
    }

    #[test]
    fn catch_up_on_fix_delay_decides_its_one_missed_fire() {
        let mut delay = job(ScheduleType::FixDelay, "10", T0);
        delay.policy.catch_up_window_ms = 60_000;
        let inside = plan_job(&delay, &params(T0 + 30_000));
        assert_eq!(
            statuses(&inside),
            vec![(0, RunStatus::Pending, TriggerType::Misfire)]
        );
        assert_eq!(inside.update.trigger_next_ms, AWAITING_COMPLETION_MS);
        let outside = plan_job(&delay, &params(T0 + 90_000));
        assert_eq!(outside.runs[0].status, RunStatus::Skipped);
        assert_eq!(outside.update.trigger_next_ms, T0 + 100_000);
    }

    fn with_calendar(rules: &[&str], now: i64) -> ScanParams {
        let stored = crate::model::Calendar {
            name: "cal".into(),
            rules: rules.iter().map(|rule| rule.to_string()).collect(),
            ..Default::default()
        };
        ScanParams {
            calendars: Arc::new(crate::model::CalendarBook::build(&[stored], chrono_tz::UTC)),
            ..params(now)
        }
    }

    #[test]
    fn a_calendar_turns_the_fires_it_keeps_out_into_skipped_rows_naming_it() {
        use crate::model::CalendarMode;
        let mut scanned = job(ScheduleType::Cron, "*/1 * * * * ?", T0 + 1000);
        scanned.calendar = "cal".into();
        // T0 is 2027-01-15 08:00:00 UTC; a cron rule holding the even seconds.
        let params = with_calendar(&["cron */2 * * * * ?"], T0 + 200);
        let plan = plan_job(&scanned, &params);
        let runs: Vec<(i64, RunStatus)> = plan
            .runs
            .iter()
            .map(|run| (run.scheduled_at_ms - T0, run.status))
            .collect();
        let (run, skip) = (RunStatus::Pending, RunStatus::Skipped);
        assert_eq!(
            runs,
            vec![
                (1000, run),
                (2000, skip),
                (3000, run),
                (4000, skip),
                (5000, run)
            ]
        );
        assert_eq!(
            plan.runs[1].trigger_msg,
            "calendar 'cal': skipped, the occurrence falls in the blackout rule 'cron */2 * * * * ?'"
        );
        // Skipped rows are no fires; the schedule goes on as without the calendar.
        let fires = plan.fire_of_each_run(&Arc::new(scanned.clone()));
        assert!(fires[1].is_none() && fires[0].is_some());
        assert_eq!(plan.update.trigger_next_ms, T0 + 6000);

        // ONLY: the even seconds are the only ones that run.
        scanned.calendar_mode = CalendarMode::Only;
        let only = plan_job(&scanned, &params);
        let ran: Vec<i64> = only
            .runs
            .iter()
            .filter(|run| run.status == RunStatus::Pending)
            .map(|run| run.scheduled_at_ms - T0)
            .collect();
        assert_eq!(ran, vec![2000, 4000]);
        assert!(only.runs[0].trigger_msg.contains("outside the calendar"));

        // A job without a calendar, or with another one, is untouched.
        scanned.calendar = String::new();
        assert!(
            plan_job(&scanned, &params)
                .runs
                .iter()
                .all(|run| run.status == RunStatus::Pending)
        );
    }

    #[test]
    fn a_fix_delay_fire_the_calendar_skips_restarts_the_delay_instead_of_waiting() {
        let mut delay = job(ScheduleType::FixDelay, "10", T0 + 1000);
        delay.calendar = "cal".into();
        let params = with_calendar(&["weekly mon-sun"], T0 + 200);
        let plan = plan_job(&delay, &params);
        assert_eq!(plan.runs.len(), 1);
        assert_eq!(plan.runs[0].status, RunStatus::Skipped);
        // No run to wait for: the next fire is the delay after now, not "awaiting completion".
        assert_eq!(plan.update.trigger_next_ms, T0 + 11_000);
    }
}
