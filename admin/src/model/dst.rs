//! A job's daylight-saving policy: what its cron does with a local time that does not exist
//! (the clocks spring forward over it) or that occurs twice (they fall back over it) in the
//! job's zone. The defaults are what every job did before the policy existed. The search that
//! applies it lives with the cron evaluator (`model::cron`); this module only names the choices.

/// A local time inside a spring-forward gap (02:30 on the night 02:00 jumps to 03:00).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DstGapPolicy {
    /// Fire once at the first valid instant after the gap (03:00 in the example); several
    /// times inside one gap make a single fire.
    #[default]
    NextValidTime,
    /// Do not fire: the time does not exist that day, like 30 February.
    Skip,
}

/// A local time inside a fall-back overlap (02:30 on the night 03:00 goes back to 02:00).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DstOverlapPolicy {
    /// Fire once, at the first occurrence (still daylight time).
    #[default]
    First,
    /// Fire once, at the second occurrence (already standard time).
    Second,
    /// Fire at both occurrences, an hour apart.
    Both,
}

/// Both halves of the policy; the default is the behaviour of a job that sets neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DstPolicy {
    pub gap: DstGapPolicy,
    pub overlap: DstOverlapPolicy,
}

impl DstPolicy {
    /// Whether it differs from the default (validation names the fields a job sets).
    pub fn is_default(self) -> bool {
        self == DstPolicy::default()
    }
}

impl DstGapPolicy {
    pub const ALL: &'static [DstGapPolicy] = &[DstGapPolicy::NextValidTime, DstGapPolicy::Skip];

    /// The stored name (also the proto enum's name without its prefix).
    pub fn as_str(self) -> &'static str {
        match self {
            DstGapPolicy::NextValidTime => "NEXT_VALID_TIME",
            DstGapPolicy::Skip => "SKIP",
        }
    }

    /// Parses a stored name; `None` for anything else.
    pub fn parse(text: &str) -> Option<DstGapPolicy> {
        Self::ALL.iter().copied().find(|p| p.as_str() == text)
    }
}

impl DstOverlapPolicy {
    pub const ALL: &'static [DstOverlapPolicy] = &[
        DstOverlapPolicy::First,
        DstOverlapPolicy::Second,
        DstOverlapPolicy::Both,
    ];

    /// The stored name (also the proto enum's name without its prefix).
    pub fn as_str(self) -> &'static str {
        match self {
            DstOverlapPolicy::First => "FIRST",
            DstOverlapPolicy::Second => "SECOND",
            DstOverlapPolicy::Both => "BOTH",
        }
    }

    /// Parses a stored name; `None` for anything else.
    pub fn parse(text: &str) -> Option<DstOverlapPolicy> {
        Self::ALL.iter().copied().find(|p| p.as_str() == text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_round_trip_and_defaults_are_todays_behaviour() {
        for &p in DstGapPolicy::ALL {
            assert_eq!(DstGapPolicy::parse(p.as_str()), Some(p));
        }
        for &p in DstOverlapPolicy::ALL {
            assert_eq!(DstOverlapPolicy::parse(p.as_str()), Some(p));
        }
        assert_eq!(DstGapPolicy::parse("skip"), None);
        assert_eq!(DstGapPolicy::default(), DstGapPolicy::NextValidTime);
        assert_eq!(DstOverlapPolicy::default(), DstOverlapPolicy::First);
        assert!(DstPolicy::default().is_default());
    }
}
