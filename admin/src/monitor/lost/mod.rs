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

mod judge;
mod verdict;
pub mod xxl_idle;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::context::AdminContext;
use crate::error::Error;
use crate::health::Loop;
use crate::model::{AddressType, ExecutorInfo, GroupId, LogId, NodeIdentity, RunLog};
use judge::normalize;

pub use judge::{
    Confirmation, LostJudge, LostParams, SessionView, Sighting, StrandedProbes, confirm,
    sort_answers, split_never_sent,
};
pub use verdict::{Judgement, LostVerdict, Suspect};

/// Most RUNNING runs examined per check.
const MAX_RUNS_PER_CHECK: i64 = 10_000;

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
    // Owners are judged gone by the database's clock, and only once their lease lapsed a whole
    // executor timeout ago: a Run call the owner sent just before its lease ran out (it sends
    // nothing after, `Trigger::send_allowed`) has arrived or failed by then, whatever either
    // admin's own clock says. The claim time is this admin's reading of the claimer's clock,
    // kept as a second bound.
    let lease_now = ctx.store.database_now_ms().await?;
    let stranded = ctx
        .store
        .stranded_dispatches(
            &ctx.node,
            lease_now - params.executor_timeout_ms,
            now - params.executor_timeout_ms,
        )
        .await?;
    let elsewhere = if stranded.is_empty() {
        StrandedProbes::default()
    } else {
        probe_stranded(ctx, &stranded, &held_elsewhere, Asking::default()).await?
    };
    let (never_sent, stranded) = split_never_sent(stranded, &sessions, &elsewhere);
    if !never_sent.is_empty() {
        let how = super::stranded::TakeOver::LeaseLapsed {
            lease_now_ms: lease_now,
        };
        super::stranded::send(ctx, never_sent, how).await?;
    }
    let judgement = judge.judge(&runs, view, now, params);
    let mut verdicts = judgement.lost;
    verdicts.extend(confirm_suspects(ctx, judge, &runs, judgement.suspects, params).await?);
    verdicts.extend(judge.judge_stranded(&stranded, view, &elsewhere, now, params));
    let xxl_runs = xxl_idle::xxl_runs(&runs, &sessions);
    if !xxl_runs.is_empty() && judge.xxl_idle.due(now) {
        let answers = xxl_idle::probe(ctx, &xxl_runs).await;
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
            .mark_lost(verdict.log_id, &verdict.message, ctx.clock.now_ms())
            .await?
        {
            crate::metrics::finished(crate::metrics::RunEnd::Lost);
            // A stranded run's dispatch was never recorded: its row still holds what its trace
            // was to continue (a retry's failed attempt, a caller's traceparent), not its own.
            let run = runs.iter().find(|run| run.id == verdict.log_id);
            let trace_id = run.map_or("", |run| run.trace_id.as_str());
            let job_id = run.map_or(0, |run| run.job_id.0);
            crate::telemetry::run_span(verdict.log_id.0, job_id, trace_id).in_scope(|| {
                tracing::warn!(reason = %verdict.message, "run lost");
            });
            crate::telemetry::record_lost(trace_id, verdict.log_id, &verdict.message);
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
    let by_id: HashMap<LogId, &RunLog> = runs.iter().map(|run| (run.id, run)).collect();
    let group_ids: Vec<GroupId> = runs.iter().map(|run| run.group_id).collect();
    let groups = ctx.store.get_groups(&group_ids).await?;
    let deadline = ctx.config.executor_timeout;
    let in_flight = Arc::new(tokio::sync::Semaphore::new(PROBES_IN_FLIGHT));
    let mut probes = tokio::task::JoinSet::new();
    for suspect in suspects.into_iter().take(MAX_PROBED_PER_CHECK) {
        let Some(run) = by_id.get(&suspect.verdict.log_id) else {
            continue;
        };
        let token = groups
            .get(&run.group_id)
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
            Confirmation::Held => judge.held_after_all(suspect.verdict.log_id),
            Confirmation::Over => {}
        }
    }
    Ok(lost)
}

/// Stranded runs whose executors are asked about in one check.
const MAX_PROBED_PER_CHECK: usize = 1_000;

/// `ReadLog` calls in flight at once while asking.
const PROBES_IN_FLIGHT: usize = 64;

