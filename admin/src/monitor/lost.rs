//! Lost runs: a RUNNING run whose executor stopped reporting it becomes LOST (handle code 500)
//! and then follows the retry policy like any failure (the follow-up picks it up).
//!
//! ```text
//! every heartbeat_interval / 2: RUNNING runs with an executor address
//!   ─▶ LostJudge::judge (pure; remembers what it saw across checks) ─▶ store.mark_lost
//! ```
//! A run is judged by what this admin knows first-hand:
//! - its executor's session is held here: the run is suspect once the executor's heartbeats
//!   have left it out for a full heartbeat interval (two heartbeats at least an interval apart,
//!   both received after the dispatch). One heartbeat is not enough: a run that just finished
//!   drops out of the list before its callback lands. Nor is the receipt time proof: on a slow
//!   network a heartbeat sent before the run reached the executor arrives after the dispatch.
//!   So a suspect is lost only once its executor, asked directly (`ReadLog` of the run, whose
//!   answer is given after the dispatch, however slow the network), says it never had it, or
//!   says it is over there and its result has not come for an executor lease.
//! - another admin holds that session: not judged here (that admin does).
//! - nobody holds it any more (stream gone, lease expired): the run is lost once that has lasted
//!   an executor lease (the silence the registry itself tolerates; an executor that reconnects,
//!   to this admin or another, within it keeps its runs). Only addresses known to belong to
//!   sessions are judged this way: those of AUTO groups (routing only ever picks live sessions
//!   there) and addresses this admin has seen live. A MANUAL group's typed address that no
//!   executor registers under is never judged by absence: there is nothing to compare with.
//!
//! A "maybe delivered" run (trigger code 0: the Run call timed out after sending) is judged the
//! same way once the dispatch deadline has passed: listed → it runs, left out → LOST. It is
//! never re-sent; the retry, if any, is a new attempt with its own log id.
//!
//! A run whose dispatcher died between claiming it and recording where it went (RUNNING, no
//! address; XXL-JOB leaves those "running" forever) is stranded. Every executor that may have
//! received it is asked (`ReadLog` of the run: running or queued, over with a run log, or never
//! seen). When all of them never saw it and no session here lists it, it was never sent: it is
//! taken over and sent now (`stranded.rs`). Otherwise it is lost once no executor has held it
//! for an executor lease: no session of this admin lists it and every executor held by another
//! admin said it does not hold it (one that cannot be asked counts as holding it).
//!
//! A dead node's runs count as stranded once its lease has lapsed and they were claimed an
//! executor timeout ago (its last Run calls may still be in flight); this node's earlier
//! epochs' count at once, from the first check after a restart, so a restarted admin sends
//! what its previous process claimed while most of it is still within the misfire threshold.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::context::AdminContext;
use crate::error::Error;
use crate::executor::RunLogChunk;
use crate::health::Loop;
use crate::model::{AddressType, ExecutorInfo, ExecutorProtocol, GroupId, LogId, RunLog};

/// Most RUNNING runs examined per check.
const MAX_RUNS_PER_CHECK: i64 = 10_000;

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
    pub session_groups: &'a HashSet<i64>,
}

/// What the executors held by other admins said of stranded runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StrandedProbes {
    /// Stranded runs every executor held elsewhere was asked about and holds nowhere.
    pub absent: HashSet<i64>,
    /// Stranded runs every executor that may have received them says it never did: their
    /// admin died between claiming and sending them, and they are sent now.
    pub never_sent: HashSet<i64>,
}

/// A run found lost, with the reason recorded as its handle message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostVerdict {
    pub log_id: LogId,
    pub message: String,
}

/// A run its executor's heartbeats have left out for a full interval. Heartbeats can arrive
/// late (a slow network): one sent before the run reached the executor may arrive after the
/// dispatch, and does not list it. So the executor is asked directly before the run is marked
/// lost; a direct answer is given after the dispatch, whatever the delay ([`confirm`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspect {
    pub verdict: LostVerdict,
    /// How long the heartbeats have left it out.
    pub missing_ms: i64,
}

