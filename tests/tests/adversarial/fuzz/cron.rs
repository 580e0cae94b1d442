//! Cron expressions, as `CreateJob`, `UpdateJob`, `PreviewSchedule`, the console and the import
//! pass them in: parsing never panics, a refusal names `schedule_conf` in a short message, and
//! for an accepted expression the next fire times are computed in bounded time, strictly after
//! the start, on whole seconds, and strictly increasing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono_tz::Tz;
use xjob_admin::model::ScheduleType;
use xjob_admin::model::cron::CronExpr;
use xjob_admin::model::next_fire::next_fire_after;
use xjob_admin::model::validate::validate_schedule;

use super::{Budget, Gen, run_cases};

const VALID: &[&str] = &[
    "0 * * * * ?",
    "*/5 * * * * ?",
    "0 0 12 ? * MON-FRI",
    "0 15 10 L * ?",
    "0 15 10 ? * 6L",
    "0 15 10 ? * 6#3",
    "0 0 0 LW * ?",
    "0 0 0 15W * ?",
    "0 0 0 L-3 * ?",
    "0 0/5 14,18 * * ?",
    "0 0 0 29 2 ? 2024-2099/4",
    "59 59 23 31 12 ? 2099",
    "0 0 0 1 JAN-DEC ? *",
    "0 0 0 ? * SUN#5",
    "0 30 2 * * ?",
    "0 0 0 31 2 ?",
    "1-59/7 3,9,27 */3 1-15 1/2 ?",
];

const DICTIONARY: &[&str] = &[
    "*",
    "?",
    "L",
    "W",
    "LW",
    "L-",
    "#",
    "/",
    "-",
    ",",
    "0",
    "59",
    "60",
    "23",
    "24",
    "31",
    "32",
    "12",
    "13",
    "7",
    "8",
    "1969",
    "1970",
    "2099",
    "2100",
    "MON",
    "SUN",
    "SAT",
    "FRI-MON",
    "JAN",
    "DEC",
    "FOO",
    "1#6",
    "0#1",
    "5#0",
    "7L",
    "L-31",
    "L-0",
    "*/0",
    "1-0",
    "5-1/2",
    "31W",
    "0W",
    "1/4294967295",
    "2099/1",
    "*/60",
    "?/2",
    "L/2",
    "W-1",
    "#1",
    "1#",
    "--",
    "//",
    ",,",
];

/// Zones whose rules are awkward: DST gaps and overlaps, half- and quarter-hour offsets, a zone
/// that skipped a whole day.
const ZONES: &[Tz] = &[
    chrono_tz::UTC,
    chrono_tz::Europe::Berlin,
    chrono_tz::America::New_York,
    chrono_tz::America::Sao_Paulo,
    chrono_tz::Australia::Lord_Howe,
    chrono_tz::Pacific::Chatham,
    chrono_tz::Pacific::Apia,
    chrono_tz::Asia::Kolkata,
    chrono_tz::Asia::Kathmandu,
];

/// A refusal longer than this quotes too much of the caller's input. An expression over 256
/// bytes is refused by its length alone; a shorter one may be quoted whole, and its bad token
/// once more.
const SHORT_MESSAGE: usize = 1024;
/// Fire times listed per accepted expression (as `PreviewSchedule` does).
const UPCOMING: usize = 5;

#[derive(Debug)]
struct Case {
    expression: String,
    after_ms: i64,
    zone: Tz,
}

fn make(rng: &mut Gen) -> Case {
    let expression = match rng.below(6) {
        0 => String::from_utf8_lossy(&rng.bytes(64)).into_owned(),
        1 => rng.string(40, DICTIONARY),
        2 | 3 => generated(rng),
        _ => {
            let valid = rng.pick(VALID).to_string();
            rng.mutate(&valid, &[',', '-', '/', '#'], DICTIONARY)
        }
    };
    let after_ms = match rng.below(6) {
        0 => rng.pick(&[0, -1, 1, i64::MIN, i64::MAX, i64::MAX - 1000, i64::MIN + 1]),
        1 => rng.i64(),
        // Around now and within the years a schedule runs in (1970-2200).
        _ => rng.i64_in(0..7_258_118_400_000),
    };
    let zone = rng.pick(ZONES);
    Case {
        expression,
        after_ms,
        zone,
    }
}

/// An expression built field by field from the forms each field takes (lists, ranges, steps,
/// `L`, `W`, `#`, names), mostly in range: most parse, so next-fire computation gets exercised
/// on rare combinations (the 31st in February, the fifth Sunday, leap days, years near the end).
fn generated(rng: &mut Gen) -> String {
    // (lowest, highest) of second, minute, hour, day-of-month, month, day-of-week, year.
    const RANGES: [(u32, u32); 7] = [
        (0, 59),
        (0, 59),
        (0, 23),
        (1, 31),
        (1, 12),
        (1, 7),
        (1970, 2099),
    ];
    let mut fields: Vec<String> = RANGES
        .iter()
        .map(|&(low, high)| field(rng, low, high))
        .collect();
    // Day-of-month or day-of-week takes `?`, and the special forms where they belong.
    if rng.chance(2) {
        fields[3] = "?".to_string();
        fields[5] = match rng.below(4) {
            0 => format!("{}L", 1 + rng.below(7)),
            1 => format!("{}#{}", 1 + rng.below(7), 1 + rng.below(5)),
            2 => rng
                .pick(&["MON-FRI", "SAT,SUN", "SUN", "TUE/2"])
                .to_string(),
            _ => fields[5].clone(),
        };
    } else {
        fields[5] = "?".to_string();
        fields[3] = match rng.below(5) {
            0 => "L".to_string(),
            1 => "LW".to_string(),
            2 => format!("L-{}", rng.below(31)),
            3 => format!("{}W", 1 + rng.below(31)),
            _ => fields[3].clone(),
        };
    }
    if rng.chance(3) {
        fields[4] = rng
            .pick(&["JAN", "FEB", "FEB-MAR", "DEC", "JAN/3"])
            .to_string();
    }
    let count = if rng.chance(2) { 7 } else { 6 };
    fields[..count].join(" ")
}

