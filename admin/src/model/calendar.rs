//! Calendars: named sets of times (dates, date ranges, weekly windows, cron matches) in a time
//! zone. A job names one to skip its occurrences inside it (a blackout: holidays, a freeze) or
//! to run only inside it (business hours). An occurrence kept out gets a SKIPPED row naming the
//! calendar and the rule, like the misfire and catch-up skips.
//!
//! Rules are stored as text, one per line (the API, the CLI and the console all show the same
//! lines); the scan holds them compiled in a [`CalendarBook`], so deciding an occurrence costs a
//! few comparisons and no database read.
//!
//! Rule lines:
//! - `2026-12-25`: one whole day.
//! - `2026-12-24..2026-12-31`: whole days, both ends included.
//! - `weekly sat,sun` / `weekly mon-fri 09:00-17:00`: days of the week, the whole day or a
//!   time-of-day window (start included, end excluded; `24:00` ends at midnight).
//! - `cron 0 0 12 * * ?`: the seconds a Quartz cron expression matches (as in a job's schedule).

use std::collections::HashMap;

use chrono::{Datelike, NaiveDate, TimeZone, Timelike};
use chrono_tz::Tz;

pub use super::calendar_mode::CalendarMode;
use super::cron::CronExpr;
use super::validate::{Refusal, field_name, resolve_time_zone, validate_calendar_name};

/// Most rules one calendar holds.
pub const MAX_CALENDAR_RULES: usize = 500;
/// Longest rule line.
pub const MAX_RULE_CHARS: usize = 200;
/// Longest description.
pub const MAX_CALENDAR_DESCRIPTION: usize = 255;

/// A calendar as stored and on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Calendar {
    /// Unique; what jobs reference.
    pub name: String,
    /// IANA zone the dates and times of the rules are in; empty = the admin's default zone.
    pub time_zone: String,
    /// Rule lines (see the module doc).
    pub rules: Vec<String>,
    pub description: String,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// One parsed rule line.
#[derive(Debug, Clone)]
enum Rule {
    /// Whole days from the first to the last, both included (one date: the same day twice).
    Days(NaiveDate, NaiveDate),
    /// Days of the week (Monday = 0) and a time-of-day window in seconds, `[from, to)`.
    Weekly {
        days: [bool; 7],
        from_s: u32,
        to_s: u32,
    },
    /// The seconds the expression matches.
    Cron(Box<CronExpr>),
}

impl Rule {
    fn contains(&self, at_ms: i64, tz: Tz) -> bool {
        let Some(local) = tz.timestamp_millis_opt(at_ms).single() else {
            return false;
        };
        match self {
            Rule::Days(first, last) => (*first..=*last).contains(&local.date_naive()),
            Rule::Weekly { days, from_s, to_s } => {
                let day = local.weekday().num_days_from_monday() as usize;
                let second = local.num_seconds_from_midnight();
                days[day] && (*from_s..*to_s).contains(&second)
            }
            // A cron "contains" the whole second it matches.
            Rule::Cron(expr) => {
                let second_ms = at_ms.div_euclid(1000) * 1000;
                expr.next_after(second_ms - 1, tz) == Some(second_ms)
            }
        }
    }
}

/// Parses one rule line; the error says what is wrong with it.
fn parse_rule(line: &str) -> Result<Rule, String> {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix("weekly ") {
        return parse_weekly(rest.trim());
    }
    if let Some(rest) = line.strip_prefix("cron ") {
        return CronExpr::parse(rest.trim())
            .map(|expr| Rule::Cron(Box::new(expr)))
            .map_err(|error| format!("bad cron expression: {error}"));
    }
    if let Some((first, last)) = line.split_once("..") {
        let (first, last) = (parse_date(first.trim())?, parse_date(last.trim())?);
        if first > last {
            return Err(format!("range ends ({last}) before it starts ({first})"));
        }
        return Ok(Rule::Days(first, last));
    }
    if line.starts_with(|c: char| c.is_ascii_digit()) {
        let day = parse_date(line)?;
        return Ok(Rule::Days(day, day));
    }
    Err(
        "expected a date (2026-12-25), a range (2026-12-24..2026-12-31), \
         'weekly DAYS [HH:MM-HH:MM]' or 'cron EXPRESSION'"
            .to_string(),
    )
}

fn parse_date(text: &str) -> Result<NaiveDate, String> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map_err(|_| format!("'{text}' is not a date (YYYY-MM-DD)"))
}

const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

fn parse_day(text: &str) -> Result<usize, String> {
    let lower = text.to_ascii_lowercase();
    DAY_NAMES
        .iter()
        .position(|name| *name == lower)
        .ok_or_else(|| format!("'{text}' is not a day (mon, tue, wed, thu, fri, sat, sun)"))
}