/// One check's outcome: runs lost now, and runs to confirm with their executor first.
#[derive(Debug, Default)]
pub struct Judgement {
    pub lost: Vec<LostVerdict>,
    pub suspects: Vec<Suspect>,
}

/// What the lost-run monitor remembers between checks.
#[derive(Debug, Default)]
pub struct LostJudge {
    /// `last_heartbeat_ms` of each session when first seen: a session's registration (or a
    /// route restored at start) is not a heartbeat, only later changes are.
    first_seen_heartbeat: HashMap<String, i64>,
    /// Receipt time of the first heartbeat that left a run out.
    missing_since: HashMap<i64, i64>,
    /// When a run's executor address was first found without any live session.
    absent_since: HashMap<i64, i64>,
    /// Addresses this admin has seen with a live session.
    seen_live: HashSet<String>,
    /// When a stranded run (dispatch never recorded) was first found listed by no session.
    stranded_since: HashMap<i64, i64>,
    /// Runs on XXL-JOB executors held here, judged by their idle answers (`xxl_idle`).
    xxl_idle: super::xxl_idle::XxlIdleJudge,
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
        let running: HashSet<i64> = runs.iter().map(|run| run.id).collect();
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
    pub fn held_after_all(&mut self, log_id: i64) {
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
        let stranded: HashSet<i64> = runs.iter().map(|run| run.id).collect();
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
                    log_id: LogId(run.id),
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
                log_id: LogId(run.id),
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
                log_id: LogId(run.id),
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
        Sighting::NeverSaw => Confirmation::Lost,
        Sighting::Ran if missing_ms > params.absence_grace_ms => Confirmation::Lost,
        Sighting::Ran => Confirmation::Over,
    }
}

