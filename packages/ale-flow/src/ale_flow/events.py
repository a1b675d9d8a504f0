"""Events yielded by `Agent.run` — the same stream the CLI renders and services forward."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ale_flow.types import AgentStopReason, ToolCall, ToolResult, Usage


@dataclass(frozen=True)
class Event:
    """Base class; `kind` names the event on the wire."""

    kind: str = "event"


@dataclass(frozen=True)
class SessionStarted(Event):
    task: str = ""
    session_id: str = ""
    kind: str = "session_started"


@dataclass(frozen=True)
class AssistantMessage(Event):
    step: int = 0
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    kind: str = "assistant_message"


@dataclass(frozen=True)
class ToolStarted(Event):
    step: int = 0
    call: ToolCall | None = None
    kind: str = "tool_started"


@dataclass(frozen=True)
class ToolFinished(Event):
    step: int = 0
    call: ToolCall | None = None
    result: ToolResult | None = None
    kind: str = "tool_finished"


@dataclass(frozen=True)
class MalformedToolCall(Event):
    step: int = 0
    problems: tuple[str, ...] = ()
    kind: str = "malformed_tool_call"


@dataclass(frozen=True)
class Compressed(Event):
    before_tokens: int = 0
    after_tokens: int = 0
    lossy: bool = False
    kind: str = "compressed"


@dataclass(frozen=True)
class Reminder(Event):
    text: str = ""
    kind: str = "reminder"


@dataclass(frozen=True)
class Intervention(Event):
    """Loop or failure-streak detection spoke to the model."""

    text: str = ""
    kind: str = "intervention"


@dataclass(frozen=True)
class HookFailed(Event):
    """A hook failed without blocking (could not start, non-zero exit, timeout); the run goes on."""

    hook_event: str = ""
    command: str = ""
    exit_code: int | None = None
    """None when the hook timed out or could not be started."""
    error: str = ""
    kind: str = "hook_failed"


@dataclass(frozen=True)
class Stopped(Event):
    reason: AgentStopReason = AgentStopReason.COMPLETED
    final_message: str = ""
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    detail: str = ""
    kind: str = "stopped"


def event_to_dict(ev: Event) -> dict[str, Any]:
    """A JSON-friendly view of an event (for `--json` output and services)."""
    from dataclasses import asdict

    d = asdict(ev)
    if isinstance(ev, Stopped):
        d["reason"] = ev.reason.value
    return d
