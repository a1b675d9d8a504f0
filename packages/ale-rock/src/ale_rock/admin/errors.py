"""Plain-Python errors of the Admin; the servicer turns them into ``ErrorDetail`` aborts."""

from __future__ import annotations

from enum import Enum


class Code(str, Enum):
    """Error categories (mirror ``ale.v1.ErrorCode``)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    UNAVAILABLE = "UNAVAILABLE"
    LOST = "LOST"
    INTERNAL = "INTERNAL"


class AdminError(Exception):
    """A failure to report to the client with a code, an optional field and metadata."""

    def __init__(self, code: Code, message: str, field: str = "", **metadata: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.metadata = metadata


def invalid(field: str, message: str) -> AdminError:
    """An INVALID_ARGUMENT error naming ``field``."""
    return AdminError(Code.INVALID_ARGUMENT, message, field=field)


def not_found(sandbox_id: str) -> AdminError:
    """The sandbox does not exist or belongs to another namespace (indistinguishable on purpose)."""
    return AdminError(Code.NOT_FOUND, f"sandbox {sandbox_id} not found", field="sandbox_id")
