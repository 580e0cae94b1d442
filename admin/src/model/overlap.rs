//! Overlap policies: what the admin does with a scheduled fire of a job whose earlier run is
//! still going (claimed, or running on an executor). The executor's block strategy only sees
//! the runs that reach it; this rule holds for every executor, XXL-JOB's included. `decide` is
//! the whole rule, pure; the trigger asks the store for the job's state and acts on the answer.

use super::LogId;

/// A job's overlap policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OverlapPolicy {
    /// Every fire is sent (the executor's block strategy still applies): as before.
    #[default]
    AllowAll,
    /// A fire that finds an earlier run going gets a SKIPPED row.
    Skip,
    /// At most one fire waits (WAITING) for the earlier run to end; later ones are SKIPPED.
    BufferOne,
    /// Every fire waits, and they are sent one after the other, oldest first.
    BufferAll,
    /// The earlier runs are killed, then the fire is sent.
    CancelOther,
}

impl OverlapPolicy {
    pub const ALL: &'static [OverlapPolicy] = &[
        OverlapPolicy::AllowAll,
        OverlapPolicy::Skip,
        OverlapPolicy::BufferOne,
        OverlapPolicy::BufferAll,
        OverlapPolicy::CancelOther,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            OverlapPolicy::AllowAll => "ALLOW_ALL",
            OverlapPolicy::Skip => "SKIP",
            OverlapPolicy::BufferOne => "BUFFER_ONE",
            OverlapPolicy::BufferAll => "BUFFER_ALL",
            OverlapPolicy::CancelOther => "CANCEL_OTHER",
        }
    }

    /// Parses a stored name; `None` for anything else.
    pub fn parse(text: &str) -> Option<OverlapPolicy> {
        OverlapPolicy::ALL
            .iter()
            .copied()
            .find(|policy| policy.as_str() == text)
    }
}

impl std::fmt::Display for OverlapPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the store says about a job when one of its fires is about to be sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overlap {
    /// Earlier runs of the job (lower ids) still RUNNING, oldest first, with the executor each
    /// was sent to (empty: claimed, not sent yet).
    pub running: Vec<(LogId, String)>,
    /// The job's WAITING runs, oldest first.
    pub waiting: Vec<LogId>,
}

/// What becomes of the fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Sent now.
    Send,
    /// Not run: a SKIPPED row with this reason.
    Skip(String),
    /// Held WAITING with this message until the runs before it end.
    Wait(String),
    /// These earlier runs are killed on their executors (address, run), then the fire is sent.
    CancelThenSend(Vec<(LogId, String)>),
}

/// The rule. Only the runs before this fire count, so of two fires of a job the older one never
/// waits for the newer one. A buffered job's fire also waits behind runs already waiting,
/// even with nothing running, so waiting fires keep their order.
pub fn decide(policy: OverlapPolicy, state: &Overlap) -> Verdict {
    let busy = state.running.first().map(|(id, _)| *id);
    match (policy, busy) {
        (OverlapPolicy::AllowAll, _) | (OverlapPolicy::Skip | OverlapPolicy::CancelOther, None) => {
            Verdict::Send
        }
        (OverlapPolicy::Skip, Some(running)) => Verdict::Skip(format!(
            "overlap policy SKIP: run {running} of this job is still running"
        )),
        (OverlapPolicy::CancelOther, Some(_)) => Verdict::CancelThenSend(state.running.clone()),
        (OverlapPolicy::BufferOne, _) => match (state.waiting.first(), busy) {
            (Some(waiting), _) => Verdict::Skip(format!(
                "overlap policy BUFFER_ONE: run {waiting} of this job already waits"
            )),
            (None, Some(running)) => Verdict::Wait(waiting_message(policy, running)),
            (None, None) => Verdict::Send,
        },
        (OverlapPolicy::BufferAll, _) => match (state.waiting.last(), busy) {
            (Some(last), _) => Verdict::Wait(format!(
                "overlap policy BUFFER_ALL: waiting behind run {last} of this job"
            )),
            (None, Some(running)) => Verdict::Wait(waiting_message(policy, running)),
            (None, None) => Verdict::Send,
        },
    }
}

fn waiting_message(policy: OverlapPolicy, running: LogId) -> String {
    format!("overlap policy {policy}: waiting for run {running} of this job to end")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(running: &[i64], waiting: &[i64]) -> Overlap {
        Overlap {
            running: running
                .iter()
                .map(|id| (LogId(*id), format!("http://e{id}")))
                .collect(),
            waiting: waiting.iter().map(|id| LogId(*id)).collect(),
        }
    }

    #[test]
    fn names_round_trip() {
        for policy in OverlapPolicy::ALL {
            assert_eq!(OverlapPolicy::parse(policy.as_str()), Some(*policy));
        }
        assert_eq!(OverlapPolicy::parse("skip"), None);
        assert_eq!(OverlapPolicy::default(), OverlapPolicy::AllowAll);
    }

    #[test]
    fn nothing_going_sends_under_every_policy() {
        for policy in OverlapPolicy::ALL {
            assert_eq!(decide(*policy, &state(&[], &[])), Verdict::Send, "{policy}");
        }
    }

    #[test]
    fn allow_all_sends_over_a_running_run() {
        assert_eq!(
            decide(OverlapPolicy::AllowAll, &state(&[7], &[8])),
            Verdict::Send
        );
    }

    #[test]
    fn skip_names_the_running_run() {
        assert_eq!(
            decide(OverlapPolicy::Skip, &state(&[7, 9], &[])),
            Verdict::Skip("overlap policy SKIP: run 7 of this job is still running".into())
        );
    }

    #[test]
    fn buffer_one_holds_one_and_skips_the_next() {
        assert_eq!(
            decide(OverlapPolicy::BufferOne, &state(&[7], &[])),
            Verdict::Wait("overlap policy BUFFER_ONE: waiting for run 7 of this job to end".into())
        );
        assert_eq!(
            decide(OverlapPolicy::BufferOne, &state(&[7], &[8])),
            Verdict::Skip("overlap policy BUFFER_ONE: run 8 of this job already waits".into())
        );
    }

    #[test]
    fn buffer_all_queues_behind_the_last_waiting_run() {
        assert_eq!(
            decide(OverlapPolicy::BufferAll, &state(&[7], &[8, 9])),
            Verdict::Wait("overlap policy BUFFER_ALL: waiting behind run 9 of this job".into())
        );
        // Nothing running but runs still waiting (not released yet): keep the order.
        assert!(matches!(
            decide(OverlapPolicy::BufferAll, &state(&[], &[8])),
            Verdict::Wait(_)
        ));
    }

    #[test]
    fn cancel_other_kills_every_earlier_run() {
        assert_eq!(
            decide(OverlapPolicy::CancelOther, &state(&[7, 9], &[])),
            Verdict::CancelThenSend(vec![
                (LogId(7), "http://e7".into()),
                (LogId(9), "http://e9".into())
            ])
        );
    }
}
