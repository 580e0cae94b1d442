"""Unit tests of the runner and the run logs, without an admin: python -m unittest discover -s tests"""

import asyncio
import tempfile
import unittest

from xjob_executor._pb import common_pb2, executor_pb2
from xjob_executor.joblog import JobLogStore
from xjob_executor.runner import Runner

SERIAL = common_pb2.BLOCK_STRATEGY_SERIAL_EXECUTION
DISCARD = common_pb2.BLOCK_STRATEGY_DISCARD_LATER
COVER = common_pb2.BLOCK_STRATEGY_COVER_EARLY


def request(log_id, handler="sleep", params="", job_id=1, block=SERIAL, timeout_ms=0):
    return executor_pb2.RunRequest(
        job_id=job_id, log_id=log_id, handler=handler, params=params, block_strategy=block,
        timeout_ms=timeout_ms, log_date_ms=1_700_000_000_000, glue_type=common_pb2.GLUE_TYPE_BEAN,
        shard_total=1,
    )


class RunnerTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.results = {}
        self.arrived = asyncio.Event()
        self.handler_exits = []

        async def sleep(ctx):
            try:
                await asyncio.sleep(int(ctx.params or "10") / 1000)
                return "slept"
            finally:
                self.handler_exits.append(ctx.log_id)

        self.release = asyncio.Event()

        async def stubborn(ctx):
            while not self.release.is_set():  # ignores cancellation until the test ends
                try:
                    await self.release.wait()
                except asyncio.CancelledError:
                    continue

        def report(result):
            self.results[result.log_id] = result
            self.arrived.set()

        self.joblog = JobLogStore(self.dir.name)
        self.runner = Runner({"sleep": sleep, "stubborn": stubborn}, self.joblog, report, kill_grace=0.2)

    async def asyncTearDown(self):
        self.release.set()
        await self.runner.shutdown(0.1)
        self.dir.cleanup()

    async def wait_result(self, log_id, timeout=5.0):
        async def wait():
            while log_id not in self.results:
                self.arrived.clear()
                await self.arrived.wait()
            return self.results[log_id]

        return await asyncio.wait_for(wait(), timeout)

    async def test_serial_runs_one_after_the_other(self):
        self.assertTrue(self.runner.submit(request(1, params="100")).accepted)
        self.assertTrue(self.runner.submit(request(2, params="10")).accepted)
        await asyncio.sleep(0.02)  # the first has started
        self.assertEqual(self.runner.queued_count(), 1)
        first, second = await self.wait_result(1), await self.wait_result(2)
        self.assertEqual(first.status, common_pb2.RUN_STATUS_SUCCESS)
        self.assertGreaterEqual(second.started_at_ms, first.finished_at_ms)

    async def test_refusals(self):
        self.runner.submit(request(1, params="200"))
        self.assertIn("duplicate run", self.runner.submit(request(1)).message)
        self.assertIn("not found", self.runner.submit(request(2, handler="nope")).message)
        self.assertIn("DISCARD_LATER", self.runner.submit(request(3, block=DISCARD)).message)
        shell = request(4, job_id=2)
        shell.glue_type = common_pb2.GLUE_TYPE_SHELL
        self.assertIn("GLUE_TYPE_SHELL", self.runner.submit(shell).message)
        await self.wait_result(1)
        self.assertIn("duplicate run", self.runner.submit(request(1)).message, "finished ids are remembered")

    async def test_cover_early_kills_the_running_and_queued_runs(self):
        self.runner.submit(request(1, params="10000"))
        self.runner.submit(request(2, params="10000"))
        await asyncio.sleep(0.05)
        self.assertTrue(self.runner.submit(request(3, params="10", block=COVER)).accepted)
        for log_id in (1, 2):
            result = await self.wait_result(log_id)
            self.assertEqual(result.status, common_pb2.RUN_STATUS_KILLED)
            self.assertIn("replaced by log 3", result.message)
        self.assertEqual((await self.wait_result(3)).status, common_pb2.RUN_STATUS_SUCCESS)
        self.assertIn(1, self.handler_exits, "the running handler was cancelled")

    async def test_timeout_and_kill(self):
        self.runner.submit(request(1, params="10000", timeout_ms=100))
        result = await self.wait_result(1)
        self.assertEqual((result.status, result.code), (common_pb2.RUN_STATUS_TIMEOUT, 502))
        self.assertIn(1, self.handler_exits)
        self.runner.submit(request(2, params="10000", job_id=5))
        await asyncio.sleep(0.05)
        self.assertFalse(self.runner.is_idle(5))
        self.assertTrue(self.runner.kill_job(5))
        result = await self.wait_result(2)
        self.assertEqual((result.status, result.code, result.message), (common_pb2.RUN_STATUS_KILLED, 500, "killed by admin"))
        self.assertTrue(self.runner.is_idle(5))
        self.assertFalse(self.runner.kill_job(5))

    async def test_a_handler_ignoring_cancellation_is_abandoned_after_the_grace(self):
        self.runner.submit(request(1, handler="stubborn"))
        await asyncio.sleep(0.05)
        self.runner.kill_job(1)
        result = await self.wait_result(1, timeout=2)
        self.assertEqual(result.status, common_pb2.RUN_STATUS_KILLED)
        content = self.joblog.read(1, 1_700_000_000_000, 1, False).content
        self.assertIn("abandoned", content)


