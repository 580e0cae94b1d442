//! Routing and sending one claimed run, and the classification of the outcome.
//!
//! A failure before the request left (bad address, connection refused) is *not delivered*: the
//! run failed and may be retried. A deadline after sending is *maybe delivered*: the run stays
//! RUNNING with an explanatory message and is resolved by the callback or the lost-run monitor,
//! never re-sent blindly.

use super::codes::{TRIGGER_ACCEPTED, TRIGGER_FAILED, TRIGGER_UNKNOWN};
use super::pool::PoolKind;
use super::request::run_request;
use super::route::{self, Probe, ProbeVerdict, RouteError};
use super::send_ahead::StartAt;
use super::trace::{DispatchTrace, FireTrace};
use super::{Claimed, Target, Trigger};
use std::sync::Arc;

use crate::executor::Idleness;
use crate::metrics::Dispatch;
use crate::model::{Fire, LogId, RouteStrategy, SENT_AHEAD_NOTE};
use crate::store::{DispatchOutcome, DispatchRecord};

/// What became of a run routed in a pool slot.
pub(super) enum Dispatched {
    /// It was sent (or failed before): its record.
    Record(DispatchRecord),
    /// Nothing was sent: the executor the route picked can no longer hold it (its clock offset
    /// became unknown since the run was judged able to go ahead). The run gives its pool slot
    /// back, waits for its instant, and is routed again then.
    AtInstant { instant_ms: i64 },
    /// The executor refused it as fenced: another admin found this one's liveness lock
    /// released, fenced this admin for the run and takes it over. Nothing is recorded (a
    /// FAILED written now could land before that admin's take-over and end the run unrun);
    /// `watch_taken_over` makes sure the take-over happened.
    TakenOver,
}

/// Where a run goes and what the route has to say about it.
struct Routed {
    address: String,
    /// Appended to the strategy name, e.g. ` (shard 1/3)`.
    note: String,
    /// FAILOVER/BUSYOVER probe transcript (`; probes: …`), appended to the message.
    transcript: String,
}

impl Trigger {
    /// Routes and sends one claimed run that holds a pool slot; never fails, the outcome is the
    /// record (or, for a run planned to go ahead that its executor can no longer hold, the
    /// instant to wait for first).
    pub(super) async fn dispatch_one(
        &self,
        claimed: &Claimed,
        target: &Target,
        pool: PoolKind,
        trace: Option<&FireTrace>,
    ) -> Dispatched {
        let fire = &claimed.fire;
        let routed = match self.choose_address(fire, target).await {
            Ok(routed) => routed,
            Err(message) => {
                return Dispatched::Record(self.failed_record(fire.log_id, message, ""));
            }
        };
        let start_at_ms = match self.start_at(fire, &routed.address) {
            StartAt::Now => 0,
            StartAt::Held { start_at_ms } => start_at_ms,
            StartAt::WaitHere { instant_ms } => return Dispatched::AtInstant { instant_ms },
        };
        let dispatch_trace = trace.and_then(|trace| {
            trace.dispatch(
                &routed.address,
                &pool.to_string(),
                self.executors.batches(&routed.address),
                self.now_ms() - fire.scheduled_at_ms,
            )
        });
        let traceparent = dispatch_trace
            .as_ref()
            .map(DispatchTrace::traceparent)
            .unwrap_or_default();
        let dispatched = self
            .send(claimed, target, pool, routed, traceparent, start_at_ms)
            .await;
        if let (Some(dispatch_trace), Dispatched::Record(record)) = (dispatch_trace, &dispatched) {
            dispatch_trace.end(record);
        }
        dispatched
    }

