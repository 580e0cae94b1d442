//! The daylight-saving policies over real zone transitions: Europe/Berlin (gap and overlap of
//! one hour at 02:00-03:00 local), America/New_York (01:00-02:00) and Australia/Lord_Howe
//! (half-hour transitions).

use chrono::{NaiveDateTime, TimeZone};
use chrono_tz::America::New_York;
use chrono_tz::Australia::Lord_Howe;
use chrono_tz::Europe::Berlin;
use chrono_tz::Tz;
use chrono_tz::UTC;

use crate::model::cron::CronExpr;
use crate::model::dst::{DstGapPolicy, DstOverlapPolicy, DstPolicy};

const SKIP: DstGapPolicy = DstGapPolicy::Skip;
const NEXT: DstGapPolicy = DstGapPolicy::NextValidTime;
const FIRST: DstOverlapPolicy = DstOverlapPolicy::First;
const SECOND: DstOverlapPolicy = DstOverlapPolicy::Second;
const BOTH: DstOverlapPolicy = DstOverlapPolicy::Both;

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

/// The next `n` fires of `expr` after local `from` in `tz` under the policy, shown in `tz`.
fn fires(
    tz: Tz,
    expr: &str,
    gap: DstGapPolicy,
    overlap: DstOverlapPolicy,
    from: &str,
    n: usize,
) -> Vec<String> {
    let cron = CronExpr::parse(expr).unwrap();
    let policy = DstPolicy { gap, overlap };
    let mut out = Vec::new();
    let mut cursor = at(tz, from);
    while out.len() < n {
        let Some(next) = cron.next_after_with(cursor, tz, policy) else {
            break;
        };
        assert!(next > cursor, "{expr}: {next} does not follow {cursor}");
        out.push(show(tz, next));
        cursor = next;
    }
    out
}

#[test]
fn berlin_gap_next_valid_time_fires_at_the_end_of_the_gap_and_skip_leaves_the_day_out() {
    // 2027-03-28: 02:00 CET jumps to 03:00 CEST.
    let from = "2027-03-27 12:00:00";
    assert_eq!(
        fires(Berlin, "0 30 2 * * ?", NEXT, FIRST, from, 3),
        [
            "2027-03-28 03:00:00 CEST",
            "2027-03-29 02:30:00 CEST",
            "2027-03-30 02:30:00 CEST",
        ]
    );
    assert_eq!(
        fires(Berlin, "0 30 2 * * ?", SKIP, FIRST, from, 2),
        ["2027-03-29 02:30:00 CEST", "2027-03-30 02:30:00 CEST"]
    );
    // Every 20 minutes: the times inside the gap are simply absent; 03:00 is a time of the
    // schedule of its own and fires once whatever the policy.
    for gap in [NEXT, SKIP] {
        assert_eq!(
            fires(
                Berlin,
                "0 0/20 * * * ?",
                gap,
                FIRST,
                "2027-03-28 01:30:00",
                4
            ),
            [
                "2027-03-28 01:40:00 CET",
                "2027-03-28 03:00:00 CEST",
                "2027-03-28 03:20:00 CEST",
                "2027-03-28 03:40:00 CEST",
            ]
        );
    }
    // A time only inside the gap: next-valid-time moves it, skip drops it.
    assert_eq!(
        fires(
            Berlin,
            "0 10 2 * * ?",
            NEXT,
            FIRST,
            "2027-03-28 01:30:00",
            1
        ),
        ["2027-03-28 03:00:00 CEST"]
    );
    assert_eq!(
        fires(
            Berlin,
            "0 10 2 * * ?",
            SKIP,
            FIRST,
            "2027-03-28 01:30:00",
            1
        ),
        ["2027-03-29 02:10:00 CEST"]
    );
}

#[test]
fn berlin_overlap_first_second_and_both() {
    // 2027-10-31: 03:00 CEST falls back to 02:00 CET.
    let from = "2027-10-30 12:00:00";
    let daily = "0 30 2 * * ?";
    assert_eq!(
        fires(Berlin, daily, NEXT, FIRST, from, 2),
        ["2027-10-31 02:30:00 CEST", "2027-11-01 02:30:00 CET"]
    );
    assert_eq!(
        fires(Berlin, daily, NEXT, SECOND, from, 2),
        ["2027-10-31 02:30:00 CET", "2027-11-01 02:30:00 CET"]
    );
    assert_eq!(
        fires(Berlin, daily, NEXT, BOTH, from, 3),
        [
            "2027-10-31 02:30:00 CEST",
            "2027-10-31 02:30:00 CET",
            "2027-11-01 02:30:00 CET",
        ]
    );
}

