//! Calendar days in the admin's zone, as epoch milliseconds: where a day starts, which day an
//! instant falls on, and the day lists the report and the dashboard work with. Pure functions.
//!
//! A day runs from its first valid local instant to the next day's; around a DST change a day
//! is 23 or 25 hours long, and in the rare zones that skip midnight it starts at the first
//! instant that exists (e.g. 01:00).

use chrono::{Days, Months, NaiveDate, NaiveTime, TimeZone};
use chrono_tz::Tz;

/// Longest gap a DST change can open in a local day (no zone skips more than this).
const MAX_GAP_MINUTES: i64 = 3 * 60;

/// The local date of `instant_ms` in `zone`.
pub fn date_of(zone: Tz, instant_ms: i64) -> NaiveDate {
    zone.timestamp_millis_opt(instant_ms)
        .single()
        .map(|local| local.date_naive())
        .unwrap_or_default()
}

/// The first instant of `date` in `zone`, epoch ms.
pub fn day_start_ms(zone: Tz, date: NaiveDate) -> i64 {
    let midnight = date.and_time(NaiveTime::MIN);
    for minutes in 0..=MAX_GAP_MINUTES {
        let local = midnight + chrono::Duration::minutes(minutes);
        // At a fall-back midnight the earlier of the two instants starts the day.
        if let Some(instant) = zone.from_local_datetime(&local).earliest() {
            return instant.timestamp_millis();
        }
    }
    // Unreachable for real zones; read the local midnight as UTC rather than fail.
    midnight.and_utc().timestamp_millis()
}

/// `[start, end)` of `date` in `zone`, epoch ms.
pub fn day_window(zone: Tz, date: NaiveDate) -> (i64, i64) {
    let next = date.checked_add_days(Days::new(1)).unwrap_or(date);
    (day_start_ms(zone, date), day_start_ms(zone, next))
}

/// The windows of the day containing `now_ms` and of the `previous` days before it, oldest
/// first.
pub fn recent_day_windows(zone: Tz, now_ms: i64, previous: u64) -> Vec<(i64, i64)> {
    let today = date_of(zone, now_ms);
    (0..=previous)
        .rev()
        .filter_map(|back| today.checked_sub_days(Days::new(back)))
        .map(|date| day_window(zone, date))
        .collect()
}

/// The start of every day from the day of `from_ms` to the day of `to_ms` (both included),
/// oldest first; `None` when the range is reversed or spans more than `max_days` days.
pub fn day_starts_between(zone: Tz, from_ms: i64, to_ms: i64, max_days: usize) -> Option<Vec<i64>> {
    let first = date_of(zone, from_ms);
    let last = date_of(zone, to_ms);
    if first > last {
        return None;
    }
    let mut starts = Vec::new();
    let mut date = first;
    while date <= last {
        if starts.len() == max_days {
            return None;
        }
        starts.push(day_start_ms(zone, date));
        date = date.checked_add_days(Days::new(1))?;
    }
    Some(starts)
}

/// The instant `months` calendar months before `now_ms` in `zone` (the 31st of a month maps to
/// the last day of a shorter month); falls back to 30-day months if the local time is invalid.
pub fn months_before(zone: Tz, now_ms: i64, months: u32) -> i64 {
    zone.timestamp_millis_opt(now_ms)
        .single()
        .and_then(|now| now.checked_sub_months(Months::new(months)))
        .map(|then| then.timestamp_millis())
        .unwrap_or_else(|| now_ms - i64::from(months) * 30 * DAY_MS)
}

/// Milliseconds in a 24-hour day.
pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;

#[cfg(test)]
mod tests {
    use super::*;

    fn date(year: i32, month: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(year, month, day).expect("valid date")
    }

    fn utc_ms(year: i32, month: u32, day: u32, hour: u32) -> i64 {
        chrono::Utc
            .with_ymd_and_hms(year, month, day, hour, 0, 0)
            .single()
            .expect("valid instant")
            .timestamp_millis()
    }

    #[test]
    fn days_start_at_local_midnight() {
        let shanghai = chrono_tz::Asia::Shanghai;
        // 2024-03-10 00:00 in Shanghai is 2024-03-09 16:00 UTC.
        assert_eq!(
            day_start_ms(shanghai, date(2024, 3, 10)),
            utc_ms(2024, 3, 9, 16)
        );
        assert_eq!(date_of(shanghai, utc_ms(2024, 3, 9, 16)), date(2024, 3, 10));
        assert_eq!(date_of(shanghai, utc_ms(2024, 3, 9, 15)), date(2024, 3, 9));
        assert_eq!(
            day_start_ms(chrono_tz::UTC, date(2024, 3, 10)),
            utc_ms(2024, 3, 10, 0)
        );
    }

    #[test]
    fn dst_days_are_23_and_25_hours_long() {
        let new_york = chrono_tz::America::New_York;
        let (start, end) = day_window(new_york, date(2024, 3, 10));
        assert_eq!(end - start, 23 * 3_600_000);
        let (start, end) = day_window(new_york, date(2024, 11, 3));
        assert_eq!(end - start, 25 * 3_600_000);
    }

    #[test]
    fn a_day_whose_midnight_is_skipped_starts_at_its_first_valid_instant() {
        // Santiago moved clocks from 2022-09-11 00:00 to 01:00 (UTC-4 -> UTC-3).
        let santiago = chrono_tz::America::Santiago;
        assert_eq!(
            day_start_ms(santiago, date(2022, 9, 11)),
            utc_ms(2022, 9, 11, 4)
        );
    }

    #[test]
    fn recent_windows_cover_today_and_previous_days_oldest_first() {
        let now = utc_ms(2024, 5, 20, 13);
        let windows = recent_day_windows(chrono_tz::UTC, now, 2);
        assert_eq!(
            windows,
            vec![
                (utc_ms(2024, 5, 18, 0), utc_ms(2024, 5, 19, 0)),
                (utc_ms(2024, 5, 19, 0), utc_ms(2024, 5, 20, 0)),
                (utc_ms(2024, 5, 20, 0), utc_ms(2024, 5, 21, 0)),
            ]
        );
    }

    #[test]
    fn day_lists_are_bounded_and_ordered() {
        let zone = chrono_tz::UTC;
        let from = utc_ms(2024, 2, 27, 5);
        let to = utc_ms(2024, 3, 1, 23);
        let starts = day_starts_between(zone, from, to, 10).expect("4 days");
        assert_eq!(starts.len(), 4, "leap day included");
        assert_eq!(starts[0], utc_ms(2024, 2, 27, 0));
        assert_eq!(starts[3], utc_ms(2024, 3, 1, 0));
        assert_eq!(day_starts_between(zone, to, from, 10), None);
        assert_eq!(day_starts_between(zone, from, to, 3), None);
        assert_eq!(
            day_starts_between(zone, from, from, 1).map(|d| d.len()),
            Some(1)
        );
    }

    #[test]
    fn months_before_follows_the_calendar() {
        let zone = chrono_tz::UTC;
        assert_eq!(
            months_before(zone, utc_ms(2024, 5, 20, 13), 1),
            utc_ms(2024, 4, 20, 13)
        );
        assert_eq!(
            months_before(zone, utc_ms(2024, 5, 20, 13), 12),
            utc_ms(2023, 5, 20, 13)
        );
        // 31 March minus one month is the last day of February.
        assert_eq!(
            months_before(zone, utc_ms(2024, 3, 31, 8), 1),
            utc_ms(2024, 2, 29, 8)
        );
    }
}
