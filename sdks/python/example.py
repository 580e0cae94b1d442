"""Example xjob executor in Python: the handlers of the executor conformance suite plus two
demo handlers. Configured by environment variables (see README.md):

    XJOB_ADMIN_ADDR     admin URL(s), comma-separated      (default http://127.0.0.1:8080)
    XJOB_APP_NAME       the group's app name               (default xjob-python)
    XJOB_EXECUTOR_PORT  port to listen on, 127.0.0.1       (default 9998)
    XJOB_ACCESS_TOKEN   the group's access token, if any
    XJOB_LOG_DIR        run log directory                  (default ./xjob-executor-logs)
    XJOB_DISPATCH       `session`: no port, the admin's calls come down the session, as
                        session://<app>-<port> (the port only makes the name unique)
"""

import asyncio
import logging
import os

from xjob_executor import Executor, JobError

port = os.environ.get("XJOB_EXECUTOR_PORT", "9998")
app_name = os.environ.get("XJOB_APP_NAME", "xjob-python")
session_dispatch = os.environ.get("XJOB_DISPATCH") == "session"
executor = Executor(
    app_name=app_name,
    admin_addrs=[a.strip() for a in os.environ.get("XJOB_ADMIN_ADDR", "http://127.0.0.1:8080").split(",") if a.strip()],
    bind=f"127.0.0.1:{port}",
    access_token=os.environ.get("XJOB_ACCESS_TOKEN", ""),
    log_dir=os.environ.get("XJOB_LOG_DIR", "xjob-executor-logs"),
    shutdown_grace=2.0,
    # TLS (all optional): the port's certificate (also presented to admins), the CA of the
    # admins, and whether callers need a client certificate from it.
    tls_cert=os.environ.get("XJOB_TLS_CERT") or None,
    tls_key=os.environ.get("XJOB_TLS_KEY") or None,
    tls_ca=os.environ.get("XJOB_TLS_CA") or None,
    require_client_cert=os.environ.get("XJOB_TLS_REQUIRE_CLIENT_CERT") == "1",
    session_dispatch=session_dispatch,
    address=f"session://{app_name}-{port}" if session_dispatch else None,
)


@executor.handler("hello")
async def hello(ctx):
    """Succeeds with a message."""
    ctx.log(f"hello, {ctx.params or 'world'}!")
    return f"greeted {ctx.params or 'world'}"


@executor.handler("failOnDemand")
async def fail_on_demand(ctx):
    """Fails when its params say `fail`, succeeds otherwise."""
    if ctx.params.strip() == "fail":
        raise JobError("failed on demand (params 'fail')")
    return "did not fail (params are not 'fail')"


# The conformance suite's handlers (docs/executors.md).


@executor.handler("succeed")
async def succeed(ctx):
    message = f"ok params={ctx.params} shard={ctx.shard_index}/{ctx.shard_total}"
    ctx.log(message)
    return message


@executor.handler("fail")
async def fail(ctx):
    ctx.log("failing on purpose")
    raise JobError(f"failed on purpose: {ctx.params}")


@executor.handler("sleep")
async def sleep(ctx):
    millis = int(ctx.params.strip()) if ctx.params.strip().isdigit() else 1000
    ctx.log(f"sleeping {millis} ms")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + millis / 1000
    tick = 0
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return f"slept {millis} ms"
        await asyncio.sleep(min(0.1, remaining))  # kill and timeout cancel it here
        if loop.time() < deadline:
            tick += 1
            ctx.log(f"tick {tick}")


@executor.handler("log")
async def write_lines(ctx):
    lines = int(ctx.params.strip()) if ctx.params.strip().isdigit() else 3
    for line in range(1, lines + 1):
        ctx.log(f"line {line}")
    return f"wrote {lines} lines"


# The built-in command handler: the params are the command line (docs/executors.md).
executor.command_handler("command")
# Script (GLUE) jobs are off unless enabled: XJOB_GLUE_SHELL=1 enables shell scripts (bash).
if os.environ.get("XJOB_GLUE_SHELL") == "1":
    executor.enable_glue("shell")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(executor.run())
