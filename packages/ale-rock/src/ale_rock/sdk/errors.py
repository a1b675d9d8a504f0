"""Typed exceptions of the SDK, built from the server's ``ErrorDetail``."""

from __future__ import annotations

from typing import Any

import grpc
from ale_proto.errors import ERROR_METADATA_KEY, error_detail_of
from ale_proto.v1 import common_pb2


class SandboxError(Exception):
    """Base class: ``code`` (e.g. "NOT_FOUND"), ``field``, ``message`` and ``metadata``."""

    code = "INTERNAL"

    def __init__(self, message: str, field: str = "", metadata: dict[str, str] | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.message = message
        self.field = field
        self.metadata = dict(metadata or {})


class InvalidArgument(SandboxError):
    """A request field is invalid; ``field`` names it (e.g. "spec.resources.memory_bytes")."""

    code = "INVALID_ARGUMENT"


class SandboxNotFound(SandboxError):
    """The sandbox (or session, file…) does not exist or belongs to another namespace."""

    code = "NOT_FOUND"


class FileNotFound(SandboxError, FileNotFoundError):
    """A path inside a running sandbox does not exist (read, download, ls…); the sandbox does.

    Also a ``FileNotFoundError``, so ``except FileNotFoundError`` works as for local files. Not a
    :class:`SandboxNotFound`: code that treats that as "the sandbox is gone" must not see it.
    """

    code = "NOT_FOUND"


class AlreadyExists(SandboxError):
    """The object already exists."""

    code = "ALREADY_EXISTS"


class Unauthenticated(SandboxError):
    """Missing or unknown API key."""

    code = "UNAUTHENTICATED"


class PermissionDenied(SandboxError):
    """Valid credentials without the right to this object."""

    code = "PERMISSION_DENIED"


class QuotaExceeded(SandboxError):
    """A quota or the global concurrency cap would be exceeded; ``quota`` names it."""

    code = "RESOURCE_EXHAUSTED"

    @property
    def quota(self) -> str:
        return self.metadata.get("quota", "")


class FailedPrecondition(SandboxError):
    """The sandbox is not in a state that allows the operation (e.g. it is stopped)."""

    code = "FAILED_PRECONDITION"


class DeadlineExceeded(SandboxError):
    """The call's timeout expired."""

    code = "DEADLINE_EXCEEDED"


class Unavailable(SandboxError):
    """The admin, the worker or the sandbox cannot be reached now; retrying later may work."""

    code = "UNAVAILABLE"


class SandboxLost(Unavailable):
    """The sandbox's worker stopped heart-beating; the sandbox is gone."""

    code = "LOST"


class Cancelled(SandboxError):
    """The call was cancelled."""

    code = "CANCELLED"


class InternalError(SandboxError):
    """A server-side bug or unexpected failure."""

    code = "INTERNAL"


class SandboxStartFailed(SandboxError):
    """The sandbox reached FAILED instead of RUNNING."""

    code = "FAILED"


class ChecksumMismatch(SandboxError):
    """A transferred file's SHA-256 does not match."""

    code = "DATA_LOSS"


_BY_CODE: dict[int, type[SandboxError]] = {
    common_pb2.ERROR_CODE_INVALID_ARGUMENT: InvalidArgument,
    common_pb2.ERROR_CODE_NOT_FOUND: SandboxNotFound,
    common_pb2.ERROR_CODE_ALREADY_EXISTS: AlreadyExists,
    common_pb2.ERROR_CODE_UNAUTHENTICATED: Unauthenticated,
    common_pb2.ERROR_CODE_PERMISSION_DENIED: PermissionDenied,
    common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED: QuotaExceeded,
    common_pb2.ERROR_CODE_FAILED_PRECONDITION: FailedPrecondition,
    common_pb2.ERROR_CODE_DEADLINE_EXCEEDED: DeadlineExceeded,
    common_pb2.ERROR_CODE_UNAVAILABLE: Unavailable,
    common_pb2.ERROR_CODE_CANCELLED: Cancelled,
    common_pb2.ERROR_CODE_LOST: SandboxLost,
    common_pb2.ERROR_CODE_INTERNAL: InternalError,
}


_PATH_FIELDS = frozenset({"path", "header.path", "remote_path", "cwd", "spec.cwd"})
"""Fields of file calls: a NOT_FOUND naming one of them is about a file, not the sandbox."""


def from_rpc_error(err: grpc.RpcError, address: str = "") -> SandboxError:
    """The typed exception for a failed call."""
    detail = error_detail_of(err)
    code: Any = err.code() if hasattr(err, "code") else None
    has_detail = any(k == ERROR_METADATA_KEY for k, _ in (getattr(err, "trailing_metadata", lambda: ())() or ()))
    if not has_detail and code == grpc.StatusCode.UNAVAILABLE:
        return Unavailable(f"cannot reach the admin at {address or '?'}: {detail.message}")
    if not has_detail and code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceeded(f"the call timed out ({detail.message})")
    if not has_detail and code == grpc.StatusCode.CANCELLED:
        return Cancelled(detail.message or "cancelled")
    cls = _BY_CODE.get(detail.code, InternalError)
    if cls is SandboxNotFound and detail.field in _PATH_FIELDS:
        cls = FileNotFound
    return cls(detail.message, detail.field, dict(detail.metadata))
