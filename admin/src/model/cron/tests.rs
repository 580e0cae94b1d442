use super::*;
use chrono::TimeZone;
use chrono_tz::America::New_York;
use chrono_tz::Europe::Berlin;
use chrono_tz::UTC;

/// Epoch ms of the unambiguous local wall time `wall` in `tz`.
fn at(tz: Tz, wall: &str) -> i64 {
    let naive = NaiveDateTime::parse_from_str(wall, "%Y-%m-%d %H:%M:%S").unwrap();
    tz.from_local_datetime(&naive)
        .single()
        .unwrap()
        .timestamp_millis()
}

fn show(tz: Tz, ms: i64) -> String {
    let t = tz.timestamp_millis_opt(ms).unwrap();
    t.format("%Y-%m-%d %H:%M:%S %Z").to_string()
}

fn cron(expr: &str) -> CronExpr {
    CronExpr::parse(expr).unwrap()
}

/// The next `n` fire times after local `from` in `tz`, formatted in `tz`.
fn fires_in(tz: Tz, expr: &str, from: &str, n: usize) -> Vec<String> {
    let times = cron(expr).upcoming(at(tz, from), tz, n);
    times.into_iter().map(|ms| show(tz, ms)).collect()
}

/// Like `fires_in` for UTC, formatted with the weekday so day rules are
/// self-evidently right.
fn fires(expr: &str, from: &str, n: usize) -> Vec<String> {
    let times = cron(expr).upcoming(at(UTC, from), UTC, n);
    times
        .into_iter()
        .map(|ms| {
            let t = UTC.timestamp_millis_opt(ms).unwrap();
            t.format("%a %Y-%m-%d %H:%M:%S").to_string()
        })
        .collect()
}

fn err(expr: &str) -> String {
    CronExpr::parse(expr).unwrap_err().to_string()
}

#[test]
fn star_fires_on_the_next_whole_second_strictly_after() {
    let every = cron("* * * * * ?");
    let noon = at(UTC, "2026-01-01 12:00:00");
    assert_eq!(every.next_after(noon, UTC), Some(noon + 1000));
    assert_eq!(every.next_after(noon + 500, UTC), Some(noon + 1000));
    assert_eq!(every.next_after(noon - 1, UTC), Some(noon));
    // Negative epoch values round down, not toward zero.
    assert_eq!(cron("0 0 0 1 1 ?").next_after(-500, UTC), Some(0));
}

#[test]
fn lists_and_ranges() {
    assert_eq!(
        fires("0 0 8,12,18 * * ?", "2026-01-01 09:00:00", 4),
        [
            "Thu 2026-01-01 12:00:00",
            "Thu 2026-01-01 18:00:00",
            "Fri 2026-01-02 08:00:00",
            "Fri 2026-01-02 12:00:00",
        ]
    );
    assert_eq!(
        fires("0 15-17 10 * * ?", "2026-01-01 10:16:00", 3),
        [
            "Thu 2026-01-01 10:17:00",
            "Fri 2026-01-02 10:15:00",
            "Fri 2026-01-02 10:16:00",
        ]
    );
}