class JobLogTest(unittest.TestCase):
    def test_reads_in_ranges_and_reports_missing_files(self):
        with tempfile.TemporaryDirectory() as root:
            store = JobLogStore(root)
            log = store.open(9, 1_700_000_000_000)
            for line in ("one", "two", "three"):
                log.write(line)
            page = store.read(9, 1_700_000_000_000, 2, run_active=True)
            self.assertEqual((page.from_line, page.to_line, page.is_end), (2, 3, False))
            self.assertTrue(page.content.endswith("three\n"))
            done = store.read(9, 1_700_000_000_000, 4, run_active=False)
            self.assertEqual((done.to_line, done.content, done.is_end), (3, "", True))
            missing = store.read(10, 1_700_000_000_000, 1, run_active=False)
            self.assertEqual((missing.to_line, missing.is_end), (0, True))
            self.assertIn("log file not found", missing.content)

    def test_sweeps_date_folders_older_than_the_retention(self):
        import datetime
        from pathlib import Path

        with tempfile.TemporaryDirectory() as root:
            for name in ("2026-01-01", "2026-01-20", "2026-01-31", "not-a-date"):
                (Path(root) / name).mkdir()
            store = JobLogStore(root)
            today = datetime.date(2026, 2, 1)
            self.assertEqual(store.remove_expired(2, today), 0, "retention below 3 days is off")
            self.assertEqual(store.remove_expired(7, today), 2)
            self.assertEqual(sorted(p.name for p in Path(root).iterdir()), ["2026-01-31", "not-a-date"])


class SpoolTest(unittest.IsolatedAsyncioTestCase):
    async def test_spooled_results_are_loaded_again_and_deleted_once_acknowledged(self):
        from xjob_executor._pb import registry_pb2
        from xjob_executor.callback import CallbackSender

        class Unreachable:
            current = "http://127.0.0.1:1"
            metadata = ()

        with tempfile.TemporaryDirectory() as root:
            sender = CallbackSender(Unreachable(), root)
            sender.report(registry_pb2.RunResult(log_id=7, status=common_pb2.RUN_STATUS_SUCCESS, code=200))
            sender.spool_all()
            again = CallbackSender(Unreachable(), root)
            self.assertEqual(again.pending_log_ids(), {7})
            again._acknowledged(7)
            self.assertEqual(list(__import__("pathlib").Path(root).iterdir()), [])


class TooLargeAdmin:
    """An admin that refuses, as OUT_OF_RANGE, a request over `limit` bytes."""

    current = "http://127.0.0.1:1"
    metadata = ()

    def __init__(self, limit):
        self.limit = limit
        self.sizes = []  # results per request it took

    def registry(self, _address):
        return self

    def advance(self):
        pass

    async def Callback(self, request, metadata=(), timeout=None):
        import grpc
        from xjob_executor._pb import registry_pb2

        if request.ByteSize() > self.limit:
            raise grpc.aio.AioRpcError(grpc.StatusCode.OUT_OF_RANGE, grpc.aio.Metadata(),
                                       grpc.aio.Metadata(), "message too large")
        self.sizes.append(len(request.results))
        return registry_pb2.CallbackResponse(accepted_log_ids=[r.log_id for r in request.results])


class TooLargeTest(unittest.IsolatedAsyncioTestCase):
    async def test_a_batch_refused_as_too_large_is_sent_as_halves(self):
        from xjob_executor._pb import registry_pb2
        from xjob_executor.callback import CallbackSender

        admin = TooLargeAdmin(limit=2500)
        with tempfile.TemporaryDirectory() as root:
            sender = CallbackSender(admin, root)
            for log_id in range(1, 5):
                sender._pending[log_id] = registry_pb2.RunResult(log_id=log_id, message="x" * 1000)
            while sender._pending:
                self.assertTrue(await sender._send_batch())
        self.assertEqual(admin.sizes, [2, 2])

    async def test_a_single_result_refused_as_too_large_has_its_message_cut(self):
        from xjob_executor._pb import registry_pb2
        from xjob_executor.callback import CallbackSender

        admin = TooLargeAdmin(limit=300)
        with tempfile.TemporaryDirectory() as root:
            sender = CallbackSender(admin, root)
            result = registry_pb2.RunResult(log_id=9, message="y" * 1000)
            sender._pending[9] = result
            while sender._pending:
                self.assertTrue(await sender._send_batch())
        self.assertEqual(admin.sizes, [1])
        # Halved until it fits: 1000 -> 500 + "..." -> 251 + "...".
        self.assertEqual(result.message, "y" * 251 + "...")


if __name__ == "__main__":
    unittest.main()
