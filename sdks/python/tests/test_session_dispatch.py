"""Session dispatch against a small admin served over real gRPC on loopback: the executor opens
no port, registers as session://NAME in DISPATCH_MODE_SESSION, and answers the calls sent down
its session with the replies a dialed call would give (python -m unittest discover -s tests)."""

import asyncio
import socket
import tempfile
import unittest

import grpc

from xjob_executor import Executor
from xjob_executor._pb import common_pb2, executor_pb2, registry_pb2, registry_pb2_grpc

STEP = 10.0  # bound of each wait; generous for a loaded machine


class FakeAdmin(registry_pb2_grpc.RegistryServicer):
    """Holds the executor's session: records its Register, sends calls, collects replies and
    callbacks."""

    def __init__(self) -> None:
        self.register = None
        self.outbound = asyncio.Queue()
        self.replies = {}
        self.heartbeats = []
        self.reply_arrived = asyncio.Condition()
        self.results = {}
        self.result_arrived = asyncio.Condition()
        self.next_call_id = 0

    async def Session(self, request_iterator, context):
        first = await request_iterator.__anext__()
        self.register = first.register
        yield registry_pb2.AdminMessage(registered=registry_pb2.Registered(
            executor_id="e-1", heartbeat_interval_ms=200, lease_ms=5000,
            dispatch_mode=registry_pb2.DISPATCH_MODE_SESSION))
        reader = asyncio.get_running_loop().create_task(self._read(request_iterator))
        try:
            while True:
                message = await self.outbound.get()
                if message is None:
                    return
                yield message
        finally:
            reader.cancel()

    async def _read(self, request_iterator):
        async for message in request_iterator:
            if message.HasField("reply"):
                async with self.reply_arrived:
                    self.replies[message.reply.call_id] = message.reply
                    self.reply_arrived.notify_all()
            if message.HasField("deregister"):
                await self.outbound.put(registry_pb2.AdminMessage(deregistered=registry_pb2.Deregistered()))
                await self.outbound.put(None)
            if message.HasField("heartbeat"):
                async with self.reply_arrived:
                    self.heartbeats.append(message.heartbeat)
                    self.reply_arrived.notify_all()

    async def Callback(self, request, context):
        async with self.result_arrived:
            for result in request.results:
                self.results[result.log_id] = result
            self.result_arrived.notify_all()
        return registry_pb2.CallbackResponse(accepted_log_ids=[result.log_id for result in request.results])

    async def call(self, deadline_ms=5000, **request) -> registry_pb2.SessionReply:
        """Sends one SessionCall and waits for its reply."""
        self.next_call_id += 1
        call_id = self.next_call_id
        await self.outbound.put(registry_pb2.AdminMessage(
            call=registry_pb2.SessionCall(call_id=call_id, deadline_ms=deadline_ms, **request)))
        async with self.reply_arrived:
            await asyncio.wait_for(self.reply_arrived.wait_for(lambda: call_id in self.replies), STEP)
        return self.replies[call_id]

    async def result(self, log_id):
        async with self.result_arrived:
            await asyncio.wait_for(self.result_arrived.wait_for(lambda: log_id in self.results), STEP)
        return self.results[log_id]


def run_request(log_id, handler, params="", job_id=1):
    return executor_pb2.RunRequest(
        job_id=job_id, log_id=log_id, handler=handler, params=params,
        block_strategy=common_pb2.BLOCK_STRATEGY_SERIAL_EXECUTION, log_date_ms=1_700_000_000_000,
        glue_type=common_pb2.GLUE_TYPE_BEAN, shard_total=1)


