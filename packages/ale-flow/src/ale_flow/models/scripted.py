"""A deterministic scripted model for tests, demos and dry runs (no LLM needed).

Each step pops the next scripted reply. A reply is a `Reply` (text and/or tool calls), a plain
string (text, no tools → the agent stops), or a callable that sees the messages and returns one
of those. When the script runs out, the model answers "done".

    >>> from ale_flow.models.scripted import ScriptedModel, Reply, call
    >>> m = ScriptedModel([Reply(calls=[call("write_file", path="a.txt", content="hi")]), "all done"])
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from ale_flow.context.builder import SUMMARY_SYSTEM
from ale_flow.models.textcalls import parse_text_calls
from ale_flow.types import ModelResponse, ToolCall, Usage


@dataclass
class Reply:
    """One scripted model turn."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    finish_reason: str = "stop"


Step = Union[Reply, str, Callable[[list[dict[str, Any]]], Union[Reply, str]]]
_counter = 0


def call(name: str, **arguments: Any) -> ToolCall:
    """A tool call with a fresh id."""
    global _counter
    _counter += 1
    return ToolCall(f"call_{_counter}", name, arguments)


class ScriptedModel:
    """`Model` that replays a script; records every prompt it was shown in `seen`."""

    def __init__(self, script: list[Step] | None = None, context_window: int = 32_000, repeat_last: bool = False) -> None:
        self.script = list(script or [])
        self.context_window = context_window
        self.repeat_last = repeat_last
        """Keep replaying the last step forever (to exercise loop detection and limits)."""
        self.name = "scripted"
        """What trajectories record as the model (`scripted:<path>` when loaded from a file)."""
        self.provider = "scripted"
        self.seen: list[list[dict[str, Any]]] = []
        self.tools_seen: list[list[str]] = []

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelResponse:
        if messages and str(messages[0].get("content", "")).startswith(SUMMARY_SYSTEM[:26]):
            # Compression asks for a summary: answer deterministically without using the script.
            body = str(messages[-1].get("content", ""))
            return ModelResponse("Scripted summary of earlier turns:\n" + body[:1500], usage=Usage(len(body) // 4, 100))
        self.seen.append(messages)
        self.tools_seen.append([t["function"]["name"] for t in tools])
        if self.script:
            step = self.script[0] if (self.repeat_last and len(self.script) == 1) else self.script.pop(0)
        else:
            step = "done"
        out = step(messages) if callable(step) else step
        if isinstance(out, str):
            # Strings may carry text-format tool calls, so one script format serves both modes.
            text, calls, problems = parse_text_calls(out)
            out = Reply(text, calls, problems)
        prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4
        completion = len(out.text) // 4 + sum(len(json.dumps(c.arguments)) for c in out.calls) // 4
        # Fresh ids per use so a repeated step still has unique call ids.
        calls = [ToolCall(call(c.name).id, c.name, dict(c.arguments)) for c in out.calls]
        return ModelResponse(out.text, calls, list(out.malformed), out.finish_reason, Usage(prompt_tokens, completion))