#[test]
fn wrap_around_ranges() {
    assert_eq!(
        fires("0 0 22-2 * * ?", "2026-01-01 12:00:00", 6),
        [
            "Thu 2026-01-01 22:00:00",
            "Thu 2026-01-01 23:00:00",
            "Fri 2026-01-02 00:00:00",
            "Fri 2026-01-02 01:00:00",
            "Fri 2026-01-02 02:00:00",
            "Fri 2026-01-02 22:00:00",
        ]
    );
    assert_eq!(
        fires("0 0 0 1 NOV-FEB ?", "2026-03-01 00:00:00", 5),
        [
            "Sun 2026-11-01 00:00:00",
            "Tue 2026-12-01 00:00:00",
            "Fri 2027-01-01 00:00:00",
            "Mon 2027-02-01 00:00:00",
            "Mon 2027-11-01 00:00:00",
        ]
    );
    assert_eq!(
        fires("0 0 0 ? * FRI-MON", "2026-01-01 00:00:00", 5),
        [
            "Fri 2026-01-02 00:00:00",
            "Sat 2026-01-03 00:00:00",
            "Sun 2026-01-04 00:00:00",
            "Mon 2026-01-05 00:00:00",
            "Fri 2026-01-09 00:00:00",
        ]
    );
    // The increment keeps counting across the wrap: 22, 0, 2.
    assert_eq!(
        fires("0 0 22-3/2 * * ?", "2026-01-01 12:00:00", 4),
        [
            "Thu 2026-01-01 22:00:00",
            "Fri 2026-01-02 00:00:00",
            "Fri 2026-01-02 02:00:00",
            "Fri 2026-01-02 22:00:00",
        ]
    );
}

#[test]
fn increments() {
    assert_eq!(
        fires("*/15 * * * * ?", "2026-01-01 10:00:07", 4),
        [
            "Thu 2026-01-01 10:00:15",
            "Thu 2026-01-01 10:00:30",
            "Thu 2026-01-01 10:00:45",
            "Thu 2026-01-01 10:01:00",
        ]
    );
    assert_eq!(
        fires("0 5/20 * * * ?", "2026-01-01 10:00:00", 4),
        [
            "Thu 2026-01-01 10:05:00",
            "Thu 2026-01-01 10:25:00",
            "Thu 2026-01-01 10:45:00",
            "Thu 2026-01-01 11:05:00",
        ]
    );
    assert_eq!(
        fires("0/5 * * * * ?", "2026-01-01 10:00:01", 2),
        ["Thu 2026-01-01 10:00:05", "Thu 2026-01-01 10:00:10"]
    );
    assert_eq!(
        fires("0 0 8-18/4 * * ?", "2026-01-01 00:00:00", 4),
        [
            "Thu 2026-01-01 08:00:00",
            "Thu 2026-01-01 12:00:00",
            "Thu 2026-01-01 16:00:00",
            "Fri 2026-01-02 08:00:00",
        ]
    );
}

#[test]
fn question_mark_and_day_of_week_numbering() {
    // 1 = Sunday, 7 = Saturday, `L` alone = Saturday.
    assert_eq!(
        fires("0 0 0 ? * 1", "2026-01-01 00:00:00", 2),
        ["Sun 2026-01-04 00:00:00", "Sun 2026-01-11 00:00:00"]
    );
    assert_eq!(
        fires("0 0 0 ? * 7", "2026-01-01 00:00:00", 1),
        ["Sat 2026-01-03 00:00:00"]
    );
    assert_eq!(
        fires("0 0 0 ? * L", "2026-01-01 00:00:00", 1),
        ["Sat 2026-01-03 00:00:00"]
    );
    assert_eq!(
        fires("0 0 0 5 * ?", "2026-01-01 00:00:00", 2),
        ["Mon 2026-01-05 00:00:00", "Thu 2026-02-05 00:00:00"]
    );
}

#[test]
fn names_are_case_insensitive() {
    assert_eq!(
        fires("0 0 9 ? * MON-FRI", "2026-01-02 10:00:00", 3),
        [
            "Mon 2026-01-05 09:00:00",
            "Tue 2026-01-06 09:00:00",
            "Wed 2026-01-07 09:00:00",
        ]
    );
    assert_eq!(
        fires("0 0 0 1 JAN,MAR ?", "2026-01-15 00:00:00", 3),
        [
            "Sun 2026-03-01 00:00:00",
            "Fri 2027-01-01 00:00:00",
            "Mon 2027-03-01 00:00:00",
        ]
    );
    assert_eq!(
        cron("0 0 9 ? jan,Mar mon-fri"),
        cron("0 0 9 ? JAN,MAR MON-FRI")
    );
    assert_eq!(cron("0 0 0 ? * friL"), cron("0 0 0 ? * 6L"));
    assert_eq!(cron("0 0 0 lw * ?"), cron("0 0 0 LW * ?"));
}

