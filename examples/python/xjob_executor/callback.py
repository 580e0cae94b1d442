"""Result reporting: finished runs wait here until an admin acknowledges them durable.

Results are sent with Registry.Callback in batches of at most 100. A log id leaves the backlog
only when it is listed in `accepted_log_ids`; anything else is retried with backoff, failing over
between admins, for as long as the process lives. Until then the run stays in the heartbeat's
running list (`pending_log_ids`), so the admin does not take a finished but unreported run for a
lost one while it is briefly down.
"""

import asyncio
import collections
import logging

import grpc

from ._proto import registry_pb2
from .backoff import Backoff

log = logging.getLogger("xjob_executor")

MAX_BATCH = 100
BATCH_WINDOW = 0.005  # seconds to gather results that finish together
CALL_TIMEOUT = 10.0


class CallbackSender:
    def __init__(self, admins) -> None:
        self._admins = admins
        self._pending = collections.OrderedDict()  # log id -> RunResult
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def report(self, result) -> None:
        self._pending[result.log_id] = result
        self._idle.clear()
        self._wake.set()

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
        batch = list(self._pending.values())[:MAX_BATCH]
        address = self._admins.current
        try:
            response = await self._admins.registry(address).Callback(
                registry_pb2.CallbackRequest(results=batch),
                metadata=self._admins.metadata,
                timeout=CALL_TIMEOUT,
            )
        except grpc.aio.AioRpcError as error:
            log.warning("callback of %d result(s) to %s failed: %s %s", len(batch), address,
                        error.code().name, error.details())
            self._admins.advance()
            return False
        accepted = set(response.accepted_log_ids)
        for result in batch:
            if result.log_id in accepted:
                self._pending.pop(result.log_id, None)
        if len(accepted) < len(batch):
            log.warning("admin %s acknowledged %d of %d results; retrying the rest",
                        address, len(accepted), len(batch))
            return False
        return True