#[test]
fn berlin_overlap_every_half_hour_in_instant_order() {
    let half_hourly = "0 0/30 * * * ?";
    let from = "2027-10-31 01:00:00";
    assert_eq!(
        fires(Berlin, half_hourly, NEXT, FIRST, from, 4),
        [
            "2027-10-31 01:30:00 CEST",
            "2027-10-31 02:00:00 CEST",
            "2027-10-31 02:30:00 CEST",
            "2027-10-31 03:00:00 CET",
        ]
    );
    assert_eq!(
        fires(Berlin, half_hourly, NEXT, SECOND, from, 4),
        [
            "2027-10-31 01:30:00 CEST",
            "2027-10-31 02:00:00 CET",
            "2027-10-31 02:30:00 CET",
            "2027-10-31 03:00:00 CET",
        ]
    );
    // Both: every half hour of real time, the repeated hour included.
    assert_eq!(
        fires(Berlin, half_hourly, NEXT, BOTH, from, 6),
        [
            "2027-10-31 01:30:00 CEST",
            "2027-10-31 02:00:00 CEST",
            "2027-10-31 02:30:00 CEST",
            "2027-10-31 02:00:00 CET",
            "2027-10-31 02:30:00 CET",
            "2027-10-31 03:00:00 CET",
        ]
    );
}

#[test]
fn a_reference_instant_inside_the_overlap_sees_the_rest_of_it() {
    let cron = CronExpr::parse("0 30 2 * * ?").unwrap();
    let next = |from_utc: &str, overlap| {
        let policy = DstPolicy { gap: NEXT, overlap };
        show(
            Berlin,
            cron.next_after_with(at(UTC, from_utc), Berlin, policy)
                .unwrap(),
        )
    };
    // 00:45 UTC is 02:45 CEST, in the first pass: 02:30 CEST is past, 02:30 CET still ahead.
    assert_eq!(
        next("2027-10-31 00:45:00", SECOND),
        "2027-10-31 02:30:00 CET"
    );
    assert_eq!(next("2027-10-31 00:45:00", BOTH), "2027-10-31 02:30:00 CET");
    assert_eq!(
        next("2027-10-31 00:45:00", FIRST),
        "2027-11-01 02:30:00 CET"
    );
    // 01:15 UTC is 02:15 CET, in the second pass: 02:30 CET is ahead for second and both.
    assert_eq!(
        next("2027-10-31 01:15:00", SECOND),
        "2027-10-31 02:30:00 CET"
    );
    assert_eq!(next("2027-10-31 01:15:00", BOTH), "2027-10-31 02:30:00 CET");
    assert_eq!(
        next("2027-10-31 01:15:00", FIRST),
        "2027-11-01 02:30:00 CET"
    );
    // Right at the first fire (02:30 CEST = 00:30 UTC): both fires the second one next.
    assert_eq!(next("2027-10-31 00:30:00", BOTH), "2027-10-31 02:30:00 CET");
}

#[test]
fn the_last_second_before_a_gap_ends_still_sees_the_times_inside_it() {
    // 00:59:59 UTC is 01:59:59 CET; the next second is 03:00 CEST, the end of the gap.
    let cron = CronExpr::parse("0 30 2 * * ?").unwrap();
    let last_cet_second = at(UTC, "2027-03-28 00:59:59");
    let next = cron.next_after_with(last_cet_second, Berlin, DstPolicy::default());
    assert_eq!(show(Berlin, next.unwrap()), "2027-03-28 03:00:00 CEST");
    let skip = DstPolicy {
        gap: SKIP,
        overlap: FIRST,
    };
    let next = cron.next_after_with(last_cet_second, Berlin, skip);
    assert_eq!(show(Berlin, next.unwrap()), "2027-03-29 02:30:00 CEST");
}

