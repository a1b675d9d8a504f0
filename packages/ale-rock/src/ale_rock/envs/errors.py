"""Typed environment errors: plain Python on both sides of the wire.

The server maps each class to an ``ErrorCode`` (and its gRPC status); the client maps the code
back to the same class, so trainer code catches :class:`SandboxLost` whether the environment ran
in-process or behind the EnvService.
"""

from __future__ import annotations

from ale_proto.v1 import common_pb2


class EnvError(Exception):
    """Base of every environment error; ``code`` is an ``ale.v1.ErrorCode`` value."""

    code: int = common_pb2.ERROR_CODE_INTERNAL

    def __init__(self, message: str, field: str = "", **metadata: str) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.metadata = metadata


class EnvNotFound(EnvError):
    """Unknown environment id or handle."""

    code = common_pb2.ERROR_CODE_NOT_FOUND


class InvalidAction(EnvError):
    """A request field is invalid (oversize action, bad kwargs)."""

    code = common_pb2.ERROR_CODE_INVALID_ARGUMENT


class EpisodeNotActive(EnvError):
    """Step before reset or after the episode ended."""

    code = common_pb2.ERROR_CODE_FAILED_PRECONDITION


class EnvDeadlineExceeded(EnvError):
    """A step timed out or the episode's wall-clock budget ran out (the env was reclaimed)."""

    code = common_pb2.ERROR_CODE_DEADLINE_EXCEEDED


class SandboxLost(EnvError):
    """The sandbox holding the environment died; resample the episode elsewhere."""

    code = common_pb2.ERROR_CODE_LOST


class EnvUnavailable(EnvError):
    """The service or a dependency is down; retrying later may work."""

    code = common_pb2.ERROR_CODE_UNAVAILABLE


class CapacityExceeded(EnvError):
    """The server holds its maximum number of environments."""

    code = common_pb2.ERROR_CODE_RESOURCE_EXHAUSTED


_BY_CODE: dict[int, type[EnvError]] = {
    cls.code: cls
    for cls in (
        EnvNotFound,
        InvalidAction,
        EpisodeNotActive,
        EnvDeadlineExceeded,
        SandboxLost,
        EnvUnavailable,
        CapacityExceeded,
    )
}


def error_class(code: int) -> type[EnvError]:
    """The exception class for an ``ErrorCode`` (``EnvError`` for codes without their own)."""
    return _BY_CODE.get(code, EnvError)
