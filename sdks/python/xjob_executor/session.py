"""The Registry.Session stream: Register first, then a Heartbeat every interval the admin asks
for (listing runs queued, running, or finished but not yet acknowledged), Deregister on a clean
stop. On any failure it reconnects with backoff, moving to the next admin of the list.

    disconnected ──connect+Register──▶ registering ──Registered──▶ registered ──heartbeats──┐
         ▲                                  │                          │  ◀─────────────────┘
         └──────── backoff, next admin ◀────┴── stream error / end ────┘
    registered ──stop──▶ Deregister ──Deregistered (or 2 s)──▶ closed
"""

import asyncio
import logging

import grpc

from ._proto import PROTOCOL_VERSION, registry_pb2
from .backoff import Backoff

log = logging.getLogger("xjob_executor")

HANDSHAKE_TIMEOUT = 10.0
DEREGISTER_TIMEOUT = 2.0
DEFAULT_HEARTBEAT_INTERVAL = 10.0  # when the admin answers 0 (or less)
MIN_HEARTBEAT_INTERVAL = 0.01


class Session:
    def __init__(self, admins, register: registry_pb2.Register, running_list) -> None:
        self._admins = admins
        self._register = register
        self._running_list = running_list  # () -> (log ids, queued count)
        self._stop = asyncio.Event()
        self.registered = asyncio.Event()  # set while a session is registered
        self.executor_id = ""

    async def run(self) -> None:
        """Keeps a session open until `stop` is called (then deregisters)."""
        backoff = Backoff()
        while not self._stop.is_set():
            address = self._admins.current
            try:
                await self._one_session(address, backoff)
            except grpc.aio.AioRpcError as error:
                log.warning("session with %s ended: %s %s", address, error.code().name, error.details())
            except (asyncio.TimeoutError, ConnectionError) as error:
                log.warning("session with %s ended: %r", address, error)
            finally:
                self.registered.clear()
            if self._stop.is_set():
                return
            self._admins.advance()
            try:
                await asyncio.wait_for(self._stop.wait(), backoff.next_delay())
            except asyncio.TimeoutError:
                pass

    def stop(self) -> None:
        self._stop.set()

    async def _one_session(self, address: str, backoff: Backoff) -> None:
        call = self._admins.registry(address).Session(metadata=self._admins.metadata)
        try:
            await call.write(registry_pb2.ExecutorMessage(register=self._register))
            first = await asyncio.wait_for(call.read(), HANDSHAKE_TIMEOUT)
            if first is grpc.aio.EOF or not first.HasField("registered"):
                raise ConnectionError(f"{address} did not answer Register")
            registered = first.registered
            self.executor_id = registered.executor_id
            interval = registered.heartbeat_interval_ms / 1000
            interval = max(interval, MIN_HEARTBEAT_INTERVAL) if interval > 0 else DEFAULT_HEARTBEAT_INTERVAL
            log.info("registered with %s as %s (heartbeat every %.3f s)", address, self.executor_id, interval)
            self.registered.set()
            backoff.reset()
            await self._heartbeats(call, interval)
        finally:
            call.cancel()

    async def _heartbeats(self, call, interval: float) -> None:
        reader = asyncio.get_running_loop().create_task(call.read())
        stop = asyncio.get_running_loop().create_task(self._stop.wait())
        try:
            while True:
                done, _ = await asyncio.wait({reader, stop}, timeout=interval,
                                             return_when=asyncio.FIRST_COMPLETED)
                if stop in done:
                    await self._deregister(call, reader)
                    return
                if reader in done:
                    reader.result()  # raises the stream's error, if any
                    raise ConnectionError("the admin closed the session")
                log_ids, queued = self._running_list()
                await call.write(registry_pb2.ExecutorMessage(
                    heartbeat=registry_pb2.Heartbeat(running_log_ids=sorted(log_ids), queued=queued)))
        finally:
            stop.cancel()
            if not reader.done():
                reader.cancel()

    async def _deregister(self, call, reader) -> None:
        try:
            await call.write(registry_pb2.ExecutorMessage(deregister=registry_pb2.Deregister()))
            await asyncio.wait_for(reader, DEREGISTER_TIMEOUT)
            log.info("deregistered")
        except (grpc.aio.AioRpcError, asyncio.TimeoutError, asyncio.CancelledError) as error:
            log.warning("deregister not confirmed: %r", error)
