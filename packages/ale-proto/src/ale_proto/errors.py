"""The wire convention for typed errors (see common.proto ``ErrorDetail``).

A failing server aborts with the gRPC status code that matches the ``ErrorCode`` and puts the
serialized ``ErrorDetail`` in the trailing metadata under ``ale-error-bin``. Clients read it back
with :func:`error_detail_of`, so they can switch on the code and show the offending field.
"""

from __future__ import annotations

from typing import Any

import grpc

from ale_proto.v1 import common_pb2

ERROR_METADATA_KEY = "ale-error-bin"

# ErrorCode -> grpc.StatusCode (and back). LOST maps to UNAVAILABLE: retrying elsewhere may work.
_TO_STATUS = {
    common_pb2.ERROR_CODE_INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    common_pb2.ERROR_CODE_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    common_pb2.ERROR_CODE_ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    common_pb2.ERROR_CODE_UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    common_pb2.ERROR_CODE_PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    common_pb2.ERROR_CODE_FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    common_pb2.ERROR_CODE_DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    common_pb2.ERROR_CODE_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    common_pb2.ERROR_CODE_CANCELLED: grpc.StatusCode.CANCELLED,
    common_pb2.ERROR_CODE_LOST: grpc.StatusCode.UNAVAILABLE,
    common_pb2.ERROR_CODE_INTERNAL: grpc.StatusCode.INTERNAL,
}
_FROM_STATUS = {v: k for k, v in _TO_STATUS.items() if k != common_pb2.ERROR_CODE_LOST}


def status_code_of(code: common_pb2.ErrorCode) -> grpc.StatusCode:
    """The gRPC status code a server uses for an ``ErrorCode``."""
    return _TO_STATUS.get(code, grpc.StatusCode.UNKNOWN)


def make_error(code: common_pb2.ErrorCode, message: str, field: str = "", **metadata: str) -> common_pb2.ErrorDetail:
    """Build an ``ErrorDetail``."""
    return common_pb2.ErrorDetail(code=code, field=field, message=message, metadata=metadata)


def abort(context: Any, detail: common_pb2.ErrorDetail) -> None:
    """Abort a server call (sync or asyncio context) with ``detail``; never returns normally.

    For the asyncio server, ``await`` the returned coroutine: ``await abort(ctx, detail)``.
    """
    context.set_trailing_metadata(((ERROR_METADATA_KEY, detail.SerializeToString()),))
    text = f"{detail.field}: {detail.message}" if detail.field else detail.message
    return context.abort(status_code_of(detail.code), text)  # type: ignore[no-any-return]


def error_detail_of(err: grpc.RpcError) -> common_pb2.ErrorDetail:
    """The ``ErrorDetail`` a server attached to a failed call, or one derived from the status."""
    trailing = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == ERROR_METADATA_KEY:
            return common_pb2.ErrorDetail.FromString(value)
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    return common_pb2.ErrorDetail(
        code=_FROM_STATUS.get(code, common_pb2.ERROR_CODE_INTERNAL), message=details or str(code)
    )
