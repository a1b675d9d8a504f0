"""The worker's RockletService proxy: calls carrying ``ale-sandbox-id`` go to that sandbox's Rocklet.

Messages pass through as bytes (no re-parsing); statuses and trailing metadata (the typed
``ale-error-bin`` detail included) come back unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from ale_proto.errors import abort, make_error
from ale_proto.v1 import common_pb2, rocklet_pb2

from ale_rock.grpc_options import channel_options
from ale_rock.rocklet.server import MAX_MESSAGE_BYTES

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

    def __init__(self, lookup: SocketLookup, on_call: Callable[[str], None] | None = None) -> None:
        self._lookup = lookup
        self._on_call = on_call or (lambda _sid: None)
        self._lock = threading.Lock()
        self._channels: dict[str, tuple[str, grpc.Channel]] = {}

    def warm(self, sandbox_id: str, path: str, timeout_s: float = 5.0) -> None:
        """Open and connect the channel of a new sandbox now, so its first call does not pay for it."""
        channel = grpc.insecure_channel(f"unix:{path}", options=_CHANNEL_OPTIONS)
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            channel.close()
            return
        with self._lock:
            old = self._channels.pop(sandbox_id, None)
            self._channels[sandbox_id] = (path, channel)
        if old is not None:
            old[1].close()

    def forget(self, sandbox_id: str) -> None:
        """Close the channel of a removed sandbox."""
        with self._lock:
            entry = self._channels.pop(sandbox_id, None)
        if entry is not None:
            entry[1].close()

    def close(self) -> None:
        """Close every channel."""
        with self._lock:
            entries = list(self._channels.values())
            self._channels.clear()
        for _, ch in entries:
            ch.close()

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
            if entry is None or entry[0] != path:
                if entry is not None:
                    entry[1].close()
                entry = (str(path), grpc.insecure_channel(f"unix:{path}", options=_CHANNEL_OPTIONS))
                self._channels[sandbox_id] = entry
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
