"""Plain-Python request/result types of the Rocklet engines (the servicer maps them to protobuf)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""Client-chosen exec and session ids."""

MAX_COMMAND_BYTES = 1 << 20
"""Longest command line (or argv total) accepted; bigger ones are an INVALID_ARGUMENT."""

DEFAULT_MAX_OUTPUT = 1 << 20
"""Default cap on returned bytes per stream."""


class RockletError(Exception):
    """A request the engines refuse; the servicer turns it into a typed gRPC error."""

    def __init__(self, kind: str, message: str, field: str = "", **metadata: str) -> None:
        super().__init__(message)
        self.kind = kind
        """One of "invalid", "not_found", "exists", "busy", "exhausted", "internal"."""
        self.message = message
        self.field = field
        self.metadata = metadata
        """Sent in the ErrorDetail, e.g. ``errno="EISDIR"`` for an OS error on a path."""


class EndReason(enum.IntEnum):
    """How a command ended; values equal the contract's ExecEndReason numbers."""

    EXITED = 1
    SIGNALED = 2
    TIMEOUT = 3
    IDLE_TIMEOUT = 4
    INTERRUPTED = 5
    BACKGROUND = 6
    START_FAILED = 7


@dataclass
class ExecRequest:
    """A command to run (see ExecSpec in sandbox.proto)."""

    command: str = ""
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    timeout_ms: int = 0
    idle_timeout_ms: int = 0
    max_output_bytes: int = 0
    stdin: bytes = b""
    background: bool = False
    exec_id: str = ""


@dataclass
class ExecOutcome:
    """The Rocklet's result of a command, server side (see ExecResult in sandbox.proto); clients
    get it as ``ale_rock.sdk.types.ExecResult``."""

    end_reason: EndReason
    exit_code: int = 0
    signal: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_spill_path: str = ""
    stderr_spill_path: str = ""
    duration_s: float = 0.0
    pid: int = 0
    exec_id: str = ""
    error: str = ""
    stdout_total_bytes: int = 0
    stderr_total_bytes: int = 0
    spill_truncated: bool = False
    oom_killed: bool = False


def check_id(value: str, field_name: str) -> None:
    """Refuse a malformed client-chosen id."""
    if value and not ID_PATTERN.match(value):
        raise RockletError("invalid", f"must match {ID_PATTERN.pattern}", field_name)
