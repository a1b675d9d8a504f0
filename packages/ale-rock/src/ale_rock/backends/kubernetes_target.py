"""The worker's side of a Rocklet reached over TCP (the ``kubernetes`` backend).

A backend hands the worker ``SandboxHandle.rocklet_socket`` as a path; a TCP Rocklet is named by
``tcp:<token>@<host>:<port>`` instead (no ``/``, so it survives ``Path``), and the worker's proxy
opens it with :class:`TcpRocklet`, which adds the token to every call. The token never leaves the
worker and the pod: clients of the worker never see it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from ale_rock.backends.kubernetes_rocklet import TOKEN_METADATA
from ale_rock.grpc_options import channel_options

PREFIX = "tcp:"
_TARGET_RE = re.compile(r"^tcp:([0-9a-f]{16,128})@(\[[0-9a-fA-F:.]+\]|[0-9.]+|[A-Za-z0-9.-]+):([0-9]{1,5})$")


def encode(host: str, port: int, token: str) -> str:
    """The handle path of the Rocklet at ``host:port`` with ``token`` (hex)."""
    name = f"[{host}]" if ":" in host else host
    out = f"{PREFIX}{token}@{name}:{port}"
    if _TARGET_RE.match(out) is None:
        raise ValueError(f"not a Rocklet target: host {host!r}, port {port}")
    return out


@dataclass
class TcpRocklet:
    """Stands in for a pinned Unix socket in the worker's proxy: same ``path``/``check``/``close``."""

    path: str
    target: str
    token: str

    def check(self) -> None:
        """Nothing to re-check: the address is the pod's, and the token authenticates the Rocklet's
        side of nothing but the caller; the NetworkPolicy keeps other pods off the port."""

    def close(self) -> None:
        """Nothing held."""

    def channel(self, options: list[tuple[str, Any]] | None = None) -> grpc.Channel:
        """A channel that sends the token with every call (the shared options unless given)."""
        return grpc.intercept_channel(
            grpc.insecure_channel(self.target, options=channel_options() if options is None else options),
            _AddToken(self.token),
        )


def parse(path: str) -> TcpRocklet | None:
    """The TCP Rocklet ``path`` names, or None for a Unix socket path."""
    m = _TARGET_RE.match(path)
    if m is None:
        return None
    return TcpRocklet(path=path, target=f"{m.group(2)}:{m.group(3)}", token=m.group(1))


class _AddToken(
    grpc.UnaryUnaryClientInterceptor,  # type: ignore[misc]
    grpc.UnaryStreamClientInterceptor,  # type: ignore[misc]
    grpc.StreamUnaryClientInterceptor,  # type: ignore[misc]
    grpc.StreamStreamClientInterceptor,  # type: ignore[misc]
):
    def __init__(self, token: str) -> None:
        self._md = (TOKEN_METADATA, token)

    def _details(self, details: Any) -> Any:
        md = [(k, v) for k, v in details.metadata or () if k != TOKEN_METADATA]
        return _Details(details.method, details.timeout, [*md, self._md], details.credentials,
                        details.wait_for_ready, details.compression)  # fmt: skip

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Callable[..., Any], details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation: Callable[..., Any], details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)


@dataclass
class _Details(grpc.ClientCallDetails):  # type: ignore[misc]
    method: str
    timeout: float | None
    metadata: list[tuple[str, str]]
    credentials: Any
    wait_for_ready: bool | None
    compression: Any