#[test]
fn year_field() {
    let expr = cron("0 0 12 1 1 ? 2030");
    let first = expr
        .next_after(at(UTC, "2026-06-01 00:00:00"), UTC)
        .unwrap();
    assert_eq!(show(UTC, first), "2030-01-01 12:00:00 UTC");
    assert_eq!(expr.next_after(first, UTC), None);
    assert_eq!(expr.upcoming(0, UTC, 3).len(), 1);
    assert_eq!(
        fires("0 0 0 1 1 ? 2027,2029-2030", "2026-01-01 00:00:00", 4),
        [
            "Fri 2027-01-01 00:00:00",
            "Mon 2029-01-01 00:00:00",
            "Tue 2030-01-01 00:00:00",
        ]
    );
}

#[test]
fn expressions_without_future_fires_return_none() {
    let now = at(UTC, "2026-01-01 00:00:00");
    for expr in [
        "0 0 0 30 2 ?",
        "0 0 0 31 4 ?",
        "0 0 0 1 1 ? 2020",
        "0 0 0 1 1 ? 2150",
    ] {
        assert_eq!(cron(expr).next_after(now, UTC), None, "{expr}");
    }
    let max_year_end = at(UTC, &format!("{MAX_YEAR}-12-31 23:59:59"));
    assert_eq!(cron("* * * * * ?").next_after(max_year_end, UTC), None);
    assert_eq!(cron("* * * * * ?").next_after(i64::MAX, UTC), None);
}

#[test]
fn day_31_skips_short_months_and_feb_29_needs_a_leap_year() {
    assert_eq!(
        fires("0 0 0 31 * ?", "2026-01-31 00:00:00", 6),
        [
            "Tue 2026-03-31 00:00:00",
            "Sun 2026-05-31 00:00:00",
            "Fri 2026-07-31 00:00:00",
            "Mon 2026-08-31 00:00:00",
            "Sat 2026-10-31 00:00:00",
            "Thu 2026-12-31 00:00:00",
        ]
    );
    assert_eq!(
        fires("0 0 0 29 2 ?", "2026-01-01 00:00:00", 2),
        ["Tue 2028-02-29 00:00:00", "Sun 2032-02-29 00:00:00"]
    );
}

#[test]
fn last_day_of_month_handles_short_months() {
    assert_eq!(
        fires("0 0 0 L * ?", "2027-01-15 00:00:00", 5),
        [
            "Sun 2027-01-31 00:00:00",
            "Sun 2027-02-28 00:00:00",
            "Wed 2027-03-31 00:00:00",
            "Fri 2027-04-30 00:00:00",
            "Mon 2027-05-31 00:00:00",
        ]
    );
    // Starting on a 31st (the day after it is in a short month).
    assert_eq!(
        fires("0 0 0 L * ?", "2028-01-31 00:00:00", 2),
        ["Tue 2028-02-29 00:00:00", "Fri 2028-03-31 00:00:00"]
    );
    assert_eq!(
        fires("0 0 0 L-3 * ?", "2026-01-01 00:00:00", 4),
        [
            "Wed 2026-01-28 00:00:00",
            "Wed 2026-02-25 00:00:00",
            "Sat 2026-03-28 00:00:00",
            "Mon 2026-04-27 00:00:00",
        ]
    );
}

