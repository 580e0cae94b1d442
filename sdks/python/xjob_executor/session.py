"""The Registry.Session stream: Register first, then a Heartbeat every interval the admin asks
for (listing runs queued, running, or finished but not yet acknowledged), Deregister on a clean
stop. On any failure it reconnects with backoff, moving to the next admin of the list.

    disconnected ──connect+Register──▶ registering ──Registered──▶ registered ──heartbeats──┐
         ▲                                  │                          │  ◀─────────────────┘
         └──────── backoff, next admin ◀────┴── stream error / end ────┘
    registered ──stop──▶ Deregister ──Deregistered (or 2 s)──▶ closed

In session dispatch (`calls` given) the admin's calls arrive on the same stream while
registered; each is handed to `calls.answer` with a writer for its reply. Writes to the stream
(heartbeats, replies, Deregister) go through one lock: gRPC allows one write at a time.
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
    def __init__(self, admins, register: registry_pb2.Register, running_list, calls=None) -> None:
        self._admins = admins
        self._register = register
        self._running_list = running_list  # () -> (log ids, queued count)
        self._calls = calls  # session_dispatch.SessionCalls, or None in the dialed mode
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
            if self._calls is not None and registered.dispatch_mode != registry_pb2.DISPATCH_MODE_SESSION:
                # An admin without session dispatch would dial the session:// address and fail.
                log.warning("%s did not confirm session dispatch: it cannot send runs here", address)
            self.registered.set()
            backoff.reset()
            await self._heartbeats(call, interval)
        finally:
            call.cancel()

    async def _heartbeats(self, call, interval: float) -> None:
        loop = asyncio.get_running_loop()
        write_lock = asyncio.Lock()

        async def send(message) -> None:
            async with write_lock:
                await call.write(message)

        reader = loop.create_task(call.read())
        stop = loop.create_task(self._stop.wait())
        next_beat = loop.time() + interval
        try:
            while True:
                done, _ = await asyncio.wait({reader, stop}, timeout=max(0.0, next_beat - loop.time()),
                                             return_when=asyncio.FIRST_COMPLETED)
                if stop in done:
                    await self._deregister(send, reader, call)
                    return
                if reader in done:
                    self._received(reader.result(), send)  # raises the stream's error, if any
                    reader = loop.create_task(call.read())
                    continue
                next_beat = loop.time() + interval
                log_ids, queued = self._running_list()
                await send(registry_pb2.ExecutorMessage(
                    heartbeat=registry_pb2.Heartbeat(running_log_ids=sorted(log_ids), queued=queued)))
        finally:
            stop.cancel()
            if not reader.done():
                reader.cancel()

    def _received(self, message, send) -> None:
        """A message from the admin while registered: a call to answer (session dispatch);
        the end of the stream or anything else ends the session."""
        if message is grpc.aio.EOF:
            raise ConnectionError("the admin closed the session")
        if message.HasField("call") and self._calls is not None:
            self._calls.answer(message.call, send)
            return
        if message.HasField("call"):
            log.warning("the admin sent a session call to a dialed executor; ignored")
            return
        raise ConnectionError(f"unexpected message from the admin: {message.WhichOneof('kind')}")

    async def _deregister(self, send, reader, call) -> None:
        """Sends Deregister and waits for Deregistered; calls still arriving meanwhile are
        answered (the admin may have sent them before it saw the Deregister)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEREGISTER_TIMEOUT
        try:
            await send(registry_pb2.ExecutorMessage(deregister=registry_pb2.Deregister()))
            while True:
                message = await asyncio.wait_for(reader, max(0.0, deadline - loop.time()))
                if message is grpc.aio.EOF or message.HasField("deregistered"):
                    break
                if message.HasField("call") and self._calls is not None:
                    self._calls.answer(message.call, send)
                reader = loop.create_task(call.read())
            log.info("deregistered")
        except (grpc.aio.AioRpcError, asyncio.TimeoutError, asyncio.CancelledError) as error:
            log.warning("deregister not confirmed: %r", error)
        finally:
            if not reader.done():
                reader.cancel()
