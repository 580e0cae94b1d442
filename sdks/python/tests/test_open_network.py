"""The open-network refusal and the access token check (python -m unittest discover -s tests).
The executors started here point at an admin port nothing listens on: their session only
retries in the background, which is all these tests need."""

import asyncio
import socket
import tempfile
import unittest

import grpc

from xjob_executor._pb import executor_pb2, executor_pb2_grpc
from xjob_executor import Executor, OpenNetworkRefused
from xjob_executor.executor import is_loopback_bind

NO_ADMIN = ["http://127.0.0.1:1"]


def free_port(host="127.0.0.1"):
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class OpenNetworkTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.started = []

    async def asyncTearDown(self):
        for executor in self.started:
            await executor.stop()
        self.dir.cleanup()

    def executor(self, bind, **options):
        return Executor(app_name="guard-test", admin_addrs=NO_ADMIN, bind=bind, log_dir=self.dir.name,
                        shutdown_grace=0.1, callback_flush_timeout=0.1, **options)

    async def start(self, executor):
        await asyncio.wait_for(executor.start(), 10)
        self.started.append(executor)

    def test_loopback_binds(self):
        for bind in ["127.0.0.1:9999", "127.8.0.1:1", "[::1]:9999", "localhost:9999"]:
            self.assertTrue(is_loopback_bind(bind), bind)
        for bind in ["0.0.0.0:9999", "[::]:9999", ":9999", "10.1.2.3:9999", "[2001:db8::1]:9999"]:
            self.assertFalse(is_loopback_bind(bind), bind)

    async def test_off_loopback_without_token_is_refused(self):
        executor = self.executor(f"0.0.0.0:{free_port('0.0.0.0')}")
        with self.assertRaises(OpenNetworkRefused) as refused:
            await executor.start()
        message = str(refused.exception)
        self.assertIn("access_token", message)
        self.assertIn("insecure_open_network", message)
        with socket.socket() as probe:  # nothing was left listening
            self.assertNotEqual(probe.connect_ex(("127.0.0.1", int(executor.bind.rsplit(":", 1)[1]))), 0)

    async def test_opt_out_starts_off_loopback_with_a_warning(self):
        port = free_port("0.0.0.0")
        executor = self.executor(f"0.0.0.0:{port}", insecure_open_network=True)
        with self.assertLogs("xjob_executor", "WARNING") as logs:
            await self.start(executor)
        self.assertTrue(any("INSECURE" in line for line in logs.output), logs.output)
        await self.assert_beat(port, None, grpc.StatusCode.OK)

    async def test_off_loopback_with_token_starts(self):
        port = free_port("0.0.0.0")
        await self.start(self.executor(f"0.0.0.0:{port}", access_token="s3cret"))
        await self.assert_beat(port, "Bearer s3cret", grpc.StatusCode.OK)

    async def test_loopback_starts_without_token(self):
        port = free_port()
        await self.start(self.executor(f"127.0.0.1:{port}"))
        await self.assert_beat(port, None, grpc.StatusCode.OK)

    async def test_a_token_is_required_on_every_call(self):
        port = free_port()
        await self.start(self.executor(f"127.0.0.1:{port}", access_token="s3cret"))
        for header in [None, "Bearer wrong", "Bearer s3cret ", "s3cret", "bearer s3cret"]:
            await self.assert_beat(port, header, grpc.StatusCode.UNAUTHENTICATED)
        await self.assert_beat(port, "Bearer s3cret", grpc.StatusCode.OK)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = executor_pb2_grpc.ExecutorServiceStub(channel)
            calls = [
                stub.Run(executor_pb2.RunRequest(job_id=1, log_id=1, handler="x"), timeout=5),
                stub.Kill(executor_pb2.KillRequest(job_id=1), timeout=5),
                stub.ReadLog(executor_pb2.ReadLogRequest(log_id=1, from_line=1), timeout=5),
            ]
            for call in calls:
                with self.assertRaises(grpc.aio.AioRpcError) as refused:
                    await call
                self.assertEqual(refused.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    async def assert_beat(self, port, header, expected):
        metadata = (("authorization", header),) if header is not None else None
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = executor_pb2_grpc.ExecutorServiceStub(channel)
            try:
                await stub.Beat(executor_pb2.BeatRequest(), metadata=metadata, timeout=5)
                code = grpc.StatusCode.OK
            except grpc.aio.AioRpcError as error:
                code = error.code()
        self.assertEqual(code, expected, header)


if __name__ == "__main__":
    unittest.main()
