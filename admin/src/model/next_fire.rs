//! A job's next fire time by its schedule type, and the two constants every writer of
//! `trigger_next_ms` shares. Pure rules about a job, so the scan (`schedule::plan`), the API,
//! the follow-up policy and the XXL-JOB import all ask here and none imports another.

use chrono_tz::Tz;

use super::cron::CronExpr;
use super::{DstPolicy, ScheduleType};

/// `trigger_next_ms` of a running FIX_DELAY job whose last fire has not finished yet: later than
/// any scan window, so the job is not read until the follow-up sets `finished + delay`.
pub const AWAITING_COMPLETION_MS: i64 = i64::MAX;

/// Delay between a start or schedule change and the earliest fire it may produce (XXL-JOB:
/// "takes effect after 5 s", so the fire never lands inside the scan's current pre-read window).
pub const SCHEDULE_CHANGE_DELAY_MS: i64 = 5_000;

/// Next fire strictly after `from_ms`: cron in `time_zone` with the job's daylight-saving
/// policy `dst` (`model::dst`); FIX_RATE and FIX_DELAY seconds
/// rounded up to a whole second (for FIX_DELAY, `from_ms` is when the previous run finished, or
/// StartJob's "now + 5 s"). None for NONE schedules or a cron with no future fire.
pub fn next_fire_after(
    schedule_type: ScheduleType,
    schedule_conf: &str,
    time_zone: Tz,
    dst: DstPolicy,
    from_ms: i64,
) -> Result<Option<i64>, String> {
    match schedule_type {
        ScheduleType::Cron => {
            let cron = CronExpr::parse(schedule_conf)
                .map_err(|error| format!("invalid cron '{schedule_conf}': {error}"))?;
            Ok(cron.next_after_with(from_ms, time_zone, dst))
        }
        ScheduleType::FixRate | ScheduleType::FixDelay => {
            let seconds = interval_seconds(schedule_conf)?;
            // Past the end of representable time there is no next fire (not a wrapped one).
            Ok(seconds
                .checked_mul(1000)
                .and_then(|interval_ms| from_ms.checked_add(interval_ms))
                .and_then(ceil_to_second))
        }
        ScheduleType::None => Ok(None),
    }
}

/// Parses a FIX_RATE / FIX_DELAY interval: whole seconds, at least 1.
pub fn interval_seconds(schedule_conf: &str) -> Result<i64, String> {
    match schedule_conf.trim().parse::<i64>() {
        Ok(seconds) if seconds >= 1 => Ok(seconds),
        _ => Err(format!(
            "interval must be a whole number of seconds >= 1, got '{schedule_conf}'"
        )),
    }
}

/// `ms` rounded up to a whole second; None when that is past `i64::MAX`.
fn ceil_to_second(ms: i64) -> Option<i64> {
    let rem = ms.rem_euclid(1000);
    if rem == 0 {
        Some(ms)
    } else {
        (ms - rem).checked_add(1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000; // a whole second

    #[test]
    fn fix_delay_next_fire_is_the_delay_after_the_given_instant() {
        assert_eq!(
            next_fire_after(
                ScheduleType::FixDelay,
                "3",
                chrono_tz::UTC,
                DstPolicy::default(),
                T0 + 1
            ),
            Ok(Some(T0 + 4000))
        );
        assert!(
            next_fire_after(
                ScheduleType::FixDelay,
                "x",
                chrono_tz::UTC,
                DstPolicy::default(),
                T0
            )
            .is_err()
        );
    }

    #[test]
    fn fix_rate_rounds_up_to_whole_seconds_and_rejects_bad_periods() {
        assert_eq!(
            next_fire_after(
                ScheduleType::FixRate,
                "5",
                chrono_tz::UTC,
                DstPolicy::default(),
                T0 + 1
            ),
            Ok(Some(T0 + 6000))
        );
        assert_eq!(
            next_fire_after(
                ScheduleType::FixRate,
                "5",
                chrono_tz::UTC,
                DstPolicy::default(),
                T0
            ),
            Ok(Some(T0 + 5000))
        );
        assert!(
            next_fire_after(
                ScheduleType::FixRate,
                "0",
                chrono_tz::UTC,
                DstPolicy::default(),
                T0
            )
            .is_err()
        );
        assert_eq!(
            next_fire_after(
                ScheduleType::None,
                "",
                chrono_tz::UTC,
                DstPolicy::default(),
                T0
            ),
            Ok(None)
        );
    }

    #[test]
    fn fix_rate_past_the_end_of_representable_time_has_no_next_fire() {
        let near_end = i64::MAX - 500;
        for (conf, from_ms) in [
            ("5", near_end),
            ("1", i64::MAX),
            (&*i64::MAX.to_string(), T0),
        ] {
            assert_eq!(
                next_fire_after(
                    ScheduleType::FixRate,
                    conf,
                    chrono_tz::UTC,
                    DstPolicy::default(),
                    from_ms
                ),
                Ok(None),
                "conf {conf} from {from_ms}"
            );
        }
        // The last whole second before the end is still a fire.
        let last_second = i64::MAX - i64::MAX.rem_euclid(1000);
        assert_eq!(
            next_fire_after(
                ScheduleType::FixRate,
                "1",
                chrono_tz::UTC,
                DstPolicy::default(),
                last_second - 1000
            ),
            Ok(Some(last_second))
        );
    }
}
