//! The connection to the admins: one `Registry.Session` stream at a time.
//!
//! ```text
//! connect (admin i) ─▶ Register ─▶ Registered (≤ 10 s) ─▶ Heartbeat every interval ─▶ …
//!      ▲ failure: next admin, backoff 100 ms → 5 s            │ shutdown: Deregister,
//!      └──────────────── stream error / end ◀─────────────────┘ wait ≤ 2 s for Deregistered
//! ```
//!
//! The session state is published on a `watch` channel, which `wait_registered` waits on and
//! the gRPC health follows: an admin that *answered* and refused the registration (wrong token,
//! bad app name) makes the executor `Refused` until a later registration succeeds, while an
//! unreachable admin only makes it `Connecting`.
//! Heartbeats carry the runner's running log ids (and those of finished runs whose result is not
//! accepted yet) and queued count, so the admin can tell a lost run from a live one.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use xjob_proto::pb;
use xjob_proto::pb::admin_message::Kind as AdminKind;
use xjob_proto::pb::executor_message::Kind as ExecutorKind;

use crate::admins::Admins;
use crate::backoff::Backoff;
use crate::callback::Unreported;
use crate::runner::Runner;
use crate::server::ExecutorServer;
pub(crate) use crate::session_state::SessionState;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const DEREGISTER_TIMEOUT: Duration = Duration::from_secs(2);
const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
const MIN_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(10);

/// What the executor announces in `Register`.
#[derive(Clone, Debug)]
pub(crate) struct Announcement {
    pub(crate) app_name: String,
    pub(crate) address: String,
    /// Sorted handler names.
    pub(crate) handlers: Vec<String>,
    pub(crate) labels: HashMap<String, String>,
}

enum SessionEnd {
    /// Shutdown asked for it; nothing more to do.
    Deregistered,
    /// The session could not be opened or was lost.
    Failed { was_registered: bool },
    /// The admin answered and refused the registration.
    Refused { admin: String, message: String },
}

/// The connection task: keeps one session open until `deregister` fires. With
/// `session_calls_opt` the executor is in session dispatch: it asks for it at registration and
/// answers the admin's calls arriving on the session with that server (`session_dispatch`).
pub(crate) async fn connection_loop(
    admins: Admins,
    announcement: Announcement,
    session_calls_opt: Option<ExecutorServer>,
    runner: Runner,
    unreported: Unreported,
    state_tx: watch::Sender<SessionState>,
    deregister: CancellationToken,
) {
    let mut backoff = Backoff::default();
    let mut admin_index = 0usize;
    loop {
        let session = Session {
            admins: &admins,
            admin_index,
            announcement: &announcement,
            session_calls_opt: session_calls_opt.as_ref(),
            runner: &runner,
            unreported: &unreported,
            state_tx: &state_tx,
            deregister: &deregister,
        };
        match session.run().await {
            SessionEnd::Deregistered => break,
            SessionEnd::Failed { was_registered } => {
                // A refusal stands until an admin accepts: an unreachable admin tried next
                // says nothing about the token.
                state_tx.send_if_modified(|state| {
                    if matches!(state, SessionState::Refused { .. }) {
                        return false;
                    }
                    *state = SessionState::Connecting;
                    true
                });
                if was_registered {
                    backoff.reset();
                }
            }
            SessionEnd::Refused { admin, message } => {
                state_tx.send_replace(SessionState::Refused { admin, message });
            }
        }
        admin_index = (admin_index + 1) % admins.len();
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            () = deregister.cancelled() => break,
        }
    }
    state_tx.send_replace(SessionState::Stopped);
}

struct Session<'a> {
    admins: &'a Admins,
    admin_index: usize,
    announcement: &'a Announcement,
    session_calls_opt: Option<&'a ExecutorServer>,
    runner: &'a Runner,
    unreported: &'a Unreported,
    state_tx: &'a watch::Sender<SessionState>,
    deregister: &'a CancellationToken,
}

