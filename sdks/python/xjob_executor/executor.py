"""The Executor: handlers by name, and the ordered start and stop of the server, the session
and the callback sender.

Graceful stop: Deregister (the admin stops routing here) -> refuse new runs, let running ones
finish within `shutdown_grace`, kill the rest -> flush results (up to `callback_flush_timeout`)
-> stop the server.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
import socket
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional

import grpc

from ._proto import PROTOCOL_VERSION, registry_pb2
from .admins import Admins
from .callback import CallbackSender
from .command import command_handler
from .glue import glue_runners, glue_type_value
from .context import Handler
from .joblog import JobLogStore
from .runner import Runner
from .server import ExecutorService, add_to_server
from .session import Session
from .session_dispatch import SESSION_SCHEME, SessionCalls, default_session_address
from .tracing import RunTraces

log = logging.getLogger("xjob_executor")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def _read(path: Optional[str]) -> Optional[bytes]:
    return Path(path).read_bytes() if path else None


class TlsFiles:
    """The TLS settings of an executor: read when it starts."""

    def __init__(self, cert, key, ca, client_cert, client_key, require_client_cert) -> None:
        self.cert, self.key, self.ca = cert, key, ca
        self.client_cert, self.client_key = client_cert, client_key
        self.require_client_cert = require_client_cert

    def server_credentials(self):
        """Credentials of the executor's own port; None for plaintext."""
        if not self.cert:
            return None
        return grpc.ssl_server_credentials(
            [(_read(self.key), _read(self.cert))],
            root_certificates=_read(self.ca) if self.require_client_cert else None,
            require_client_auth=self.require_client_cert,
        )

    def channel_credentials(self):
        """Credentials of https:// admin channels: the CA (or the system's roots), and the
        client certificate when there is one."""
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca),
            private_key=_read(self.client_key),
            certificate_chain=_read(self.client_cert),
        )


