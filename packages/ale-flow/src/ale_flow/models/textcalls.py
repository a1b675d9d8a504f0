"""The text fallback tool-call format, for models without native tool calling.

The model writes `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks in its reply.
Parsing never raises: unparseable or unterminated (truncated) blocks become `malformed` notes
that the loop reports back to the model.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from ale_flow.types import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(re.escape(OPEN) + r"(.*?)" + re.escape(CLOSE), re.S)


def tools_prompt(tools: list[dict[str, Any]]) -> str:
    """System-prompt section that teaches the text format."""
    lines = [
        "You can call tools. To call one, write exactly:",
        f'{OPEN}{{"name": "TOOL_NAME", "arguments": {{...}}}}{CLOSE}',
        "You may write several such blocks. Tool results come back in <tool_result> blocks.",
        "When the task is finished, reply without any tool call. Available tools:",
    ]
    for t in tools:
        f = t["function"]
        lines.append(f"- {f['name']}: {f['description']} Parameters (JSON schema): {json.dumps(f['parameters'])}")
    return "\n".join(lines)


def parse_arguments(raw: str | dict[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
    """Decode a tool call's arguments; returns (arguments, problem)."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    try:
        val = json.loads(raw)
    except json.JSONDecodeError as e:
        return None, f"arguments are not valid JSON ({e.msg} at char {e.pos}): {raw[:200]!r}"
    if not isinstance(val, dict):
        return None, f"arguments must be a JSON object, got {type(val).__name__}"
    return val, None


def parse_text_calls(text: str) -> tuple[str, list[ToolCall], list[str]]:
    """Split a reply into (prose, tool calls, problems)."""
    calls: list[ToolCall] = []
    problems: list[str] = []
    for m in _BLOCK.finditer(text):
        body = m.group(1).strip()
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as e:
            problems.append(f"tool call is not valid JSON ({e.msg}): {body[:200]!r}")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            problems.append(f"tool call needs a string 'name': {body[:200]!r}")
            continue
        args, problem = parse_arguments(obj.get("arguments", {}))
        if problem or args is None:
            problems.append(f"tool call {obj['name']}: {problem}")
            continue
        calls.append(ToolCall(f"call_{uuid.uuid4().hex[:12]}", obj["name"], args))
    rest = _BLOCK.sub("", text)
    if OPEN in rest:
        problems.append("tool call was cut off (no closing </tool_call>); the reply may have hit the length limit")
        rest = rest[: rest.index(OPEN)]
    return rest.strip(), calls, problems