    /// Sends the routed run (to start at `start_at_ms` in its executor's clock, 0: at once) and
    /// classifies the answer.
    async fn send(
        &self,
        claimed: &Claimed,
        target: &Target,
        pool: PoolKind,
        routed: Routed,
        traceparent: String,
        start_at_ms: i64,
    ) -> Dispatched {
        let fire = &claimed.fire;
        let address = routed.address;
        let route = format!(
            "route {}{}, {pool} pool",
            fire.job.route_strategy, routed.note
        );
        if start_at_ms != 0 {
            self.remember_held(fire, &address, &target.group.access_token);
        }
        // Lateness of the schedule's own fires: a retry waits for its backoff on purpose. A run
        // sent ahead leaves early on purpose: it is not late.
        if fire.is_of_schedule() && fire.attempt == 0 {
            crate::metrics::observe_lateness((self.now_ms() - fire.scheduled_at_ms).max(0));
        }
        let request = run_request(
            fire,
            &self.node,
            claimed.trigger_time_ms,
            traceparent,
            start_at_ms,
        );
        let answer = self
            .executors
            .run(&address, &target.group.access_token, request)
            .await;
        let taken = matches!(&answer, Ok(response) if response.accepted)
            || matches!(&answer, Err(status) if maybe_delivered(status));
        if start_at_ms != 0 && !taken {
            self.forget_held(fire);
        }
        if matches!(&answer, Ok(response) if response.fenced) {
            tracing::warn!(log_id = %fire.log_id, %address, "the executor refused the run as \
                fenced: another admin found this one's liveness lock released and takes it over");
            self.watch_taken_over(fire.log_id, address);
            return Dispatched::TakenOver;
        }
        let record = match answer {
            Ok(response) if response.accepted => DispatchRecord {
                log_id: fire.log_id,
                outcome: DispatchOutcome::Accepted,
                trigger_code: TRIGGER_ACCEPTED,
                trigger_msg: format!(
                    "{route}: accepted by {address}{}{}",
                    held_note(start_at_ms),
                    routed.transcript
                ),
                executor_address: address,
                finished_ms: self.now_ms(),
                trace_id: String::new(),
            },
            Ok(response) => self.failed_record_as(
                crate::metrics::Dispatch::Refused,
                fire.log_id,
                format!(
                    "{route}: executor {address} refused the run: {}{}",
                    response.message, routed.transcript
                ),
                &address,
            ),
            Err(status) if maybe_delivered(&status) => DispatchRecord {
                log_id: fire.log_id,
                outcome: DispatchOutcome::Accepted,
                trigger_code: TRIGGER_UNKNOWN,
                trigger_msg: format!(
                    "{route}: dispatch to {address} ended with {}: {}; the run may have been \
                     delivered{}{}",
                    status.code(),
                    status.message(),
                    held_note(start_at_ms),
                    routed.transcript
                ),
                executor_address: address,
                finished_ms: self.now_ms(),
                trace_id: String::new(),
            },
            Err(status) => self.failed_record(
                fire.log_id,
                format!(
                    "{route}: dispatch to {address} failed: {}: {}{}",
                    status.code(),
                    status.message(),
                    routed.transcript
                ),
                &address,
            ),
        };
        if record.outcome == DispatchOutcome::Accepted {
            crate::metrics::dispatched(crate::metrics::Dispatch::Sent, 1);
            // A retry's instant is its first attempt's: its backoff is no latency; a backfill
            // run stands for a time it was never meant to be sent at.
            if fire.attempt == 0 && !fire.is_backfill() {
                crate::metrics::observe_dispatch_latency(
                    (record.finished_ms - fire.scheduled_at_ms).max(0),
                );
            }
        }
        Dispatched::Record(record)
    }

    /// After an executor refused a run as fenced: the admin that fenced it normally takes it
    /// over within a second. Should it not have (it failed or died in between, and this
    /// admin's lock is held again, so nobody reports this admin dead any more), the run would
    /// stay RUNNING and unsent for good; a lease later it is recorded FAILED instead, with the
    /// reason, so the job's retry policy and alarms see it. Written fenced like every dispatch
    /// outcome: a run taken over meanwhile is left alone.
    fn watch_taken_over(&self, log_id: LogId, address: String) {
        let store = self.store.clone();
        let node = self.node.clone();
        let clock = Arc::clone(&self.clock);
        let recorder = self.recorder_tx.clone();
        let wait = self.node_lease;
        let stopping = self.tasks.stopping().clone();
        self.tasks.spawn(async move {
            tokio::select! {
                _ = stopping.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            let ids = [log_id];
            let Ok(still_ours) = store.owned_unsent_runs(&ids, &node).await else {
                return;
            };
            if still_ours.is_empty() {
                return;
            }
            tracing::warn!(%log_id, "a run fenced away from this admin was not taken over");
            crate::metrics::dispatched(Dispatch::Refused, 1);
            crate::metrics::recorder_backlog().inc();
            let record = DispatchRecord {
                log_id,
                outcome: DispatchOutcome::Failed,
                trigger_code: TRIGGER_FAILED,
                trigger_msg: format!(
                    "executor {address} refused the run as fenced (another admin took it over \
                     from this one), and that admin did not take it over"
                ),
                executor_address: address,
                finished_ms: clock.now_ms(),
                trace_id: String::new(),
            };
            let outcome = super::recorder::Outcome { record, slot: None };
            if recorder.send(outcome).is_err() {
                crate::metrics::recorder_backlog().dec();
            }
        });
    }

    /// Applies the job's route strategy to the fire's address list; the error is the trigger
    /// message of a run no executor can take.
    async fn choose_address(&self, fire: &Fire, target: &Target) -> Result<Routed, String> {
        let (job, group, addresses) = (&fire.job, &target.group, &target.addresses);
        if addresses.is_empty() {
            return Err(format!(
                "no online executor for app '{}' (group {}); route {}",
                group.app_name, group.id, job.route_strategy
            ));
        }
        match job.route_strategy {
            RouteStrategy::ShardingBroadcast => {
                let address = route::shard_address(addresses, fire.shard.index)
                    .ok_or_else(|| RouteError::NoAddress.to_string())?;
                Ok(Routed {
                    address: address.to_string(),
                    note: format!(" (shard {}/{})", fire.shard.index, fire.shard.total),
                    transcript: String::new(),
                })
            }
            RouteStrategy::Failover | RouteStrategy::Busyover => {
                self.probe_in_order(fire, &group.access_token, addresses)
                    .await
            }
            strategy => {
                let address = self
                    .routes
                    .pick(strategy, fire.job_id(), addresses, self.now_ms())
                    .map_err(|error| format!("route {strategy}: {error}"))?;
                Ok(Routed {
                    address: address.to_string(),
                    note: String::new(),
                    transcript: String::new(),
                })
            }
        }
    }

    /// FAILOVER (`Beat`) and BUSYOVER (`IdleBeat`): probes each address in order until one
    /// passes; the transcript of every probe goes into the trigger message either way.
    async fn probe_in_order(
        &self,
        fire: &Fire,
        token: &str,
        addresses: &[String],
    ) -> Result<Routed, String> {
        let mut probes = Vec::with_capacity(addresses.len());
        for address in addresses {
            let verdict = self.probe(fire, token, address).await;
            let passed = verdict == ProbeVerdict::Pass;
            probes.push(Probe {
                address: address.clone(),
                verdict,
            });
            if passed {
                break;
            }
        }
        let transcript = route::probe_transcript(&probes);
        match route::choose_probed(&probes) {
            Some(address) => Ok(Routed {
                address: address.to_string(),
                note: String::new(),
                transcript: format!("; probes: {transcript}"),
            }),
            None if fire.job.route_strategy == RouteStrategy::Busyover => Err(format!(
                "route BUSYOVER: no executor is idle for job {}; probes: {transcript}",
                fire.job.id
            )),
            None => Err(format!(
                "route FAILOVER: no executor answered; probes: {transcript}"
            )),
        }
    }

    /// One probe with a short deadline: `Beat` for FAILOVER, `IdleBeat(job)` for BUSYOVER.
    async fn probe(&self, fire: &Fire, token: &str, address: &str) -> ProbeVerdict {
        let described = |status: tonic::Status| {
            ProbeVerdict::Error(format!("{}: {}", status.code(), status.message()))
        };
        if fire.job.route_strategy == RouteStrategy::Failover {
            return match self.executors.beat(address, token).await {
                Ok(()) => ProbeVerdict::Pass,
                Err(status) => described(status),
            };
        }
        match self
            .executors
            .idle_beat(address, token, fire.job_id())
            .await
        {
            Ok(Idleness::Idle) => ProbeVerdict::Pass,
            Ok(Idleness::Busy(reason)) => ProbeVerdict::Busy(reason),
            Err(status) => described(status),
        }
    }
}

/// Deadline or cancellation after the request may have reached the executor.
fn maybe_delivered(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
    )
}

