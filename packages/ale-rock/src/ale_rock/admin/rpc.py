"""Shared servicer plumbing: turn AdminErrors and upstream failures into typed aborts."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from ale_proto import errors as wire_errors
from ale_proto.v1 import common_pb2

from ale_rock.admin.convert import error_to_pb
from ale_rock.admin.errors import AdminError

log = logging.getLogger("ale_rock.admin")
T = TypeVar("T")


def upstream_detail(e: grpc.aio.AioRpcError) -> common_pb2.ErrorDetail:
    """The ErrorDetail of a failed worker/Rocklet call, worded for the client."""
    detail = wire_errors.error_detail_of(e)
    has_detail = any(k == wire_errors.ERROR_METADATA_KEY for k, _ in (e.trailing_metadata() or ()))
    if not has_detail and e.code() == grpc.StatusCode.UNAVAILABLE:
        detail = wire_errors.make_error(
            common_pb2.ERROR_CODE_UNAVAILABLE, f"the sandbox's worker is unreachable: {e.details()}"
        )
    return detail


def cancelled_by_its_channel() -> bool:
    """Whether a CancelledError caught now came from a gRPC call whose channel was closed under it
    (grpc.aio raises CancelledError there) rather than from this task being cancelled (a caller
    that went away, a shutdown): only the latter may propagate as a cancellation."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return task is not None and cancelling is not None and cancelling() == 0


def _channel_closed() -> common_pb2.ErrorDetail:
    return wire_errors.make_error(common_pb2.ERROR_CODE_UNAVAILABLE,
                                  "the sandbox's worker went away during the call (its connection was closed)")


async def _abort(context: Any, exc: BaseException, method: str) -> None:
    if isinstance(exc, AdminError):
        detail = error_to_pb(exc)
    elif isinstance(exc, grpc.aio.AioRpcError):
        detail = upstream_detail(exc)
    else:
        log.exception("internal error", extra={"method": method})
        detail = wire_errors.make_error(common_pb2.ERROR_CODE_INTERNAL, f"internal error: {type(exc).__name__}")
    await wire_errors.abort(context, detail)  # type: ignore[func-returns-value,misc]


def unary(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Wrap a unary-response handler (unary or client-streaming request)."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: Any) -> Any:
        try:
            return await fn(self, request, context)
        except (AdminError, grpc.aio.AioRpcError) as e:
            await _abort(context, e, fn.__name__)
        except asyncio.CancelledError:
            if not cancelled_by_its_channel():
                raise
            await wire_errors.abort(context, _channel_closed())  # type: ignore[func-returns-value,misc]
        except Exception as e:
            if isinstance(e, grpc.aio.AbortError):
                raise
            await _abort(context, e, fn.__name__)

    return wrapper


def streaming(fn: Callable[..., AsyncIterator[T]]) -> Callable[..., AsyncIterator[T]]:
    """Wrap a server-streaming handler."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            async for item in fn(self, request, context):
                yield item
        except (AdminError, grpc.aio.AioRpcError) as e:
            await _abort(context, e, fn.__name__)
        except asyncio.CancelledError:
            if not cancelled_by_its_channel():
                raise
            await wire_errors.abort(context, _channel_closed())  # type: ignore[func-returns-value,misc]
        except Exception as e:
            if isinstance(e, grpc.aio.AbortError):
                raise
            await _abort(context, e, fn.__name__)

    return wrapper


def remaining(context: Any, default: float | None = None) -> float | None:
    """The caller's remaining deadline in seconds (propagated to the worker)."""
    left = context.time_remaining()
    return left if left is not None else default
