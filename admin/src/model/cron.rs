//! Quartz-style cron expressions: parsing and evaluation.
//!
//! This module owns the cron semantics XXL-JOB exposes to users (the Quartz
//! `CronExpression` dialect). It is pure: no I/O and no clock reads — the
//! caller passes the reference instant and the time zone in.
//!
//! # Syntax
//!
//! Six or seven whitespace-separated fields:
//! `second minute hour day-of-month month day-of-week [year]`.
//! Seconds are mandatory. Months accept `JAN`-`DEC`, days of week `SUN`-`SAT`
//! (`1` = Sunday, `7` = Saturday), case-insensitively. Every field accepts
//! `*`, lists (`,`), ranges (`-`, wrapping around when the start is greater
//! than the end, e.g. `22-2` or `FRI-MON`) and increments (`*/n`, `a/n`,
//! `a-b/n`). Exactly one of day-of-month / day-of-week must be `?`.
//! Day-of-month also accepts `L`, `L-n`, `nW` and `LW`; day-of-week accepts
//! `L` (= Saturday), `nL` (last weekday `n` of the month) and `n#k` (the
//! `k`-th weekday `n` of the month). These special forms must stand alone in
//! their field.
//!
//! # Representation
//!
//! Every plain field is a `ValueSet` bitset, so "the next allowed value at or
//! after `x`" is a couple of word operations. The day-of-month and
//! day-of-week fields collapse into a single `DayRule`, because exactly one
//! of them is active; a rule is evaluated per concrete month, which is what
//! makes `L`, `W`, `#` and short months (February, 30-day months) correct.
//!
//! Evaluation walks wall-clock fields from the most to the least significant
//! one (year → month → day → hour → minute → second). When a field has no
//! allowed value left, the next larger unit is incremented and the smaller
//! ones are reset, so the cost is a handful of lookups per call rather than a
//! scan over seconds. The search gives up after [`MAX_YEAR`].
//!
//! # Time zones and daylight-saving time
//!
//! The expression is matched against local wall-clock time in the zone given
//! to [`CronExpr::next_after`]; the matching wall time is then mapped to an
//! instant by the job's [`DstPolicy`](super::dst::DstPolicy) (the `dst`
//! child module). By default:
//!
//! * **Gap (spring forward)**: a wall time that does not exist fires once, at
//!   the first valid instant after the gap (the instant the gap ends, e.g.
//!   03:00 local when clocks jump from 02:00 to 03:00). Several scheduled
//!   times inside the same gap all map to that single instant, so it fires
//!   only once. With `Skip` it does not fire.
//! * **Overlap (fall back)**: a wall time that occurs twice fires once, at
//!   its first (earlier, daylight-time) occurrence. Each wall-clock time fires
//!   at most once, so wall times repeated during the second pass are skipped:
//!   an every-30-minutes job fires at 02:00 and 02:30 daylight time and then
//!   at 03:00 standard time, with nothing during the repeated hour. `Second`
//!   fires at the second occurrence instead, `Both` at each.
//!
//! The result is always strictly later than the reference instant, also when
//! that instant lies inside the repeated hour.

use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};
use chrono_tz::Tz;

/// Last year the evaluator searches (inclusive): roughly "now + 100 years",
/// like Quartz, but fixed so results stay deterministic. Expressions whose
/// next match lies beyond it yield `None`. The year field still accepts
/// values up to 2199 for compatibility with existing Quartz expressions.
pub const MAX_YEAR: i32 = 2126;

/// Errors produced while parsing a cron expression or a time zone name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// The expression contains no fields at all.
    #[error("cron expression is empty")]
    Empty,
    /// The expression does not have 6 or 7 fields.
    #[error(
        "expected 6 or 7 fields (second minute hour day-of-month month day-of-week [year]), found {0}"
    )]
    FieldCount(usize),
    /// A numeric value lies outside the range allowed for its field.
    #[error("{field}: value {value} out of range {min}-{max}")]
    OutOfRange {
        field: &'static str,
        value: u32,
        min: u32,
        max: u32,
    },
    /// An increment (`/n`) is zero or not smaller than the field size.
    #[error("{field}: increment {step} out of range 1-{max}")]
    InvalidIncrement {
        field: &'static str,
        step: u32,
        max: u32,
    },
    /// Any other malformed token in a field.
    #[error("{field}: {message}")]
    Syntax {
        field: &'static str,
        message: String,
    },
    /// Neither day-of-month nor day-of-week is `?`.
    #[error("support for specifying both a day-of-week and a day-of-month is not implemented")]
    BothDaysSpecified,
    /// Both day-of-month and day-of-week are `?`.
    #[error("day-of-month and day-of-week cannot both be '?': one of them must be specified")]
    NoDaySpecified,
}

