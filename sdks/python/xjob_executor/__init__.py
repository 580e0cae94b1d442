"""An xjob executor for Python: serves ExecutorService, registers with the admin over
Registry.Session and reports results through Registry.Callback, on asyncio and grpc.aio.

    from xjob_executor import Executor, JobError

    executor = Executor(app_name="my-app", admin_addrs=["http://127.0.0.1:8080"])

    @executor.handler("hello")
    async def hello(ctx):
        ctx.log(f"hello {ctx.params}")
        return f"greeted {ctx.params}"       # SUCCESS with this message; raise to fail

    asyncio.run(executor.run())              # until SIGTERM/SIGINT, then a graceful stop

The protocol it implements is described in docs/executors.md of the xjob repository.
The package is typed (PEP 561): JobContext's fields and the handler signature are annotated.
"""

from .context import Handler, JobContext, JobError
from .executor import Executor, OpenNetworkRefused

__all__ = ["Executor", "Handler", "JobContext", "JobError", "OpenNetworkRefused"]