/// Asks every executor that may have received each stranded run whether it did (`ReadLog` of
/// the run): for an AUTO group every live executor of its app (this admin's sessions, the other
/// admins' rows, and the routes restored at start for executors still reconnecting), for a
/// MANUAL group its typed addresses too. An executor that cannot be asked in time may hold the
/// run, so no run is judged, or sent again, on missing evidence. `asking` may add the
/// executors of the app's recent registry rows, and fence the runs (`Sighting::Fenced`).
async fn probe_stranded(
    ctx: &AdminContext,
    stranded: &[RunLog],
    held_elsewhere: &HashSet<String>,
    asking: Asking<'_>,
) -> Result<StrandedProbes, Error> {
    let Asking {
        fence,
        rows: recent_rows,
    } = asking;
    let group_ids: Vec<GroupId> = stranded.iter().map(|run| run.group_id).collect();
    let groups = ctx.store.get_groups(&group_ids).await?;
    let deadline = ctx.config.executor_timeout;
    let in_flight = Arc::new(tokio::sync::Semaphore::new(PROBES_IN_FLIGHT));
    let mut probes = tokio::task::JoinSet::new();
    // Bounded per check, so a mass of stranded runs after an outage never becomes a burst of
    // calls; the rest are asked in later checks (oldest first, as the store lists them).
    for run in stranded.iter().take(MAX_PROBED_PER_CHECK) {
        let Some(group) = groups.get(&run.group_id) else {
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
        addresses.extend(
            recent_rows
                .iter()
                .filter(|row| row.app_name == group.app_name)
                .map(|row| normalize(&row.address).to_string()),
        );
        addresses.sort();
        addresses.dedup();
        let executors = Arc::clone(&ctx.executors);
        let in_flight = Arc::clone(&in_flight);
        let token = group.access_token.clone();
        let (log_id, log_date_ms) = (run.id, run.trigger_time_ms);
        let fence = fence.cloned();
        probes.spawn(async move {
            let mut said = Vec::with_capacity(addresses.len());
            for address in addresses {
                let Ok(_permit) = in_flight.acquire().await else {
                    break;
                };
                let read = async {
                    match &fence {
                        Some(fence) => {
                            executors
                                .read_log_fencing(&address, &token, log_id, log_date_ms, fence)
                                .await
                        }
                        None => {
                            executors
                                .read_log(&address, &token, log_id, log_date_ms, 1)
                                .await
                        }
                    }
                };
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

/// Asks every executor that may have received each of `runs` (claimed by `owner`, never
/// recorded as sent) whether it did, fencing it against `owner` where it never did
/// (`StrandedProbes::fenced`).
pub(in crate::monitor) async fn probe_fencing(
    ctx: &AdminContext,
    runs: &[RunLog],
    owner: &NodeIdentity,
) -> Result<StrandedProbes, Error> {
    // Besides this admin's view of the registry (which a failed refresh can leave short), every
    // executor with a registry row renewed within an executor lease: the owner may have routed
    // to any executor it saw live, and one left out would never be fenced.
    let lease_ms = ctx.config.executor_lease.as_millis() as i64;
    let rows = ctx
        .store
        .list_live_registry(ctx.clock.now_ms() - lease_ms)
        .await?;
    // First without fencing: a fence set on some executors only (another could not be asked,
    // or may hold the run) would make the owner's own send refused there while the run is not
    // taken over, if the owner is alive after all. Only runs every candidate never saw are
    // fenced.
    let looking = Asking {
        fence: None,
        rows: &rows,
    };
    let looked = probe_stranded(ctx, runs, &HashSet::new(), looking).await?;
    let never_seen: Vec<RunLog> = runs
        .iter()
        .filter(|run| looked.never_sent.contains(&run.id))
        .cloned()
        .collect();
    if never_seen.is_empty() {
        return Ok(StrandedProbes::default());
    }
    let fencing = Asking {
        fence: Some(owner),
        rows: &rows,
    };
    probe_stranded(ctx, &never_seen, &HashSet::new(), fencing).await
}

/// Whom a stranded-run probe asks besides the app's live executors, and whether it fences.
#[derive(Default, Clone, Copy)]
struct Asking<'a> {
    /// Fences each run against this node where it was never received.
    fence: Option<&'a NodeIdentity>,
    /// Registry rows whose executors of the run's app are asked too.
    rows: &'a [ExecutorInfo],
}

/// The AUTO groups among those of `runs` (read with one query).
async fn auto_groups_of(ctx: &AdminContext, runs: &[RunLog]) -> Result<HashSet<GroupId>, Error> {
    let group_ids: Vec<GroupId> = runs.iter().map(|run| run.group_id).collect();
    Ok(ctx
        .store
        .get_groups(&group_ids)
        .await?
        .into_iter()
        .filter(|(_, group)| group.address_type == AddressType::Auto)
        .map(|(id, _)| id)
        .collect())
}

#[cfg(test)]
mod tests;
