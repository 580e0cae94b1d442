"""Result reporting: finished runs wait here until an admin acknowledges them durable.

Results are sent with Registry.Callback in batches of at most 100. A log id leaves the backlog
only when it is listed in `accepted_log_ids`; anything else is retried with backoff, failing over
between admins, for as long as the process lives. Until then the run stays in the heartbeat's
running list (`pending_log_ids`), so the admin does not take a finished but unreported run for a
lost one while it is briefly down.

When no admin has taken a result for SPOOL_AFTER seconds, or a graceful stop could not deliver
it, it is also written to `{spool_dir}/{log_id}.pb` (a serialized RunResult), so a restarted
executor sends it again; the file goes once the result is acknowledged.

An admin refuses a request larger than its `max_request_bytes` with OUT_OF_RANGE: the batch is
then sent again as halves, down to one result, and a single result still refused has its message
halved, so no result is retried unchanged for ever.
"""

import asyncio
import collections
import logging
import time
from pathlib import Path

import grpc

from ._proto import registry_pb2
from .backoff import Backoff

log = logging.getLogger("xjob_executor")

MAX_BATCH = 100
BATCH_WINDOW = 0.005  # seconds to gather results that finish together
CALL_TIMEOUT = 10.0
SPOOL_AFTER = 10.0  # seconds of failed delivery before results are written to disk
# Below this many characters a cut message would be mostly the cut mark: it is emptied instead.
MIN_CUT_CHARS = 32


class CallbackSender:
    def __init__(self, admins, spool_dir, on_accepted=None) -> None:
        self._admins = admins
        self._on_accepted = on_accepted  # called with each log id an admin accepted (tracing)
        self._spool_dir = Path(spool_dir)
        self._pending = collections.OrderedDict()  # log id -> RunResult
        self._reported_at = {}  # log id -> monotonic time it was reported
        self._spooled = set()
        self._batch_limit = MAX_BATCH  # lowered for good when an admin refuses a batch as too large
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._load_spool()

    def report(self, result) -> None:
        self._pending[result.log_id] = result
        self._reported_at[result.log_id] = time.monotonic()
        self._idle.clear()
        self._wake.set()

    def spool_all(self) -> None:
        """Writes every unacknowledged result to disk (a stop that could not deliver them)."""
        self._spool(lambda log_id: True)

    def _spool(self, wanted) -> None:
        for log_id, result in self._pending.items():
            if log_id in self._spooled or not wanted(log_id):
                continue
            try:
                self._spool_dir.mkdir(parents=True, exist_ok=True)
                path = self._spool_dir / f"{log_id}.pb"
                path.with_suffix(".tmp").write_bytes(result.SerializeToString())
                path.with_suffix(".tmp").replace(path)  # whole files only
                self._spooled.add(log_id)
            except OSError as error:
                log.error("cannot spool the result of log %s: %s", log_id, error)

    def _load_spool(self) -> None:
        if not self._spool_dir.is_dir():
            return
        for path in sorted(self._spool_dir.glob("*.pb")):
            try:
                result = registry_pb2.RunResult.FromString(path.read_bytes())
            except Exception as error:  # a damaged file is left for a human
                log.warning("unreadable callback spool file %s left in place: %s", path, error)
                continue
            log.info("re-sending the spooled result of log %s", result.log_id)
            self._pending[result.log_id] = result
            self._reported_at[result.log_id] = time.monotonic()
            self._spooled.add(result.log_id)
        if self._pending:
            self._idle.clear()
            self._wake.set()

    def _acknowledged(self, log_id: int) -> None:
        if self._on_accepted is not None:
            self._on_accepted([log_id])
        self._pending.pop(log_id, None)
        self._reported_at.pop(log_id, None)
        if log_id in self._spooled:
            self._spooled.discard(log_id)
            (self._spool_dir / f"{log_id}.pb").unlink(missing_ok=True)

    def pending_log_ids(self):
        return set(self._pending)

    async def run(self) -> None:
        """Sends until cancelled."""
        backoff = Backoff()
        while True:
            await self._wake.wait()
            await asyncio.sleep(BATCH_WINDOW)
            self._wake.clear()
            while self._pending:
                if await self._send_batch():
                    backoff.reset()
                else:
                    horizon = time.monotonic() - SPOOL_AFTER
                    self._spool(lambda log_id: self._reported_at.get(log_id, 0) < horizon)
                    await asyncio.sleep(backoff.next_delay())
            self._idle.set()

    async def flush(self, timeout: float) -> bool:
        """Waits until every result is acknowledged, up to `timeout`; returns whether it was."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return not self._pending

    async def _send_batch(self) -> bool:
        batch = list(self._pending.values())[:self._batch_limit]
        address = self._admins.current
        try:
            response = await self._admins.registry(address).Callback(
                registry_pb2.CallbackRequest(results=batch),
                metadata=self._admins.metadata,
                timeout=CALL_TIMEOUT,
            )
        except grpc.aio.AioRpcError as error:
            # gRPC servers answer OUT_OF_RANGE to a request over their decoding limit.
            if error.code() == grpc.StatusCode.OUT_OF_RANGE and self._shrink(batch):
                return True
            log.warning("callback of %d result(s) to %s failed: %s %s", len(batch), address,
                        error.code().name, error.details())
            self._admins.advance()
            return False
        accepted = set(response.accepted_log_ids)
        for result in batch:
            if result.log_id in accepted:
                self._acknowledged(result.log_id)
        if len(accepted) < len(batch):
            log.warning("admin %s acknowledged %d of %d results; retrying the rest",
                        address, len(accepted), len(batch))
            return False
        return True

    def _shrink(self, batch) -> bool:
        """After a refusal of `batch` as too large: False when nothing is left to make smaller."""
        if len(batch) > 1:
            self._batch_limit = max(1, len(batch) // 2)
            log.warning("an admin refused a callback batch as too large; sending at most %d "
                        "results a batch", self._batch_limit)
            return True
        result = batch[0]
        if not result.message:
            return False
        keep = len(result.message) // 2
        result.message = result.message[:keep] + "..." if keep >= MIN_CUT_CHARS else ""
        log.warning("an admin refused the result of log %s as too large; its message is cut to "
                    "%d characters", result.log_id, keep)
        return True