#[test]
fn new_york_transitions_under_each_policy() {
    // 2027-03-14: 02:00 EST jumps to 03:00 EDT; 2027-11-07: 02:00 EDT falls back to 01:00 EST.
    assert_eq!(
        fires(
            New_York,
            "0 30 2 * * ?",
            SKIP,
            FIRST,
            "2027-03-13 12:00:00",
            1
        ),
        ["2027-03-15 02:30:00 EDT"]
    );
    assert_eq!(
        fires(
            New_York,
            "0 30 1 * * ?",
            SKIP,
            BOTH,
            "2027-11-06 12:00:00",
            3
        ),
        [
            "2027-11-07 01:30:00 EDT",
            "2027-11-07 01:30:00 EST",
            "2027-11-08 01:30:00 EST",
        ]
    );
}

#[test]
fn half_hour_transitions_of_lord_howe() {
    // Lord Howe Island moves its clocks by 30 minutes: 2027-04-04 02:00 LHDT goes back to
    // 01:30 LHST, 2027-10-03 02:00 LHST jumps to 02:30 LHDT.
    let ms = |expr, gap, overlap, from| {
        let cron = CronExpr::parse(expr).unwrap();
        let policy = DstPolicy { gap, overlap };
        let mut cursor = at(Lord_Howe, from);
        let mut out = Vec::new();
        while let Some(next) = cron.next_after_with(cursor, Lord_Howe, policy) {
            out.push(next);
            cursor = next;
            if out.len() == 3 {
                break;
            }
        }
        out
    };
    let both = ms("0 45 1 * * ?", NEXT, BOTH, "2027-04-03 12:00:00");
    assert_eq!(
        both[1] - both[0],
        30 * 60 * 1000,
        "the repeated 01:45 is 30 min apart"
    );
    let skip = ms("0 15 2 * * ?", SKIP, FIRST, "2027-10-02 12:00:00");
    let next_day = at(Lord_Howe, "2027-10-04 02:15:00");
    assert_eq!(skip[0], next_day, "02:15 does not exist on 2027-10-03");
}

#[test]
fn utc_and_zones_without_daylight_saving_are_untouched_by_the_policy() {
    for overlap in [FIRST, SECOND, BOTH] {
        for gap in [NEXT, SKIP] {
            assert_eq!(
                fires(UTC, "0 30 2 * * ?", gap, overlap, "2027-10-30 12:00:00", 2),
                ["2027-10-31 02:30:00 UTC", "2027-11-01 02:30:00 UTC"]
            );
        }
    }
}

/// Over most of a year in zones with one-hour, half-hour and southern-hemisphere transitions: each
/// policy's fires strictly increase; with `SKIP` every fire is at a wall time the expression
/// matches; `BOTH` fires exactly at the union of `FIRST` and `SECOND`.
#[test]
fn every_policy_walks_forward_and_both_is_the_union_of_first_and_second() {
    use std::collections::BTreeSet;
    let zones = [Berlin, Lord_Howe, chrono_tz::America::Santiago];
    let exprs = [
        "0 10/30 * * * ?",
        "0 30 2 * * ?",
        "0 0 0-3 ? * SUN",
        "0 45 1 * * ?",
    ];
    // Every transition of these zones in 2027 falls between March and mid-November.
    let from = at(UTC, "2027-03-01 00:00:00");
    let until = at(UTC, "2027-11-15 00:00:00");
    for tz in zones {
        for expr in exprs {
            let cron = CronExpr::parse(expr).unwrap();
            let walk = |gap, overlap| {
                let policy = DstPolicy { gap, overlap };
                let mut out = Vec::new();
                let mut cursor = from;
                while let Some(next) = cron.next_after_with(cursor, tz, policy) {
                    assert!(
                        next > cursor,
                        "{tz} {expr} {policy:?}: {next} after {cursor}"
                    );
                    if next > until {
                        break;
                    }
                    out.push(next);
                    cursor = next;
                }
                out
            };
            for gap in [NEXT, SKIP] {
                let first = walk(gap, FIRST);
                let second = walk(gap, SECOND);
                let both: BTreeSet<i64> = walk(gap, BOTH).into_iter().collect();
                let union: BTreeSet<i64> = first.iter().chain(&second).copied().collect();
                assert_eq!(both, union, "{tz} {expr} {gap:?}");
                if gap == SKIP {
                    for &ms in &both {
                        let wall = tz.timestamp_millis_opt(ms).unwrap().naive_local();
                        assert_eq!(
                            cron.next_local(wall),
                            Some(wall),
                            "{tz} {expr} {}",
                            show(tz, ms)
                        );
                    }
                }
            }
        }
    }
}