#[test]
fn nearest_weekday() {
    assert_eq!(
        fires("0 0 0 15W * ?", "2026-01-01 00:00:00", 4),
        [
            "Thu 2026-01-15 00:00:00",
            "Mon 2026-02-16 00:00:00",
            "Mon 2026-03-16 00:00:00",
            "Wed 2026-04-15 00:00:00",
        ]
    );
    // 2026-08-15 is a Saturday: the Friday before.
    assert_eq!(
        fires("0 0 0 15W * ?", "2026-08-01 00:00:00", 1),
        ["Fri 2026-08-14 00:00:00"]
    );
    // 2026-08-01 is a Saturday: Monday the 3rd, not July 31st.
    assert_eq!(
        fires("0 0 0 1W * ?", "2026-07-15 00:00:00", 1),
        ["Mon 2026-08-03 00:00:00"]
    );
    // 2026-05-31 is a Sunday: Friday the 29th; June has no 31st.
    assert_eq!(
        fires("0 0 0 31W * ?", "2026-04-15 00:00:00", 2),
        ["Fri 2026-05-29 00:00:00", "Fri 2026-07-31 00:00:00"]
    );
    assert_eq!(
        fires("0 0 0 LW * ?", "2026-01-01 00:00:00", 5),
        [
            "Fri 2026-01-30 00:00:00",
            "Fri 2026-02-27 00:00:00",
            "Tue 2026-03-31 00:00:00",
            "Thu 2026-04-30 00:00:00",
            "Fri 2026-05-29 00:00:00",
        ]
    );
}

#[test]
fn last_and_nth_weekday_of_month() {
    assert_eq!(
        fires("0 0 0 ? * 6L", "2026-01-01 00:00:00", 4),
        [
            "Fri 2026-01-30 00:00:00",
            "Fri 2026-02-27 00:00:00",
            "Fri 2026-03-27 00:00:00",
            "Fri 2026-04-24 00:00:00",
        ]
    );
    assert_eq!(
        fires("0 0 0 ? * 2#1", "2026-01-01 00:00:00", 4),
        [
            "Mon 2026-01-05 00:00:00",
            "Mon 2026-02-02 00:00:00",
            "Mon 2026-03-02 00:00:00",
            "Mon 2026-04-06 00:00:00",
        ]
    );
    // February to April 2026 have only four Fridays and are skipped.
    assert_eq!(
        fires("0 0 0 ? * 6#5", "2026-01-31 00:00:00", 2),
        ["Fri 2026-05-29 00:00:00", "Fri 2026-07-31 00:00:00"]
    );
}

#[test]
fn berlin_spring_forward_gap_fires_once_at_the_end_of_the_gap() {
    // 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC).
    assert_eq!(
        fires_in(Berlin, "0 30 2 * * ?", "2026-03-28 12:00:00", 3),
        [
            "2026-03-29 03:00:00 CEST",
            "2026-03-30 02:30:00 CEST",
            "2026-03-31 02:30:00 CEST",
        ]
    );
    let gap_end = cron("0 30 2 * * ?").next_after(at(Berlin, "2026-03-29 00:00:00"), Berlin);
    assert_eq!(show(UTC, gap_end.unwrap()), "2026-03-29 01:00:00 UTC");
    // Six scheduled times inside the gap collapse into one fire.
    assert_eq!(
        fires_in(Berlin, "0 */10 2 * * ?", "2026-03-29 00:00:00", 3),
        [
            "2026-03-29 03:00:00 CEST",
            "2026-03-30 02:00:00 CEST",
            "2026-03-30 02:10:00 CEST",
        ]
    );
    // 02:00 (skipped) and 03:00 are the same instant: one fire.
    assert_eq!(
        fires_in(Berlin, "0 0 * * * ?", "2026-03-29 00:30:00", 3),
        [
            "2026-03-29 01:00:00 CET",
            "2026-03-29 03:00:00 CEST",
            "2026-03-29 04:00:00 CEST",
        ]
    );
}