impl Session<'_> {
    async fn run(self) -> SessionEnd {
        let admin = self.admins.address(self.admin_index).to_owned();
        let connected = tokio::select! {
            connected = self.admins.connect(self.admin_index) => connected,
            () = self.deregister.cancelled() => return SessionEnd::Deregistered,
        };
        let mut client = match connected {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(admin = %admin, %error, "admin unreachable");
                return SessionEnd::Failed {
                    was_registered: false,
                };
            }
        };
        // Room for the replies of calls answered at once (session dispatch) next to heartbeats.
        let (outbound_tx, outbound_rx) = mpsc::channel(64);
        let dispatch_mode = if self.session_calls_opt.is_some() {
            pb::DispatchMode::Session
        } else {
            pb::DispatchMode::Dial
        };
        let register = pb::Register {
            app_name: self.announcement.app_name.clone(),
            address: self.announcement.address.clone(),
            handlers: self.announcement.handlers.clone(),
            protocol_version: xjob_proto::PROTOCOL_VERSION,
            labels: self.announcement.labels.clone(),
            capacity: 0,
            dispatch_mode: dispatch_mode as i32,
            // The runner holds runs sent ahead and starts them on its own timer.
            can_hold_runs: true,
        };
        // The receiver is alive here, so the first message is always queued.
        let _ = outbound_tx
            .send(executor_message(ExecutorKind::Register(register)))
            .await;
        let handshake = async {
            let mut inbound = client
                .session(ReceiverStream::new(outbound_rx))
                .await?
                .into_inner();
            loop {
                match inbound.message().await? {
                    Some(pb::AdminMessage {
                        kind: Some(AdminKind::Registered(registered)),
                    }) => {
                        return Ok((inbound, registered));
                    }
                    Some(_) => continue,
                    None => {
                        return Err(tonic::Status::unavailable(
                            "session ended before registered",
                        ));
                    }
                }
            }
        };
        let handshake_outcome = tokio::select! {
            outcome = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake) => outcome,
            () = self.deregister.cancelled() => return SessionEnd::Deregistered,
        };
        let (mut inbound, registered) = match handshake_outcome {
            Ok(Ok(accepted)) => accepted,
            Ok(Err(status)) if is_refusal(status.code()) => {
                tracing::warn!(admin = %admin, code = ?status.code(), message = status.message(), "registration refused");
                return SessionEnd::Refused {
                    admin,
                    message: status.message().to_owned(),
                };
            }
            Ok(Err(status)) => {
                tracing::warn!(admin = %admin, code = ?status.code(), message = status.message(), "registration failed");
                return SessionEnd::Failed {
                    was_registered: false,
                };
            }
            Err(_) => {
                tracing::warn!(admin = %admin, timeout = ?HANDSHAKE_TIMEOUT, "registration timed out");
                return SessionEnd::Failed {
                    was_registered: false,
                };
            }
        };
        let interval = heartbeat_interval(registered.heartbeat_interval_ms);
        tracing::info!(admin = %admin, executor_id = %registered.executor_id, ?interval, "registered with admin");
        self.state_tx.send_replace(SessionState::Registered {
            executor_id: registered.executor_id,
            admin: admin.clone(),
        });
        let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    let heartbeat = pb::Heartbeat {
                        running_log_ids: self.alive_log_ids(),
                        queued: self.runner.queued_count(),
                    };
                    let message = executor_message(ExecutorKind::Heartbeat(heartbeat));
                    if outbound_tx.send(message).await.is_err() {
                        tracing::warn!(admin = %admin, "session closed while sending heartbeat");
                        return SessionEnd::Failed { was_registered: true };
                    }
                }
                received = inbound.message() => match received {
                    Ok(Some(pb::AdminMessage { kind: Some(AdminKind::Call(call)) })) => {
                        match self.session_calls_opt {
                            Some(server) => crate::session_dispatch::answer(
                                server.clone(),
                                call,
                                outbound_tx.clone(),
                            ),
                            None => tracing::warn!(admin = %admin, call_id = call.call_id,
                                "admin sent a session call to a dialed executor; ignored"),
                        }
                    }
                    Ok(Some(pb::AdminMessage { kind: Some(AdminKind::ClockProbe(probe)) })) => {
                        // Never waits: a probe left unanswered only delays the offset estimate.
                        let _ = outbound_tx.try_send(clock_echo(&probe));
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        tracing::warn!(admin = %admin, "session ended by admin");
                        return SessionEnd::Failed { was_registered: true };
                    }
                    Err(status) => {
                        tracing::warn!(admin = %admin, code = ?status.code(), message = status.message(), "session lost");
                        return SessionEnd::Failed { was_registered: true };
                    }
                },
                () = self.deregister.cancelled() => {
                    let deregister = executor_message(ExecutorKind::Deregister(pb::Deregister {}));
                    if outbound_tx.send(deregister).await.is_ok() {
                        let answered = tokio::time::timeout(DEREGISTER_TIMEOUT, async {
                            // Deregistered, the stream's end or its error all mean the admin let go.
                            while let Ok(Some(message)) = inbound.message().await {
                                if matches!(message.kind, Some(AdminKind::Deregistered(_))) {
                                    break;
                                }
                            }
                        })
                        .await;
                        if answered.is_err() {
                            tracing::warn!(admin = %admin, "no answer to deregister");
                        }
                    }
                    tracing::info!(admin = %admin, "deregistered from admin");
                    return SessionEnd::Deregistered;
                }
            }
        }
    }
}

