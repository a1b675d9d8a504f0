"""The worker's RockletService proxy: calls carrying ``ale-sandbox-id`` go to that sandbox's Rocklet.

Messages pass through as bytes (no re-parsing); statuses and trailing metadata (the typed
``ale-error-bin`` detail included) come back unchanged. Each socket is pinned and checked
(:mod:`ale_rock.worker.rocklet_socket`) before use: a socket the sandbox could redirect is refused
and the sandbox reported through ``on_unsafe``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from ale_proto.errors import abort, make_error
from ale_proto.v1 import common_pb2, rocklet_pb2

from ale_rock.backends.kubernetes_target import TcpRocklet
from ale_rock.backends.kubernetes_target import parse as parse_tcp_rocklet
from ale_rock.grpc_options import channel_options
from ale_rock.rocklet.server import MAX_MESSAGE_BYTES
from ale_rock.worker.rocklet_socket import PinnedSocket, UnsafeRockletSocket, pin

log = logging.getLogger("ale_rock.worker")

SANDBOX_METADATA_KEY = "ale-sandbox-id"
_CHANNEL_OPTIONS = channel_options(MAX_MESSAGE_BYTES)
SERVICE = "ale.v1.RockletService"
_KINDS = {
    name: (method.client_streaming, method.server_streaming)
    for name, method in (
        (m.name, m) for m in rocklet_pb2.DESCRIPTOR.services_by_name["RockletService"].methods
    )
}

SocketLookup = Callable[[str], "str | None"]
"""sandbox id -> host path of its Rocklet socket, or None when this worker has no such sandbox."""


class RockletProxy:
    """Routes RockletService calls to per-sandbox Unix sockets, with one cached channel each."""

    def __init__(
        self,
        lookup: SocketLookup,
        on_call: Callable[[str], None] | None = None,
        on_unsafe: Callable[[str, str], None] | None = None,
    ) -> None:
        self._lookup = lookup
        self._on_call = on_call or (lambda _sid: None)
        self._on_unsafe = on_unsafe or (lambda _sid, _why: None)
        self._lock = threading.Lock()
        self._channels: dict[str, tuple[PinnedSocket | TcpRocklet, grpc.Channel]] = {}

    def _open(self, sandbox_id: str, path: str) -> tuple[PinnedSocket | TcpRocklet, grpc.Channel] | None:
        if (tcp := parse_tcp_rocklet(path)) is not None:  # a pod's Rocklet (kubernetes backend)
            return tcp, tcp.channel(_CHANNEL_OPTIONS)
        try:
            pinned = pin(path)
        except UnsafeRockletSocket as e:
            self._unsafe(sandbox_id, str(e))
            return None
        return pinned, grpc.insecure_channel(f"unix:{pinned.target}", options=_CHANNEL_OPTIONS)

    def _unsafe(self, sandbox_id: str, why: str) -> None:
        log.warning("sandbox %s: refusing its Rocklet socket: %s", sandbox_id, why)
        self.forget(sandbox_id)
        self._on_unsafe(sandbox_id, why)

    def warm(self, sandbox_id: str, path: str, timeout_s: float = 5.0) -> None:
        """Open and connect the channel of a new sandbox now, so its first call does not pay for it."""
        entry = self._open(sandbox_id, path)
        if entry is None:
            return
        try:
            grpc.channel_ready_future(entry[1]).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            _close(entry)
            return
        with self._lock:
            old = self._channels.pop(sandbox_id, None)
            self._channels[sandbox_id] = entry
        if old is not None:
            _close(old)

    def forget(self, sandbox_id: str) -> None:
        """Close the channel of a removed sandbox."""
        with self._lock:
            entry = self._channels.pop(sandbox_id, None)
        if entry is not None:
            _close(entry)

    def close(self) -> None:
        """Close every channel."""
        with self._lock:
            entries = list(self._channels.values())
            self._channels.clear()
        for entry in entries:
            _close(entry)

    def _channel(self, context: grpc.ServicerContext) -> tuple[grpc.Channel, list[tuple[str, Any]]]:
        md = [(k, v) for k, v in context.invocation_metadata()]
        sandbox_id = next((str(v) for k, v in md if k == SANDBOX_METADATA_KEY), "")
        if not sandbox_id:
            abort(
                context,
                make_error(
                    common_pb2.ERROR_CODE_INVALID_ARGUMENT,
                    "metadata ale-sandbox-id is required",
                    SANDBOX_METADATA_KEY,
                ),
            )
        path = self._lookup(sandbox_id)
        if path is None:
            abort(
                context,
                make_error(
                    common_pb2.ERROR_CODE_NOT_FOUND, f"no sandbox {sandbox_id!r} on this worker", "sandbox_id"
                ),
            )
        self._on_call(sandbox_id)
        with self._lock:
            entry = self._channels.get(sandbox_id)
        if entry is not None and entry[0].path != path:
            self.forget(sandbox_id)
            entry = None
        try:
            if entry is not None:
                entry[0].check()  # the pinned directory may not have become the sandbox's since
        except UnsafeRockletSocket as e:
            self._unsafe(sandbox_id, str(e))
            entry = None
        else:
            if entry is None and (entry := self._open(sandbox_id, str(path))) is not None:
                with self._lock:
                    old = self._channels.pop(sandbox_id, None)
                    self._channels[sandbox_id] = entry
                if old is not None:
                    _close(old)
        if entry is None:
            abort(
                context,
                make_error(
                    common_pb2.ERROR_CODE_UNAVAILABLE,
                    f"sandbox {sandbox_id!r}: its Rocklet socket is not trustworthy; the sandbox is failed",
                    "sandbox_id",
                ),
            )
            raise AssertionError("abort returned")  # pragma: no cover - context.abort raises
        forward = [(k, v) for k, v in md if not k.startswith(("authorization", ":")) and k != "user-agent"]
        return entry[1], forward

    def handler(self) -> grpc.GenericRpcHandler:
        """A generic handler serving every RockletService method."""
        handlers = {}
        for name, (client_stream, server_stream) in _KINDS.items():
            path = f"/{SERVICE}/{name}"
            if client_stream and not server_stream:
                handlers[name] = grpc.stream_unary_rpc_method_handler(self._stream_unary(path))
            elif server_stream and not client_stream:
                handlers[name] = grpc.unary_stream_rpc_method_handler(self._unary_stream(path))
            elif not client_stream and not server_stream:
                handlers[name] = grpc.unary_unary_rpc_method_handler(self._unary_unary(path))
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    def _unary_unary(self, path: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        def call(request: bytes, context: grpc.ServicerContext) -> bytes:
            channel, md = self._channel(context)
            try:
                return channel.unary_unary(path)(request, metadata=md, timeout=_remaining(context))  # type: ignore[no-any-return]
            except grpc.RpcError as e:
                _relay(context, e)
                raise

        return call

    def _unary_stream(self, path: str) -> Callable[[bytes, grpc.ServicerContext], Iterator[bytes]]:
        def call(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
            channel, md = self._channel(context)
            upstream = channel.unary_stream(path)(request, metadata=md, timeout=_remaining(context))
            context.add_callback(upstream.cancel)
            try:
                yield from upstream
            except grpc.RpcError as e:
                _relay(context, e)

        return call

    def _stream_unary(self, path: str) -> Callable[[Iterator[bytes], grpc.ServicerContext], bytes]:
        def call(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
            channel, md = self._channel(context)
            try:
                return channel.stream_unary(path)(requests, metadata=md, timeout=_remaining(context))  # type: ignore[no-any-return]
            except grpc.RpcError as e:
                _relay(context, e)
                raise

        return call


def _close(entry: tuple[PinnedSocket | TcpRocklet, grpc.Channel]) -> None:
    entry[1].close()
    entry[0].close()


def _remaining(context: grpc.ServicerContext) -> float | None:
    # grpcio reports 0 (not None) when the caller set no deadline.
    left = context.time_remaining()
    return None if not left or left > 1e8 else left


def _relay(context: grpc.ServicerContext, err: grpc.RpcError) -> None:
    """Fail the proxied call exactly as the Rocklet failed it."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    if code == grpc.StatusCode.UNAVAILABLE:
        # The Rocklet's socket is gone: the sandbox stopped or crashed.
        abort(
            context,
            make_error(
                common_pb2.ERROR_CODE_UNAVAILABLE, f"the sandbox's Rocklet is unreachable: {err.details()}"
            ),
        )
    trailing = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    if trailing:
        context.set_trailing_metadata(tuple((k, v) for k, v in trailing))
    context.abort(code, err.details() if hasattr(err, "details") else str(err))
