"""The built-in `command` handler: each run executes a program, and a stopped run really stops it.
It behaves as the Rust SDK's (docs/executors.md, "The built-in command handler"):

    argv + params split on whitespace ─spawn: own process group, XJOB_* env, stdin null─▶ child
    child stdout + stderr ─line by line, as they arrive─▶ run log (ctx.log)
    exit 0 ─▶ success · exit N / signal S ─▶ failure "command exited with status N"
    stopped (kill, job timeout, COVER_EARLY, shutdown) or the handler's own timeout
        ─▶ SIGTERM the group ─(kill_grace / 2)─▶ SIGKILL the group ─▶ reap ─▶ return

The command leads its own process group, so a stop reaches the processes it started too
(`sh -c 'sleep 60 & sleep 60'`). The whole stop takes at most three quarters of the executor's
`kill_grace`, so the handler returns before the runner abandons it. After a normal exit,
background processes are left alone and their output is read for at most OUTPUT_DRAIN more.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from typing import Iterable, List, Mapping, Optional

from ._proto import common_pb2
from .context import Handler, JobContext, JobError

#: How long output is still read after the command exited (a background process may hold it).
OUTPUT_DRAIN = 1.0
#: Longest run of bytes logged as one line; longer lines are split.
MAX_LINE_BYTES = 64 * 1024


def command_handler(
    argv: Iterable[str] = (),
    working_dir: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    timeout: Optional[float] = None,
) -> Handler:
    """Returns the handler that runs `argv` followed by each run's params split on whitespace.
    `timeout` (seconds) stops the command like a kill does, besides the job's own timeout."""
    argv = list(argv)
    extra_env = dict(env or {})
    own_timeout = timeout if timeout and timeout > 0 else None

    async def command(ctx: JobContext) -> str:
        return await _run(argv, working_dir, extra_env, own_timeout, ctx)

    return command


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:g}ms" if seconds < 1 else f"{seconds:g}s"


def run_environment(ctx: JobContext) -> dict:
    """The XJOB_* variables describing the run."""
    trigger = common_pb2.TriggerType.Name(ctx.trigger_type) if ctx.trigger_type in common_pb2.TriggerType.values() else "TRIGGER_TYPE_UNSPECIFIED"
    environment = {
        "XJOB_JOB_ID": str(ctx.job_id),
        "XJOB_LOG_ID": str(ctx.log_id),
        "XJOB_PARAMS": ctx.params,
        "XJOB_SHARD_INDEX": str(ctx.shard_index),
        "XJOB_SHARD_TOTAL": str(ctx.shard_total),
        "XJOB_SCHEDULED_AT_MS": str(ctx.scheduled_at_ms),
        "XJOB_ATTEMPT": str(ctx.attempt),
        "XJOB_TRIGGER_TYPE": trigger.removeprefix("TRIGGER_TYPE_"),
    }
    if ctx.traceparent:  # the command's own spans can join the run's trace
        environment["TRACEPARENT"] = ctx.traceparent
    return environment


def describe_exit(returncode: int):
    """(succeeded, text) for a return code (negative: killed by that signal)."""
    if returncode == 0:
        return True, "command exited with status 0"
    if returncode > 0:
        return False, f"command exited with status {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown"
    return False, f"command killed by signal {number} ({name})"


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass  # every process of the group is gone already, which is what we want


async def _forward(stream, ctx: JobContext) -> None:
    """Logs each line of one pipe as it arrives, until it closes."""
    pending = b""
    while True:
        chunk = await stream.read(MAX_LINE_BYTES)
        if not chunk:
            if pending:
                ctx.log(pending.decode("utf-8", errors="replace"))
            return
        pending += chunk
        while True:
            end = pending.find(b"\n")
            if end < 0:
                if len(pending) < MAX_LINE_BYTES:
                    break
                line, pending = pending[:MAX_LINE_BYTES], pending[MAX_LINE_BYTES:]
            else:
                line, pending = pending[:end], pending[end + 1:]
                if line.endswith(b"\r"):
                    line = line[:-1]
            ctx.log(line.decode("utf-8", errors="replace"))


async def _run(argv: List[str], working_dir, extra_env, timeout, ctx: JobContext) -> str:
    command_line = argv + ctx.params.split()
    if not command_line:
        raise JobError("no command to run: the handler has no argv and the run has no params")
    if ctx.is_cancelled():
        raise JobError("run cancelled before the command started")
    environment = dict(os.environ)
    environment.update(extra_env)
    environment.update(run_environment(ctx))
    try:
        child = await asyncio.create_subprocess_exec(
            *command_line,
            cwd=working_dir,
            env=environment,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group (and session), led by the child
        )
    except OSError as error:
        raise JobError(f"failed to start command {json.dumps(command_line[0])}: {error}") from None
    group = child.pid
    armed = True
    ctx.log(f"command started: pid={group} argv=[{', '.join(json.dumps(a) for a in command_line)}]")
    loop = asyncio.get_running_loop()
    output = loop.create_task(_drain_both(child, ctx))
    exited = loop.create_task(child.wait())
    try:
        try:
            done, _ = await asyncio.wait({exited}, timeout=timeout)
        except asyncio.CancelledError:
            armed = False
            await _stop_group(group, exited, output, ctx)
            raise
        if not done:
            armed = False
            await _stop_group(group, exited, output, ctx)
            raise JobError(f"command timed out after {_duration(timeout)} (handler timeout)")
        armed = False
        done, _ = await asyncio.wait({output}, timeout=OUTPUT_DRAIN)
        if not done:
            ctx.log(
                f"command exited but its output is still open after {_duration(OUTPUT_DRAIN)} "
                "(a background process holds it): no longer read"
            )
        succeeded, text = describe_exit(exited.result())
        if not succeeded:
            raise JobError(text)
        return text
    finally:
        if armed:  # left any other way: nothing of the command outlives its run
            _signal_group(group, signal.SIGKILL)
        output.cancel()


async def _drain_both(child, ctx: JobContext) -> None:
    await asyncio.gather(_forward(child.stdout, ctx), _forward(child.stderr, ctx))


async def _stop_group(group: int, exited, output, ctx: JobContext) -> None:
    """SIGTERM to the group, up to half the kill grace for the command to exit, SIGKILL to the
    group (stragglers included), then reaps it and reads the rest of its output, all within
    three quarters of the kill grace."""
    grace = ctx.stop_grace
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace * 3 / 4
    _signal_group(group, signal.SIGTERM)
    ctx.log(f"run stopped: sent SIGTERM to process group {group}")
    done, _ = await asyncio.wait({exited}, timeout=grace / 2)
    if done:
        ctx.log(f"after SIGTERM: {describe_exit(exited.result())[1]}")
    else:
        ctx.log(f"command still running {_duration(grace / 2)} after SIGTERM: sending SIGKILL")
    # Always: processes of the group may outlive its leader, or ignore SIGTERM.
    _signal_group(group, signal.SIGKILL)
    if not done:
        done, _ = await asyncio.wait({exited}, timeout=max(deadline - loop.time(), 0))
        if not done:
            ctx.log("command not reaped in time after SIGKILL")
    await asyncio.wait({output}, timeout=max(deadline - loop.time(), 0))
    ctx.log(f"command stopped: process group {group} killed")
