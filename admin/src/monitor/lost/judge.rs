//! The lost-run judgement, pure: what the monitor remembers between checks ([`LostJudge`]), and
//! what to make of what the executors said when asked ([`Sighting`], [`confirm`],
//! [`sort_answers`]). It takes `now` as an argument and touches no database.

use std::collections::{HashMap, HashSet};

use super::verdict::{Judgement, LostVerdict, Suspect};
use crate::executor::log_chunk::RunLogChunk;
use crate::model::{ExecutorInfo, ExecutorProtocol, GroupId, LogId, RunLog};

/// Timing the judgement depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostParams {
    pub heartbeat_interval_ms: i64,
    /// Deadline of a Run call: a maybe-delivered run is not judged before it has passed.
    pub executor_timeout_ms: i64,
    /// How long a run's executor may be without any live session before the run is lost.
    pub absence_grace_ms: i64,
}

/// What is known about executor sessions at one check.
#[derive(Debug, Clone, Copy)]
pub struct SessionView<'a> {
    /// The sessions this admin holds.
    pub sessions: &'a [ExecutorInfo],
    /// Addresses whose sessions other admins hold.
    pub held_elsewhere: &'a HashSet<String>,
    /// Groups whose runs only ever go to live sessions (AUTO address type).
    pub session_groups: &'a HashSet<GroupId>,
}

/// What the executors held by other admins said of stranded runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StrandedProbes {
    /// Stranded runs every executor held elsewhere was asked about and holds nowhere.
    pub absent: HashSet<LogId>,
    /// Stranded runs every executor that may have received them says it never did: their
    /// admin died between claiming and sending them, and they are sent now.
    pub never_sent: HashSet<LogId>,
    /// Of those, the runs every such executor also fenced against their owner (a fencing
    /// probe): the owner can no longer start them anywhere asked, so they are sent now even
    /// though its lease still holds.
    pub fenced: HashSet<LogId>,
}

/// What the lost-run monitor remembers between checks.
#[derive(Debug, Default)]
pub struct LostJudge {
    /// `last_heartbeat_ms` of each session when first seen: a session's registration (or a
    /// route restored at start) is not a heartbeat, only later changes are.
    first_seen_heartbeat: HashMap<String, i64>,
    /// Receipt time of the first heartbeat that left a run out.
    missing_since: HashMap<LogId, i64>,
    /// When a run's executor address was first found without any live session.
    absent_since: HashMap<LogId, i64>,
    /// Addresses this admin has seen with a live session.
    seen_live: HashSet<String>,
    /// When a stranded run (dispatch never recorded) was first found listed by no session.
    stranded_since: HashMap<LogId, i64>,
    /// Runs on XXL-JOB executors held here, judged by their idle answers (`xxl_idle`).
    pub(super) xxl_idle: super::xxl_idle::XxlIdleJudge,
}

impl LostJudge {
    /// Judges the RUNNING `runs` against what is known of the sessions; returns the runs now
    /// lost, and those the heartbeats leave out (to confirm with their executor).
    pub fn judge(
        &mut self,
        runs: &[RunLog],
        view: SessionView<'_>,
        now_ms: i64,
        params: LostParams,
    ) -> Judgement {
        self.remember_sessions(view);
        let running: HashSet<LogId> = runs.iter().map(|run| run.id).collect();
        self.missing_since
            .retain(|log_id, _| running.contains(log_id));
        self.absent_since
            .retain(|log_id, _| running.contains(log_id));
        let mut judgement = Judgement::default();
        for run in runs {
            match self.judge_run(run, view, now_ms, params) {
                Some(Finding::Lost(verdict)) => judgement.lost.push(verdict),
                Some(Finding::Suspect(suspect)) => judgement.suspects.push(suspect),
                None => {}
            }
        }
        judgement
    }

    /// The executor, asked directly, may still hold a suspect run: the heartbeats that left it
    /// out were sent before it arrived there. Its absence is counted again from the next one.
    pub fn held_after_all(&mut self, log_id: LogId) {
        self.missing_since.remove(&log_id);
    }

