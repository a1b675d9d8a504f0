"""Typed errors: the one exception hierarchy of ALE and its wire convention (common.proto ``ErrorDetail``).

A failing server aborts with the gRPC status code that matches the ``ErrorCode`` and puts the
serialized ``ErrorDetail`` in the trailing metadata under ``ale-error-bin``. Clients read it back
with :func:`error_detail_of`, so they can switch on the code and show the offending field.
"""

from __future__ import annotations

import enum
import errno
from collections.abc import Mapping
from typing import Any, ClassVar

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


def abort(context: Any, detail: common_pb2.ErrorDetail) -> Any:
    """Abort a server call (sync or asyncio context) with ``detail``; never returns normally.

    For the asyncio server, ``await`` the returned coroutine: ``await abort(ctx, detail)``.
    """
    context.set_trailing_metadata(((ERROR_METADATA_KEY, detail.SerializeToString()),))
    text = f"{detail.field}: {detail.message}" if detail.field else detail.message
    return context.abort(status_code_of(detail.code), text)


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


# -- the one exception hierarchy -------------------------------------------------------------------
# Every component raises these (Admin, worker, EnvService, SDK) and every client rebuilds them from
# the ``ErrorDetail`` of a failed call (:func:`error_from_rpc`), the way SWE-ReX ships exceptions:
# the server names the class in the detail, the client raises the same class, so ``except X`` works
# the same whether X was raised in-process or behind a gRPC call.


class ErrorCode(enum.IntEnum):
    """``ale.v1.ErrorCode`` as a Python enum (values are the wire numbers).

    A member also equals its name (``ErrorCode.NOT_FOUND == "NOT_FOUND"``): the SDK's ``.code``
    was that string before the hierarchy was unified, and code comparing with it keeps working.
    """

    UNSPECIFIED = common_pb2.ERROR_CODE_UNSPECIFIED
    INVALID_ARGUMENT = common_pb2.ERROR_CODE_INVALID_ARGUMENT
    NOT_FOUND = common_pb2.ERROR_CODE_NOT_FOUND
    ALREADY_EXISTS = common_pb2.ERROR_CODE_ALREADY_EXISTS
    UNAUTHENTICATED = common_pb2.ERROR_CODE_UNAUTHENTICATED
    PERMISSION_DENIED = common_pb2.ERROR_CODE_PERMISSION_DENIED
    RESOURCE_EXHAUSTED = common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED
    FAILED_PRECONDITION = common_pb2.ERROR_CODE_FAILED_PRECONDITION
    DEADLINE_EXCEEDED = common_pb2.ERROR_CODE_DEADLINE_EXCEEDED
    UNAVAILABLE = common_pb2.ERROR_CODE_UNAVAILABLE
    CANCELLED = common_pb2.ERROR_CODE_CANCELLED
    LOST = common_pb2.ERROR_CODE_LOST
    INTERNAL = common_pb2.ERROR_CODE_INTERNAL

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str) and not isinstance(other, enum.Enum):
            return self.name == other
        return int(self) == other

    __hash__ = enum.IntEnum.__hash__

    @classmethod
    def of(cls, code: int | str | enum.Enum) -> ErrorCode:
        """The member for a wire number, a name, or another enum with the same member names."""
        if isinstance(code, enum.Enum) and not isinstance(code, int):
            code = code.name
        if isinstance(code, str):
            return cls[code]
        try:
            return cls(int(code))
        except ValueError:
            return cls.INTERNAL


ERROR_TYPE_KEY = "error_type"
"""``ErrorDetail.metadata`` key naming the exception class the server raised (e.g. "FileNotFound")."""