/// One field within `low..=high` (now and then one past it).
fn field(rng: &mut Gen, low: u32, high: u32) -> String {
    let span = (high - low + 2) as usize;
    let value = |rng: &mut Gen| low + rng.below(span) as u32;
    match rng.below(6) {
        0 => "*".to_string(),
        1 => value(rng).to_string(),
        2 => format!("{}-{}", value(rng), value(rng)),
        3 => format!("{}/{}", value(rng), 1 + rng.below(span)),
        4 => format!("{}-{}/{}", value(rng), value(rng), 1 + rng.below(span)),
        _ => (0..1 + rng.below(4))
            .map(|_| value(rng).to_string())
            .collect::<Vec<_>>()
            .join(","),
    }
}

fn check(case: &Case) -> Result<(), String> {
    let validated = validate_schedule(ScheduleType::Cron, &case.expression, "job");
    let parsed = CronExpr::parse(&case.expression);
    match (&validated, &parsed) {
        (Err(refusal), _) => {
            let message = refusal.to_string();
            if !message.starts_with("job.schedule_conf: ") || message.len() > SHORT_MESSAGE {
                return Err(format!(
                    "refusal does not name the field briefly: {message}"
                ));
            }
        }
        (Ok(()), Err(error)) => return Err(format!("validated but does not parse: {error}")),
        (Ok(()), Ok(_)) => {}
    }
    let Ok(cron) = parsed else { return Ok(()) };
    let fires = cron.upcoming(case.after_ms, case.zone, UPCOMING);
    let mut previous = case.after_ms;
    for fire in &fires {
        if *fire <= previous || fire.rem_euclid(1000) != 0 {
            return Err(format!(
                "fire times not strictly increasing whole seconds after {}: {fires:?}",
                case.after_ms
            ));
        }
        previous = *fire;
    }
    // The schedule's own entry point agrees with the parser.
    let planned = next_fire_after(
        ScheduleType::Cron,
        &case.expression,
        case.zone,
        Default::default(),
        case.after_ms,
    )?;
    if planned != fires.first().copied() {
        return Err(format!("next_fire_after {planned:?} vs upcoming {fires:?}"));
    }
    Ok(())
}

#[test]
fn cron_expressions_parse_or_refuse_cleanly_and_next_fires_terminate() {
    // Mutations start from expressions the parser accepts.
    for valid in VALID {
        assert!(CronExpr::parse(valid).is_ok(), "{valid}");
    }
    let budget = Budget::for_target("cron", 20000);
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    let ran = run_cases("cron", budget, make, move |case: &Case| {
        check(case)?;
        if CronExpr::parse(&case.expression).is_ok() {
            counted.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    // Both sides were reached: expressions accepted (and evaluated) and refused.
    let accepted = accepted.load(Ordering::Relaxed);
    eprintln!(
        "fuzz cron: {accepted} of {} expressions accepted",
        ran.cases
    );
    assert!(
        accepted > 0 && accepted < ran.cases,
        "{accepted} of {}",
        ran.cases
    );
}

/// FIX_RATE / FIX_DELAY intervals at the edges of time: an error or a later whole second, never
/// an overflow.
#[test]
fn fixed_intervals_never_overflow() {
    let budget = Budget::for_target("interval", 20000);
    let make = |rng: &mut Gen| {
        let conf = if rng.chance(2) {
            rng.pick(super::EXTREME_NUMBERS).to_string()
        } else {
            rng.string(24, &["1", "86400", "2147483647", " ", "+", "-"])
        };
        let from = if rng.chance(3) {
            rng.pick(&[i64::MIN, -1, 0, i64::MAX - 999, i64::MAX])
        } else {
            rng.i64()
        };
        (conf, from)
    };
    let check = |(conf, from): &(String, i64)| {
        for schedule_type in [ScheduleType::FixRate, ScheduleType::FixDelay] {
            let validated = validate_schedule(schedule_type, conf, "job");
            if let Err(refusal) = &validated
                && refusal.to_string().len() > SHORT_MESSAGE
            {
                return Err(format!("long refusal: {refusal}"));
            }
            if let Ok(Some(next)) = next_fire_after(
                schedule_type,
                conf,
                chrono_tz::UTC,
                Default::default(),
                *from,
            ) && (next <= *from || next.rem_euclid(1000) != 0)
            {
                return Err(format!("next {next} after {from}"));
            }
        }
        Ok(())
    };
    run_cases("interval", budget, make, check);
}