    /// Judges stranded runs (claimed by an admin that is gone, dispatch never recorded);
    /// returns those now lost.
    ///
    /// The sessions this admin holds list their runs in heartbeats. Executors whose sessions
    /// other admins hold were asked directly (`ExecutorService.ReadLog` of the run: `is_end`
    /// false while it runs or waits there); `elsewhere` says what they answered. A run one of
    /// them may hold (it said so, or it could not be asked) is not judged.
    pub fn judge_stranded(
        &mut self,
        runs: &[RunLog],
        view: SessionView<'_>,
        elsewhere: &StrandedProbes,
        now_ms: i64,
        params: LostParams,
    ) -> Vec<LostVerdict> {
        let stranded: HashSet<LogId> = runs.iter().map(|run| run.id).collect();
        self.stranded_since
            .retain(|log_id, _| stranded.contains(log_id));
        let mut lost = Vec::new();
        for run in runs {
            let listed = view.sessions.iter().any(|session| session.lists(run.id))
                || (!view.held_elsewhere.is_empty() && !elsewhere.absent.contains(&run.id));
            if listed {
                self.stranded_since.remove(&run.id);
                continue;
            }
            let unlisted_ms = now_ms - *self.stranded_since.entry(run.id).or_insert(now_ms);
            if unlisted_ms > params.absence_grace_ms {
                lost.push(LostVerdict {
                    log_id: run.id,
                    message: format!(
                        "run lost: the admin dispatching it stopped before recording where it \
                         went, and no executor has listed it for {unlisted_ms} ms"
                    ),
                });
            }
        }
        lost
    }

    fn remember_sessions(&mut self, view: SessionView<'_>) {
        let present: HashSet<&str> = view
            .sessions
            .iter()
            .map(|session| session.executor_id.as_str())
            .collect();
        self.first_seen_heartbeat
            .retain(|executor_id, _| present.contains(executor_id.as_str()));
        for session in view.sessions {
            self.first_seen_heartbeat
                .entry(session.executor_id.clone())
                .or_insert(session.last_heartbeat_ms);
            self.seen_live
                .insert(normalize(&session.address).to_string());
        }
        self.seen_live.extend(
            view.held_elsewhere
                .iter()
                .map(|address| normalize(address).to_string()),
        );
    }

    fn judge_run(
        &mut self,
        run: &RunLog,
        view: SessionView<'_>,
        now_ms: i64,
        params: LostParams,
    ) -> Option<Finding> {
        let address = normalize(&run.executor_address);
        // Before this instant the executor may not have the run yet (the Run call may still be
        // in flight when the dispatch outcome is unknown).
        let judge_from = run.trigger_time_ms
            + if run.trigger_code == 0 {
                params.executor_timeout_ms
            } else {
                0
            };
        let holders: Vec<&ExecutorInfo> = view
            .sessions
            .iter()
            .filter(|session| normalize(&session.address) == address)
            .collect();
        if !holders.is_empty() {
            self.absent_since.remove(&run.id);
            // An XXL-JOB executor does not list its runs: while it keeps registering, its
            // runs are its own; once its registration expires, the absence rule below applies.
            if holders
                .iter()
                .all(|session| session.protocol == ExecutorProtocol::XxlJobHttp)
            {
                self.missing_since.remove(&run.id);
                return None;
            }
            return self
                .judge_by_heartbeats(run, &holders, judge_from, params)
                .map(Finding::Suspect);
        }
        self.missing_since.remove(&run.id);
        let known_session_address =
            view.session_groups.contains(&run.group_id) || self.seen_live.contains(address);
        if view.held_elsewhere.contains(address) || !known_session_address {
            self.absent_since.remove(&run.id);
            return None;
        }
        let absent_since = *self.absent_since.entry(run.id).or_insert(now_ms);
        let absent_ms = now_ms - absent_since;
        (absent_ms > params.absence_grace_ms && now_ms > judge_from).then(|| {
            Finding::Lost(LostVerdict {
                log_id: run.id,
                message: format!(
                    "run lost: executor {address} has had no live session for {absent_ms} ms \
                     (it crashed, disconnected or its lease expired)"
                ),
            })
        })
    }

    fn judge_by_heartbeats(
        &mut self,
        run: &RunLog,
        holders: &[&ExecutorInfo],
        judge_from: i64,
        params: LostParams,
    ) -> Option<Suspect> {
        if holders.iter().any(|session| session.lists(run.id)) {
            self.missing_since.remove(&run.id);
            return None;
        }
        let heard_ms = holders
            .iter()
            .filter(|session| {
                self.first_seen_heartbeat.get(&session.executor_id)
                    != Some(&session.last_heartbeat_ms)
            })
            .map(|session| session.last_heartbeat_ms)
            .max()?;
        if heard_ms <= judge_from {
            return None;
        }
        let missing_since = *self.missing_since.entry(run.id).or_insert(heard_ms);
        let missing_ms = heard_ms - missing_since;
        (missing_ms >= params.heartbeat_interval_ms).then(|| Suspect {
            verdict: LostVerdict {
                log_id: run.id,
                message: format!(
                    "run lost: executor {} no longer lists it (left out of its heartbeats for \
                     {missing_ms} ms; the executor restarted or dropped the run)",
                    normalize(&run.executor_address)
                ),
            },
            missing_ms,
        })
    }
}