/// Static description of one plain field: its name (used in error
/// messages), its inclusive range, and optional symbolic names for
/// `min`, `min + 1`, ...
struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

impl FieldSpec {
    const fn new(name: &'static str, min: u32, max: u32) -> Self {
        FieldSpec {
            name,
            min,
            max,
            names: &[],
        }
    }

    fn size(&self) -> u32 {
        self.max - self.min + 1
    }

    fn syntax(&self, message: String) -> CronError {
        CronError::Syntax {
            field: self.name,
            message,
        }
    }
}

const SECOND: FieldSpec = FieldSpec::new("second", 0, 59);
const MINUTE: FieldSpec = FieldSpec::new("minute", 0, 59);
const HOUR: FieldSpec = FieldSpec::new("hour", 0, 23);
const DAY_OF_MONTH: FieldSpec = FieldSpec::new("day-of-month", 1, 31);
const MONTH: FieldSpec = FieldSpec {
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
    ..FieldSpec::new("month", 1, 12)
};
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
    ..FieldSpec::new("day-of-week", 1, 7)
};
/// Quartz's year range; evaluation additionally stops at [`MAX_YEAR`].
const YEAR: FieldSpec = FieldSpec::new("year", 1970, 2199);

/// Day-of-week numbers used by Quartz (1 = Sunday).
const SUNDAY: u32 = 1;
const SATURDAY: u32 = 7;

/// A set of up to 256 values starting at `base`, stored as a bitset.
#[derive(Clone, Copy, PartialEq, Eq)]
struct ValueSet {
    base: u32,
    words: [u64; 4],
}

impl ValueSet {
    fn empty(base: u32) -> Self {
        ValueSet {
            base,
            words: [0; 4],
        }
    }

    fn insert(&mut self, value: u32) {
        let idx = (value - self.base) as usize;
        self.words[idx / 64] |= 1 << (idx % 64);
    }

    fn contains(&self, value: u32) -> bool {
        self.next_from(value) == Some(value)
    }

    /// Smallest member `>= value`, if any.
    fn next_from(&self, value: u32) -> Option<u32> {
        let idx = value.saturating_sub(self.base) as usize;
        let mut word = idx / 64;
        if word >= self.words.len() {
            return None;
        }
        let mut bits = self.words[word] & (u64::MAX << (idx % 64));
        loop {
            if bits != 0 {
                return Some(self.base + (word * 64) as u32 + bits.trailing_zeros());
            }
            word += 1;
            bits = *self.words.get(word)?;
        }
    }

    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let mut next = self.next_from(self.base);
        std::iter::from_fn(move || {
            let current = next?;
            next = self.next_from(current + 1);
            Some(current)
        })
    }
}

impl fmt::Debug for ValueSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// The active day selector: whichever of day-of-month / day-of-week is not `?`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DayRule {
    /// Plain day-of-month values (1-31); days missing from a month never match.
    MonthDays(ValueSet),
    /// `L` / `L-n`: `n` days before the last day of the month.
    LastDay { offset: u32 },
    /// `LW`: the last weekday (Mon-Fri) of the month.
    LastWeekday,
    /// `nW`: the weekday nearest to day `n`, staying inside the month.
    NearestWeekday(u32),
    /// Plain day-of-week values (1 = Sunday .. 7 = Saturday).
    WeekDays(ValueSet),
    /// `nL`: the last occurrence of weekday `n` in the month.
    LastWeekdayOf(u32),
    /// `n#k`: the `k`-th occurrence of weekday `n` in the month.
    NthWeekdayOf { weekday: u32, nth: u32 },
}

/// Facts about one concrete month needed to evaluate a `DayRule`.
struct MonthInfo {
    len: u32,
    /// Day of week of the 1st, 1 = Sunday.
    first_dow: u32,
}

impl MonthInfo {
    fn new(year: i32, month: u32) -> Option<Self> {
        let first = NaiveDate::from_ymd_opt(year, month, 1)?;
        Some(MonthInfo {
            len: days_in_month(year, month),
            first_dow: first.weekday().num_days_from_sunday() + 1,
        })
    }