/// `DAYS [HH:MM-HH:MM]`: DAYS is a comma list of days and day ranges (`mon-fri,sun`).
fn parse_weekly(rest: &str) -> Result<Rule, String> {
    let mut parts = rest.split_whitespace();
    let day_list = parts
        .next()
        .ok_or("weekly needs days, e.g. 'weekly sat,sun'")?;
    let mut days = [false; 7];
    for item in day_list.split(',') {
        match item.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (parse_day(first)?, parse_day(last)?);
                if first > last {
                    return Err(format!("day range '{item}' runs backwards (mon ... sun)"));
                }
                days[first..=last].iter_mut().for_each(|day| *day = true);
            }
            None => days[parse_day(item)?] = true,
        }
    }
    let (from_s, to_s) = match parts.next() {
        None => (0, 86_400),
        Some(window) => parse_window(window)?,
    };
    if let Some(extra) = parts.next() {
        return Err(format!("unexpected '{extra}' after the time window"));
    }
    Ok(Rule::Weekly { days, from_s, to_s })
}

fn parse_window(window: &str) -> Result<(u32, u32), String> {
    let (from, to) = window
        .split_once('-')
        .ok_or_else(|| format!("'{window}' is not a time window (HH:MM-HH:MM)"))?;
    let (from_s, to_s) = (parse_time(from)?, parse_time(to)?);
    if from_s >= to_s {
        return Err(format!(
            "time window '{window}' must end after it starts (split a window over midnight \
             into two rules)"
        ));
    }
    Ok((from_s, to_s))
}

/// `HH:MM` as seconds since midnight; `24:00` is the end of the day.
fn parse_time(text: &str) -> Result<u32, String> {
    let bad = || format!("'{text}' is not a time (HH:MM, 00:00 to 24:00)");
    let (hours, minutes) = text.split_once(':').ok_or_else(bad)?;
    let hours: u32 = hours.parse().map_err(|_| bad())?;
    let minutes: u32 = minutes.parse().map_err(|_| bad())?;
    if minutes > 59 || hours > 24 || (hours == 24 && minutes > 0) {
        return Err(bad());
    }
    Ok(hours * 3600 + minutes * 60)
}

/// A calendar ready to decide occurrences.
#[derive(Debug, Clone)]
pub struct CompiledCalendar {
    name: String,
    tz: Tz,
    /// Each rule with its line, to name it in a skip reason.
    rules: Vec<(Rule, String)>,
}

