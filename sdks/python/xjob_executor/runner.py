"""The runner: one queue per job id, one run at a time per job, block strategies, timeouts and
kills that cancel the handler, and the result of every run handed to the callback sender.

    Run ──submit──▶ JobSlot(queue, running) ──drain task──▶ handler task ──▶ RunResult ─▶ callbacks
         refusals: shutting down, duplicate log id, glue type, unknown handler, DISCARD_LATER
    Kill / COVER_EARLY ──▶ queued runs reported KILLED at once + the running one stopped

A stopped handler is cancelled (asyncio.CancelledError at its next await, and ctx.cancelled()
resolves); if it has not returned within `kill_grace` it is abandoned and the run reported all
the same. The next queued run of the job starts only after that.
"""

import asyncio
import collections
import inspect
import logging
import time

from ._proto import common_pb2, executor_pb2, registry_pb2
from .context import JobContext, JobError
from .glue import GROOVY_UNSUPPORTED, LANGUAGES
from .tracing import RunTraces

log = logging.getLogger("xjob_executor")

CODE_SUCCESS, CODE_FAIL, CODE_TIMEOUT = 200, 500, 502
RECENT_RUN_TTL = 600.0  # seconds a finished log id is remembered to refuse duplicates


def now_ms() -> int:
    return int(time.time() * 1000)


def _enum_name(enum, value: int) -> str:
    return enum.Name(value) if value in enum.values() else str(value)


def start_line(request) -> str:
    """The first line of every run's log, as in every xjob SDK (docs/executors.md)."""
    trigger = _enum_name(common_pb2.TriggerType, request.trigger_type)
    return (
        f"run start: job_id={request.job_id} log_id={request.log_id} handler={request.handler} "
        f"params={request.params} shard={request.shard_index}/{request.shard_total} "
        f"attempt={request.attempt} trigger={trigger} timeout_ms={request.timeout_ms}"
    )


class _Run:
    def __init__(self, request, ctx: JobContext, handler) -> None:
        self.request = request
        self.ctx = ctx
        self.handler = handler
        self.stop_reason = None  # (status, code, message) once asked to stop
        self.stopped = asyncio.Event()

    def stop(self, reason) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.stopped.set()


class _JobSlot:
    def __init__(self) -> None:
        self.queue = collections.deque()
        self.running = None
        self.task = None

    def busy(self) -> bool:
        return self.running is not None or bool(self.queue)