    fn dow(&self, day: u32) -> u32 {
        (self.first_dow - 1 + day - 1) % 7 + 1
    }

    /// Weekday nearest to `day` without leaving the month (Quartz `W`).
    fn nearest_weekday(&self, day: u32) -> u32 {
        match self.dow(day) {
            SATURDAY if day == 1 => 3,
            SATURDAY => day - 1,
            SUNDAY if day == self.len => day - 2,
            SUNDAY => day + 1,
            _ => day,
        }
    }
}

fn days_in_month(year: i32, month: u32) -> u32 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl DayRule {
    fn matches(&self, day: u32, m: &MonthInfo) -> bool {
        match *self {
            DayRule::MonthDays(set) => set.contains(day),
            DayRule::LastDay { offset } => m.len.checked_sub(offset) == Some(day),
            DayRule::LastWeekday => day == m.nearest_weekday(m.len),
            DayRule::NearestWeekday(n) => n <= m.len && day == m.nearest_weekday(n),
            DayRule::WeekDays(set) => set.contains(m.dow(day)),
            DayRule::LastWeekdayOf(w) => m.dow(day) == w && day + 7 > m.len,
            DayRule::NthWeekdayOf { weekday, nth } => {
                m.dow(day) == weekday && (day - 1) / 7 + 1 == nth
            }
        }
    }

    /// First matching day `>= from` in the given month.
    fn next_day(&self, year: i32, month: u32, from: u32) -> Option<u32> {
        let info = MonthInfo::new(year, month)?;
        (from..=info.len).find(|&day| self.matches(day, &info))
    }
}

/// A parsed Quartz cron expression. Parse with [`CronExpr::parse`] (or
/// `str::parse`), evaluate with [`CronExpr::next_after`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    seconds: ValueSet,
    minutes: ValueSet,
    hours: ValueSet,
    days: DayRule,
    months: ValueSet,
    /// `None` when the year field is absent (every year).
    years: Option<ValueSet>,
}

impl FromStr for CronExpr {
    type Err = CronError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CronExpr::parse(s)
    }
}

impl CronExpr {
    /// Parses a 6- or 7-field Quartz cron expression
    /// (`second minute hour day-of-month month day-of-week [year]`).
    pub fn parse(expr: &str) -> Result<CronExpr, CronError> {
        let fields: Vec<&str> = expr.split_whitespace().collect();
        match fields.len() {
            0 => return Err(CronError::Empty),
            6 | 7 => {}
            n => return Err(CronError::FieldCount(n)),
        }
        Ok(CronExpr {
            seconds: parse_set(fields[0], &SECOND)?,
            minutes: parse_set(fields[1], &MINUTE)?,
            hours: parse_set(fields[2], &HOUR)?,
            days: parse_day_rule(fields[3], fields[5])?,
            months: parse_set(fields[4], &MONTH)?,
            years: fields.get(6).map(|f| parse_set(f, &YEAR)).transpose()?,
        })
    }

    /// The next `count` fire times after `after_ms`, strictly increasing
    /// (fewer if the schedule ends before [`MAX_YEAR`]).
    pub fn upcoming(&self, after_ms: i64, tz: Tz, count: usize) -> Vec<i64> {
        let mut out = Vec::with_capacity(count.min(1024));
        let mut cursor = after_ms;
        while out.len() < count {
            match self.next_after(cursor, tz) {
                Some(next) => {
                    out.push(next);
                    cursor = next;
                }
                None => break,
            }
        }
        out
    }

    /// Smallest matching wall-clock time `>= from`, ignoring time zones.
    fn next_local(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut c = Cursor::new(from);
        loop {
            let year = self.next_year(c.year)?;
            if year != c.year {
                c = Cursor::start_of_year(year);
            }
            let Some(month) = self.months.next_from(c.month) else {
                c = Cursor::start_of_year(c.year + 1);
                continue;
            };
            if month != c.month {
                c.set(Unit::Month, month);
            }
            let Some(day) = self.days.next_day(c.year, c.month, c.day) else {
                c.bump(Unit::Month);
                continue;
            };
            if day != c.day {
                c.set(Unit::Day, day);
            }
            let Some(hour) = self.hours.next_from(c.hour) else {
                c.bump(Unit::Day);
                continue;
            };
            if hour != c.hour {
                c.set(Unit::Hour, hour);
            }
            let Some(minute) = self.minutes.next_from(c.minute) else {
                c.bump(Unit::Hour);
                continue;
            };
            if minute != c.minute {
                c.set(Unit::Minute, minute);
            }
            let Some(second) = self.seconds.next_from(c.second) else {
                c.bump(Unit::Minute);
                continue;
            };
            c.second = second;
            return c.to_naive();
        }
    }