#[test]
fn berlin_fall_back_overlap_fires_once_at_the_first_occurrence() {
    // 2026-10-25: 03:00 CEST falls back to 02:00 CET (01:00 UTC).
    assert_eq!(
        fires_in(Berlin, "0 30 2 * * ?", "2026-10-24 12:00:00", 2),
        ["2026-10-25 02:30:00 CEST", "2026-10-26 02:30:00 CET"]
    );
    // Repeated wall times are skipped during the second pass.
    assert_eq!(
        fires_in(Berlin, "0 0/30 * * * ?", "2026-10-25 01:00:00", 5),
        [
            "2026-10-25 01:30:00 CEST",
            "2026-10-25 02:00:00 CEST",
            "2026-10-25 02:30:00 CEST",
            "2026-10-25 03:00:00 CET",
            "2026-10-25 03:30:00 CET",
        ]
    );
}

#[test]
fn reference_time_inside_the_repeated_hour_moves_forward() {
    let second_pass = at(UTC, "2026-10-25 01:15:00");
    assert_eq!(show(Berlin, second_pass), "2026-10-25 02:15:00 CET");
    let next = |expr: &str| show(Berlin, cron(expr).next_after(second_pass, Berlin).unwrap());
    assert_eq!(next("0 0/30 * * * ?"), "2026-10-25 03:00:00 CET");
    assert_eq!(next("* * * * * ?"), "2026-10-25 03:00:00 CET");
    assert_eq!(next("0 30 2 * * ?"), "2026-10-26 02:30:00 CET");
    // The very first second of the second pass.
    let last_dst_second = at(UTC, "2026-10-25 00:59:59");
    let after = cron("* * * * * ?").next_after(last_dst_second, Berlin);
    assert_eq!(show(Berlin, after.unwrap()), "2026-10-25 03:00:00 CET");
}

#[test]
fn daily_job_fires_exactly_once_per_day_across_transitions() {
    let spring = fires_in(Berlin, "0 30 2 * * ?", "2026-03-27 00:00:00", 4);
    assert_eq!(
        spring,
        [
            "2026-03-27 02:30:00 CET",
            "2026-03-28 02:30:00 CET",
            "2026-03-29 03:00:00 CEST",
            "2026-03-30 02:30:00 CEST",
        ]
    );
    let autumn = fires_in(Berlin, "0 30 2 * * ?", "2026-10-24 00:00:00", 3);
    assert_eq!(
        autumn,
        [
            "2026-10-24 02:30:00 CEST",
            "2026-10-25 02:30:00 CEST",
            "2026-10-26 02:30:00 CET",
        ]
    );
}

#[test]
fn new_york_transitions() {
    // 2026-03-08: 02:00 EST jumps to 03:00 EDT.
    assert_eq!(
        fires_in(New_York, "0 30 2 * * ?", "2026-03-07 00:00:00", 3),
        [
            "2026-03-07 02:30:00 EST",
            "2026-03-08 03:00:00 EDT",
            "2026-03-09 02:30:00 EDT",
        ]
    );
    // 2026-11-01: 02:00 EDT falls back to 01:00 EST.
    assert_eq!(
        fires_in(New_York, "0 30 1 * * ?", "2026-10-31 12:00:00", 2),
        ["2026-11-01 01:30:00 EDT", "2026-11-02 01:30:00 EST"]
    );
    assert_eq!(
        fires_in(New_York, "0 0 * * * ?", "2026-11-01 00:30:00", 3),
        [
            "2026-11-01 01:00:00 EDT",
            "2026-11-01 02:00:00 EST",
            "2026-11-01 03:00:00 EST",
        ]
    );
}

#[test]
fn upcoming_is_strictly_increasing() {
    // Reference instants given in UTC: the first one is 02:59:50 CEST,
    // ten seconds before the repeated hour starts.
    let cases = [
        ("* * * * * ?", Berlin, "2026-10-25 00:59:50"),
        ("*/20 * * * * ?", Berlin, "2026-03-29 00:59:00"),
        ("0 */10 2 * * ?", Berlin, "2026-03-27 00:00:00"),
        ("0 0/30 * * * ?", New_York, "2026-11-01 04:00:00"),
        ("0 0 0 L * ?", UTC, "2026-01-01 00:00:00"),
    ];
    for (expr, tz, from) in cases {
        let times = cron(expr).upcoming(at(UTC, from), tz, 200);
        assert_eq!(times.len(), 200, "{expr}");
        assert!(times.windows(2).all(|w| w[0] < w[1]), "{expr}");
        assert!(times.iter().all(|t| t % 1000 == 0), "{expr}");
    }
}

