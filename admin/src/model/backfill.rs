//! A backfill: the occurrences a job's schedule has in a range, run now, in order, at most
//! `max_concurrent` unfinished at once, each with the time it stands for. The rules here are
//! pure: which instants are occurrences, and what a request may ask for. The runner that
//! starts the runs is `crate::backfill`; the rows are the store's.

use chrono_tz::Tz;

use super::cron::CronExpr;
use super::next_fire::{interval_seconds, next_fire_after};
use super::{BackfillState, Job, JobId, ScheduleType};

/// Most occurrences one backfill may hold: enough for a year of hourly runs, small enough that
/// counting them at the request stays cheap.
pub const MAX_OCCURRENCES: i64 = 10_000;
/// Most runs of one backfill unfinished at once. Each takes an admission slot like a live
/// fire, so a backfill can never crowd the live schedule out of the bound on unsent runs.
pub const MAX_CONCURRENT: i32 = 100;

/// One backfill row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backfill {
    pub id: i64,
    pub job_id: JobId,
    /// Both ends included.
    pub from_ms: i64,
    pub to_ms: i64,
    pub max_concurrent: i32,
    pub state: BackfillState,
    /// Occurrences in the range, counted when the backfill was created.
    pub total: i64,
    /// Occurrences whose run exists (they are created in order).
    pub created: i64,
    /// The scheduled time of the last occurrence created; 0 before the first.
    pub cursor_ms: i64,
    /// The admin that starts its runs (and its epoch): the runner's fence.
    pub owner_node: String,
    pub epoch: i64,
    pub created_by: String,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// How the created runs of a backfill stand, counted from their rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackfillProgress {
    pub succeeded: i64,
    pub failed: i64,
    /// PENDING or RUNNING.
    pub running: i64,
}

impl Backfill {
    /// Whether every occurrence has its run.
    pub fn all_created(&self) -> bool {
        self.created >= self.total
    }

    /// The instant after which the next occurrence is looked for: just before `from_ms` until
    /// the first run exists, then the cursor.
    pub fn next_after_ms(&self) -> i64 {
        if self.created == 0 {
            self.from_ms.saturating_sub(1)
        } else {
            self.cursor_ms
        }
    }
}

/// An instant of a refusal as people read and write it (the request's epoch milliseconds mean
/// little to whoever typed a date): RFC 3339 in `zone`, whole seconds unless it has millis.
fn rfc3339(ms: i64, zone: Tz) -> String {
    use chrono::TimeZone;
    match zone.timestamp_millis_opt(ms).single() {
        Some(at) => at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        None => format!("{ms} ms"),
    }
}

/// Why a backfill request is refused (the API answers INVALID_ARGUMENT with the text).
pub fn check_request(from_ms: i64, to_ms: i64, max_concurrent: i32) -> Result<(), String> {
    if from_ms <= 0 || to_ms <= 0 {
        return Err(format!(
            "from_ms and to_ms must be positive epoch milliseconds, got {from_ms} and {to_ms}"
        ));
    }
    if from_ms > to_ms {
        return Err(format!(
            "from_ms {} must not be after to_ms {}",
            rfc3339(from_ms, Tz::UTC),
            rfc3339(to_ms, Tz::UTC)
        ));
    }
    if !(0..=MAX_CONCURRENT).contains(&max_concurrent) {
        return Err(format!(
            "max_concurrent must be 1-{MAX_CONCURRENT} (0 = 1), got {max_concurrent}"
        ));
    }
    Ok(())
}

/// The first occurrence strictly after `after_ms` and at most `to_ms`. FIX_RATE occurrences
/// start at the range's start (rounded up to a whole second) and repeat at the interval: a
/// fix-rate job has no phase of its own to align them to.
pub fn next_occurrence(
    job: &Job,
    zone: Tz,
    range_from_ms: i64,
    after_ms: i64,
    to_ms: i64,
) -> Result<Option<i64>, String> {
    let next = match job.schedule_type {
        ScheduleType::FixRate if after_ms < range_from_ms => {
            interval_seconds(&job.schedule_conf)?;
            Some(ceil_to_second(range_from_ms))
        }
        ScheduleType::Cron | ScheduleType::FixRate => next_fire_after(
            job.schedule_type,
            &job.schedule_conf,
            zone,
            job.policy.dst,
            after_ms,
        )?,
        ScheduleType::FixDelay | ScheduleType::None => {
            return Err(no_occurrences(job.schedule_type));
        }
    };
    Ok(next.filter(|at| *at <= to_ms))
}

