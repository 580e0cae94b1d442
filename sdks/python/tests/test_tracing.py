"""The runner's spans, exported to memory: python -m unittest discover -s tests (needs the
`tracing` extra; skipped without it)."""

import asyncio
import tempfile
import unittest

from xjob_executor._pb import common_pb2, executor_pb2
from xjob_executor.joblog import JobLogStore
from xjob_executor.runner import Runner
from xjob_executor.tracing import RunTraces

try:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode
except ImportError:  # the SDK is the optional `tracing` extra
    TracerProvider = None

ADMIN_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ADMIN_SPAN = "00f067aa0ba902b7"


@unittest.skipIf(TracerProvider is None, "the OpenTelemetry SDK is not installed")
class TracingTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.traces = RunTraces()
        self.traces._provider, self.traces._tracer = provider, provider.get_tracer("test")
        self.results = {}
        self.arrived = asyncio.Event()

        async def succeed(ctx):
            return f"ok {ctx.traceparent}"

        async def fail(ctx):
            raise RuntimeError("failed on purpose")

        def report(result):
            self.results[result.log_id] = result
            self.arrived.set()

        self.runner = Runner({"succeed": succeed, "fail": fail}, JobLogStore(self.dir.name), report,
                             0.5, traces=self.traces)

    async def asyncTearDown(self):
        self.dir.cleanup()

    async def run_one(self, log_id, handler):
        request = executor_pb2.RunRequest(
            job_id=1, log_id=log_id, handler=handler, log_date_ms=1_700_000_000_000, shard_total=1,
            traceparent=f"00-{ADMIN_TRACE}-{ADMIN_SPAN}-01",
        )
        self.assertTrue(self.runner.submit(request).accepted)
        await asyncio.wait_for(self._wait(log_id), 5)
        return self.results[log_id]

    async def _wait(self, log_id):
        while log_id not in self.results:
            self.arrived.clear()
            await self.arrived.wait()

    def spans(self):
        return {span.name: span for span in self.exporter.get_finished_spans()}

    async def test_run_handler_callback_under_the_admins_trace(self):
        result = await self.run_one(1, "succeed")
        spans = self.spans()
        self.assertEqual(set(spans), {"run", "handler"})  # callback: open until accepted
        run, handler = spans["run"], spans["handler"]
        self.assertEqual(f"{run.context.trace_id:032x}", ADMIN_TRACE)
        self.assertEqual(f"{run.parent.span_id:016x}", ADMIN_SPAN)
        self.assertEqual(handler.parent.span_id, run.context.span_id)
        self.assertEqual(run.attributes["xjob.handler"], "succeed")
        self.assertEqual(run.attributes["xjob.status"], "RUN_STATUS_SUCCESS")
        self.assertIn(f"{handler.context.span_id:016x}", result.message)  # ctx.traceparent
        self.traces.accepted_results([1])
        callback = self.spans()["callback"]
        self.assertEqual(callback.parent.span_id, handler.context.span_id)
        self.assertEqual(result.traceparent, f"00-{ADMIN_TRACE}-{callback.context.span_id:016x}-01")

    async def test_a_failed_run_is_an_error(self):
        await self.run_one(2, "fail")
        spans = self.spans()
        for name in ("run", "handler"):
            self.assertEqual(spans[name].status.status_code, StatusCode.ERROR)
            self.assertIn("RUN_STATUS_FAILED", spans[name].status.description)

    async def test_a_refused_run_ends_its_run_span_in_error(self):
        request = executor_pb2.RunRequest(job_id=1, log_id=3, handler="missing")
        self.assertFalse(self.runner.submit(request).accepted)
        run = self.spans()["run"]
        self.assertEqual(run.status.status_code, StatusCode.ERROR)
        self.assertIn("not found", run.status.description)


if __name__ == "__main__":
    unittest.main()