class Runner:
    def __init__(self, handlers, joblog, report, kill_grace: float, glue=None, traces=None) -> None:
        self._handlers = handlers
        self._traces = traces or RunTraces()  # off unless the executor traces
        self._glue = glue or {}  # enabled script glue type -> its handler
        self._joblog = joblog
        self._report = report  # called with each RunResult
        self._kill_grace = kill_grace
        self._slots = {}
        self._active = set()  # log ids queued or running
        self._recent = collections.OrderedDict()  # finished log id -> finish time
        self._accepting = True

    # -- the ExecutorService side -------------------------------------------------------------

    def submit(self, request) -> executor_pb2.RunResponse:
        run_span = self._traces.run_span(request)
        refusal = self._refusal(request)
        if refusal:
            self._traces.refused(run_span, refusal)
            return executor_pb2.RunResponse(accepted=False, message=refusal)
        self._traces.accepted(request.log_id, run_span)
        slot = self._slots.setdefault(request.job_id, _JobSlot())
        if slot.busy() and request.block_strategy == common_pb2.BLOCK_STRATEGY_COVER_EARLY:
            self._stop_slot(
                slot,
                (common_pb2.RUN_STATUS_KILLED, CODE_FAIL,
                 f"block strategy COVER_EARLY: replaced by log {request.log_id}"),
            )
        run_log = self._joblog.open(request.log_id, request.log_date_ms)
        slot.queue.append(_Run(request, JobContext(request, run_log, self._kill_grace), self._handler_of(request)))
        self._active.add(request.log_id)
        if slot.task is None:
            slot.task = asyncio.get_running_loop().create_task(self._drain(request.job_id, slot))
        return executor_pb2.RunResponse(accepted=True)

    def _refusal(self, request):
        if not self._accepting:
            return "executor is shutting down"
        self._forget_old()
        if request.log_id in self._active or request.log_id in self._recent:
            return f"duplicate run: log_id {request.log_id} already queued or running"
        glue_type = request.glue_type
        if glue_type == common_pb2.GLUE_TYPE_GROOVY:
            return GROOVY_UNSUPPORTED
        if glue_type not in (common_pb2.GLUE_TYPE_BEAN, common_pb2.GLUE_TYPE_UNSPECIFIED):
            if glue_type not in LANGUAGES:
                return f"glue type {glue_type} is not supported"
            if glue_type not in self._glue:
                return f"glue type {common_pb2.GlueType.Name(glue_type)} is not enabled on this executor"
        elif request.handler not in self._handlers:
            return f"job handler [{request.handler}] not found"
        slot = self._slots.get(request.job_id)
        if slot and slot.busy() and request.block_strategy == common_pb2.BLOCK_STRATEGY_DISCARD_LATER:
            return f"block strategy DISCARD_LATER: job {request.job_id} is running or queued"
        return None

    def _handler_of(self, request):
        if request.glue_type in self._glue:
            return self._glue[request.glue_type]
        return self._handlers[request.handler]

    def kill_job(self, job_id: int) -> bool:
        slot = self._slots.get(job_id)
        if slot is None or not slot.busy():
            return False
        self._stop_slot(slot, (common_pb2.RUN_STATUS_KILLED, CODE_FAIL, "killed by admin"))
        return True

    def is_idle(self, job_id: int) -> bool:
        slot = self._slots.get(job_id)
        return slot is None or not slot.busy()

    def is_active(self, log_id: int) -> bool:
        return log_id in self._active

    def active_log_ids(self):
        return set(self._active)

    def queued_count(self) -> int:
        return sum(len(slot.queue) for slot in self._slots.values())

    # -- shutdown -----------------------------------------------------------------------------

    async def shutdown(self, grace: float) -> None:
        """Refuses new runs, reports queued runs KILLED, lets running handlers finish within
        `grace`, then stops the rest (KILLED)."""
        self._accepting = False
        reason = (common_pb2.RUN_STATUS_KILLED, CODE_FAIL, "executor is shutting down")
        for slot in self._slots.values():
            self._drop_queued(slot, reason)
        tasks = [slot.task for slot in self._slots.values() if slot.task]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        for slot in list(self._slots.values()):
            if slot.running:
                slot.running.stop(reason)
        tasks = [slot.task for slot in self._slots.values() if slot.task]
        if tasks:
            await asyncio.wait(tasks, timeout=self._kill_grace + 1)

    # -- running ------------------------------------------------------------------------------

    def _stop_slot(self, slot: _JobSlot, reason) -> None:
        self._drop_queued(slot, reason)
        if slot.running:
            slot.running.stop(reason)

    def _drop_queued(self, slot: _JobSlot, reason) -> None:
        while slot.queue:
            run = slot.queue.popleft()
            run.ctx.log(f"run not started: {reason[2]}")
            self._finish(run, reason, started_at_ms=0)

    async def _drain(self, job_id: int, slot: _JobSlot) -> None:
        try:
            while slot.queue:
                run = slot.queue.popleft()
                slot.running = run
                try:
                    await self._execute(run)
                finally:
                    slot.running = None
        finally:
            slot.task = None
            if not slot.busy() and self._slots.get(job_id) is slot:
                del self._slots[job_id]

    async def _execute(self, run: _Run) -> None:
        request = run.request
        started = now_ms()
        run.ctx.log(start_line(request))
        run.ctx._trace_span = self._traces.handler_span(request.log_id)
        handler_task = asyncio.get_running_loop().create_task(self._call(run))
        stopped = asyncio.get_running_loop().create_task(run.stopped.wait())
        timeout = request.timeout_ms / 1000 if request.timeout_ms > 0 else None
        try:
            await asyncio.wait({handler_task, stopped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if handler_task.done() and run.stop_reason is None:
            outcome = handler_task.result()
        else:
            if run.stop_reason is None:
                run.stop_reason = (common_pb2.RUN_STATUS_TIMEOUT, CODE_TIMEOUT,
                                   f"job execute timeout after {request.timeout_ms} ms")
            outcome = run.stop_reason
            await self._stop_handler(run, handler_task)
        self._finish(run, outcome, started)

    async def _call(self, run: _Run):
        """Runs the handler; returns (status, code, message). Never raises."""
        try:
            if inspect.iscoroutinefunction(run.handler):
                returned = await run.handler(run.ctx)
            else:
                returned = await asyncio.to_thread(run.handler, run.ctx)
            message = "" if returned is None else str(returned)
            return common_pb2.RUN_STATUS_SUCCESS, CODE_SUCCESS, message
        except asyncio.CancelledError:
            if run.stop_reason is None:
                return common_pb2.RUN_STATUS_FAILED, CODE_FAIL, "handler cancelled"
            raise
        except JobError as error:
            return common_pb2.RUN_STATUS_FAILED, CODE_FAIL, str(error)
        except Exception as error:  # a failing handler is a FAILED run, not a dead queue
            log.exception("handler %s of log %s raised", run.request.handler, run.request.log_id)
            return common_pb2.RUN_STATUS_FAILED, CODE_FAIL, f"{type(error).__name__}: {error}"

    async def _stop_handler(self, run: _Run, handler_task) -> None:
        run.ctx._cancel()
        handler_task.cancel()
        done, _ = await asyncio.wait({handler_task}, timeout=self._kill_grace)
        if not done:
            run.ctx.log(f"handler did not stop within {self._kill_grace} s; abandoned")
            log.warning("handler of log %s ignored cancellation; abandoned", run.request.log_id)

    def _finish(self, run: _Run, outcome, started_at_ms: int) -> None:
        status, code, message = outcome
        request = run.request
        if started_at_ms:  # a run that never started has its "run not started" line only
            run.ctx.log(f"run end: status={_enum_name(common_pb2.RunStatus, status)} code={code} message={message}")
        self._active.discard(request.log_id)
        self._recent[request.log_id] = time.monotonic()
        result = registry_pb2.RunResult(
            log_id=request.log_id,
            log_date_ms=request.log_date_ms,
            status=status,
            code=code,
            message=message,
            started_at_ms=started_at_ms,
            finished_at_ms=now_ms(),
            # Untraced, the admin's dispatch context goes back: its `complete` span closes the
            # run's trace all the same. Traced, the `callback` span's context replaces it.
            traceparent=request.traceparent,
        )
        self._traces.finished(result)
        self._report(result)

    def _forget_old(self) -> None:
        horizon = time.monotonic() - RECENT_RUN_TTL
        while self._recent:
            log_id, finished = next(iter(self._recent.items()))
            if finished > horizon:
                break
            self._recent.popitem(last=False)
