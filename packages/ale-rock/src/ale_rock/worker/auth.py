"""The worker credential: every WorkerService and RockletService call must carry this worker's secret.

The worker draws a random secret at each start and keeps it in memory only (a restarted worker
draws a new one and registers again, so nothing has to survive a restart). It hands the secret to
the admin once, in the metadata of ``RegisterWorker`` — a call the join token authenticates — and
the admin sends it back as metadata ``ale-worker-secret`` on every call it makes to the worker.
A call without it, or with a wrong one, is UNAUTHENTICATED before any handler runs: neither a
process on the host nor a sandbox that reaches the worker's port can list, exec in or create
sandboxes. Health and reflection stay open (they reveal only the public service names); the
hosted EnvService keeps its own API key.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
from ale_proto.errors import abort, make_error
from ale_proto.v1 import common_pb2

from ale_rock.grpc_options import channel_options

WORKER_SECRET_METADATA = "ale-worker-secret"
"""Metadata key of the worker credential."""
GUARDED_PREFIXES = ("/ale.v1.WorkerService/", "/ale.v1.RockletService/")
"""Services only the admin (holder of the secret) may call."""


def new_secret() -> str:
    """A fresh worker secret (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def write_secret(path: Path, secret: str) -> None:
    """Write ``secret`` to ``path`` atomically, readable by its owner only (0600 from creation)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret)
    tmp.replace(path)


def secret_of(metadata: Sequence[tuple[str, Any]] | None) -> str:
    """The worker secret in call metadata ("" when absent)."""
    for key, value in metadata or ():
        if key == WORKER_SECRET_METADATA:
            return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    return ""


class WorkerSecretInterceptor(grpc.ServerInterceptor):
    """Refuses guarded calls whose ``ale-worker-secret`` is not this worker's (UNAUTHENTICATED, with
    the usual ErrorDetail); the handler never runs. Constant-time comparison."""

    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("a worker secret is required")
        self._secret = secret.encode()

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        if not details.method.startswith(GUARDED_PREFIXES):
            return continuation(details)
        given = secret_of(details.invocation_metadata).encode()
        if given and hmac.compare_digest(given, self._secret):
            return continuation(details)
        handler = continuation(details)
        if handler is None:
            return None
        return _refusing(handler, "wrong worker credential" if given else
                         f"missing worker credential (metadata {WORKER_SECRET_METADATA!r})")


def _refusing(handler: Any, message: str) -> Any:
    """A handler of the same kind as ``handler`` that only aborts (requests are never read)."""

    def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
        abort(context, make_error(common_pb2.ERROR_CODE_UNAUTHENTICATED, message))
        raise AssertionError("abort returned")  # pragma: no cover - context.abort raises

    def refuse_stream(_request: Any, context: grpc.ServicerContext) -> Any:
        refuse(_request, context)
        yield  # pragma: no cover - makes this a generator, as streaming handlers are

    # Raw bytes in and out: nothing is parsed before the caller is authenticated.
    kinds = {
        (False, False): grpc.unary_unary_rpc_method_handler(refuse),
        (False, True): grpc.unary_stream_rpc_method_handler(refuse_stream),
        (True, False): grpc.stream_unary_rpc_method_handler(refuse),
        (True, True): grpc.stream_stream_rpc_method_handler(refuse_stream),
    }
    return kinds[(bool(handler.request_streaming), bool(handler.response_streaming))]


class _AddSecret(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Client side (synchronous channels): adds the worker secret to every call."""

    def __init__(self, secret: str) -> None:
        self._md = (WORKER_SECRET_METADATA, secret)

    def _details(self, details: Any) -> Any:
        md = [m for m in (details.metadata or ()) if m[0] != WORKER_SECRET_METADATA]
        return _Details(details.method, details.timeout, [*md, self._md], details.credentials,
                        getattr(details, "wait_for_ready", None), getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)


class _Details(grpc.ClientCallDetails):
    def __init__(self, method: str, timeout: Any, metadata: Any, credentials: Any, wait_for_ready: Any,
                 compression: Any) -> None:
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


def worker_channel(address: str, secret: str, options: Sequence[tuple[str, Any]] | None = None) -> grpc.Channel:
    """A synchronous channel to a worker that sends ``secret`` on every call (tools, tests, bench)."""
    channel = grpc.insecure_channel(address, options=list(options) if options is not None else channel_options())
    return grpc.intercept_channel(channel, _AddSecret(secret))
