//! Session dispatch: `ExecutorService` calls sent down an executor's own `Registry.Session`
//! stream, for executors that open no port (behind NAT, serverless, laptops).
//!
//! ```text
//! executor client ─call(address)─▶ SessionLine ──AdminMessage.call{call_id}──▶ executor
//!        ▲                              │ pending[call_id] = oneshot
//!        └──── reply / DEADLINE_EXCEEDED ◀── ExecutorMessage.reply{call_id} ◀──┘
//! ```
//!
//! Each open session in this mode has one [`SessionLine`], keyed by the executor's address
//! (`session://NAME`). A call waits for the reply with the same id at most its deadline; no
//! reply in time is `DEADLINE_EXCEEDED`; a stream that ended before the call went out is
//! `UNAVAILABLE` (not delivered: the trigger may retry it elsewhere) and one that ends after
//! is `CANCELLED` (maybe delivered: the run is left to its callback or the lost-run monitor,
//! never re-sent). These are the statuses the trigger already classifies for dialed calls, so
//! its retries and its claim/fence rules treat both modes alike. A late reply finds no waiter
//! and is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tonic::Status;
use xjob_proto::pb;
use xjob_proto::pb::session_call::Request as CallRequest;
use xjob_proto::pb::session_reply::Response as CallResponse;

/// The scheme of an executor address in session dispatch.
pub const SESSION_SCHEME: &str = "session://";

/// Whether `address` names an executor reached through its session.
pub fn is_session_address(address: &str) -> bool {
    address.starts_with(SESSION_SCHEME)
}

type Outbound = mpsc::Sender<Result<pb::AdminMessage, Status>>;
type Waiters = Mutex<HashMap<u64, oneshot::Sender<CallResponse>>>;

/// The calls in flight on one session.
pub struct SessionLine {
    outbound: Outbound,
    next_id: AtomicU64,
    waiters: Waiters,
    /// Set when the session ends: calls from then on fail at once.
    ended: AtomicBool,
}

impl SessionLine {
    pub fn new(outbound: Outbound) -> SessionLine {
        SessionLine {
            outbound,
            next_id: AtomicU64::new(1),
            waiters: Mutex::new(HashMap::new()),
            ended: AtomicBool::new(false),
        }
    }

    /// The session ended: every call waiting ends `UNAVAILABLE` now, not at its deadline.
    pub fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.lock().clear();
    }

    /// Sends `request` and waits for its reply, at most `deadline` in all (queueing included).
    pub async fn call(
        &self,
        request: CallRequest,
        deadline: Duration,
    ) -> Result<CallResponse, Status> {
        let call_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply_tx, reply_rx) = oneshot::channel();
        self.lock().insert(call_id, reply_tx);
        if self.ended.load(Ordering::SeqCst) {
            self.lock().remove(&call_id);
            return Err(Status::unavailable("the executor's session ended"));
        }
        // Removes the waiter however the call ends (reply, deadline, or the caller dropped).
        let _waiter = WaiterGuard {
            line: self,
            call_id,
        };
        let message = pb::AdminMessage {
            kind: Some(pb::admin_message::Kind::Call(pb::SessionCall {
                call_id,
                deadline_ms: i64::try_from(deadline.as_millis()).unwrap_or(i64::MAX),
                request: Some(request),
            })),
        };
        let exchange = async {
            self.outbound
                .send(Ok(message))
                .await
                .map_err(|_| Status::unavailable("the executor's session ended"))?;
            // Sent: from here the executor may have acted on it (a run may be running), so an
            // end without a reply is CANCELLED, which the trigger reads as "maybe delivered"
            // (never re-sent blindly), as it reads a dialed call's deadline.
            reply_rx.await.map_err(|_| {
                Status::cancelled(
                    "the executor's session ended after the call was sent and before it \
                     replied; it may have been delivered",
                )
            })
        };
        match tokio::time::timeout(deadline, exchange).await {
            Ok(Ok(CallResponse::Error(error))) => Err(Status::new(
                tonic::Code::from_i32(error.code),
                error.message,
            )),
            Ok(outcome) => outcome,
            Err(_) => Err(Status::deadline_exceeded(format!(
                "the executor sent no reply on its session within {deadline:?}"
            ))),
        }
    }

    /// Hands a reply to its waiting call; false when no call waits for that id (it timed out,
    /// or the executor made the id up).
    pub fn deliver(&self, reply: pb::SessionReply) -> bool {
        let Some(waiter) = self.lock().remove(&reply.call_id) else {
            return false;
        };
        let response = reply.response.unwrap_or_else(|| {
            CallResponse::Error(pb::SessionError {
                code: tonic::Code::Internal as i32,
                message: "the executor's reply carried no response".to_string(),
            })
        });
        // The caller may have given up in between; then the reply goes nowhere.
        let _ = waiter.send(response);
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<CallResponse>>> {
        self.waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

struct WaiterGuard<'a> {
    line: &'a SessionLine,
    call_id: u64,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.line.lock().remove(&self.call_id);
    }
}

/// The session lines of this admin, by executor address.
#[derive(Default)]
pub struct SessionLines {
    lines: RwLock<HashMap<String, Arc<SessionLine>>>,
}