/// Counts the occurrences in `[from_ms, to_ms]`, refusing more than [`MAX_OCCURRENCES`] and a
/// range with none.
pub fn count_occurrences(job: &Job, zone: Tz, from_ms: i64, to_ms: i64) -> Result<i64, String> {
    if job.schedule_type == ScheduleType::Cron {
        // Parse once up front so a bad cron is reported as such, not as "no occurrences".
        CronExpr::parse(&job.schedule_conf)
            .map_err(|error| format!("invalid cron '{}': {error}", job.schedule_conf))?;
    }
    let mut count = 0;
    let mut after = from_ms.saturating_sub(1);
    while let Some(at) = next_occurrence(job, zone, from_ms, after, to_ms)? {
        count += 1;
        if count > MAX_OCCURRENCES {
            return Err(format!(
                "the range holds more than {MAX_OCCURRENCES} occurrences of job {}'s schedule \
                 (the most one backfill may run); split it into smaller ranges",
                job.id
            ));
        }
        after = at;
    }
    if count == 0 {
        return Err(format!(
            "job {}'s schedule has no occurrence between {} and {}",
            job.id,
            rfc3339(from_ms, zone),
            rfc3339(to_ms, zone)
        ));
    }
    Ok(count)
}

fn no_occurrences(schedule_type: ScheduleType) -> String {
    match schedule_type {
        ScheduleType::FixDelay => "a FIX_DELAY job has no occurrences to backfill: each run \
            is placed after the previous one finished"
            .to_string(),
        _ => format!("a {schedule_type} schedule has no occurrences to backfill"),
    }
}

fn ceil_to_second(ms: i64) -> i64 {
    let rem = ms.rem_euclid(1000);
    if rem == 0 {
        ms
    } else {
        ms.saturating_add(1000 - rem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(schedule_type: ScheduleType, conf: &str) -> Job {
        let mut job = Job::new(super::super::GroupId(1), "demo");
        job.id = JobId(7);
        job.schedule_type = schedule_type;
        job.schedule_conf = conf.to_string();
        job
    }

    fn all(job: &Job, from: i64, to: i64) -> Vec<i64> {
        let mut out = Vec::new();
        let mut after = from - 1;
        while let Some(at) = next_occurrence(job, chrono_tz::UTC, from, after, to).unwrap() {
            out.push(at);
            after = at;
        }
        out
    }

    #[test]
    fn cron_occurrences_include_both_ends() {
        let every_minute = job(ScheduleType::Cron, "0 * * * * ?");
        assert_eq!(
            all(&every_minute, 60_000, 180_000),
            [60_000, 120_000, 180_000]
        );
        assert_eq!(
            count_occurrences(&every_minute, chrono_tz::UTC, 60_000, 180_000),
            Ok(3)
        );
    }

    #[test]
    fn fix_rate_occurrences_start_at_the_range() {
        let every_ten = job(ScheduleType::FixRate, "10");
        assert_eq!(all(&every_ten, 1_500, 31_000), [2_000, 12_000, 22_000]);
    }

    #[test]
    fn too_many_occurrences_and_none_are_refused() {
        let every_second = job(ScheduleType::Cron, "* * * * * ?");
        let error = count_occurrences(&every_second, chrono_tz::UTC, 1_000, 20_000_000);
        assert!(error.unwrap_err().contains("more than 10000 occurrences"));
        let yearly = job(ScheduleType::Cron, "0 0 0 1 1 ?");
        let error = count_occurrences(&yearly, chrono_tz::UTC, 1_000_000, 2_000_000);
        assert!(error.unwrap_err().contains("no occurrence"));
        let delay = job(ScheduleType::FixDelay, "10");
        assert!(
            count_occurrences(&delay, chrono_tz::UTC, 1, 2)
                .unwrap_err()
                .contains("FIX_DELAY")
        );
    }

    #[test]
    fn requests_are_checked() {
        // A reversed range names its ends as times, not epoch milliseconds.
        assert_eq!(
            check_request(1_767_312_000_000, 1_767_225_600_000, 1),
            Err("from_ms 2026-01-02T00:00:00Z must not be after to_ms 2026-01-01T00:00:00Z".into())
        );
        assert!(
            check_request(1, 4, 101)
                .unwrap_err()
                .contains("max_concurrent")
        );
        assert!(check_request(1, 4, 0).is_ok());
    }
}
