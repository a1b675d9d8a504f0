"""Environment errors: the one ALE hierarchy (:mod:`ale_proto.errors`) under the names env code uses.

The EnvService sends each error's ``ErrorDetail`` (its class named); the client rebuilds the same
class, so trainer code catches :class:`SandboxLost` whether the environment ran in-process or
behind the EnvService, and whether the sandbox SDK or the env layer noticed the loss.
"""

from __future__ import annotations

from ale_proto.errors import (
    AleError,
    DeadlineExceeded,
    EnvNotFound,
    FailedPrecondition,
    InvalidArgument,
    ResourceExhausted,
    SandboxLost,
    Unavailable,
    class_for_code,
)

EnvError = AleError
"""Base of every environment error (the one base class)."""
InvalidAction = InvalidArgument
"""A request field is invalid (oversize action, bad kwargs)."""
EpisodeNotActive = FailedPrecondition
"""Step before reset or after the episode ended."""
EnvDeadlineExceeded = DeadlineExceeded
"""A step timed out or the episode's wall-clock budget ran out (the env was reclaimed)."""
EnvUnavailable = Unavailable
"""The service or a dependency is down; retrying later may work."""
CapacityExceeded = ResourceExhausted
"""The server holds its maximum number of environments."""

__all__ = [
    "CapacityExceeded", "EnvDeadlineExceeded", "EnvError", "EnvNotFound", "EnvUnavailable", "EpisodeNotActive",
    "InvalidAction", "SandboxLost", "error_class",
]


def error_class(code: int) -> type[EnvError]:
    """The exception class for an ``ErrorCode``."""
    return class_for_code(code)
