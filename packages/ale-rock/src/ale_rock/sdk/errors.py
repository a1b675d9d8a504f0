"""The SDK's exceptions: the one ALE hierarchy (:mod:`ale_proto.errors`), re-exported under the
names SDK users know, and rebuilt from a failed call's ``ErrorDetail`` by :func:`from_rpc_error`."""

from __future__ import annotations

from typing import Any

import grpc
from ale_proto.errors import (
    AleError,
    AlreadyExists,
    Cancelled,
    ChecksumMismatch,
    DeadlineExceeded,
    ErrorCode,
    FailedPrecondition,
    FileNotFound,
    InternalError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    SandboxLost,
    SandboxNotFound,
    SandboxStartFailed,
    Unauthenticated,
    Unavailable,
    error_detail_of,
    error_from_rpc,
    has_error_detail,
)

SandboxError = AleError
"""The SDK's name for the base class (``except SandboxError`` catches every SDK error)."""

QuotaExceeded = ResourceExhausted
"""The SDK's name for RESOURCE_EXHAUSTED (``.quota`` names the quota)."""

__all__ = [
    "AleError", "AlreadyExists", "Cancelled", "ChecksumMismatch", "DeadlineExceeded", "ErrorCode",
    "FailedPrecondition", "FileNotFound", "InternalError", "InvalidArgument", "NotFound", "PermissionDenied",
    "QuotaExceeded", "ResourceExhausted", "SandboxError", "SandboxLost", "SandboxNotFound", "SandboxStartFailed",
    "Unauthenticated", "Unavailable", "from_rpc_error",
]


def from_rpc_error(err: grpc.RpcError, address: str = "") -> AleError:
    """The typed exception for a failed call to the Admin.

    A status without an ``ErrorDetail`` is the transport's (the admin unreachable, the deadline hit
    on the client); a NOT_FOUND the server names no more precisely is, to the SDK, about the
    sandbox or one of its sessions (a missing file names a path field: :class:`FileNotFound`).
    """
    code: Any = err.code() if hasattr(err, "code") else None
    if not has_error_detail(err):
        message = error_detail_of(err).message
        if code == grpc.StatusCode.UNAVAILABLE:
            return Unavailable(f"cannot reach the admin at {address or '?'}: {message}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return DeadlineExceeded(f"the call timed out ({message})")
        if code == grpc.StatusCode.CANCELLED:
            return Cancelled(message or "cancelled")
    error = error_from_rpc(err)
    if type(error) is NotFound:
        return SandboxNotFound(error.message, error.field, error.metadata)
    return error