    /// First allowed year `>= year`, bounded by [`MAX_YEAR`].
    fn next_year(&self, year: i32) -> Option<i32> {
        let next = match &self.years {
            None => year,
            Some(set) => {
                let from = u32::try_from(year).unwrap_or(0);
                i32::try_from(set.next_from(from)?).ok()?
            }
        };
        (next <= MAX_YEAR).then_some(next)
    }
}

/// Calendar units the search cursor can advance.
#[derive(Clone, Copy)]
enum Unit {
    Month,
    Day,
    Hour,
    Minute,
}

/// Broken-down wall-clock position of the search. Fields may temporarily
/// overflow (hour 24, day 32, month 13); the next lookup then finds no
/// allowed value and carries into the larger unit.
struct Cursor {
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl Cursor {
    fn new(t: NaiveDateTime) -> Self {
        Cursor {
            year: t.year(),
            month: t.month(),
            day: t.day(),
            hour: t.hour(),
            minute: t.minute(),
            second: t.second(),
        }
    }

    fn start_of_year(year: i32) -> Self {
        Cursor {
            year,
            month: 1,
            day: 1,
            hour: 0,
            minute: 0,
            second: 0,
        }
    }

    /// Sets `unit` to `value` and resets every smaller unit to its minimum.
    fn set(&mut self, unit: Unit, value: u32) {
        self.second = 0;
        match unit {
            Unit::Month => {
                (self.month, self.day, self.hour, self.minute) = (value, 1, 0, 0);
            }
            Unit::Day => (self.day, self.hour, self.minute) = (value, 0, 0),
            Unit::Hour => (self.hour, self.minute) = (value, 0),
            Unit::Minute => self.minute = value,
        }
    }

    /// Moves to the start of the next `unit`.
    fn bump(&mut self, unit: Unit) {
        let value = match unit {
            Unit::Month => self.month,
            Unit::Day => self.day,
            Unit::Hour => self.hour,
            Unit::Minute => self.minute,
        };
        self.set(unit, value + 1);
    }

    fn to_naive(&self) -> Option<NaiveDateTime> {
        NaiveDate::from_ymd_opt(self.year, self.month, self.day)?.and_hms_opt(
            self.hour,
            self.minute,
            self.second,
        )
    }
}

/// Parses the day-of-month and day-of-week fields into the single active rule.
fn parse_day_rule(dom: &str, dow: &str) -> Result<DayRule, CronError> {
    match (dom == "?", dow == "?") {
        (true, true) => Err(CronError::NoDaySpecified),
        (false, false) => Err(CronError::BothDaysSpecified),
        (false, true) => parse_day_of_month(dom),
        (true, false) => parse_day_of_week(dow),
    }
}

fn parse_day_of_month(text: &str) -> Result<DayRule, CronError> {
    let upper = text.to_ascii_uppercase();
    if !upper.contains(['L', 'W']) {
        return parse_set(text, &DAY_OF_MONTH).map(DayRule::MonthDays);
    }
    if upper.contains([',', '/']) {
        return Err(DAY_OF_MONTH.syntax(format!(
            "'L' and 'W' cannot be combined with other values in '{text}'"
        )));
    }
    if upper == "L" {
        return Ok(DayRule::LastDay { offset: 0 });
    }
    if upper == "LW" {
        return Ok(DayRule::LastWeekday);
    }
    if let Some(offset) = upper.strip_prefix("L-") {
        return match parse_number(offset) {
            Some(n) if n <= 30 => Ok(DayRule::LastDay { offset: n }),
            _ => Err(DAY_OF_MONTH.syntax(format!(
                "offset in '{text}' must be a number between 0 and 30"
            ))),
        };
    }
    if let Some(day) = upper
        .strip_suffix('W')
        .filter(|d| parse_number(d).is_some())
    {
        return parse_value(day, &DAY_OF_MONTH).map(DayRule::NearestWeekday);
    }
    Err(DAY_OF_MONTH.syntax(format!("invalid value '{text}'")))
}

fn parse_day_of_week(text: &str) -> Result<DayRule, CronError> {
    let upper = text.to_ascii_uppercase();
    if let Some((weekday, nth)) = upper.split_once('#') {
        if upper.contains([',', '-', '/']) || nth.contains('#') {
            return Err(DAY_OF_WEEK.syntax(format!(
                "'#' must be a single term 'weekday#n', got '{text}'"
            )));
        }
        let weekday = parse_value(weekday, &DAY_OF_WEEK)?;
        return match parse_number(nth) {
            Some(nth @ 1..=5) => Ok(DayRule::NthWeekdayOf { weekday, nth }),
            _ => Err(DAY_OF_WEEK.syntax(format!("occurrence in '{text}' must be between 1 and 5"))),
        };
    }
    if upper == "L" {
        let mut saturday = ValueSet::empty(DAY_OF_WEEK.min);
        saturday.insert(SATURDAY);
        return Ok(DayRule::WeekDays(saturday));
    }
    if let Some(weekday) = upper.strip_suffix('L') {
        if upper.contains([',', '-', '/']) {
            return Err(DAY_OF_WEEK.syntax(format!(
                "'L' cannot be combined with other values in '{text}'"
            )));
        }
        return parse_value(weekday, &DAY_OF_WEEK).map(DayRule::LastWeekdayOf);
    }
    parse_set(text, &DAY_OF_WEEK).map(DayRule::WeekDays)
}

/// Parses a plain field: a comma-separated list of `*`, values, ranges and
/// increments.
fn parse_set(text: &str, spec: &FieldSpec) -> Result<ValueSet, CronError> {
    let mut set = ValueSet::empty(spec.min);
    for term in text.split(',') {
        parse_term(term, spec, &mut set)?;
    }
    Ok(set)
}

fn parse_term(term: &str, spec: &FieldSpec, set: &mut ValueSet) -> Result<(), CronError> {
    let (range, step) = match term.split_once('/') {
        Some((range, step)) => (range, Some(parse_step(step, spec)?)),
        None => (term, None),
    };
    let (lo, hi) = if range == "*" {
        (spec.min, spec.max)
    } else if let Some((a, b)) = range.split_once('-') {
        (parse_value(a, spec)?, parse_value(b, spec)?)
    } else {
        let value = parse_value(range, spec)?;
        // Quartz reads `a/n` as "from a to the end of the range, every n".
        (value, if step.is_some() { spec.max } else { value })
    };
    insert_stepped(set, spec, lo, hi, step.unwrap_or(1));
    Ok(())
}

/// Inserts `lo, lo+step, ...` up to `hi`; when `lo > hi` the range wraps
/// past the field maximum back to its minimum (e.g. hours `22-2`).
fn insert_stepped(set: &mut ValueSet, spec: &FieldSpec, lo: u32, hi: u32, step: u32) {
    let span = if hi >= lo {
        hi - lo
    } else {
        hi + spec.size() - lo
    };
    for offset in (0..=span).step_by(step as usize) {
        let mut value = lo + offset;
        if value > spec.max {
            value -= spec.size();
        }
        set.insert(value);
    }
}

fn parse_step(text: &str, spec: &FieldSpec) -> Result<u32, CronError> {
    let max = spec.size() - 1;
    match parse_number(text) {
        Some(step) if step >= 1 && step <= max => Ok(step),
        Some(step) => Err(CronError::InvalidIncrement {
            field: spec.name,
            step,
            max,
        }),
        None => Err(spec.syntax(format!("invalid increment '{text}'"))),
    }
}

/// Parses one value: a number within the field range or a symbolic name.
fn parse_value(text: &str, spec: &FieldSpec) -> Result<u32, CronError> {
    if let Some(value) = parse_number(text) {
        if value < spec.min || value > spec.max {
            return Err(CronError::OutOfRange {
                field: spec.name,
                value,
                min: spec.min,
                max: spec.max,
            });
        }
        return Ok(value);
    }
    let index = spec
        .names
        .iter()
        .position(|name| name.eq_ignore_ascii_case(text));
    match index {
        Some(i) => Ok(spec.min + i as u32),
        None if text == "?" || text.eq_ignore_ascii_case("L") || text.contains('#') => Err(spec
            .syntax(format!(
                "'{text}' is only allowed in day-of-month or day-of-week"
            ))),
        None => Err(spec.syntax(format!("invalid value '{text}'"))),
    }
}

/// Parses a plain decimal number (no sign); `None` for anything else,
/// including values too large for `u32`.
fn parse_number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

mod dst;

#[cfg(test)]
mod tests;
