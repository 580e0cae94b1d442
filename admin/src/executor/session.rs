//! The session-dispatch transport of the executor client: the same five calls as over a dialed
//! channel, sent down the executor's own `Registry.Session` stream instead
//! (`registry::session_calls`). The executor client picks it by address (`session://NAME`), so
//! the trigger's route and block logic, kills and log reads do not know which transport ran.

use std::sync::Arc;
use std::time::Duration;

use tonic::Status;
use xjob_proto::pb;
use xjob_proto::pb::session_call::Request as CallRequest;
use xjob_proto::pb::session_reply::Response as CallResponse;

use crate::registry::Registry;
use crate::registry::session_calls::{SessionLine, is_session_address};

/// The line to the executor at `address` when it is in session dispatch: `None` for a dialed
/// address; `UNAVAILABLE` when no session of this admin holds it (it left, or another admin
/// holds its session; routing on this admin never picks such an address, but a kill or a log
/// read of an older run may name it).
pub(super) fn line(
    registry: Option<&Arc<Registry>>,
    address: &str,
) -> Option<Result<Arc<SessionLine>, Status>> {
    if !is_session_address(address) {
        return None;
    }
    let line = registry.and_then(|registry| registry.session_lines.get(address));
    Some(line.ok_or_else(|| {
        Status::unavailable(format!(
            "executor {address} has no session on this admin (it left, or its session is held \
             by another admin)"
        ))
    }))
}

pub(super) async fn run(
    line: &SessionLine,
    request: pb::RunRequest,
    deadline: Duration,
) -> Result<pb::RunResponse, Status> {
    match line.call(CallRequest::Run(request), deadline).await? {
        CallResponse::Run(response) => Ok(response),
        other => Err(mismatch("Run", &other)),
    }
}

pub(super) async fn beat(line: &SessionLine, deadline: Duration) -> Result<(), Status> {
    match line
        .call(CallRequest::Beat(pb::BeatRequest {}), deadline)
        .await?
    {
        CallResponse::Beat(_) => Ok(()),
        other => Err(mismatch("Beat", &other)),
    }
}

pub(super) async fn idle_beat(
    line: &SessionLine,
    job_id: i64,
    deadline: Duration,
) -> Result<pb::IdleBeatResponse, Status> {
    let request = CallRequest::IdleBeat(pb::IdleBeatRequest { job_id });
    match line.call(request, deadline).await? {
        CallResponse::IdleBeat(response) => Ok(response),
        other => Err(mismatch("IdleBeat", &other)),
    }
}

pub(super) async fn kill(
    line: &SessionLine,
    request: pb::KillRequest,
    deadline: Duration,
) -> Result<pb::KillResponse, Status> {
    match line.call(CallRequest::Kill(request), deadline).await? {
        CallResponse::Kill(response) => Ok(response),
        other => Err(mismatch("Kill", &other)),
    }
}

pub(super) async fn read_log(
    line: &SessionLine,
    request: pb::ReadLogRequest,
    deadline: Duration,
) -> Result<pb::ReadLogResponse, Status> {
    match line.call(CallRequest::ReadLog(request), deadline).await? {
        CallResponse::ReadLog(response) => Ok(response),
        other => Err(mismatch("ReadLog", &other)),
    }
}

/// An executor that answers a call with another call's response is broken; the call fails as
/// an executor error would.
fn mismatch(call: &str, got: &CallResponse) -> Status {
    let got = match got {
        CallResponse::Beat(_) => "Beat",
        CallResponse::IdleBeat(_) => "IdleBeat",
        CallResponse::Run(_) => "Run",
        CallResponse::Kill(_) => "Kill",
        CallResponse::ReadLog(_) => "ReadLog",
        CallResponse::Error(_) => "an error",
    };
    Status::internal(format!(
        "the executor answered a {call} call on its session with {got}"
    ))
}