class AleError(Exception):
    """Base of every ALE error: ``code`` (an :class:`ErrorCode`), ``field``, ``message``, ``metadata``.

    ``AleError(code, message, field=...)`` (a code first, as ``OSError(errno, ...)``) builds the
    class of that code, e.g. ``AleError(ErrorCode.NOT_FOUND, "gone")`` is a :class:`NotFound`; the
    code may be an :class:`ErrorCode`, its number, or its name followed by a message.
    Otherwise the arguments are ``(message, field="", metadata=None, **more_metadata)``.
    """

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL

    def __new__(cls, *args: Any, **kwargs: Any) -> AleError:
        if cls is AleError and _code_first(args):
            cls = class_for_code(ErrorCode.of(args[0]))
        return super().__new__(cls)

    def __init__(self, *args: Any, field: str = "", metadata: Mapping[str, str] | None = None, **extra: str) -> None:
        if _code_first(args):  # the class is the code's (see __new__)
            args = args[1:]
        message = str(args[0]) if args else ""
        if len(args) > 1:
            field = str(args[1])
        if len(args) > 2:
            metadata = args[2]
        super().__init__(f"{field}: {message}" if field else message)
        self.message = message
        self.field = field
        self.metadata: dict[str, str] = {**(metadata or {}), **extra}

    def __str__(self) -> str:  # not KeyError's repr() of the argument, for the subclasses that are one
        return str(self.args[0]) if self.args else ""

    @property
    def detail(self) -> common_pb2.ErrorDetail:
        """The ``ErrorDetail`` a server sends for this error (naming its class for the client)."""
        metadata = {k: str(v) for k, v in self.metadata.items()}
        return make_error(self.code, self.message, self.field, **{**metadata, ERROR_TYPE_KEY: type(self).__name__})  # type: ignore[arg-type]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.field, self.metadata))


def _code_first(args: tuple[Any, ...]) -> bool:
    """Whether arguments start with a code: an enum or number, or a code's name before a message."""
    if not args:
        return False
    first = args[0]
    if isinstance(first, (int, enum.Enum)):
        return True
    return isinstance(first, str) and len(args) > 1 and first in ErrorCode.__members__


def _rebuild(cls: type[AleError], message: str, field: str, metadata: dict[str, str]) -> AleError:
    return cls(message, field, metadata)


# One class per code (the class a client raises when the server names no more precise one) ...
class InvalidArgument(AleError):
    """A request field is invalid; ``field`` names it (e.g. "spec.resources.memory_bytes")."""

    code = ErrorCode.INVALID_ARGUMENT


class NotFound(AleError):
    """The object does not exist (or belongs to another namespace: the two are not told apart)."""

    code = ErrorCode.NOT_FOUND


class AlreadyExists(AleError):
    """The object already exists."""

    code = ErrorCode.ALREADY_EXISTS


class Unauthenticated(AleError):
    """Missing or unknown API key."""

    code = ErrorCode.UNAUTHENTICATED


class PermissionDenied(AleError):
    """Valid credentials without the right to this object."""

    code = ErrorCode.PERMISSION_DENIED


class ResourceExhausted(AleError):
    """A quota, the global concurrency cap or a server's capacity would be exceeded; ``quota`` names it."""

    code = ErrorCode.RESOURCE_EXHAUSTED

    @property
    def quota(self) -> str:
        return self.metadata.get("quota", "")


class FailedPrecondition(AleError):
    """The object is not in a state that allows the operation (a stopped sandbox, an ended episode)."""

    code = ErrorCode.FAILED_PRECONDITION


class DeadlineExceeded(AleError):
    """The call's timeout (or an episode's budget) expired."""

    code = ErrorCode.DEADLINE_EXCEEDED


class Unavailable(AleError):
    """A service or a dependency cannot be reached now; retrying later may work."""

    code = ErrorCode.UNAVAILABLE


class SandboxLost(Unavailable):
    """The sandbox (or its worker) died; its work is gone: resample it elsewhere.

    An :class:`Unavailable` (retrying elsewhere may work) with its own code, ``LOST``.
    """

    code = ErrorCode.LOST


class Cancelled(AleError):
    """The call was cancelled."""

    code = ErrorCode.CANCELLED


class InternalError(AleError):
    """A server-side bug or unexpected failure."""

    code = ErrorCode.INTERNAL


# ... and the refinements a server (or the client itself) names more precisely.
class SandboxNotFound(NotFound, KeyError):
    """The sandbox (or one of its sessions) does not exist in the caller's namespace.

    Also a ``KeyError``: a backend's "unknown sandbox id" (see ``ale_rock.backends.base``).
    """