/// What one check finds of one run.
enum Finding {
    Lost(LostVerdict),
    Suspect(Suspect),
}

/// What to make of a suspect run once its executor was asked (`ReadLog` of the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// Not there and never was (a restarted executor, a dropped run): lost.
    Lost,
    /// Running or queued there, or the executor could not be asked: not lost.
    Held,
    /// Over there: its result is on the way (the executor keeps and resends it until the admin
    /// acknowledges it). Lost only if it has not come for an executor lease (a run cut off by
    /// a crash, with its log left behind).
    Over,
}

/// Confirms (or not) a run the heartbeats left out with what its executor said of it.
pub fn confirm(sighting: Sighting, missing_ms: i64, params: LostParams) -> Confirmation {
    match sighting {
        Sighting::MayHold => Confirmation::Held,
        Sighting::NeverSaw | Sighting::Fenced => Confirmation::Lost,
        Sighting::Ran if missing_ms > params.absence_grace_ms => Confirmation::Lost,
        Sighting::Ran => Confirmation::Over,
    }
}

/// Addresses compare without a trailing slash (typed manual addresses may carry one).
pub(super) fn normalize(address: &str) -> &str {
    address.trim_end_matches('/')
}

/// Splits off the stranded runs no executor ever received (every candidate said so, and no
/// session of this admin lists it): those are sent now instead of being judged lost.
pub fn split_never_sent(
    stranded: Vec<RunLog>,
    sessions: &[ExecutorInfo],
    probes: &StrandedProbes,
) -> (Vec<RunLog>, Vec<RunLog>) {
    stranded.into_iter().partition(|run| {
        probes.never_sent.contains(&run.id) && !sessions.iter().any(|session| session.lists(run.id))
    })
}

/// What one executor said of a run when asked (`ReadLog` of the run from line 1): a stranded
/// run, or one its heartbeats left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sighting {
    /// Running or queued there (`is_end` false), or it could not be asked: it may hold it.
    MayHold,
    /// Over there, with a run log: it received the run (its result may still be on the way).
    Ran,
    /// Not running there and no run log: it never received the run (the SDK writes a log line
    /// for every run it accepts, if only the end line or "run not started").
    NeverSaw,
    /// Never received it, as `NeverSaw`, and refuses it from now on from the node the probe
    /// fenced (`ExecutorClient::read_log_fencing`).
    Fenced,
}

impl Sighting {
    /// Reads an executor's answer to `ReadLog(log_id, from_line 1)`.
    pub fn of(answer: Result<&RunLogChunk, ()>) -> Sighting {
        match answer {
            Ok(chunk) if !chunk.is_end => Sighting::MayHold,
            Ok(chunk) if chunk.to_line >= chunk.from_line => Sighting::Ran,
            Ok(chunk) if chunk.fenced => Sighting::Fenced,
            Ok(_) => Sighting::NeverSaw,
            Err(()) => Sighting::MayHold,
        }
    }
}

/// What the candidate executors of one stranded run said, by address.
pub(super) type Answers = Vec<(String, Sighting)>;

/// Sorts what the executors said into the two sets the checks use.
pub fn sort_answers(
    answers: &HashMap<LogId, Answers>,
    held_elsewhere: &HashSet<String>,
) -> StrandedProbes {
    let mut probes = StrandedProbes::default();
    for (&log_id, said) in answers {
        let elsewhere_done = said
            .iter()
            .filter(|(address, _)| held_elsewhere.contains(address))
            .all(|(_, sighting)| *sighting != Sighting::MayHold);
        if elsewhere_done {
            probes.absent.insert(log_id);
        }
        let all = |test: fn(Sighting) -> bool| {
            !said.is_empty() && said.iter().all(|(_, sighting)| test(*sighting))
        };
        if all(|sighting| matches!(sighting, Sighting::NeverSaw | Sighting::Fenced)) {
            probes.never_sent.insert(log_id);
        }
        if all(|sighting| sighting == Sighting::Fenced) {
            probes.fenced.insert(log_id);
        }
    }
    probes
}
