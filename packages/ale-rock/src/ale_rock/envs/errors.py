"""Environment errors: the one ALE hierarchy (:mod:`ale_proto.errors`) under the names env code uses.

The EnvService sends each error's ``ErrorDetail`` (its class named); the client rebuilds the same
class, so trainer code catches :class:`SandboxLost` whether the environment ran in-process or
behind the EnvService, and whether the sandbox SDK or the env layer noticed the loss. Each env
class refines its code's class (``InvalidAction`` is an ``InvalidArgument``...).
"""

from __future__ import annotations

from ale_proto.errors import (
    AleError,
    CapacityExceeded,
    EnvDeadlineExceeded,
    EnvNotFound,
    EnvUnavailable,
    EpisodeNotActive,
    InvalidAction,
    SandboxLost,
    class_for_code,
)

EnvError = AleError
"""Base of every environment error (the one base class)."""

__all__ = [
    "CapacityExceeded", "EnvDeadlineExceeded", "EnvError", "EnvNotFound", "EnvUnavailable", "EpisodeNotActive",
    "InvalidAction", "SandboxLost", "error_class",
]


def error_class(code: int) -> type[EnvError]:
    """The exception class for an ``ErrorCode`` (its code's class; the server names finer ones)."""
    return class_for_code(code)
