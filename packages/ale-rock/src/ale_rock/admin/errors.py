"""The Admin's errors: the one ALE hierarchy (:mod:`ale_proto.errors`); the servicer sends each
one's ``ErrorDetail`` (see ``admin/rpc.py``)."""

from __future__ import annotations

from ale_proto.errors import AleError, ErrorCode, InvalidArgument, SandboxNotFound

Code = ErrorCode
"""The error codes (``ale.v1.ErrorCode``)."""

AdminError = AleError
"""``AdminError(Code.X, message, field=...)`` builds the class of code X (as ``OSError(errno, ...)``
does); ``except AdminError`` catches every ALE error."""

__all__ = ["AdminError", "Code", "invalid", "not_found"]


def invalid(field: str, message: str) -> AleError:
    """An INVALID_ARGUMENT error naming ``field``."""
    return InvalidArgument(message, field)


def not_found(sandbox_id: str) -> AleError:
    """The sandbox does not exist or belongs to another namespace (indistinguishable on purpose)."""
    return SandboxNotFound(f"sandbox {sandbox_id} not found", "sandbox_id")
