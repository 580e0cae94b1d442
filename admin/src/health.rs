//! Whether the admin's background loops make progress: each loop reports every round it
//! finishes (or fails), and the gRPC health service and `GetDashboard` read the verdict.
//!
//! A loop that fails a round is not yet unhealthy: a single failed write (a busy database, one
//! lost connection) is retried within a second. A loop is unhealthy once it has failed without a
//! success in between for [`STALL_MS`]. The schedule cannot make progress when one of the loops
//! on the fire path (scan, claim, recorder) is unhealthy; then the admin reports NOT_SERVING,
//! even though reads (and the API) may still work, as on a full disk.

use std::sync::Mutex;

use crate::model::SharedClock;

/// How long a loop may keep failing before it counts as unhealthy.
pub const STALL_MS: i64 = 3_000;

/// The background loops that report here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    /// The schedule round (`schedule::scan`): reads due jobs, writes their fires.
    Scan,
    /// Claims of the ring's fires (`Scheduler::dispatch`).
    Claim,
    /// Writes dispatch outcomes (`trigger::recorder`).
    Recorder,
    /// Retries, alarms, child jobs (`monitor::followup`).
    Followup,
    /// Finds runs whose executor lost them (`monitor::lost`).
    LostRuns,
    /// Reads the other admins' executors (`registry::refresh`); the database probe.
    RegistryRefresh,
    /// Renews this node's lease (`schedule::run_recovery`).
    LeaseRenewal,
    /// Adopts the PENDING fires of dead admins and of this node's earlier starts
    /// (`schedule::run_recovery`).
    Adoption,
}

impl Loop {
    pub const ALL: [Loop; 8] = [
        Loop::Scan,
        Loop::Claim,
        Loop::Recorder,
        Loop::Followup,
        Loop::LostRuns,
        Loop::RegistryRefresh,
        Loop::LeaseRenewal,
        Loop::Adoption,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Loop::Scan => "scan",
            Loop::Claim => "claim",
            Loop::Recorder => "recorder",
            Loop::Followup => "followup",
            Loop::LostRuns => "lost_runs",
            Loop::RegistryRefresh => "registry_refresh",
            Loop::LeaseRenewal => "lease_renewal",
            Loop::Adoption => "adoption",
        }
    }

    /// Loops without which no fire reaches an executor (or gets its outcome written).
    fn on_fire_path(self) -> bool {
        matches!(self, Loop::Scan | Loop::Claim | Loop::Recorder)
    }

    /// Loops whose every successful round got an answer from the database.
    fn asks_the_database(self) -> bool {
        matches!(
            self,
            Loop::Scan | Loop::Claim | Loop::Recorder | Loop::LeaseRenewal | Loop::Adoption
        )
    }

    fn index(self) -> usize {
        Loop::ALL.iter().position(|l| *l == self).unwrap_or(0)
    }
}

/// One loop's state as reported.
#[derive(Debug, Clone, Default, PartialEq)]
struct LoopState {
    last_success_ms: i64,
    /// The first failure since the last success.
    failing_since_ms: Option<i64>,
    last_error: String,
}

/// A loop's state as the dashboard shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopStatus {
    pub name: &'static str,
    /// 0 = no successful round yet.
    pub last_success_ms: i64,
    /// The last error, kept until the next success.
    pub last_error: String,
    pub healthy: bool,
}

/// Whether the schedule can make progress, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub serving: bool,
    pub reason: String,
}

/// The loops' reports, shared by every loop of one admin.
pub struct Health {
    clock: SharedClock,
    loops: Mutex<[LoopState; Loop::ALL.len()]>,
}

impl Health {
    pub fn new(clock: SharedClock) -> Health {
        for which in Loop::ALL {
            crate::metrics::loop_known(which.name());
        }
        Health {
            clock,
            loops: Mutex::default(),
        }
    }

    fn states(&self) -> std::sync::MutexGuard<'_, [LoopState; Loop::ALL.len()]> {
        // Each update is a few plain assignments; a poisoned lock holds consistent data.
        self.loops
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `which` finished a round.
    pub fn succeeded(&self, which: Loop) {
        let now = self.clock.now_ms();
        let mut states = self.states();
        let state = &mut states[which.index()];
        state.last_success_ms = now;
        state.failing_since_ms = None;
        state.last_error.clear();
        crate::metrics::loop_round(which.name(), Some(now));
    }

    /// `which` failed a round with `error`.
    pub fn failed(&self, which: Loop, error: &dyn std::fmt::Display) {
        let now = self.clock.now_ms();
        let mut states = self.states();
        let state = &mut states[which.index()];
        state.failing_since_ms.get_or_insert(now);
        // Bounded: a driver error can carry a whole statement.
        state.last_error = error.to_string().chars().take(300).collect();
        crate::metrics::loop_round(which.name(), None);
    }