class FileNotFound(NotFound, FileNotFoundError):
    """A path inside a running sandbox does not exist; the sandbox does.

    Also a ``FileNotFoundError``, so ``except FileNotFoundError`` works as for local files. Not a
    :class:`SandboxNotFound`: code that treats that as "the sandbox is gone" must not see it.
    """

    def __init__(self, *args: Any, field: str = "", metadata: Mapping[str, str] | None = None, **extra: str) -> None:
        AleError.__init__(self, *args, field=field, metadata=metadata, **extra)
        self.errno = errno.ENOENT
        self.strerror = self.message
        self.filename = self.field or None


class EnvNotFound(NotFound):
    """Unknown environment id or handle."""


class InvalidAction(InvalidArgument):
    """An environment request field is invalid (oversize action, bad kwargs)."""


class EpisodeNotActive(FailedPrecondition):
    """A step before reset or after the episode ended."""


class EnvDeadlineExceeded(DeadlineExceeded):
    """A step timed out or the episode's wall-clock budget ran out (the environment was reclaimed)."""


class EnvUnavailable(Unavailable):
    """The environment service or a dependency is down; retrying later may work."""


class CapacityExceeded(ResourceExhausted):
    """The environment server holds its maximum number of environments."""


class SandboxStartFailed(FailedPrecondition):
    """The sandbox reached FAILED instead of RUNNING (raised by the SDK's ``create``)."""


class ChecksumMismatch(InternalError):
    """A transferred file's SHA-256 (or size) does not match what was sent (raised by the SDK)."""


_PER_CODE: dict[ErrorCode, type[AleError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument, NotFound, AlreadyExists, Unauthenticated, PermissionDenied, ResourceExhausted,
        FailedPrecondition, DeadlineExceeded, Unavailable, SandboxLost, Cancelled, InternalError,
    )
}
_BY_NAME: dict[str, type[AleError]] = {
    cls.__name__: cls
    for cls in (
        *_PER_CODE.values(), SandboxNotFound, FileNotFound, SandboxStartFailed, ChecksumMismatch,
        EnvNotFound, InvalidAction, EpisodeNotActive, EnvDeadlineExceeded, EnvUnavailable, CapacityExceeded,
    )
}

PATH_FIELDS = frozenset({"path", "header.path", "remote_path", "cwd", "spec.cwd"})
"""Fields of file calls: a NOT_FOUND naming one of them is about a file, not the sandbox (for
servers, like the Rocklet, that send the code and the field but no class name)."""


def class_for_code(code: int | str | enum.Enum) -> type[AleError]:
    """The class of an ``ErrorCode`` (:class:`InternalError` for unknown codes)."""
    return _PER_CODE.get(ErrorCode.of(code), InternalError)


def error_from_detail(detail: common_pb2.ErrorDetail) -> AleError:
    """Rebuild the exception a server sent: the class it named if that fits the code, else the
    code's class (a NOT_FOUND naming a path field is a :class:`FileNotFound`)."""
    code = ErrorCode.of(detail.code)
    metadata = dict(detail.metadata)
    named = _BY_NAME.get(metadata.pop(ERROR_TYPE_KEY, ""))
    base = class_for_code(code)
    cls = named if named is not None and issubclass(named, base) else base
    if cls is NotFound and detail.field in PATH_FIELDS:
        cls = FileNotFound
    return cls(detail.message, detail.field, metadata)


def has_error_detail(err: grpc.RpcError) -> bool:
    """Whether the server attached an ``ErrorDetail`` (False: the transport itself failed)."""
    trailing = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    return any(k == ERROR_METADATA_KEY for k, _ in trailing or ())


def error_from_rpc(err: grpc.RpcError) -> AleError:
    """The typed exception for a failed call (see :func:`error_from_detail`)."""
    return error_from_detail(error_detail_of(err))


def abort_with(context: Any, error: AleError) -> Any:
    """Abort a server call with ``error`` (for the asyncio server, ``await`` the result)."""
    return abort(context, error.detail)