/// Fires whose turn to be sent came too late.
impl Trigger {
    /// A fire skipped because its turn to be sent came past the misfire threshold.
    pub(super) fn skipped_as_late(&self, log_id: LogId, late_ms: i64) -> DispatchRecord {
        crate::metrics::dispatched(Dispatch::Skipped, 1);
        DispatchRecord {
            outcome: DispatchOutcome::Skipped,
            trigger_msg: format!(
                "misfire: its turn to be sent came {late_ms} ms after its time (the admin is \
                 overloaded); DO_NOTHING skips it"
            ),
            ..self.record(log_id, String::new(), "")
        }
    }

    /// How late a fire is, when its turn to be sent came past the misfire threshold (its claim,
    /// its pool slot or the admin were slow) and its job's misfire strategy skips it
    /// (`model::skipped_as_misfire`).
    pub(super) fn too_late_to_send(&self, claimed: &Claimed) -> Option<i64> {
        let fire = &claimed.fire;
        if claimed.released {
            return None;
        }
        crate::model::skipped_as_misfire(
            fire.into(),
            fire.job.misfire_strategy,
            self.now_ms(),
            self.misfire_threshold_ms,
        )
    }

    /// A FAILED outcome (trigger code 500) for a run that was not delivered; counted as a
    /// failed fire.
    pub(super) fn failed_record(
        &self,
        log_id: LogId,
        message: String,
        address: &str,
    ) -> DispatchRecord {
        self.failed_record_as(Dispatch::Failed, log_id, message, address)
    }

    /// A FAILED outcome counted as `outcome` (overloaded, refused: failures with a cause an
    /// operator watches on its own).
    pub(super) fn failed_record_as(
        &self,
        outcome: Dispatch,
        log_id: LogId,
        message: String,
        address: &str,
    ) -> DispatchRecord {
        crate::metrics::dispatched(outcome, 1);
        self.record(log_id, message, address)
    }

    /// A FAILED outcome, not counted (the caller counts it or replaces the outcome).
    pub(super) fn record(&self, log_id: LogId, message: String, address: &str) -> DispatchRecord {
        DispatchRecord {
            log_id,
            outcome: DispatchOutcome::Failed,
            trigger_code: TRIGGER_FAILED,
            trigger_msg: message,
            executor_address: address.to_string(),
            finished_ms: self.now_ms(),
            trace_id: String::new(),
        }
    }
}

/// Said on the row of a run sent ahead, so its early dispatch reads as intended. It is also
/// how any admin finds the runs an executor may still hold (`Store::held_runs`).
fn held_note(start_at_ms: i64) -> String {
    if start_at_ms == 0 {
        return String::new();
    }
    format!(" ({SENT_AHEAD_NOTE}, {start_at_ms} in the executor's clock)")
}