impl Session<'_> {
    /// Runs running or queued here, and finished ones whose result no admin has accepted yet:
    /// the admin must not take any of them for lost.
    fn alive_log_ids(&self) -> Vec<i64> {
        let mut log_ids = self.runner.running_log_ids();
        log_ids.extend(self.unreported.log_ids());
        log_ids.sort_unstable();
        log_ids.dedup();
        log_ids
    }
}

/// Whether the admin's answer refuses this executor as configured (its token, app name or
/// address), as opposed to an outage that retrying outlives.
fn is_refusal(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::Unauthenticated
            | tonic::Code::PermissionDenied
            | tonic::Code::InvalidArgument
            | tonic::Code::FailedPrecondition
    )
}

/// The answer to a clock probe: when it arrived and when it is answered, in this executor's
/// clock (the one held runs start by), so the admin can estimate the offset.
fn clock_echo(probe: &pb::ClockProbe) -> pb::ExecutorMessage {
    let received_ms = crate::runner::execution::now_ms();
    executor_message(ExecutorKind::ClockEcho(pb::ClockEcho {
        admin_sent_ms: probe.admin_sent_ms,
        executor_received_ms: received_ms,
        executor_sent_ms: crate::runner::execution::now_ms(),
    }))
}

fn executor_message(kind: ExecutorKind) -> pb::ExecutorMessage {
    pb::ExecutorMessage { kind: Some(kind) }
}

/// The admin's interval, or the default when it sent none; never below 10 ms.
fn heartbeat_interval(heartbeat_interval_ms: i64) -> Duration {
    match u64::try_from(heartbeat_interval_ms) {
        Ok(millis) if millis > 0 => Duration::from_millis(millis).max(MIN_HEARTBEAT_INTERVAL),
        _ => DEFAULT_HEARTBEAT_INTERVAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_interval_defaults_and_floors() {
        assert_eq!(heartbeat_interval(0), DEFAULT_HEARTBEAT_INTERVAL);
        assert_eq!(heartbeat_interval(-5), DEFAULT_HEARTBEAT_INTERVAL);
        assert_eq!(heartbeat_interval(1), MIN_HEARTBEAT_INTERVAL);
        assert_eq!(heartbeat_interval(2500), Duration::from_millis(2500));
    }
}
