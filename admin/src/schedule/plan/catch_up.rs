//! Branch A of the scan for a job with a catch-up window (`model::catch_up` decides; this
//! walks the job's schedule to find the missed occurrences and writes their rows).

use chrono_tz::Tz;

use super::occurrence::{ScanParams, new_run, next_after_fire};
use crate::model::catch_up::{self, Missed};
use crate::model::{Job, NewRun, RunStatus, TriggerType};

/// Branch A for a job with a catch-up window: every occurrence missed from `scheduled` up to
/// now is decided by `model::catch_up` (runs for the latest or all inside the window, SKIPPED
/// rows for the rest); returns those rows in time order and the job's next fire.
pub(super) fn plan(
    job: &Job,
    params: &ScanParams,
    tz: Tz,
    scheduled: i64,
) -> (Vec<NewRun>, Result<Option<i64>, String>) {
    let now = params.now_ms;
    let window_ms = job.policy.catch_up_window_ms;
    let window_start = now - window_ms;
    // Only FIX_DELAY cares whether its one missed fire runs (it then awaits its completion).
    let next = next_after_fire(job, tz, scheduled, scheduled >= window_start, now);
    let Ok(Some(next_at)) = next else {
        // No future fire: the missed one alone is decided.
        let only = catch_up::decide(
            (scheduled < window_start).then_some(scheduled),
            (scheduled >= window_start).then_some(scheduled),
            job.policy.catch_up_mode,
            window_ms,
            now,
        );
        return (catch_up_rows(job, params, only), next);
    };
    // A fire's successor regardless of now (as in `covered_fires`).
    let successors = |from: i64| {
        std::iter::successors(Some(from), move |&at| {
            next_after_fire(job, tz, at, true, at).ok().flatten()
        })
        .take_while(move |&at| at < next_at)
    };
    let before = successors(scheduled).take_while(|&at| at < window_start);
    let first_in_window = if scheduled >= window_start {
        Some(scheduled)
    } else {
        next_after_fire(job, tz, window_start - 1, true, window_start - 1)
            .ok()
            .flatten()
    };
    let inside = first_in_window.into_iter().flat_map(successors);
    let decided = catch_up::decide(before, inside, job.policy.catch_up_mode, window_ms, now);
    (catch_up_rows(job, params, decided), next)
}

/// The rows of decided missed occurrences: a run goes now (a MISFIRE run, not jittered, like
/// FIRE_ONCE_NOW's), a skipped one keeps its reason.
fn catch_up_rows(job: &Job, params: &ScanParams, decided: Vec<(i64, Missed)>) -> Vec<NewRun> {
    decided
        .into_iter()
        .map(|(at, missed)| match missed {
            Missed::Run => new_run(
                job,
                params,
                at,
                TriggerType::Misfire,
                RunStatus::Pending,
                "",
            ),
            Missed::Skipped(reason) => new_run(
                job,
                params,
                at,
                TriggerType::Cron,
                RunStatus::Skipped,
                &reason,
            ),
        })
        .collect()
}