impl CompiledCalendar {
    /// Compiles `calendar` (its zone already checked); the error names the first bad rule by
    /// its position (`rules[2]: ...`).
    pub fn compile(calendar: &Calendar, tz: Tz) -> Result<CompiledCalendar, String> {
        let rules = calendar
            .rules
            .iter()
            .enumerate()
            .map(|(index, line)| {
                parse_rule(line)
                    .map(|rule| (rule, line.trim().to_string()))
                    .map_err(|error| format!("rules[{index}]: {error}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(CompiledCalendar {
            name: calendar.name.clone(),
            tz,
            rules,
        })
    }

    /// The first rule line holding the instant `at_ms`, if any.
    pub fn rule_at(&self, at_ms: i64) -> Option<&str> {
        self.rules
            .iter()
            .find(|(rule, _)| rule.contains(at_ms, self.tz))
            .map(|(_, line)| line.as_str())
    }

    /// Why an occurrence at `at_ms` of a job using this calendar in `mode` does not run; `None`
    /// when it runs.
    pub fn skip_reason(&self, mode: CalendarMode, at_ms: i64) -> Option<String> {
        let name = &self.name;
        match (mode, self.rule_at(at_ms)) {
            (CalendarMode::Skip, Some(line)) => Some(format!(
                "calendar '{name}': skipped, the occurrence falls in the blackout rule '{line}'"
            )),
            (CalendarMode::Only, None) => Some(format!(
                "calendar '{name}': skipped, the occurrence is outside the calendar the job \
                 only runs in"
            )),
            _ => None,
        }
    }
}

/// Every calendar, compiled, by name: what the scan decides occurrences with.
#[derive(Debug, Clone, Default)]
pub struct CalendarBook {
    calendars: HashMap<String, CompiledCalendar>,
}

impl CalendarBook {
    /// Compiles stored calendars; one that no longer compiles (it cannot be saved so, but a
    /// database may be edited by hand) is left out with a warning, and jobs naming it run as
    /// if they had no calendar.
    pub fn build(calendars: &[Calendar], default_tz: Tz) -> CalendarBook {
        let mut book = CalendarBook::default();
        for calendar in calendars {
            let tz = if calendar.time_zone.is_empty() {
                Ok(default_tz)
            } else {
                super::zone::parse_time_zone(&calendar.time_zone)
                    .map_err(|_| format!("unknown time zone '{}'", calendar.time_zone))
            };
            match tz.and_then(|tz| CompiledCalendar::compile(calendar, tz)) {
                Ok(compiled) => {
                    book.calendars.insert(calendar.name.clone(), compiled);
                }
                Err(error) => tracing::warn!(calendar = %calendar.name, %error,
                    "stored calendar does not compile; jobs naming it ignore it"),
            }
        }
        book
    }

    pub fn get(&self, name: &str) -> Option<&CompiledCalendar> {
        self.calendars.get(name)
    }

    pub fn len(&self) -> usize {
        self.calendars.len()
    }

    pub fn is_empty(&self) -> bool {
        self.calendars.is_empty()
    }
}

/// Checks a calendar for create/update (`prefix` names the fields: `calendar.rules[2]: ...`);
/// returns it compiled.
pub fn validate_calendar(
    calendar: &Calendar,
    default_tz: Tz,
    prefix: &str,
) -> Result<CompiledCalendar, Refusal> {
    let field = |name: &str| field_name(prefix, name);
    validate_calendar_name(&calendar.name, &field("name"))?;
    if calendar.description.chars().count() > MAX_CALENDAR_DESCRIPTION {
        return Err(Refusal::invalid(
            &field("description"),
            format!("at most {MAX_CALENDAR_DESCRIPTION} characters"),
        ));
    }
    let tz = resolve_time_zone(&calendar.time_zone, default_tz, &field("time_zone"))?;
    if calendar.rules.len() > MAX_CALENDAR_RULES {
        return Err(Refusal::invalid(
            &field("rules"),
            format!(
                "at most {MAX_CALENDAR_RULES} rules, got {}",
                calendar.rules.len()
            ),
        ));
    }
    for (index, line) in calendar.rules.iter().enumerate() {
        let rule_field = field(&format!("rules[{index}]"));
        if line.trim().is_empty() {
            return Err(Refusal::invalid(&rule_field, "empty rule"));
        }
        if line.chars().count() > MAX_RULE_CHARS {
            return Err(Refusal::invalid(
                &rule_field,
                format!("at most {MAX_RULE_CHARS} characters"),
            ));
        }
    }
    CompiledCalendar::compile(calendar, tz).map_err(|error| {
        // `compile` says `rules[i]: ...`; the field prefix goes in front.
        Refusal::InvalidArgument(field(&error))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calendar(zone: &str, rules: &[&str]) -> CompiledCalendar {
        let stored = Calendar {
            name: "c".into(),
            time_zone: zone.into(),
            rules: rules.iter().map(|rule| rule.to_string()).collect(),
            ..Calendar::default()
        };
        let tz = super::super::zone::parse_time_zone(zone).unwrap_or(chrono_tz::UTC);
        match CompiledCalendar::compile(&stored, tz) {
            Ok(compiled) => compiled,
            Err(error) => panic!("test calendar does not compile: {error}"),
        }
    }

    fn at(text: &str, tz: Tz) -> i64 {
        let wall = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
            .unwrap_or_else(|error| panic!("bad test time {text}: {error}"));
        tz.from_local_datetime(&wall)
            .single()
            .map(|time| time.timestamp_millis())
            .unwrap_or_else(|| panic!("ambiguous test time {text}"))
    }

    #[test]
    fn dates_and_ranges_hold_whole_days_in_the_calendars_zone() {
        let tz: Tz = chrono_tz::Asia::Shanghai;
        let holidays = calendar("Asia/Shanghai", &["2026-10-01..2026-10-07", "2026-12-25"]);
        assert_eq!(
            holidays.rule_at(at("2026-10-01 00:00:00", tz)),
            Some("2026-10-01..2026-10-07")
        );
        assert!(holidays.rule_at(at("2026-10-07 23:59:59", tz)).is_some());
        assert!(holidays.rule_at(at("2026-10-08 00:00:00", tz)).is_none());
        assert_eq!(
            holidays.rule_at(at("2026-12-25 12:00:00", tz)),
            Some("2026-12-25")
        );
        // 2026-12-24 20:00 UTC is already the 25th in Shanghai.
        assert!(
            holidays
                .rule_at(at("2026-12-24 20:00:00", chrono_tz::UTC))
                .is_some()
        );
    }

    #[test]
    fn weekly_windows_hold_their_days_and_times() {
        let tz = chrono_tz::UTC;
        let hours = calendar("UTC", &["weekly mon-fri 09:00-17:00", "weekly sun"]);
        // 2026-12-07 is a Monday.
        assert!(hours.rule_at(at("2026-12-07 09:00:00", tz)).is_some());
        assert!(hours.rule_at(at("2026-12-07 16:59:59", tz)).is_some());
        assert!(hours.rule_at(at("2026-12-07 17:00:00", tz)).is_none());
        assert!(
            hours.rule_at(at("2026-12-12 10:00:00", tz)).is_none(),
            "Saturday"
        );
        assert_eq!(
            hours.rule_at(at("2026-12-13 23:59:59", tz)),
            Some("weekly sun")
        );
        let evening = calendar("UTC", &["weekly SAT,Wed 22:00-24:00"]);
        assert!(evening.rule_at(at("2026-12-09 23:30:00", tz)).is_some());
        assert!(evening.rule_at(at("2026-12-10 23:30:00", tz)).is_none());
    }

    #[test]
    fn a_cron_rule_holds_the_seconds_it_matches() {
        let tz = chrono_tz::UTC;
        let noon = calendar("UTC", &["cron 0 0 12 * * ?"]);
        assert!(noon.rule_at(at("2026-12-07 12:00:00", tz)).is_some());
        assert!(noon.rule_at(at("2026-12-07 12:00:00", tz) + 500).is_some());
        assert!(noon.rule_at(at("2026-12-07 12:00:01", tz)).is_none());
        let every_minute_at_noon = calendar("UTC", &["cron * * 12 * * ?"]);
        assert!(
            every_minute_at_noon
                .rule_at(at("2026-12-07 12:34:56", tz))
                .is_some()
        );
    }

    #[test]
    fn modes_name_the_calendar_and_the_rule() {
        let tz = chrono_tz::UTC;
        let holidays = calendar("UTC", &["2026-12-25"]);
        let christmas = at("2026-12-25 08:00:00", tz);
        let reason = holidays.skip_reason(CalendarMode::Skip, christmas);
        assert_eq!(
            reason.as_deref(),
            Some("calendar 'c': skipped, the occurrence falls in the blackout rule '2026-12-25'")
        );
        assert!(
            holidays
                .skip_reason(CalendarMode::Only, christmas)
                .is_none()
        );
        let boxing_day = at("2026-12-26 08:00:00", tz);
        assert!(
            holidays
                .skip_reason(CalendarMode::Skip, boxing_day)
                .is_none()
        );
        let outside = holidays.skip_reason(CalendarMode::Only, boxing_day);
        assert!(outside.is_some_and(|reason| reason.contains("outside the calendar")));
    }

    #[test]
    fn bad_rules_are_refused_with_what_is_wrong() {
        let refused = |line: &str| match parse_rule(line) {
            Ok(rule) => panic!("'{line}' parsed as {rule:?}"),
            Err(error) => error,
        };
        assert_eq!(
            refused("2026-13-01"),
            "'2026-13-01' is not a date (YYYY-MM-DD)"
        );
        assert_eq!(
            refused("2026-12-31..2026-12-01"),
            "range ends (2026-12-01) before it starts (2026-12-31)"
        );
        assert!(refused("weekly fri-mon").contains("runs backwards"));
        assert!(refused("weekly funday").contains("'funday' is not a day"));
        assert!(refused("weekly mon 17:00-09:00").contains("must end after it starts"));
        assert!(refused("weekly mon 09:00-25:00").contains("'25:00' is not a time"));
        assert!(refused("weekly mon 09:00-10:00 extra").contains("unexpected 'extra'"));
        assert!(refused("cron 0 0").starts_with("bad cron expression"));
        assert!(refused("holidays").starts_with("expected a date"));
        let stored = Calendar {
            rules: vec!["2026-12-25".into(), "nope".into()],
            ..Calendar::default()
        };
        let error = CompiledCalendar::compile(&stored, chrono_tz::UTC).err();
        assert!(error.is_some_and(|error| error.starts_with("rules[1]: ")));
        let named = Calendar {
            name: "holidays".into(),
            ..stored
        };
        let refusal = validate_calendar(&named, chrono_tz::UTC, "calendar").err();
        assert_eq!(
            refusal,
            Some(Refusal::InvalidArgument(
                "calendar.rules[1]: expected a date (2026-12-25), a range (2026-12-24..2026-12-31), \
                 'weekly DAYS [HH:MM-HH:MM]' or 'cron EXPRESSION'"
                    .into()
            ))
        );
        let unnamed = Calendar::default();
        assert_eq!(
            validate_calendar(&unnamed, chrono_tz::UTC, "calendar").err(),
            Some(Refusal::InvalidArgument("calendar.name: required".into()))
        );
        assert!(validate_calendar_name("a b", "name").is_err());
    }
}
