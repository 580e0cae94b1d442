//! The two ends of a run the metrics count apart: how its dispatch went ([`Dispatch`], counted
//! when the admin decides it) and how it finished ([`RunEnd`], counted when the result is
//! written). `xjob_fires_total` is their older mix, kept for existing alerts.

/// How a fire's dispatch went, counted at the moment it is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    /// An executor accepted the run (or the `Run` call's answer was lost after it may have
    /// been delivered: the run is treated as sent).
    Sent,
    /// Not delivered: no executor online, connection refused, group gone.
    Failed,
    /// The executor answered and refused the run.
    Refused,
    /// No trigger-pool slot within `pool_wait`, or beyond `max_unsent_runs`.
    Overloaded,
    /// Deliberately not run: a misfire, a stopped or rescheduled job.
    Skipped,
}

impl Dispatch {
    pub(super) const ALL: [Dispatch; 5] = [
        Dispatch::Sent,
        Dispatch::Failed,
        Dispatch::Refused,
        Dispatch::Overloaded,
        Dispatch::Skipped,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            Dispatch::Sent => "sent",
            Dispatch::Failed => "failed",
            Dispatch::Refused => "refused",
            Dispatch::Overloaded => "overloaded",
            Dispatch::Skipped => "skipped",
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// How a sent run finished, counted when its final status is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    Success,
    /// The handler failed (or the executor reported an unknown status).
    Failed,
    Timeout,
    Killed,
    /// The executor stopped holding it without a result (`monitor::lost`).
    Lost,
}

impl RunEnd {
    pub(super) const ALL: [RunEnd; 5] = [
        RunEnd::Success,
        RunEnd::Failed,
        RunEnd::Timeout,
        RunEnd::Killed,
        RunEnd::Lost,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            RunEnd::Success => "success",
            RunEnd::Failed => "failed",
            RunEnd::Timeout => "timeout",
            RunEnd::Killed => "killed",
            RunEnd::Lost => "lost",
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// The `xjob_fires_total` outcomes: every dispatch outcome but `sent`, and every run end.
pub(super) const FIRE_OUTCOMES: [&str; 8] = [
    "success",
    "failed",
    "timeout",
    "killed",
    "lost",
    "skipped",
    "overloaded",
    "refused",
];
