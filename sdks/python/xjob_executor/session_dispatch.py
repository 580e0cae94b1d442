"""Session dispatch: the admin's ExecutorService calls arrive on the executor's own
Registry.Session stream instead of a port the executor serves, so an executor behind NAT, in a
serverless box or on a laptop needs no inbound route. TLS covers them through the admin's
certificate (the executor dialed the admin).

Each SessionCall is answered by the same ExecutorService code a dialed call runs
(server.ExecutorService), in its own task (a slow log read must not hold up heartbeats or
runs), bounded by the call's deadline, with a SessionReply carrying the call's id. Replies go
out in any order; the admin matches them by id. A reply that cannot be sent (the session
ended) is dropped: the admin has already ended that call as it ends a dialed call to a vanished
executor.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from typing import Awaitable, Callable, Optional, Set

import grpc

from ._proto import registry_pb2

log = logging.getLogger("xjob_executor")

SESSION_SCHEME = "session://"

# The longest a call is worked on when the admin sent no deadline.
DEFAULT_CALL_DEADLINE = 30.0

# SessionCall.request field -> (ExecutorService method, SessionReply.response field).
_METHODS = {
    "beat": ("Beat", "beat"),
    "idle_beat": ("IdleBeat", "idle_beat"),
    "run": ("Run", "run"),
    "kill": ("Kill", "kill"),
    "read_log": ("ReadLog", "read_log"),
}


def default_session_address(app_name: str) -> str:
    """The address of an executor that names none: the app, this process and a random part,
    fixed for the life of the process so that a reconnect keeps it (the admin kills and reads
    the logs of runs by the address they were sent to)."""
    return f"{SESSION_SCHEME}{app_name}-{os.getpid()}-{secrets.token_hex(4)}"


class CallFailed(Exception):
    """A call ending as a failed gRPC call would: a status code and its message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _CallContext:
    """The part of grpc.aio.ServicerContext the ExecutorService uses. The admin's identity was
    checked when this executor dialed it, so there is no metadata to present: the service of
    session calls is built without an access token."""

    def invocation_metadata(self):
        return ()

    async def abort(self, code: grpc.StatusCode, details: str = ""):
        raise CallFailed(code, details)


def _error(code: grpc.StatusCode, message: str) -> registry_pb2.SessionError:
    # StatusCode.value is (number, name); the reply carries the number, as on the wire.
    return registry_pb2.SessionError(code=code.value[0], message=message)


async def serve(service, call: registry_pb2.SessionCall) -> registry_pb2.SessionReply:
    """Runs one call through `service` (an ExecutorService), exactly as if it had been dialed,
    and returns its reply: the response, or an error where the dialed call would have failed."""
    reply = registry_pb2.SessionReply(call_id=call.call_id)
    kind: Optional[str] = call.WhichOneof("request")
    if kind not in _METHODS:
        reply.error.CopyFrom(_error(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"session call {call.call_id} carries no request this executor knows"))
        return reply
    method, field = _METHODS[kind]
    deadline = call.deadline_ms / 1000 if call.deadline_ms > 0 else DEFAULT_CALL_DEADLINE
    try:
        response = await asyncio.wait_for(getattr(service, method)(getattr(call, kind), _CallContext()), deadline)
    except CallFailed as failed:
        reply.error.CopyFrom(_error(failed.code, failed.message))
    except asyncio.TimeoutError:
        reply.error.CopyFrom(_error(grpc.StatusCode.DEADLINE_EXCEEDED, "call deadline passed"))
    except Exception as error:  # noqa: BLE001 - a dialed call's handler error is UNKNOWN too
        log.exception("session call %d (%s) failed", call.call_id, method)
        reply.error.CopyFrom(_error(grpc.StatusCode.UNKNOWN, f"{type(error).__name__}: {error}"))
    else:
        getattr(reply, field).CopyFrom(response)
    return reply


Send = Callable[[registry_pb2.ExecutorMessage], Awaitable[None]]


class SessionCalls:
    """Answers the calls of one executor's sessions, each in its own task."""

    def __init__(self, service) -> None:
        self._service = service
        self._tasks: Set[asyncio.Task] = set()  # held so they are not collected mid-call

    def answer(self, call: registry_pb2.SessionCall, send: Send) -> None:
        task = asyncio.get_running_loop().create_task(self._answer(call, send))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, call: registry_pb2.SessionCall, send: Send) -> None:
        reply = await serve(self._service, call)
        try:
            await send(registry_pb2.ExecutorMessage(reply=reply))
        except Exception as error:  # noqa: BLE001 - whatever ended the stream, the reply is dropped
            log.debug("session ended before the reply to call %d could be sent: %r", call.call_id, error)
