"""ExecutorService, served to the admin: Beat, IdleBeat, Run, RunBatch, Kill, ReadLog.

With an access token set, every call must carry `authorization: Bearer <token>`, otherwise it
is refused with UNAUTHENTICATED before it does anything.
"""

import hmac

import grpc

from ._proto import executor_pb2, executor_pb2_grpc


class ExecutorService(executor_pb2_grpc.ExecutorServiceServicer):
    def __init__(self, runner, joblog, access_token: str) -> None:
        self._runner = runner
        self._joblog = joblog
        self._expected = f"Bearer {access_token}".encode() if access_token else None

    async def _check(self, context) -> None:
        if self._expected is None:
            return
        presented = dict(context.invocation_metadata()).get("authorization", "")
        if not hmac.compare_digest(presented.encode(), self._expected):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid access token")

    async def Beat(self, request, context):
        await self._check(context)
        return executor_pb2.BeatResponse()

    async def IdleBeat(self, request, context):
        await self._check(context)
        if self._runner.is_idle(request.job_id):
            return executor_pb2.IdleBeatResponse(idle=True)
        return executor_pb2.IdleBeatResponse(
            idle=False, reason=f"job {request.job_id} is running or has queued runs")

    async def Run(self, request, context):
        await self._check(context)
        return self._runner.submit(request)

    async def RunBatch(self, request, context):
        await self._check(context)
        return executor_pb2.RunBatchResponse(results=[self._runner.submit(run) for run in request.runs])

    async def Kill(self, request, context):
        await self._check(context)
        if self._runner.kill_job(request.job_id):
            return executor_pb2.KillResponse(killed=True)
        return executor_pb2.KillResponse(
            killed=False, message=f"job {request.job_id} has no running or queued run")

    async def ReadLog(self, request, context):
        await self._check(context)
        # Asked before reading: a run that is over has written its last line already.
        active = self._runner.is_active(request.log_id)
        return self._joblog.read(request.log_id, request.log_date_ms, request.from_line, active)


def add_to_server(server, service: ExecutorService) -> None:
    executor_pb2_grpc.add_ExecutorServiceServicer_to_server(service, server)
