"""The worker's EgressService: every outbound TCP connection of every sandbox passes here.

One gRPC server on one Unix socket serves all sandboxes of a worker; the socket is bound into each
sandbox, and a per-sandbox token (metadata ``ale-egress-token``, readable only inside that
sandbox) tells the gateway which sandbox is calling and therefore which policy applies.

Connections to the reserved host ``model-proxy`` carry HTTP to the ModelProxy: on those the
gateway stamps each request with the calling sandbox's id (:mod:`ale_rock.egress.httpstamp`), so
the proxy can hold every episode credential to the sandbox it was issued for.

The server is asynchronous (its own event loop thread): a connection holds no thread, so one
sandbox's streams cannot starve another's. Each sandbox may hold ``max_streams_per_sandbox``
streams at once, and a stream whose first message (the target) does not arrive within
``first_message_timeout_s`` is closed. Destinations are re-checked at connect time against
:mod:`ale_rock.egress.admission` after resolution, and the connection goes to the checked address.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc
from ale_proto.errors import make_error
from ale_proto.v1 import common_pb2, rocklet_pb2, rocklet_pb2_grpc

from ale_rock.egress.admission import MODEL_PROXY_HOST, Endpoint, connect_problem, resolve_protected
from ale_rock.egress.httpstamp import HttpFramingError, SandboxHeaderStamper
from ale_rock.egress.policy import Decision, Rule, SafetyLog, decide
from ale_rock.grpc_options import server_options

TOKEN_METADATA_KEY = "ale-egress-token"
_CONNECT_TIMEOUT_S = 10.0
_CHUNK = 65536

__all__ = ["MODEL_PROXY_HOST", "TOKEN_METADATA_KEY", "EgressGateway"]


class EgressGateway(rocklet_pb2_grpc.EgressServiceServicer):
    """Policy check, safety events, and the byte pump for sandboxes' connections."""

    def __init__(
        self,
        model_proxy_address: str = "",
        max_streams_per_sandbox: int = 64,
        first_message_timeout_s: float = 5.0,
        protected: Sequence[Endpoint] = (),
    ) -> None:
        self.model_proxy_address = model_proxy_address
        self.max_streams_per_sandbox = max_streams_per_sandbox
        self.first_message_timeout_s = first_message_timeout_s
        self.safety = SafetyLog()
        self._lock = threading.Lock()
        self._tokens: dict[str, str] = {}
        self._policies: dict[str, list[Rule]] = {}
        self._open: dict[str, int] = {}
        self._protected_ips: set[Endpoint] = set()
        self.set_protected(protected)
        self._server: grpc.aio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.socket_path: Path | None = None

    # -- registry ------------------------------------------------------------------------------

    def register(self, sandbox_id: str, token: str, rules: list[Rule]) -> None:
        """Let ``token`` speak for ``sandbox_id`` under ``rules``."""
        with self._lock:
            if token:
                self._tokens[token] = sandbox_id
            self._policies[sandbox_id] = list(rules)

    def set_policy(self, sandbox_id: str, rules: list[Rule]) -> None:
        """Replace a sandbox's policy."""
        with self._lock:
            self._policies[sandbox_id] = list(rules)

    def policy(self, sandbox_id: str) -> list[Rule]:
        """A sandbox's current rules."""
        with self._lock:
            return list(self._policies.get(sandbox_id, []))

    def forget(self, sandbox_id: str) -> None:
        """Drop everything about a removed sandbox."""
        with self._lock:
            self._tokens = {t: s for t, s in self._tokens.items() if s != sandbox_id}
            self._policies.pop(sandbox_id, None)
        self.safety.forget(sandbox_id)

    def set_protected(self, endpoints: Sequence[Endpoint]) -> None:
        """ALE services (host, port) no connection may reach, whatever the policy says."""
        resolved = resolve_protected(endpoints)
        with self._lock:
            self._protected_ips = resolved

    def open_streams(self, sandbox_id: str) -> int:
        """Streams a sandbox holds now."""
        with self._lock:
            return self._open.get(sandbox_id, 0)

    # -- serving -------------------------------------------------------------------------------

    def start(self, socket_path: Path) -> None:
        """Serve EgressService on a Unix socket, on an event loop of its own."""
        socket_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="egress-gateway", daemon=True)
        self._thread.start()
        self._loop = loop

        async def serve() -> grpc.aio.Server:
            server = grpc.aio.server(options=server_options())
            rocklet_pb2_grpc.add_EgressServiceServicer_to_server(self, server)
            server.add_insecure_port(f"unix:{socket_path}")
            await server.start()
            return server

        self._server = asyncio.run_coroutine_threadsafe(serve(), loop).result(timeout=30)
        # Sandboxes run as a non-root uid: let them reach the socket (the token gates the rest).
        socket_path.chmod(0o666)
        self.socket_path = socket_path

    def stop(self) -> None:
        """Stop serving."""
        loop, server = self._loop, self._server
        self._server = None
        if loop is None:
            return
        if server is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(server.stop(0.5), loop).result(timeout=3)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=3)
        self._loop = None

    async def Connect(  # noqa: N802
        self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        token = dict(context.invocation_metadata() or ()).get(TOKEN_METADATA_KEY, "")
        with self._lock:
            sandbox_id = self._tokens.get(str(token), "")
            held = self._open.get(sandbox_id, 0)
            admitted = bool(sandbox_id) and held < self.max_streams_per_sandbox
            if admitted:
                self._open[sandbox_id] = held + 1
        if not sandbox_id:
            yield _error(common_pb2.ERROR_CODE_UNAUTHENTICATED, "unknown egress token")
            return
        if not admitted:
            yield _error(
                common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED,
                f"this sandbox already holds {self.max_streams_per_sandbox} egress connections",
            )
            return
        try:
            async for out in self._connect(sandbox_id, request_iterator):
                yield out
        finally:
            with self._lock:
                left = self._open.get(sandbox_id, 1) - 1
                if left > 0:
                    self._open[sandbox_id] = left
                else:
                    self._open.pop(sandbox_id, None)

    async def _connect(self, sandbox_id: str, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        try:
            first = await asyncio.wait_for(anext(requests, None), self.first_message_timeout_s)
        except asyncio.TimeoutError:
            yield _error(
                common_pb2.ERROR_CODE_DEADLINE_EXCEEDED,
                f"no target within {self.first_message_timeout_s:g} s", "target",
            )
            return
        if first is None or not first.HasField("target"):
            yield _error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, "the first message must be a target", "target")
            return
        host, port, command = first.target.host, first.target.port, first.target.command
        if not host or len(host) > 253 or not 0 < port < 65536:
            yield _error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, "host and a port in 1..65535 are required", "target")
            return
        with self._lock:
            rules = list(self._policies.get(sandbox_id, []))
            protected = set(self._protected_ips)
        loop = asyncio.get_running_loop()
        # decide() may resolve names (wildcard rules): off the loop.
        decision: Decision = await loop.run_in_executor(None, decide, rules, host, port)
        connect_host, connect_port = host, port
        if decision.allowed and host == MODEL_PROXY_HOST:
            if not self.model_proxy_address:
                decision = Decision(False, reason="this worker has no model proxy configured")
            else:
                connect_host, _, p = self.model_proxy_address.rpartition(":")
                connect_port = int(p)
        elif decision.allowed:
            decision = await self._checked(decision.address or host, port, protected)
            connect_host = decision.address
        if not decision.allowed:
            self.safety.record(sandbox_id, "egress_blocked", command, f"{host}:{port}: {decision.reason}")
            yield _error(common_pb2.ERROR_CODE_PERMISSION_DENIED, decision.reason, "target.host")
            return
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(connect_host, connect_port, limit=_CHUNK), _CONNECT_TIMEOUT_S
            )
        except (OSError, asyncio.TimeoutError) as e:
            yield _error(common_pb2.ERROR_CODE_UNAVAILABLE, f"cannot connect to {host}:{port}: {e or 'timeout'}")
            return
        yield rocklet_pb2.ConnectResponse(connected=True)
        if host == MODEL_PROXY_HOST:
            stamper = SandboxHeaderStamper(sandbox_id)

            def refused(reason: str) -> None:
                self.safety.record(sandbox_id, "egress_blocked", command, f"{host}:{port}: {reason}")

            up = loop.create_task(_pump_up(requests, writer, stamper, refused))
        else:
            up = loop.create_task(_pump_up(requests, writer))
        try:
            while data := await reader.read(_CHUNK):
                yield rocklet_pb2.ConnectResponse(data=data)
        except OSError:
            pass
        finally:
            up.cancel()
            writer.close()

    async def _checked(self, host: str, port: int, protected: set[Endpoint]) -> Decision:
        """Resolve ``host`` once, refuse the machine itself and ALE's ports, and name the IP to use."""
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), _CONNECT_TIMEOUT_S
            )
        except (OSError, asyncio.TimeoutError) as e:
            return Decision(False, reason=f"cannot resolve {host}: {e or 'timeout'}")
        ips = [str(info[4][0]) for info in infos]
        if not ips:
            return Decision(False, reason=f"cannot resolve {host}")
        if problem := connect_problem(ips, port, protected):
            return Decision(False, reason=problem)
        return Decision(True, address=ips[0])


async def _pump_up(
    requests: AsyncIterator[Any],
    writer: asyncio.StreamWriter,
    stamper: SandboxHeaderStamper | None = None,
    refused: Any = None,
) -> None:
    """Sandbox → destination; through the stamper on model-proxy connections (a request it cannot
    frame ends the connection)."""
    try:
        async for req in requests:
            if req.data:
                out = stamper.feed(req.data) if stamper is not None else req.data
                if out:
                    writer.write(out)
                    await writer.drain()
    except HttpFramingError as e:
        if refused is not None:
            refused(f"unframeable HTTP to the model proxy: {e}")
        writer.close()
        return
    except (OSError, grpc.RpcError, ValueError, asyncio.CancelledError):
        pass
    with contextlib.suppress(OSError, RuntimeError):
        if writer.can_write_eof():
            writer.write_eof()


def _error(code: Any, message: str, field: str = "") -> Any:
    return rocklet_pb2.ConnectResponse(error=make_error(code, message, field))
