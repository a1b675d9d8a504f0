"""Plain data types shared by the loop, models, tools and recorders (no protobuf here)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any


class AgentStopReason(str, enum.Enum):
    """Why an agent run ended (the contract's ``AgentStopKind``, finer grained).

    Not the contract's ``StopReason`` (ale-roll's ``StopReason``): that says why one model
    generation ended.
    """

    COMPLETED = "completed"
    """The model answered without calling a tool."""
    MAX_STEPS = "max_steps"
    MAX_TOKENS = "max_tokens"
    MAX_COST = "max_cost"
    TIME_LIMIT = "time_limit"
    INTERRUPTED = "interrupted"
    LOOP_DETECTED = "loop_detected"
    FAILURE_STREAK = "failure_streak"
    MALFORMED_LIMIT = "malformed_limit"
    """Too many malformed or truncated tool calls in a row."""
    MODEL_ERROR = "model_error"
    """The model endpoint failed after all retries."""
    BLOCKED = "blocked"
    """A UserPromptSubmit hook refused the task."""


@dataclass
class ToolCall:
    """One tool invocation requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any]

    def signature(self) -> str:
        """A stable key for loop detection: name plus canonical arguments."""
        return self.name + ":" + json.dumps(self.arguments, sort_keys=True, default=str)


@dataclass
class Usage:
    """Token counts reported by the model endpoint."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


@dataclass
class Message:
    """One chat message in the agent's history.

    `turn` groups messages into turns (an assistant message plus the tool results it caused share
    a turn number); compression cuts only between turns.
    """

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    turn: int = 0
    pinned: bool = False
    """Pinned messages (the task) are never compressed away."""
    _wire: dict[bool, dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)

    def to_openai(self, native_tools: bool = True) -> dict[str, Any]:
        """The OpenAI chat-completions wire form of this message (cached: messages are never
        mutated after creation — compression replaces them — so each is serialized once)."""
        cached = self._wire.get(native_tools)
        if cached is None:
            cached = self._wire[native_tools] = self._to_openai(native_tools)
        return cached

    def _to_openai(self, native_tools: bool) -> dict[str, Any]:
        if not native_tools:
            # Text fallback: tool results become user messages, tool calls stay in the text.
            if self.role == "tool":
                return {"role": "user", "content": f"<tool_result name={self.name}>\n{self.content}\n</tool_result>"}
            return {"role": self.role, "content": self.content}
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in self.tool_calls
            ]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
            if self.name:
                out["name"] = self.name
        return out


@dataclass
class ModelResponse:
    """What one model call produced, after tool-call parsing."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    """Human-readable problems with tool calls that could not be parsed (sent back to the model)."""
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    completion_token_ids: list[int] = field(default_factory=list)
    completion_logprobs: list[float] = field(default_factory=list)


@dataclass
class ToolResult:
    """The outcome of one tool call, as shown to the model."""

    content: str
    is_error: bool = False
    blocked: bool = False
    """True when a hook, the guard or the mode refused the call (it never ran)."""
