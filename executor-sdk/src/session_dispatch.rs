//! Session dispatch: the admin's `ExecutorService` calls arrive on the executor's own
//! `Registry.Session` stream instead of a port the executor serves, so an executor behind NAT,
//! in a serverless box or on a laptop needs no inbound route. TLS covers them through the
//! admin's certificate (the executor dialed the admin).
//!
//! Each `SessionCall` is answered by the same `ExecutorService` code a dialed call runs
//! (`server::ExecutorServer`), in its own task, bounded by the call's deadline, with a
//! `SessionReply` carrying the call's id. Calls answer in any order; the admin matches them by
//! id. A reply that cannot be sent (the session ended) is dropped: the admin has already ended
//! that call as it ends a dialed call to a vanished executor.

use std::time::Duration;

use tokio::sync::mpsc;
use tonic::{Request, Status};
use xjob_proto::pb;
use xjob_proto::pb::executor_service_server::ExecutorService;
use xjob_proto::pb::session_call::Request as CallRequest;
use xjob_proto::pb::session_reply::Response as CallResponse;

use crate::server::ExecutorServer;

/// The scheme of an executor's address in session dispatch (`session://NAME`).
pub(crate) const SESSION_SCHEME: &str = "session://";

/// The longest a call is worked on when the admin sent no deadline.
const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(30);

/// The session address of an executor that names none: the app, this process and a random
/// part, stable for the life of the process so that a reconnect keeps the same address (the
/// admin kills and reads the logs of runs by the address they were sent to).
pub(crate) fn default_session_address(app_name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    format!(
        "{SESSION_SCHEME}{app_name}-{}-{nanos:08x}",
        std::process::id()
    )
}

/// Answers one call in its own task; the reply goes out on `outbound`.
pub(crate) fn answer(
    server: ExecutorServer,
    call: pb::SessionCall,
    outbound: mpsc::Sender<pb::ExecutorMessage>,
) {
    tokio::spawn(async move {
        let call_id = call.call_id;
        let deadline = u64::try_from(call.deadline_ms)
            .ok()
            .filter(|millis| *millis > 0)
            .map_or(DEFAULT_CALL_DEADLINE, Duration::from_millis);
        let response = match call.request {
            Some(request) => tokio::time::timeout(deadline, serve(&server, request))
                .await
                .unwrap_or_else(|_| Err(Status::deadline_exceeded("call deadline passed"))),
            None => Err(Status::invalid_argument("session call without a request")),
        };
        let response = response.unwrap_or_else(|status| {
            CallResponse::Error(pb::SessionError {
                code: status.code() as i32,
                message: status.message().to_owned(),
            })
        });
        let reply = pb::ExecutorMessage {
            kind: Some(pb::executor_message::Kind::Reply(pb::SessionReply {
                call_id,
                response: Some(response),
            })),
        };
        if outbound.send(reply).await.is_err() {
            tracing::debug!(call_id, "session ended before the reply could be sent");
        }
    });
}

/// Runs the call through the executor's `ExecutorService`, exactly as if it had been dialed.
async fn serve(server: &ExecutorServer, request: CallRequest) -> Result<CallResponse, Status> {
    Ok(match request {
        CallRequest::Beat(request) => {
            CallResponse::Beat(server.beat(Request::new(request)).await?.into_inner())
        }
        CallRequest::IdleBeat(request) => {
            CallResponse::IdleBeat(server.idle_beat(Request::new(request)).await?.into_inner())
        }
        CallRequest::Run(request) => {
            CallResponse::Run(server.run(Request::new(request)).await?.into_inner())
        }
        CallRequest::Kill(request) => {
            CallResponse::Kill(server.kill(Request::new(request)).await?.into_inner())
        }
        CallRequest::ReadLog(request) => {
            CallResponse::ReadLog(server.read_log(Request::new(request)).await?.into_inner())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_session_address_names_the_app_and_is_a_session_address() {
        let address = default_session_address("orders");
        assert!(address.starts_with("session://orders-"), "{address}");
        assert!(
            address[SESSION_SCHEME.len()..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        );
    }
}
