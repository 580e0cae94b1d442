//! From matching wall-clock times to instants: the part of cron evaluation that knows about
//! time zones and applies a job's daylight-saving policy (`model::dst`).
//!
//! The wall-clock search (`CronExpr::next_local`) walks local times in order. Mapped to instants
//! that order holds everywhere but in a fall-back overlap, where each wall time has a first
//! instant (in the first pass over the repeated hour) and a second one (an overlap's length
//! later). Taking always the first, or always the second, instant of a wall time keeps the
//! order, so each of those is one forward walk ([`CronExpr::next_in_pass`]); firing at both is
//! the earlier of the two walks' answers, which visits every instant once and in order.

use chrono::{DateTime, Datelike, LocalResult, NaiveDateTime, TimeDelta, TimeZone};
use chrono_tz::Tz;

use super::{CronExpr, MAX_YEAR};
use crate::model::dst::{DstGapPolicy, DstOverlapPolicy, DstPolicy};

/// Which instant of a repeated wall time a walk takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    First,
    Second,
}

impl CronExpr {
    /// First fire time strictly after `after_ms` (epoch milliseconds),
    /// evaluated in zone `tz` with the default daylight-saving policy. The
    /// result is epoch milliseconds on a whole second; `None` if there is no
    /// fire time up to [`MAX_YEAR`].
    pub fn next_after(&self, after_ms: i64, tz: Tz) -> Option<i64> {
        self.next_after_with(after_ms, tz, DstPolicy::default())
    }

    /// [`CronExpr::next_after`] with a job's daylight-saving policy.
    pub fn next_after_with(&self, after_ms: i64, tz: Tz, dst: DstPolicy) -> Option<i64> {
        let start = after_ms.div_euclid(1000).checked_add(1)?;
        let first = || self.next_in_pass(start, tz, Pass::First, dst.gap);
        let second = || self.next_in_pass(start, tz, Pass::Second, dst.gap);
        let secs = match dst.overlap {
            DstOverlapPolicy::First => first(),
            DstOverlapPolicy::Second => second(),
            DstOverlapPolicy::Both => match (first(), second()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }?;
        secs.checked_mul(1000)
    }

    /// First fire at or after the instant `start` (epoch seconds) when a repeated wall time
    /// fires in `pass` only and a skipped one as `gap` says.
    fn next_in_pass(&self, start: i64, tz: Tz, pass: Pass, gap: DstGapPolicy) -> Option<i64> {
        let mut from = start_wall(tz, start, pass)?;
        loop {
            let wall = self.next_local(from)?;
            let at = match tz.from_local_datetime(&wall) {
                LocalResult::Single(t) => Some(t.timestamp()),
                LocalResult::Ambiguous(first, second) => Some(match pass {
                    Pass::First => first.timestamp(),
                    Pass::Second => second.timestamp(),
                }),
                LocalResult::None => {
                    let end = end_of_transition(tz, wall)?;
                    if gap == DstGapPolicy::Skip {
                        // Nothing in this gap fires: go on from where it ends.
                        from = end;
                        continue;
                    }
                    tz.from_local_datetime(&end)
                        .earliest()
                        .map(|t| t.timestamp())
                }
            };
            match at {
                Some(at) if at >= start => return Some(at),
                // Unreachable when `start_wall` did its job; kept so that a surprising zone
                // rule can only cost iterations, never a result that goes backwards.
                _ => from = wall + TimeDelta::seconds(1),
            }
        }
    }
}

/// Wall-clock time from which a walk in `pass` searches for the first fire at or after the
/// instant `start` (epoch seconds).
///
/// * `start` in the second pass of an overlap: every first instant of that overlap is before
///   `start`, so a first-pass walk begins where the overlap ends.
/// * `start` in the first pass: every second instant of that overlap is after `start`, so a
///   second-pass walk begins where the overlap begins.
/// * `start` the instant a gap ends: the wall times inside the gap map to `start` itself, so
///   the walk begins where the gap begins.
fn start_wall(tz: Tz, start: i64, pass: Pass) -> Option<NaiveDateTime> {
    let wall = local_wall(tz, start)?;
    if wall.year() > MAX_YEAR {
        return None;
    }
    match tz.from_local_datetime(&wall) {
        LocalResult::Ambiguous(first, _) => {
            let in_first_pass = first.timestamp() == start;
            match (pass, in_first_pass) {
                (Pass::First, false) => end_of_transition(tz, wall),
                (Pass::Second, true) => start_of_transition(tz, wall),
                _ => Some(wall),
            }
        }
        _ => {
            let after_previous = local_wall(tz, start - 1)? + TimeDelta::seconds(1);
            let gap_ends_at_start =
                matches!(tz.from_local_datetime(&after_previous), LocalResult::None);
            Some(if gap_ends_at_start {
                after_previous
            } else {
                wall
            })
        }
    }
}

/// The wall-clock time of the instant `secs` (epoch seconds) in `tz`.
fn local_wall(tz: Tz, secs: i64) -> Option<NaiveDateTime> {
    Some(
        DateTime::from_timestamp(secs, 0)?
            .with_timezone(&tz)
            .naive_local(),
    )
}

/// First wall time after `wall` (which lies in a gap or an overlap) that maps to exactly one
/// instant, to the second.
fn end_of_transition(tz: Tz, wall: NaiveDateTime) -> Option<NaiveDateTime> {
    nearest_single(tz, wall, 1)
}

/// First wall time of the gap or overlap that `wall` lies in.
fn start_of_transition(tz: Tz, wall: NaiveDateTime) -> Option<NaiveDateTime> {
    Some(nearest_single(tz, wall, -1)? + TimeDelta::seconds(1))
}

/// Nearest wall time from `wall` (in a gap or an overlap) in `direction` (1 = later, -1 =
/// earlier) that maps to exactly one instant. Transitions are at most a day or so long, so
/// gallop in doubling steps, then bisect.
fn nearest_single(tz: Tz, wall: NaiveDateTime, direction: i64) -> Option<NaiveDateTime> {
    let is_single = |t: NaiveDateTime| matches!(tz.from_local_datetime(&t), LocalResult::Single(_));
    let mut inside = wall;
    let mut step = 3600;
    let mut outside = inside + TimeDelta::seconds(direction * step);
    while !is_single(outside) {
        // No real zone has a transition anywhere near this long.
        if step > 8 * 86_400 {
            return None;
        }
        inside = outside;
        step *= 2;
        outside = inside + TimeDelta::seconds(direction * step);
    }
    while (outside - inside).num_seconds().abs() > 1 {
        let mid = inside + TimeDelta::seconds((outside - inside).num_seconds() / 2);
        if is_single(mid) {
            outside = mid;
        } else {
            inside = mid;
        }
    }
    Some(outside)
}

#[cfg(test)]
mod tests;