class Executor:
    def __init__(
        self,
        app_name: str,
        admin_addrs: Iterable[str],
        bind: str = "127.0.0.1:9999",
        address: Optional[str] = None,
        access_token: str = "",
        log_dir: str = "xjob-executor-logs",
        kill_grace: float = 2.0,
        shutdown_grace: float = 5.0,
        callback_flush_timeout: float = 10.0,
        labels: Optional[Mapping[str, str]] = None,
        log_retention_days: int = 30,
        insecure_open_network: bool = False,
        tls_cert: Optional[str] = None,
        tls_key: Optional[str] = None,
        tls_ca: Optional[str] = None,
        tls_client_cert: Optional[str] = None,
        tls_client_key: Optional[str] = None,
        require_client_cert: bool = False,
        otlp_endpoint: str = "",
        session_dispatch: bool = False,
    ) -> None:
        """`bind` is host:port to listen on; `address` is the URL the admin dials
        (default http://<bind>). `admin_addrs` lists admin URLs, tried in turn.

        Bound off loopback, the executor refuses to start without `access_token`, unless
        `insecure_open_network=True`: anyone who reaches the port could then run its handlers
        with any params and read its run logs.

        TLS (PEM files, as the Rust SDK): `tls_cert`/`tls_key` serve this executor's port over
        TLS (the default `address` becomes https://); `tls_ca` verifies the admins of https://
        addresses (default: the system's roots) and, with `require_client_cert`, the client
        certificates of callers (only the admins may then call); `tls_client_cert`/
        `tls_client_key` are presented to admins that ask for one (default: `tls_cert`).

        Tracing: with the `tracing` extra installed, runs are traced (`run`, `handler`,
        `callback` spans under the admin's trace) and exported over OTLP/gRPC to
        `otlp_endpoint`, or to the standard OTEL_EXPORTER_OTLP_ENDPOINT when it is empty.

        Session dispatch (`session_dispatch=True`): for an executor the admins cannot dial
        (behind NAT, in another network, on a laptop). It opens no port; the admin's runs, kills
        and log reads come down the session this executor opens to the admin. `address` may
        then name it (`session://orders-laptop-1`, unique in the app and the same across
        restarts), else it is the app name, the process id and a random part. `bind`, the
        server TLS files and `insecure_open_network` are unused; `tls_ca` and the client
        certificate still apply to the connection to the admin."""
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        if require_client_cert and not (tls_cert and tls_ca):
            raise ValueError("require_client_cert needs tls_cert, tls_key and tls_ca")
        self._tls = TlsFiles(tls_cert, tls_key, tls_ca, tls_client_cert or tls_cert,
                             tls_client_key or tls_key, require_client_cert)
        self.app_name = app_name
        self.bind = bind
        self.session_dispatch = session_dispatch
        self.address = _advertised_address(app_name, bind, address, bool(tls_cert), session_dispatch)
        self._admin_addrs = list(admin_addrs)
        self._access_token = access_token or ""
        self._log_dir = log_dir
        self._kill_grace = kill_grace
        self._shutdown_grace = shutdown_grace
        self._flush_timeout = callback_flush_timeout
        self._labels = dict(labels or {})
        self._log_retention_days = log_retention_days
        self._insecure_open_network = insecure_open_network
        self._otlp_endpoint = otlp_endpoint
        self._handlers = {}
        self._glue = {}  # enabled script glue type -> interpreter (None: the usual one)
        self._glue_env = {}
        self._tasks = []
        self._server = None

    def handler(self, name: str) -> Callable[[Handler], Handler]:
        """Decorator: registers an async (or plain) function taking a JobContext. Its return
        value is the SUCCESS message; raising ends the run FAILED with the exception's text."""

        def register(function: Handler) -> Handler:
            self._handlers[name] = function
            return function

        return register

    def command_handler(
        self,
        name: str,
        argv: Iterable[str] = (),
        working_dir: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> None:
        """Registers the built-in `command` handler under `name`: each run executes `argv`
        followed by the run's params split on whitespace (empty `argv`: the params are the whole
        command line), with XJOB_* variables describing the run in its environment. Its stdout
        and stderr go to the run log line by line; exit status 0 is a success, anything else a
        failure ("command exited with status N"). The command leads its own process group: a
        kill, a timeout, COVER_EARLY or shutdown sends SIGTERM to the whole group, then SIGKILL
        after half the kill_grace. `timeout` (seconds) is the handler's own, besides the job's."""
        self._handlers[name] = command_handler(argv, working_dir, env, timeout)

    def enable_glue(self, glue_type, interpreter: Optional[str] = None) -> None:
        """Enables script (GLUE) jobs of one language (`"shell"`, `"python"`, `"nodejs"`,
        `"php"`, `"powershell"`, or the GlueType value), run with `interpreter` or its usual one
        on the PATH (bash, python3, node, php, pwsh). Off by default: a run of a type not
        enabled is refused. Each run writes the job's script under {log_dir}/gluesource/ (once
        per version) and runs it like the command handler."""
        self._glue[glue_type_value(glue_type)] = interpreter

    def glue_env(self, key: str, value: str) -> None:
        """Adds an environment variable for script runs (the XJOB_* variables win)."""
        self._glue_env[key] = value

    async def start(self) -> None:
        if not self.session_dispatch:
            # mTLS (only callers with a certificate from the CA) guards the port as a token does.
            refuse_open_network(self.bind, bool(self._access_token) or self._tls.require_client_cert,
                                self._insecure_open_network)
        loop = asyncio.get_running_loop()
        self._admins = Admins(self._admin_addrs, self._access_token, self._tls.channel_credentials())
        self._traces = RunTraces.start(self.app_name, self._otlp_endpoint)
        self._callbacks = CallbackSender(self._admins, Path(self._log_dir) / "callback-spool",
                                         self._traces.accepted_results)
        self._joblog = JobLogStore(self._log_dir)
        glue = glue_runners(self._glue, self._glue_env, self._log_dir)
        self._runner = Runner(self._handlers, self._joblog, self._callbacks.report, self._kill_grace, glue,
                              self._traces)
        calls = None
        if self.session_dispatch:
            # No token check on these calls: they come from the admin this executor dialed.
            calls = SessionCalls(ExecutorService(self._runner, self._joblog, ""))
        else:
            await self._serve()
        register = registry_pb2.Register(
            app_name=self.app_name,
            address=self.address,
            handlers=sorted(self._handlers),
            protocol_version=PROTOCOL_VERSION,
            labels=self._labels,
            dispatch_mode=(registry_pb2.DISPATCH_MODE_SESSION if self.session_dispatch
                           else registry_pb2.DISPATCH_MODE_DIAL),
        )
        self._session = Session(self._admins, register, self._running_list, calls)
        self._tasks = [
            loop.create_task(self._callbacks.run()),
            loop.create_task(self._session.run()),
            loop.create_task(self._sweep_logs()),
        ]
        mode = "session dispatch, no port" if self.session_dispatch else "serving"
        log.info("executor %s %s as %s, admins %s", self.app_name, mode, self.address, self._admin_addrs)

    async def _serve(self) -> None:
        """Starts the gRPC server the admins dial (the dialed mode)."""
        # The admin batches up to 512 runs per RunBatch, each with up to 64 KiB of params.
        self._server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
        add_to_server(self._server, ExecutorService(self._runner, self._joblog, self._access_token))
        server_credentials = self._tls.server_credentials()
        bound = (
            self._server.add_secure_port(self.bind, server_credentials)
            if server_credentials
            else self._server.add_insecure_port(self.bind)
        )
        if bound == 0:
            raise OSError(f"cannot listen on {self.bind}")
        await self._server.start()

    async def wait_registered(self, timeout: float) -> None:
        await asyncio.wait_for(self._session.registered.wait(), timeout)

    def _running_list(self):
        """What a heartbeat reports: runs queued or running, and finished runs whose result
        the admin has not acknowledged yet."""
        log_ids = self._runner.active_log_ids() | self._callbacks.pending_log_ids()
        return log_ids, self._runner.queued_count()

    async def _sweep_logs(self) -> None:
        """Deletes run log folders older than the retention, at start and then hourly."""
        while True:
            removed = await asyncio.to_thread(self._joblog.remove_expired, self._log_retention_days)
            if removed:
                log.info("removed %d expired run log folder(s)", removed)
            await asyncio.sleep(3600)

    async def stop(self) -> None:
        callbacks_task, session_task, sweep_task = self._tasks
        sweep_task.cancel()
        self._session.stop()
        try:
            await asyncio.wait_for(session_task, 3.0)
        except asyncio.TimeoutError:
            log.warning("the session did not close in time")
        await self._runner.shutdown(self._shutdown_grace)
        if not await self._callbacks.flush(self._flush_timeout):
            log.error("results of log ids %s could not be reported; spooled for the next start",
                      sorted(self._callbacks.pending_log_ids()))
            self._callbacks.spool_all()
        callbacks_task.cancel()
        await asyncio.to_thread(self._traces.shutdown)  # sends the buffered spans
        if self._server is not None:
            await self._server.stop(1.0)
        await self._admins.close()
        log.info("executor stopped")

    async def run(self, until=None) -> None:
        """Starts, serves until `until` (an awaitable) completes or SIGTERM/SIGINT arrives,
        then stops gracefully."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        waiters = [loop.create_task(stop.wait())]
        if until is not None:
            waiters.append(asyncio.ensure_future(until))
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()
        await self.stop()


def _advertised_address(app_name: str, bind: str, address: Optional[str], tls: bool, session: bool) -> str:
    """The address sent in Register: what the admins dial, or the executor's session name."""
    if session:
        if address and not address.startswith(SESSION_SCHEME):
            raise ValueError(f"with session_dispatch the address is {SESSION_SCHEME}NAME, not {address!r}")
        return address or default_session_address(app_name)
    if address and address.startswith(SESSION_SCHEME):
        raise ValueError(f"{address!r} is a session address: set session_dispatch=True")
    scheme = "https" if tls else "http"
    return (address or f"{scheme}://{bind}").rstrip("/")


class OpenNetworkRefused(ValueError):
    """Raised by `start` for a non-loopback bind with no access token and no opt-out."""


def is_loopback_bind(bind: str) -> bool:
    """True when every address `bind`'s host resolves to is a loopback one. An empty host or a
    wildcard (`0.0.0.0`, `[::]`) listens on every interface, so it is not."""
    host = bind.rsplit(":", 1)[0] if ":" in bind else bind
    host = host.strip("[]")
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass  # a host name: look at what it resolves to
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


def refuse_open_network(bind: str, token_set: bool, insecure_open_network: bool) -> None:
    """An executor reachable from other machines must know who calls it: the group's access
    token. Without one, anyone who reaches the port runs its handlers with any params and reads
    its logs, so starting is refused unless the operator opted out by name."""
    if token_set or is_loopback_bind(bind):
        return
    if insecure_open_network:
        log.warning("INSECURE: executor open to the network without access token (insecure_open_network) on %s", bind)
        return
    raise OpenNetworkRefused(
        f"{bind} is reachable from other machines, and with no access token anyone who reaches "
        "it can run this executor's handlers and read its logs. Set access_token (the group's "
        "token, also set on the group in the admin), or bind 127.0.0.1; to run open anyway, set "
        "insecure_open_network=True")