/// Addresses compare without a trailing slash (typed manual addresses may carry one).
fn normalize(address: &str) -> &str {
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

/// Checks RUNNING runs every half heartbeat interval until cancelled.
pub async fn run_lost_monitor(ctx: Arc<AdminContext>, cancel: CancellationToken) {
    let period = (ctx.config.heartbeat_interval / 2).max(Duration::from_millis(50));
    let params = LostParams {
        heartbeat_interval_ms: ctx.config.heartbeat_interval.as_millis() as i64,
        executor_timeout_ms: ctx.config.executor_timeout.as_millis() as i64,
        absence_grace_ms: ctx.config.executor_lease.as_millis() as i64,
    };
    let mut judge = LostJudge::default();
    // The first check comes at once: after a restart, the runs this node's previous process
    // claimed but never sent are sent now, while most are still within the misfire threshold.
    loop {
        match check_once(&ctx, &mut judge, params).await {
            Ok(_) => ctx.health.succeeded(Loop::LostRuns),
            Err(error) => {
                ctx.health
                    .failed(Loop::LostRuns, &crate::health::with_causes(&error));
                tracing::warn!(%error, "lost-run check failed");
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(period) => {}
        }
    }
}

async fn check_once(
    ctx: &AdminContext,
    judge: &mut LostJudge,
    params: LostParams,
) -> Result<(), Error> {
    let runs = ctx.store.running_runs(MAX_RUNS_PER_CHECK).await?;
    let sessions = ctx.registry.list("");
    let now = ctx.clock.now_ms();
    let lease_ms = ctx.config.executor_lease.as_millis() as i64;
    let held_elsewhere: HashSet<String> = ctx
        .store
        .live_addresses_of_other_nodes(&ctx.node.node_id, now - lease_ms)
        .await?
        .into_iter()
        .map(|address| normalize(&address).to_string())
        .collect();
    let session_groups = auto_groups_of(ctx, &runs).await?;
    let view = SessionView {
        sessions: &sessions,
        held_elsewhere: &held_elsewhere,
        session_groups: &session_groups,
    };
    let stranded = ctx
        .store
        .stranded_dispatches(&ctx.node, now, now - params.executor_timeout_ms)
        .await?;
    let elsewhere = if stranded.is_empty() {
        StrandedProbes::default()
    } else {
        probe_stranded(ctx, &stranded, &held_elsewhere).await?
    };
    let (never_sent, stranded) = split_never_sent(stranded, &sessions, &elsewhere);
    if !never_sent.is_empty() {
        super::stranded::send(ctx, never_sent).await?;
    }
    let judgement = judge.judge(&runs, view, now, params);
    let mut verdicts = judgement.lost;
    verdicts.extend(confirm_suspects(ctx, judge, &runs, judgement.suspects, params).await?);
    verdicts.extend(judge.judge_stranded(&stranded, view, &elsewhere, now, params));
    let xxl_runs = super::xxl_idle::xxl_runs(&runs, &sessions);
    if !xxl_runs.is_empty() && judge.xxl_idle.due(now) {
        let answers = super::xxl_idle::probe(ctx, &xxl_runs).await;
        let grace_ms = ctx.config.xxl_job_compat_lease.as_millis() as i64;
        verdicts.extend(
            judge
                .xxl_idle
                .judge(&xxl_runs, &answers, ctx.clock.now_ms(), grace_ms),
        );
    }
    for verdict in verdicts {
        if ctx
            .store
            .mark_lost(verdict.log_id.0, &verdict.message, ctx.clock.now_ms())
            .await?
        {
            crate::metrics::fires(crate::metrics::FireOutcome::Lost).inc();
            tracing::warn!(log_id = %verdict.log_id, reason = %verdict.message, "run lost");
            // A stranded run's dispatch was never recorded: its row still holds what its trace
            // was to continue (a retry's failed attempt, a caller's traceparent), not its own.
            let trace_id = runs
                .iter()
                .find(|run| run.id == verdict.log_id.0)
                .map_or("", |run| run.trace_id.as_str());
            crate::telemetry::record_lost(trace_id, verdict.log_id.0, &verdict.message);
        }
    }
    Ok(())
}

/// Asks the executor of each suspect run whether it still holds it, and returns those it does
/// not (see [`confirm`]).
async fn confirm_suspects(
    ctx: &AdminContext,
    judge: &mut LostJudge,
    runs: &[RunLog],
    suspects: Vec<Suspect>,
    params: LostParams,
) -> Result<Vec<LostVerdict>, Error> {
    if suspects.is_empty() {
        return Ok(Vec::new());
    }
    let by_id: HashMap<i64, &RunLog> = runs.iter().map(|run| (run.id, run)).collect();
    let group_ids: Vec<GroupId> = runs.iter().map(|run| GroupId(run.group_id)).collect();
    let groups = crate::trigger::load::groups(&ctx.store, &group_ids).await?;
    let deadline = ctx.config.executor_timeout;
    let in_flight = Arc::new(tokio::sync::Semaphore::new(PROBES_IN_FLIGHT));
    let mut probes = tokio::task::JoinSet::new();
    for suspect in suspects.into_iter().take(MAX_PROBED_PER_CHECK) {
        let Some(run) = by_id.get(&suspect.verdict.log_id.0) else {
            continue;
        };
        let token = groups
            .get(&GroupId(run.group_id))
            .map(|group| group.access_token.clone())
            .unwrap_or_default();
        let executors = Arc::clone(&ctx.executors);
        let in_flight = Arc::clone(&in_flight);
        let address = normalize(&run.executor_address).to_string();
        let log_date_ms = run.trigger_time_ms;
        probes.spawn(async move {
            let _permit = in_flight.acquire().await;
            let log_id = suspect.verdict.log_id;
            let read = executors.read_log(&address, &token, log_id, log_date_ms, 1);
            let sighting = match tokio::time::timeout(deadline, read).await {
                Ok(Ok(chunk)) => Sighting::of(Ok(&chunk)),
                _ => Sighting::of(Err(())),
            };
            (suspect, sighting)
        });
    }
    let mut lost = Vec::new();
    while let Some(joined) = probes.join_next().await {
        let Ok((suspect, sighting)) = joined else {
            continue;
        };
        match confirm(sighting, suspect.missing_ms, params) {
            Confirmation::Lost => lost.push(suspect.verdict),
            Confirmation::Held => judge.held_after_all(suspect.verdict.log_id.0),
            Confirmation::Over => {}
        }
    }
    Ok(lost)
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
}

impl Sighting {
    /// Reads an executor's answer to `ReadLog(log_id, from_line 1)`.
    pub fn of(answer: Result<&RunLogChunk, ()>) -> Sighting {
        match answer {
            Ok(chunk) if !chunk.is_end => Sighting::MayHold,
            Ok(chunk) if chunk.to_line >= chunk.from_line => Sighting::Ran,
            Ok(_) => Sighting::NeverSaw,
            Err(()) => Sighting::MayHold,
        }
    }
}

/// What the candidate executors of one stranded run said, by address.
type Answers = Vec<(String, Sighting)>;

/// Sorts what the executors said into the two sets the checks use.
pub fn sort_answers(
    answers: &HashMap<i64, Answers>,
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
        if !said.is_empty()
            && said
                .iter()
                .all(|(_, sighting)| *sighting == Sighting::NeverSaw)
        {
            probes.never_sent.insert(log_id);
        }
    }
    probes
}

/// Stranded runs whose executors are asked about in one check.
const MAX_PROBED_PER_CHECK: usize = 1_000;
/// `ReadLog` calls in flight at once while asking.
const PROBES_IN_FLIGHT: usize = 64;

/// Asks every executor that may have received each stranded run whether it did (`ReadLog` of
/// the run): for an AUTO group every live executor of its app (this admin's sessions, the other
/// admins' rows, and the routes restored at start for executors still reconnecting), for a
/// MANUAL group its typed addresses too. An executor that cannot be asked in time may hold the
/// run, so no run is judged, or sent again, on missing evidence.
async fn probe_stranded(
    ctx: &AdminContext,
    stranded: &[RunLog],
    held_elsewhere: &HashSet<String>,
) -> Result<StrandedProbes, Error> {
    let group_ids: Vec<GroupId> = stranded.iter().map(|run| GroupId(run.group_id)).collect();
    let groups = crate::trigger::load::groups(&ctx.store, &group_ids).await?;
    let deadline = ctx.config.executor_timeout;
    let in_flight = Arc::new(tokio::sync::Semaphore::new(PROBES_IN_FLIGHT));
    let mut probes = tokio::task::JoinSet::new();
    // Bounded per check, so a mass of stranded runs after an outage never becomes a burst of
    // calls; the rest are asked in later checks (oldest first, as the store lists them).
    for run in stranded.iter().take(MAX_PROBED_PER_CHECK) {
        let Some(group) = groups.get(&GroupId(run.group_id)) else {
            continue;
        };
        let mut addresses: Vec<String> = ctx
            .registry
            .online_addresses(&group.app_name)
            .iter()
            .map(|address| normalize(address).to_string())
            .collect();
        if group.address_type == AddressType::Manual {
            addresses.extend(group.addresses.iter().map(|a| normalize(a).to_string()));
        }
        addresses.sort();
        addresses.dedup();
        let executors = Arc::clone(&ctx.executors);
        let in_flight = Arc::clone(&in_flight);
        let token = group.access_token.clone();
        let (log_id, log_date_ms) = (run.id, run.trigger_time_ms);
        probes.spawn(async move {
            let mut said = Vec::with_capacity(addresses.len());
            for address in addresses {
                let Ok(_permit) = in_flight.acquire().await else {
                    break;
                };
                let read = executors.read_log(&address, &token, LogId(log_id), log_date_ms, 1);
                let sighting = match tokio::time::timeout(deadline, read).await {
                    Ok(Ok(chunk)) => Sighting::of(Ok(&chunk)),
                    _ => Sighting::of(Err(())),
                };
                said.push((address, sighting));
            }
            (log_id, said)
        });
    }
    let mut answers = HashMap::new();
    while let Some(joined) = probes.join_next().await {
        if let Ok((log_id, said)) = joined {
            answers.insert(log_id, said);
        }
    }
    Ok(sort_answers(&answers, held_elsewhere))
}

/// The AUTO groups among those of `runs` (read with one query).
async fn auto_groups_of(ctx: &AdminContext, runs: &[RunLog]) -> Result<HashSet<i64>, Error> {
    let group_ids: Vec<GroupId> = runs.iter().map(|run| GroupId(run.group_id)).collect();
    Ok(crate::trigger::load::groups(&ctx.store, &group_ids)
        .await?
        .into_iter()
        .filter(|(_, group)| group.address_type == AddressType::Auto)
        .map(|(id, _)| id.0)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunStatus, TriggerType};

    const T0: i64 = 1_800_000_000_000;
    const ADDRESS: &str = "http://127.0.0.1:9001";
    const PARAMS: LostParams = LostParams {
        heartbeat_interval_ms: 1_000,
        executor_timeout_ms: 3_000,
        absence_grace_ms: 3_000,
    };
    const AUTO_GROUP: i64 = 1;
    const MANUAL_GROUP: i64 = 2;

    fn run(id: i64, trigger_code: i32) -> RunLog {
        RunLog {
            id,
            job_id: 1,
            group_id: AUTO_GROUP,
            fire_key: None,
            status: RunStatus::Running,
            trigger_type: TriggerType::Manual,
            scheduled_at_ms: 0,
            trigger_time_ms: T0,
            trigger_code,
            trigger_msg: String::new(),
            handle_time_ms: 0,
            handle_code: 0,
            handle_msg: String::new(),
            executor_address: ADDRESS.to_string(),
            handler: "h".into(),
            params: String::new(),
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            trace_id: String::new(),
            owner_node: "n".into(),
            epoch: 1,
            dispatch_at_ms: 0,
            alarm_delivery: String::new(),
        }
    }

    fn session(executor_id: &str, heartbeat_ms: i64, running: &[i64]) -> ExecutorInfo {
        ExecutorInfo {
            executor_id: executor_id.to_string(),
            app_name: "app".into(),
            address: ADDRESS.to_string(),
            handlers: vec![],
            registered_ms: T0 - 10_000,
            last_heartbeat_ms: heartbeat_ms,
            admin_node: "n".into(),
            running_log_ids: crate::model::sorted_log_ids(running.to_vec()),
            protocol: Default::default(),
        }
    }

    /// One check with `sessions` held here, `elsewhere` held by other admins.
    fn check(
        judge: &mut LostJudge,
        runs: &[RunLog],
        sessions: &[ExecutorInfo],
        elsewhere: &[&str],
        at: i64,
    ) -> Vec<i64> {
        let held_elsewhere: HashSet<String> = elsewhere.iter().map(|a| a.to_string()).collect();
        let session_groups: HashSet<i64> = [AUTO_GROUP].into();
        let view = SessionView {
            sessions,
            held_elsewhere: &held_elsewhere,
            session_groups: &session_groups,
        };
        let judgement = judge.judge(runs, view, at, PARAMS);
        judgement
            .lost
            .iter()
            .chain(judgement.suspects.iter().map(|suspect| &suspect.verdict))
            .map(|verdict| verdict.log_id.0)
            .collect()
    }

    /// One check per heartbeat of session "e1" at each time, listing the given runs.
    fn heartbeats(judge: &mut LostJudge, runs: &[RunLog], beats: &[(i64, &[i64])]) -> Vec<i64> {
        let mut lost = Vec::new();
        for (at, running) in beats {
            lost.extend(check(judge, runs, &[session("e1", *at, running)], &[], *at));
        }
        lost
    }

    #[test]
    fn a_run_listed_in_heartbeats_is_alive() {
        let mut judge = LostJudge::default();
        let runs = [run(5, 200)];
        let beats: Vec<(i64, &[i64])> = (0..6).map(|i| (T0 + i * 1_000, &[5][..])).collect();
        assert!(heartbeats(&mut judge, &runs, &beats).is_empty());
    }

    #[test]
    fn a_run_left_out_for_a_full_interval_is_lost_but_one_heartbeat_is_not_enough() {
        let mut judge = LostJudge::default();
        let runs = [run(5, 200)];
        // First sight (registration), then a heartbeat without it, then one just short of an
        // interval later, then one a full interval after the first miss.
        let lost = heartbeats(
            &mut judge,
            &runs,
            &[(T0 - 500, &[]), (T0 + 100, &[]), (T0 + 1_050, &[])],
        );
        assert!(lost.is_empty(), "missing for 950 ms only");
        let lost = heartbeats(&mut judge, &runs, &[(T0 + 1_100, &[])]);
        assert_eq!(lost, vec![5]);
    }

    #[test]
    fn a_run_that_reappears_in_the_list_starts_over() {
        let mut judge = LostJudge::default();
        let runs = [run(5, 200)];
        let lost = heartbeats(
            &mut judge,
            &runs,
            &[
                (T0 - 500, &[]),
                (T0 + 100, &[]),
                (T0 + 600, &[5]),
                (T0 + 1_200, &[]),
                (T0 + 2_100, &[]),
            ],
        );
        assert!(lost.is_empty());
        assert_eq!(heartbeats(&mut judge, &runs, &[(T0 + 2_200, &[])]), vec![5]);
    }

    #[test]
    fn registration_and_heartbeats_before_the_dispatch_are_no_evidence() {
        let mut judge = LostJudge::default();
        let runs = [run(5, 200)];
        // The session's first sight happens after the dispatch: it is not a heartbeat.
        let lost = heartbeats(&mut judge, &runs, &[(T0 + 5_000, &[])]);
        assert!(lost.is_empty());
        // Heartbeats from before the dispatch do not count either.
        let mut early = LostJudge::default();
        let lost = heartbeats(
            &mut early,
            &runs,
            &[(T0 - 3_000, &[]), (T0 - 2_000, &[]), (T0 - 1, &[])],
        );
        assert!(lost.is_empty());
    }

    #[test]
    fn a_maybe_delivered_run_is_judged_only_after_the_dispatch_deadline() {
        let mut judge = LostJudge::default();
        let runs = [run(5, 0)];
        let lost = heartbeats(
            &mut judge,
            &runs,
            &[
                (T0 - 500, &[]),
                (T0 + 1_000, &[]),
                (T0 + 2_000, &[]),
                (T0 + 3_000, &[]),
            ],
        );
        assert!(lost.is_empty(), "the Run call may still be in flight");
        let lost = heartbeats(&mut judge, &runs, &[(T0 + 3_500, &[]), (T0 + 4_500, &[])]);
        assert_eq!(lost, vec![5]);
        // Listed instead: it runs, whatever the dispatch outcome was.
        let mut listed = LostJudge::default();
        let beats: Vec<(i64, &[i64])> = (0..8).map(|i| (T0 + i * 1_000, &[5][..])).collect();
        assert!(heartbeats(&mut listed, &runs, &beats).is_empty());
    }

    #[test]
    fn a_gone_executor_loses_its_runs_after_the_grace_unless_another_admin_holds_it() {
        let runs = [run(5, 200)];
        let mut judge = LostJudge::default();
        // An AUTO group's executor: judged by absence even if never seen live here.
        assert!(check(&mut judge, &runs, &[], &[], T0 + 500).is_empty());
        assert!(check(&mut judge, &runs, &[], &[], T0 + 3_400).is_empty());
        let verdicts = judge.judge(
            &runs,
            SessionView {
                sessions: &[],
                held_elsewhere: &HashSet::new(),
                session_groups: &[AUTO_GROUP].into(),
            },
            T0 + 3_600,
            PARAMS,
        );
        let verdicts = verdicts.lost;
        assert_eq!(verdicts.len(), 1);
        assert!(
            verdicts[0].message.contains(ADDRESS),
            "{}",
            verdicts[0].message
        );

        let mut moved = LostJudge::default();
        check(&mut moved, &runs, &[session("e1", T0, &[5])], &[], T0);
        for at in [T0 + 500, T0 + 5_000, T0 + 50_000] {
            assert!(check(&mut moved, &runs, &[], &[ADDRESS], at).is_empty());
        }
    }

    #[test]
    fn a_manual_address_is_judged_by_absence_only_once_seen_live() {
        let mut manual = run(5, 200);
        manual.group_id = MANUAL_GROUP;
        let runs = [manual];
        let mut never_seen = LostJudge::default();
        for at in [T0, T0 + 5_000, T0 + 600_000] {
            assert!(check(&mut never_seen, &runs, &[], &[], at).is_empty());
        }
        let mut seen = LostJudge::default();
        assert!(check(&mut seen, &runs, &[session("e1", T0, &[5])], &[], T0).is_empty());
        assert!(check(&mut seen, &runs, &[], &[], T0 + 100).is_empty());
        assert_eq!(check(&mut seen, &runs, &[], &[], T0 + 3_200), vec![5]);
    }

    /// One stranded-run check with `sessions` held here, `elsewhere` held by other admins.
    fn check_stranded(
        judge: &mut LostJudge,
        runs: &[RunLog],
        sessions: &[ExecutorInfo],
        elsewhere: &[&str],
        at: i64,
    ) -> Vec<LostVerdict> {
        check_stranded_probed(judge, runs, sessions, elsewhere, &[], at)
    }

    /// As `check_stranded`, with `absent` the runs the executors held elsewhere said they do
    /// not hold.
    fn check_stranded_probed(
        judge: &mut LostJudge,
        runs: &[RunLog],
        sessions: &[ExecutorInfo],
        elsewhere: &[&str],
        absent: &[i64],
        at: i64,
    ) -> Vec<LostVerdict> {
        let held_elsewhere: HashSet<String> = elsewhere.iter().map(|a| a.to_string()).collect();
        let view = SessionView {
            sessions,
            held_elsewhere: &held_elsewhere,
            session_groups: &HashSet::new(),
        };
        let probes = StrandedProbes {
            absent: absent.iter().copied().collect(),
            ..StrandedProbes::default()
        };
        judge.judge_stranded(runs, view, &probes, at, PARAMS)
    }

    #[test]
    fn a_stranded_dispatch_is_lost_once_no_executor_listed_it_for_the_grace() {
        let mut stranded = run(5, 0);
        stranded.executor_address = String::new();
        let runs = [stranded];
        let mut judge = LostJudge::default();
        assert!(check_stranded(&mut judge, &runs, &[], &[], T0).is_empty());
        assert!(check_stranded(&mut judge, &runs, &[], &[], T0 + 3_000).is_empty());
        let lost = check_stranded(&mut judge, &runs, &[], &[], T0 + 3_100);
        assert_eq!(lost.len(), 1);
        assert!(lost[0].message.contains("stopped before recording"));

        // Listed by an executor: it was delivered and runs.
        let listing = [session("e1", T0, &[5])];
        let mut delivered = LostJudge::default();
        for at in [T0, T0 + 5_000, T0 + 50_000] {
            assert!(check_stranded(&mut delivered, &runs, &listing, &[], at).is_empty());
        }
        // Another admin holds sessions and its executors could not be asked, or one of them
        // holds the run: not judged.
        let mut cautious = LostJudge::default();
        for at in [T0, T0 + 5_000, T0 + 50_000] {
            assert!(check_stranded(&mut cautious, &runs, &[], &[ADDRESS], at).is_empty());
        }
        // Every executor held elsewhere said it does not hold the run: lost after the grace.
        let mut asked = LostJudge::default();
        let absent = [5];
        assert!(check_stranded_probed(&mut asked, &runs, &[], &[ADDRESS], &absent, T0).is_empty());
        let lost = check_stranded_probed(&mut asked, &runs, &[], &[ADDRESS], &absent, T0 + 3_100);
        assert_eq!(lost.len(), 1, "{lost:?}");
    }

    fn chunk(to_line: i32, is_end: bool) -> RunLogChunk {
        RunLogChunk {
            from_line: 1,
            to_line,
            content: String::new(),
            is_end,
        }
    }

    #[test]
    fn an_executor_never_saw_a_run_only_if_it_neither_holds_it_nor_logged_it() {
        assert_eq!(Sighting::of(Ok(&chunk(0, false))), Sighting::MayHold);
        assert_eq!(Sighting::of(Ok(&chunk(3, false))), Sighting::MayHold);
        assert_eq!(Sighting::of(Ok(&chunk(2, true))), Sighting::Ran);
        assert_eq!(Sighting::of(Ok(&chunk(0, true))), Sighting::NeverSaw);
        assert_eq!(Sighting::of(Err(())), Sighting::MayHold);
    }

    #[test]
    fn a_stranded_run_is_sent_again_only_when_every_candidate_never_saw_it() {
        let other = "http://127.0.0.1:9002".to_string();
        let held_elsewhere: HashSet<String> = [other.clone()].into();
        let mut answers: HashMap<i64, Answers> = HashMap::new();
        let never = |address: &str| (address.to_string(), Sighting::NeverSaw);
        answers.insert(1, vec![never(ADDRESS), never(&other)]);
        answers.insert(2, vec![never(ADDRESS), (other.clone(), Sighting::Ran)]);
        answers.insert(3, vec![(ADDRESS.into(), Sighting::MayHold), never(&other)]);
        answers.insert(4, vec![never(ADDRESS), (other.clone(), Sighting::MayHold)]);
        answers.insert(5, vec![]);
        let probes = sort_answers(&answers, &held_elsewhere);
        assert_eq!(probes.never_sent, [1].into());
        // Absent from the executors held elsewhere (judged by the lost-run rules): 1, 2, 3, 5.
        assert_eq!(probes.absent, [1, 2, 3, 5].into());

        // A session of this admin listing the run overrides a "never saw it".
        let mut one = run(1, 0);
        one.executor_address = String::new();
        let mut two = run(2, 0);
        two.executor_address = String::new();
        let listing = [session("e1", T0, &[1])];
        let probes = StrandedProbes {
            never_sent: [1, 2].into(),
            ..StrandedProbes::default()
        };
        let (send, judge) = split_never_sent(vec![one.clone(), two.clone()], &listing, &probes);
        assert_eq!(send.iter().map(|r| r.id).collect::<Vec<_>>(), vec![2]);
        assert_eq!(judge.iter().map(|r| r.id).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn a_run_left_out_of_heartbeats_is_lost_only_if_its_executor_confirms_it() {
        // Running or queued there, or no answer: the heartbeats were older than the run.
        assert_eq!(
            confirm(Sighting::MayHold, 1_000, PARAMS),
            Confirmation::Held
        );
        assert_eq!(
            confirm(Sighting::MayHold, 60_000, PARAMS),
            Confirmation::Held
        );
        // Never there: lost at once.
        assert_eq!(
            confirm(Sighting::NeverSaw, 1_000, PARAMS),
            Confirmation::Lost
        );
        // Over there: its result is on the way, unless it has not come for a lease.
        assert_eq!(confirm(Sighting::Ran, 1_000, PARAMS), Confirmation::Over);
        assert_eq!(confirm(Sighting::Ran, 3_100, PARAMS), Confirmation::Lost);
    }

    #[test]
    fn a_run_its_executor_still_holds_is_suspected_again_only_after_another_interval() {
        let mut judge = LostJudge::default();
        let runs = [run(5, 200)];
        let lost = heartbeats(
            &mut judge,
            &runs,
            &[(T0 - 500, &[]), (T0 + 100, &[]), (T0 + 1_100, &[])],
        );
        assert_eq!(lost, vec![5]);
        // The executor said it holds the run: late heartbeats count from the next one again.
        judge.held_after_all(5);
        let lost = heartbeats(&mut judge, &runs, &[(T0 + 1_600, &[]), (T0 + 2_500, &[])]);
        assert!(lost.is_empty(), "missing for 900 ms since the answer");
        assert_eq!(heartbeats(&mut judge, &runs, &[(T0 + 2_600, &[])]), vec![5]);
    }

    #[test]
    fn a_reconnecting_executor_keeps_its_runs() {
        let mut judge = LostJudge::default();
        let runs = [run(5, 200)];
        check(&mut judge, &runs, &[session("e1", T0, &[5])], &[], T0);
        assert!(check(&mut judge, &runs, &[], &[], T0 + 400).is_empty());
        // Back under a new session (within the grace) that lists the run again.
        let back = [session("e2", T0 + 2_800, &[])];
        assert!(check(&mut judge, &runs, &back, &[], T0 + 2_800).is_empty());
        let beat = [session("e2", T0 + 3_300, &[5])];
        assert!(check(&mut judge, &runs, &beat, &[], T0 + 3_300).is_empty());
        assert!(check(&mut judge, &runs, &beat, &[], T0 + 9_000).is_empty());
    }
}