#[test]
fn field_count_errors() {
    assert_eq!(err(""), "cron expression is empty");
    assert_eq!(err("   "), "cron expression is empty");
    assert_eq!(
        err("0 0 0 * *"),
        "expected 6 or 7 fields (second minute hour day-of-month month day-of-week [year]), found 5"
    );
    assert!(err("0 0 0 1 * ? 2030 x").ends_with("found 8"));
}

#[test]
fn value_and_increment_errors_name_the_field() {
    assert_eq!(err("60 * * * * ?"), "second: value 60 out of range 0-59");
    assert_eq!(
        err("0 0 0 32 * ?"),
        "day-of-month: value 32 out of range 1-31"
    );
    assert_eq!(err("0 0 0 1 13 ?"), "month: value 13 out of range 1-12");
    assert_eq!(err("0 0 0 ? * 8"), "day-of-week: value 8 out of range 1-7");
    assert_eq!(
        err("0 0 0 1 1 ? 1969"),
        "year: value 1969 out of range 1970-2199"
    );
    assert_eq!(
        err("*/0 * * * * ?"),
        "second: increment 0 out of range 1-59"
    );
    assert_eq!(
        err("*/60 * * * * ?"),
        "second: increment 60 out of range 1-59"
    );
    assert_eq!(
        err("0 0 0 0W * ?"),
        "day-of-month: value 0 out of range 1-31"
    );
}

#[test]
fn day_field_errors() {
    assert_eq!(
        err("0 0 0 1 * MON"),
        "support for specifying both a day-of-week and a day-of-month is not implemented"
    );
    assert_eq!(err("0 0 0 * * *"), err("0 0 0 1 * MON"));
    assert!(err("0 0 0 ? * ?").contains("cannot both be '?'"));
    for expr in [
        "0 0 0 ? * 5#6",
        "0 0 0 ? * 5#0",
        "0 0 0 ? * 2#1,3#1",
        "0 0 0 ? * 9L",
    ] {
        assert!(err(expr).starts_with("day-of-week: "), "{expr}");
    }
    for expr in [
        "0 0 0 L-31 * ?",
        "0 0 0 1,L * ?",
        "0 0 0 W * ?",
        "0 0 0 ?,1 * ?",
    ] {
        assert!(err(expr).starts_with("day-of-month: "), "{expr}");
    }
}

#[test]
fn garbage_tokens_are_rejected_with_the_field_name() {
    assert_eq!(
        err("0 0 L * * ?"),
        "hour: 'L' is only allowed in day-of-month or day-of-week"
    );
    assert_eq!(
        err("? * * * * ?"),
        "second: '?' is only allowed in day-of-month or day-of-week"
    );
    assert_eq!(err("0 0 abc * * ?"), "hour: invalid value 'abc'");
    assert_eq!(err("0 1-x * * * ?"), "minute: invalid value 'x'");
    assert_eq!(err("0 0 0 1 FOO ?"), "month: invalid value 'FOO'");
    assert_eq!(err("5, * * * * ?"), "second: invalid value ''");
    assert_eq!(err("0 */x * * * ?"), "minute: invalid increment 'x'");
    assert_eq!(
        err("99999999999 * * * * ?"),
        "second: invalid value '99999999999'"
    );
    assert_eq!(err("0 0 0 ? * MON-"), "day-of-week: invalid value ''");
}

#[test]
fn from_str_matches_parse() {
    let parsed: CronExpr = "0 0 12 * * ?".parse().unwrap();
    assert_eq!(parsed, cron("0 0 12 * * ?"));
}
