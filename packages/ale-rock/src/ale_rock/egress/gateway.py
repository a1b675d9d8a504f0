"""The worker's EgressService: every outbound TCP connection of every sandbox passes here.

One gRPC server on one Unix socket serves all sandboxes of a worker; the socket is bound into each
sandbox, and a per-sandbox token (metadata ``ale-egress-token``, readable only inside that
sandbox) tells the gateway which sandbox is calling and therefore which policy applies.

Connections to the reserved host ``model-proxy`` carry HTTP to the ModelProxy: on those the
gateway stamps each request with the calling sandbox's id (:mod:`ale_rock.egress.httpstamp`), so
the proxy can hold every episode credential to the sandbox it was issued for.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from ale_proto.errors import make_error
from ale_proto.v1 import common_pb2, rocklet_pb2, rocklet_pb2_grpc

from ale_rock.egress.httpstamp import HttpFramingError, SandboxHeaderStamper
from ale_rock.egress.policy import Rule, SafetyLog, decide
from ale_rock.grpc_options import server_options

TOKEN_METADATA_KEY = "ale-egress-token"
MODEL_PROXY_HOST = "model-proxy"
_CONNECT_TIMEOUT_S = 10.0


class EgressGateway(rocklet_pb2_grpc.EgressServiceServicer):
    """Policy check, safety events, and the byte pump for sandboxes' connections."""

    def __init__(self, model_proxy_address: str = "") -> None:
        self.model_proxy_address = model_proxy_address
        self.safety = SafetyLog()
        self._lock = threading.Lock()
        self._tokens: dict[str, str] = {}
        self._policies: dict[str, list[Rule]] = {}
        self._server: grpc.Server | None = None
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

    # -- serving -------------------------------------------------------------------------------

    def start(self, socket_path: Path, max_connections: int = 256) -> None:
        """Serve EgressService on a Unix socket."""
        socket_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_connections, thread_name_prefix="egress"),
            options=server_options(),
        )
        rocklet_pb2_grpc.add_EgressServiceServicer_to_server(self, server)
        server.add_insecure_port(f"unix:{socket_path}")
        server.start()
        # Sandboxes run as a non-root uid: let them reach the socket (the token gates the rest).
        socket_path.chmod(0o666)
        self._server = server
        self.socket_path = socket_path

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.stop(grace=0.5).wait(2)
            self._server = None

    def Connect(self, request_iterator: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:  # noqa: N802
        token = dict(context.invocation_metadata()).get(TOKEN_METADATA_KEY, "")
        with self._lock:
            sandbox_id = self._tokens.get(str(token), "")
            rules = list(self._policies.get(sandbox_id, []))
        if not sandbox_id:
            yield _error(common_pb2.ERROR_CODE_UNAUTHENTICATED, "unknown egress token")
            return
        first = next(request_iterator, None)
        if first is None or not first.HasField("target"):
            yield _error(
                common_pb2.ERROR_CODE_INVALID_ARGUMENT, "the first message must be a target", "target"
            )
            return
        host, port, command = first.target.host, first.target.port, first.target.command
        if not host or len(host) > 253 or not 0 < port < 65536:
            yield _error(
                common_pb2.ERROR_CODE_INVALID_ARGUMENT, "host and a port in 1..65535 are required", "target"
            )
            return
        decision = decide(rules, host, port)
        address = decision.address
        if decision.allowed and host == MODEL_PROXY_HOST:
            if not self.model_proxy_address:
                decision = decision.__class__(False, reason="this worker has no model proxy configured")
            else:
                address, _, p = self.model_proxy_address.rpartition(":")
                port = int(p)
        if not decision.allowed:
            self.safety.record(sandbox_id, "egress_blocked", command, f"{host}:{port}: {decision.reason}")
            yield _error(common_pb2.ERROR_CODE_PERMISSION_DENIED, decision.reason, "target.host")
            return
        try:
            sock = socket.create_connection((address, port), timeout=_CONNECT_TIMEOUT_S)
        except OSError as e:
            yield _error(common_pb2.ERROR_CODE_UNAVAILABLE, f"cannot connect to {host}:{port}: {e}")
            return
        sock.settimeout(None)
        yield rocklet_pb2.ConnectResponse(connected=True)
        if host == MODEL_PROXY_HOST:
            stamper = SandboxHeaderStamper(sandbox_id)

            def refused(reason: str) -> None:
                self.safety.record(sandbox_id, "egress_blocked", command, f"{host}:{port}: {reason}")

            args: tuple[Any, ...] = (request_iterator, sock, stamper, refused)
            threading.Thread(target=_pump_up_stamped, args=args, daemon=True).start()
        else:
            threading.Thread(target=_pump_up, args=(request_iterator, sock), daemon=True).start()
        try:
            while True:
                try:
                    data = sock.recv(65536)
                except OSError:
                    break
                if not data:
                    break
                yield rocklet_pb2.ConnectResponse(data=data)
        finally:
            sock.close()


def _pump_up(request_iterator: Iterator[Any], sock: socket.socket) -> None:
    try:
        for req in request_iterator:
            if req.data:
                sock.sendall(req.data)
    except (OSError, grpc.RpcError, ValueError):
        pass
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def _pump_up_stamped(
    request_iterator: Iterator[Any], sock: socket.socket, stamper: SandboxHeaderStamper, refused: Any
) -> None:
    """Like :func:`_pump_up`, through the stamper; a request it cannot frame ends the connection."""
    try:
        for req in request_iterator:
            if req.data:
                out = stamper.feed(req.data)
                if out:
                    sock.sendall(out)
    except HttpFramingError as e:
        refused(f"unframeable HTTP to the model proxy: {e}")
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        return
    except (OSError, grpc.RpcError, ValueError):
        pass
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def _error(code: Any, message: str, field: str = "") -> Any:
    return rocklet_pb2.ConnectResponse(error=make_error(code, message, field))
