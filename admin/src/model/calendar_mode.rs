//! What a job does with the occurrences its calendar (`model::calendar`) holds: a file of its
//! own, so a job names it without importing the calendar rules.

/// What a job does with the occurrences its calendar holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CalendarMode {
    /// Occurrences inside the calendar are skipped (a blackout).
    #[default]
    Skip,
    /// Only occurrences inside the calendar run; the others are skipped.
    Only,
}

impl CalendarMode {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            CalendarMode::Skip => "SKIP",
            CalendarMode::Only => "ONLY",
        }
    }

    pub fn parse(text: &str) -> Option<CalendarMode> {
        match text {
            "SKIP" => Some(CalendarMode::Skip),
            "ONLY" => Some(CalendarMode::Only),
            _ => None,
        }
    }
}
