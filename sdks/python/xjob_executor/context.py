"""What a handler sees of its run (JobContext), and how it fails on purpose (JobError)."""

import asyncio

from .joblog import RunLog


class JobError(Exception):
    """Raise it from a handler to end the run FAILED (handle code 500) with this message.
    Any other exception does the same, with its text as the message."""


class JobContext:
    def __init__(self, request, log: RunLog) -> None:
        self._request = request
        self._log = log
        self._cancelled = asyncio.Event()

    job_id = property(lambda self: self._request.job_id)
    log_id = property(lambda self: self._request.log_id)
    handler = property(lambda self: self._request.handler)
    params = property(lambda self: self._request.params)
    shard_index = property(lambda self: self._request.shard_index)
    shard_total = property(lambda self: self._request.shard_total)
    attempt = property(lambda self: self._request.attempt)
    scheduled_at_ms = property(lambda self: self._request.scheduled_at_ms)
    trigger_type = property(lambda self: self._request.trigger_type)
    timeout_ms = property(lambda self: self._request.timeout_ms)

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