def listening_ports():
    """Local TCP ports in LISTEN state (Linux), to show the executor opened none."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    if fields[3] == "0A":  # LISTEN
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except FileNotFoundError:
            pass
    return ports


class SessionDispatchTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.admin = FakeAdmin()
        self.server = grpc.aio.server()
        registry_pb2_grpc.add_RegistryServicer_to_server(self.admin, self.server)
        admin_port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        with socket.socket() as probe:  # a port nobody listens on: the executor must not bind it
            probe.bind(("127.0.0.1", 0))
            self.unused_port = probe.getsockname()[1]
        self.release = asyncio.Event()
        self.executor = Executor(
            app_name="session-test", admin_addrs=[f"http://127.0.0.1:{admin_port}"],
            bind=f"127.0.0.1:{self.unused_port}", address="session://session-test-1",
            access_token="s3cret", log_dir=self.dir.name, shutdown_grace=0.2,
            callback_flush_timeout=2.0, session_dispatch=True)

        @self.executor.handler("succeed")
        async def succeed(ctx):
            ctx.log(f"params {ctx.params}")
            return f"ok {ctx.params}"

        @self.executor.handler("wait")
        async def wait(ctx):
            await self.release.wait()  # a kill cancels it here
            return "released"

        await asyncio.wait_for(self.executor.start(), STEP)
        await self.executor.wait_registered(STEP)

    async def asyncTearDown(self):
        self.release.set()
        await self.executor.stop()
        await self.server.stop(None)
        self.dir.cleanup()

    async def test_registers_in_session_dispatch_and_opens_no_port(self):
        register = self.admin.register
        self.assertEqual(register.dispatch_mode, registry_pb2.DISPATCH_MODE_SESSION)
        self.assertEqual(register.address, "session://session-test-1")
        self.assertEqual(sorted(register.handlers), ["succeed", "wait"])
        self.assertNotIn(self.unused_port, listening_ports())

    async def test_beat_and_idle_beat(self):
        reply = await self.admin.call(beat=executor_pb2.BeatRequest())
        self.assertEqual(reply.WhichOneof("response"), "beat")
        reply = await self.admin.call(idle_beat=executor_pb2.IdleBeatRequest(job_id=7))
        self.assertTrue(reply.idle_beat.idle)

    async def test_run_result_and_log_read(self):
        reply = await self.admin.call(run=run_request(11, "succeed", "p1"))
        self.assertTrue(reply.run.accepted, reply)
        result = await self.admin.result(11)
        self.assertEqual(result.status, common_pb2.RUN_STATUS_SUCCESS)
        self.assertEqual(result.message, "ok p1")
        reply = await self.admin.call(read_log=executor_pb2.ReadLogRequest(
            log_id=11, log_date_ms=1_700_000_000_000, from_line=1))
        self.assertIn("params p1", reply.read_log.content)
        self.assertTrue(reply.read_log.is_end)
        # The same log id again is refused, as a dialed Run would be.
        reply = await self.admin.call(run=run_request(11, "succeed", "p1"))
        self.assertFalse(reply.run.accepted)
        self.assertIn("duplicate run", reply.run.message)

    async def test_kill_stops_a_running_run_and_idle_beat_sees_it(self):
        reply = await self.admin.call(run=run_request(21, "wait", job_id=3))
        self.assertTrue(reply.run.accepted, reply)
        busy = await self.admin.call(idle_beat=executor_pb2.IdleBeatRequest(job_id=3))
        self.assertFalse(busy.idle_beat.idle)
        reply = await self.admin.call(kill=executor_pb2.KillRequest(job_id=3, log_id=21))
        self.assertTrue(reply.kill.killed, reply)
        result = await self.admin.result(21)
        self.assertEqual(result.status, common_pb2.RUN_STATUS_KILLED)
        reply = await self.admin.call(kill=executor_pb2.KillRequest(job_id=3, log_id=21))
        self.assertFalse(reply.kill.killed)

    async def test_concurrent_calls_each_get_their_own_reply(self):
        # Three calls sent at once; each reply carries its own call id.
        first = self.admin.next_call_id + 1
        sent = [asyncio.ensure_future(self.admin.call(beat=executor_pb2.BeatRequest())) for _ in range(3)]
        replies = await asyncio.wait_for(asyncio.gather(*sent), STEP)
        self.assertEqual(sorted(reply.call_id for reply in replies), [first, first + 1, first + 2])

    async def test_a_call_without_a_request_is_an_invalid_argument(self):
        reply = await self.admin.call()
        self.assertEqual(reply.WhichOneof("response"), "error")
        self.assertEqual(reply.error.code, grpc.StatusCode.INVALID_ARGUMENT.value[0])

    async def test_heartbeats_go_on_between_calls_and_list_the_runs(self):
        reply = await self.admin.call(run=run_request(31, "wait", job_id=4))
        self.assertTrue(reply.run.accepted, reply)
        async with self.admin.reply_arrived:
            await asyncio.wait_for(self.admin.reply_arrived.wait_for(
                lambda: any(31 in beat.running_log_ids for beat in self.admin.heartbeats)), STEP)
        reply = await self.admin.call(beat=executor_pb2.BeatRequest())
        self.assertEqual(reply.WhichOneof("response"), "beat")


class SessionAddressTest(unittest.TestCase):
    def test_default_address_is_a_session_name(self):
        executor = Executor(app_name="orders", admin_addrs=["http://127.0.0.1:1"], session_dispatch=True)
        self.assertTrue(executor.address.startswith("session://orders-"), executor.address)

    def test_a_dialed_address_is_refused_in_session_dispatch(self):
        with self.assertRaises(ValueError):
            Executor(app_name="orders", admin_addrs=["http://127.0.0.1:1"], session_dispatch=True,
                     address="http://127.0.0.1:9999")
        with self.assertRaises(ValueError):
            Executor(app_name="orders", admin_addrs=["http://127.0.0.1:1"], address="session://orders-1")


if __name__ == "__main__":
    unittest.main()
