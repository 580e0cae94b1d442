"""The executor's half of a run's trace, exported over OTLP/gRPC when an endpoint is configured
(the executor's `otlp_endpoint`, or the standard OTEL_EXPORTER_OTLP_ENDPOINT /
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables), with the same span names and attributes as every
xjob SDK:

    (admin) dispatch ─▶ run (server span; parent = RunRequest.traceparent)
                         └─▶ handler (the handler's own spans nest here: ctx.trace_context)
                               └─▶ callback (client span, open until an admin accepts the
                                    result; RunResult.traceparent, so the admin's `complete`
                                    span continues it)

The OpenTelemetry SDK and OTLP exporter are an optional extra (`xjob-executor[tracing]`):
without them, or without an endpoint, tracing is off, every method returns at once and the
result carries the admin's own context back.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Optional

from ._proto import common_pb2

log = logging.getLogger("xjob_executor")

# What a script run's spans call its handler (`glue:` and the language's usual interpreter).
_GLUE_NAMES = {
    common_pb2.GLUE_TYPE_SHELL: "glue:bash",
    common_pb2.GLUE_TYPE_PYTHON: "glue:python3",
    common_pb2.GLUE_TYPE_NODEJS: "glue:node",
    common_pb2.GLUE_TYPE_PHP: "glue:php",
    common_pb2.GLUE_TYPE_POWERSHELL: "glue:pwsh",
    common_pb2.GLUE_TYPE_GROOVY: "glue:groovy",
}


def run_handler_name(request) -> str:
    """What a run calls, as its spans name it: the handler, or `glue:<interpreter>`."""
    return _GLUE_NAMES.get(request.glue_type, request.handler)


def _env(key: str) -> str:
    return os.environ.get(key, "").strip()


def _status_name(status: int) -> str:
    values = common_pb2.RunStatus.values()
    return common_pb2.RunStatus.Name(status) if status in values else "RUN_STATUS_UNKNOWN"


class RunTraces:
    """The open spans of this executor's runs, by log id; off when `start` found no endpoint
    or no OpenTelemetry SDK."""

    def __init__(self) -> None:
        self._provider = None
        self._tracer = None
        self._runs: Dict[int, list] = {}  # log id -> [run span, handler span or None]
        self._callbacks: Dict[int, Any] = {}  # log id -> callback span

    @classmethod
    def start(cls, app_name: str, endpoint: str = "") -> "RunTraces":
        traces = cls()
        if not endpoint and not (_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or _env("OTEL_EXPORTER_OTLP_ENDPOINT")):
            return traces
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            log.warning("an OTLP endpoint is set but the OpenTelemetry SDK is not installed "
                        "(pip install 'xjob-executor[tracing]'): runs are not traced")
            return traces
        named_by_env = bool(_env("OTEL_SERVICE_NAME")) or any(
            pair.strip().startswith("service.name=") for pair in _env("OTEL_RESOURCE_ATTRIBUTES").split(",")
        )
        # Resource.create reads OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES itself.
        resource = Resource.create({} if named_by_env else {"service.name": app_name})
        # Its own provider, not the global one: an executor inside a traced app is its own service.
        provider = TracerProvider(resource=resource)  # sampler from OTEL_TRACES_SAMPLER(_ARG)
        exporter = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        traces._provider = provider
        traces._tracer = provider.get_tracer("xjob-executor")
        return traces

    @property
    def on(self) -> bool:
        return self._tracer is not None

    def run_span(self, request):
        """Opens the `run` span of a run the admin sent, continuing the admin's trace."""
        if self._tracer is None:
            return None
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        parent = TraceContextTextMapPropagator().extract({"traceparent": request.traceparent})
        return self._tracer.start_span(
            "run",
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes={
                "xjob.job_id": request.job_id,
                "xjob.log_id": request.log_id,
                "xjob.handler": run_handler_name(request),
                "xjob.attempt": request.attempt,
                "xjob.shard_index": request.shard_index,
                "xjob.shard_total": request.shard_total,
            },
        )

    def accepted(self, log_id: int, run) -> None:
        """Keeps the `run` span of an accepted run open until its result."""
        if run is not None:
            self._runs[log_id] = [run, None]

    def refused(self, run, reason: str) -> None:
        """Ends the `run` span of a refused run with the reason as its error."""
        if run is not None:
            from opentelemetry.trace import Status, StatusCode

            run.set_status(Status(StatusCode.ERROR, reason))
            run.end()

    def handler_span(self, log_id: int):
        """Opens the `handler` span of a run about to call its handler."""
        open_run = self._runs.get(log_id) if self._tracer is not None else None
        if open_run is None:
            return None
        from opentelemetry import trace

        handler = self._tracer.start_span(
            "handler", context=trace.set_span_in_context(open_run[0]), kind=trace.SpanKind.INTERNAL
        )
        open_run[1] = handler
        return handler

    def finished(self, result) -> None:
        """Ends the run's `handler` and `run` spans with its result (ERROR unless it
        succeeded), opens its `callback` span and writes that span's context into the result."""
        open_run = self._runs.pop(result.log_id, None) if self._tracer is not None else None
        if open_run is None:
            return
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        run, handler = open_run
        callback = self._tracer.start_span(
            "callback",
            context=trace.set_span_in_context(handler or run),
            kind=trace.SpanKind.CLIENT,
            attributes={"xjob.log_id": result.log_id},
        )
        result.traceparent = span_traceparent(callback)
        self._callbacks[result.log_id] = callback
        if result.status == common_pb2.RUN_STATUS_SUCCESS:
            status = Status(StatusCode.OK)
        else:
            status = Status(StatusCode.ERROR, f"{_status_name(result.status)}: {result.message}")
        for span in (handler, run):
            if span is not None:
                span.set_attribute("xjob.status", _status_name(result.status))
                span.set_status(status)
                span.end()

    def accepted_results(self, log_ids) -> None:
        """Ends the `callback` spans of results an admin accepted."""
        for log_id in log_ids:
            callback = self._callbacks.pop(log_id, None)
            if callback is not None:
                callback.end()

    def shutdown(self) -> None:
        """Ends what is still open and sends the buffered spans (graceful stop)."""
        if self._provider is None:
            return
        from opentelemetry.trace import Status, StatusCode

        for callback in self._callbacks.values():
            callback.set_status(Status(StatusCode.ERROR, "executor stopped before an admin accepted the result"))
            callback.end()
        for run, _ in self._runs.values():
            run.set_status(Status(StatusCode.ERROR, "executor stopped while the run was open"))
            run.end()
        self._callbacks.clear()
        self._runs.clear()
        try:
            self._provider.shutdown()
        except Exception as error:  # flushing is best effort at shutdown
            log.warning("flushing traces at shutdown failed: %s", error)


def span_traceparent(span: Optional[Any]) -> str:
    """The W3C `traceparent` of a span; empty for none."""
    if span is None:
        return ""
    context = span.get_span_context()
    if not context.is_valid:
        return ""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
