"""What a handler sees of its run (JobContext), and how it fails on purpose (JobError)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Awaitable, Callable, Union

from .joblog import RunLog

if TYPE_CHECKING:
    from ._pb.executor_pb2 import RunRequest


class JobError(Exception):
    """Raise it from a handler to end the run FAILED (handle code 500) with this message.
    Any other exception does the same, with its text as the message."""


class JobContext:
    """One run of a handler: its request's fields, its run log, and whether it is being stopped."""

    def __init__(self, request: RunRequest, log: RunLog, stop_grace: float = 2.0) -> None:
        self._request = request
        self._log = log
        self._stop_grace = stop_grace
        self._cancelled = asyncio.Event()
        self._trace_span = None  # the run's `handler` span, when the executor traces

    @property
    def job_id(self) -> int:
        return self._request.job_id

    @property
    def log_id(self) -> int:
        """The run's id; its log is read by this id."""
        return self._request.log_id

    @property
    def handler(self) -> str:
        return self._request.handler

    @property
    def params(self) -> str:
        """The job's params, or the ones given to this trigger."""
        return self._request.params

    @property
    def shard_index(self) -> int:
        """This executor's shard (0-based) under the sharding broadcast route."""
        return self._request.shard_index

    @property
    def shard_total(self) -> int:
        """The number of shards under the sharding broadcast route."""
        return self._request.shard_total

    @property
    def attempt(self) -> int:
        """0 for the first attempt, then 1, 2, … for retries."""
        return self._request.attempt

    @property
    def scheduled_at_ms(self) -> int:
        """When the fire was planned, in milliseconds since the Unix epoch."""
        return self._request.scheduled_at_ms

    @property
    def trigger_type(self) -> int:
        """Why the run was fired: a value of the TriggerType enum (cron, manual, retry, …)."""
        return self._request.trigger_type

    @property
    def timeout_ms(self) -> int:
        """The run's timeout in milliseconds, 0 for none."""
        return self._request.timeout_ms

    @property
    def stop_grace(self) -> float:
        """Seconds a stopped handler has to return before it is abandoned (the executor's
        kill_grace): time to clean up, e.g. stop child processes."""
        return self._stop_grace

    @property
    def trace_context(self):
        """The OpenTelemetry context of the run's `handler` span when the executor traces (None
        otherwise): start your own spans with `tracer.start_as_current_span(name,
        context=ctx.trace_context)` to nest them under the run."""
        if self._trace_span is None:
            return None
        from opentelemetry import trace

        return trace.set_span_in_context(self._trace_span)

    @property
    def traceparent(self) -> str:
        """The W3C `traceparent` to pass to services the handler calls so their spans join the
        run's trace: the run's `handler` span when the executor traces, else the admin's
        `dispatch` span the run came with; empty when the run has no trace."""
        from .tracing import span_traceparent

        return span_traceparent(self._trace_span) or self._request.traceparent

    def log(self, line: str) -> None:
        """Appends a line to the run's log, readable through the admin's ReadRunLog."""
        self._log.write(line)

    def is_cancelled(self) -> bool:
        """True once the run is being stopped (kill, timeout, COVER_EARLY, shutdown)."""
        return self._cancelled.is_set()

    async def cancelled(self) -> None:
        """Waits until the run is being stopped. Async handlers are also cancelled
        (asyncio.CancelledError at their next await); synchronous ones, run in a thread,
        should poll is_cancelled()."""
        await self._cancelled.wait()

    def _cancel(self) -> None:
        self._cancelled.set()


#: A handler: an async function (or a plain one, run in a thread) taking the run's context and
#: returning the success message (None for none).
Handler = Callable[[JobContext], Union[Awaitable[Union[str, None]], Union[str, None]]]