    /// Whether a loop got an answer from the database at or after `since_ms`: a statement that
    /// timed out meanwhile met a busy database (a full pool, a queued writer), not a dead one.
    pub fn database_answered_since(&self, since_ms: i64) -> bool {
        let states = self.states();
        Loop::ALL
            .iter()
            .zip(states.iter())
            .any(|(which, state)| which.asks_the_database() && state.last_success_ms >= since_ms)
    }

    /// Every loop's state now.
    pub fn snapshot(&self) -> Vec<LoopStatus> {
        let now = self.clock.now_ms();
        let states = self.states();
        Loop::ALL
            .iter()
            .zip(states.iter())
            .map(|(which, state)| LoopStatus {
                name: which.name(),
                last_success_ms: state.last_success_ms,
                last_error: state.last_error.clone(),
                healthy: !stalled(state, now),
            })
            .collect()
    }

    /// Serving unless a loop on the fire path has been failing for [`STALL_MS`].
    pub fn verdict(&self) -> Verdict {
        let now = self.clock.now_ms();
        let states = self.states();
        let stalled: Vec<String> = Loop::ALL
            .iter()
            .zip(states.iter())
            .filter(|(which, state)| which.on_fire_path() && stalled(state, now))
            .map(|(which, state)| {
                let since = state.failing_since_ms.unwrap_or(now);
                format!(
                    "{} failing for {} ms: {}",
                    which.name(),
                    now - since,
                    state.last_error
                )
            })
            .collect();
        Verdict {
            serving: stalled.is_empty(),
            reason: if stalled.is_empty() {
                "schedule loops make progress".to_string()
            } else {
                stalled.join("; ")
            },
        }
    }
}

/// `error` with its sources (`message: cause: …`), for a reason an operator can act on: the
/// trigger's errors say only "database unavailable", their source says why. A source whose text
/// the message already holds is left out.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn stalled(state: &LoopState, now_ms: i64) -> bool {
    state
        .failing_since_ms
        .is_some_and(|since| now_ms - since >= STALL_MS)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::ManualClock;

    #[test]
    fn a_fire_path_loop_failing_for_the_stall_time_stops_serving_until_it_succeeds() {
        let clock = Arc::new(ManualClock::at(1_000_000));
        let health = Health::new(clock.clone());
        health.succeeded(Loop::Scan);
        health.failed(Loop::Scan, &"disk full");
        clock.advance(STALL_MS - 1);
        assert!(health.verdict().serving, "a short failure is retried");
        clock.advance(1);
        let verdict = health.verdict();
        assert!(!verdict.serving);
        assert!(verdict.reason.contains("scan failing") && verdict.reason.contains("disk full"));
        let scan = &health.snapshot()[0];
        assert_eq!(
            (scan.name, scan.healthy, scan.last_success_ms),
            ("scan", false, 1_000_000)
        );
        // Another failure does not move the start of the stall.
        health.failed(Loop::Scan, &"still full");
        assert!(!health.verdict().serving);
        health.succeeded(Loop::Scan);
        assert!(health.verdict().serving);
        assert_eq!(health.snapshot()[0].last_error, "");
    }

    #[test]
    fn the_database_answered_if_a_loop_that_asks_it_succeeded_since() {
        let clock = Arc::new(ManualClock::at(1_000_000));
        let health = Health::new(clock.clone());
        health.succeeded(Loop::Claim);
        assert!(health.database_answered_since(1_000_000));
        assert!(!health.database_answered_since(1_000_001));
        // The lost-run monitor and the refresh itself are no proof: their rounds can succeed
        // without a statement, or are the one in question.
        clock.advance(10);
        health.succeeded(Loop::LostRuns);
        health.succeeded(Loop::RegistryRefresh);
        assert!(!health.database_answered_since(1_000_005));
        health.succeeded(Loop::LeaseRenewal);
        assert!(health.database_answered_since(1_000_005));
    }

    #[test]
    fn a_reason_names_the_cause_once() {
        let io = std::io::Error::other("database or disk is full");
        let error = crate::error::Error::unavailable("database unavailable", io);
        assert_eq!(
            with_causes(&error),
            "database unavailable: database or disk is full"
        );
    }

    #[test]
    fn loops_off_the_fire_path_show_unhealthy_without_stopping_service() {
        let clock = Arc::new(ManualClock::at(1_000_000));
        let health = Health::new(clock.clone());
        health.failed(Loop::Followup, &"timeout");
        clock.advance(STALL_MS);
        assert!(health.verdict().serving);
        let followup = health
            .snapshot()
            .into_iter()
            .find(|status| status.name == "followup")
            .expect("listed");
        assert!(!followup.healthy);
        assert_eq!(followup.last_error, "timeout");
    }
}