impl SessionLines {
    /// Opens the line of a session; a line left at the address by a replaced session closes
    /// (its calls end `UNAVAILABLE` once that stream ends).
    pub fn open(&self, address: &str, line: Arc<SessionLine>) {
        self.write().insert(address.to_string(), line);
    }

    /// Closes the line at `address` if it is still `line` (a newer session may hold it now).
    pub fn close(&self, address: &str, line: &Arc<SessionLine>) {
        let mut lines = self.write();
        if lines
            .get(address)
            .is_some_and(|held| Arc::ptr_eq(held, line))
        {
            lines.remove(address);
        }
    }

    pub fn get(&self, address: &str) -> Option<Arc<SessionLine>> {
        self.lines
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(address)
            .cloned()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<SessionLine>>> {
        self.lines
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line() -> (
        Arc<SessionLine>,
        mpsc::Receiver<Result<pb::AdminMessage, Status>>,
    ) {
        let (tx, rx) = mpsc::channel(4);
        (Arc::new(SessionLine::new(tx)), rx)
    }

    fn call_id(message: Option<Result<pb::AdminMessage, Status>>) -> u64 {
        match message.and_then(Result::ok).and_then(|m| m.kind) {
            Some(pb::admin_message::Kind::Call(call)) => call.call_id,
            other => panic!("expected a call, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_reply_reaches_the_call_with_its_id() {
        let (line, mut rx) = line();
        let caller = tokio::spawn({
            let line = Arc::clone(&line);
            async move {
                line.call(
                    CallRequest::Beat(pb::BeatRequest {}),
                    Duration::from_secs(30),
                )
                .await
            }
        });
        let id = call_id(rx.recv().await);
        assert!(!line.deliver(pb::SessionReply {
            call_id: id + 100,
            response: Some(CallResponse::Beat(pb::BeatResponse {})),
        }));
        assert!(line.deliver(pb::SessionReply {
            call_id: id,
            response: Some(CallResponse::Beat(pb::BeatResponse {})),
        }));
        let outcome = caller.await.expect("call task");
        assert!(matches!(outcome, Ok(CallResponse::Beat(_))), "{outcome:?}");
    }

    #[tokio::test]
    async fn an_error_reply_is_the_status_it_names() {
        let (line, mut rx) = line();
        let caller = tokio::spawn({
            let line = Arc::clone(&line);
            async move {
                line.call(
                    CallRequest::Beat(pb::BeatRequest {}),
                    Duration::from_secs(30),
                )
                .await
            }
        });
        let id = call_id(rx.recv().await);
        line.deliver(pb::SessionReply {
            call_id: id,
            response: Some(CallResponse::Error(pb::SessionError {
                code: tonic::Code::Unavailable as i32,
                message: "executor stopped".into(),
            })),
        });
        let status = caller.await.expect("call task").expect_err("an error");
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "executor stopped");
    }

    #[tokio::test]
    async fn no_reply_within_the_deadline_is_deadline_exceeded_and_forgotten() {
        let (line, mut rx) = line();
        let status = line
            .call(
                CallRequest::Beat(pb::BeatRequest {}),
                Duration::from_millis(200),
            )
            .await
            .expect_err("no reply");
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        let id = call_id(rx.recv().await);
        assert!(
            !line.deliver(pb::SessionReply {
                call_id: id,
                response: Some(CallResponse::Beat(pb::BeatResponse {})),
            }),
            "a late reply finds no waiter"
        );
    }

    #[tokio::test]
    async fn a_closed_stream_is_unavailable() {
        let (line, rx) = line();
        drop(rx);
        let status = line
            .call(
                CallRequest::Beat(pb::BeatRequest {}),
                Duration::from_secs(30),
            )
            .await
            .expect_err("stream gone");
        assert_eq!(status.code(), tonic::Code::Unavailable);
    }

    #[tokio::test]
    async fn an_ended_session_fails_its_waiting_calls_at_once() {
        let (line, mut rx) = line();
        let caller = tokio::spawn({
            let line = Arc::clone(&line);
            async move {
                line.call(
                    CallRequest::Beat(pb::BeatRequest {}),
                    Duration::from_secs(3600),
                )
                .await
            }
        });
        call_id(rx.recv().await);
        line.end();
        let status = caller.await.expect("call task").expect_err("ended");
        assert_eq!(
            status.code(),
            tonic::Code::Cancelled,
            "sent, so maybe delivered"
        );
        let status = line
            .call(
                CallRequest::Beat(pb::BeatRequest {}),
                Duration::from_secs(3600),
            )
            .await
            .expect_err("ended");
        assert_eq!(status.code(), tonic::Code::Unavailable);
    }

    #[test]
    fn a_replaced_sessions_close_leaves_the_newer_line() {
        let lines = SessionLines::default();
        let (old, _rx1) = line();
        let (new, _rx2) = line();
        lines.open("session://a", Arc::clone(&old));
        lines.open("session://a", Arc::clone(&new));
        lines.close("session://a", &old);
        assert!(
            lines
                .get("session://a")
                .is_some_and(|l| Arc::ptr_eq(&l, &new))
        );
        lines.close("session://a", &new);
        assert!(lines.get("session://a").is_none());
    }
}
