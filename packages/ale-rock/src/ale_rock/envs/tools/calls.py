"""Parsing tool-call actions and the base class of tool-use environments.

An action is one tool call, in any of the shapes models produce:
``{"name": ..., "arguments": {...}}``, OpenAI's ``{"type": "function", "function": {...}}`` (with
``arguments`` as a JSON string), or Qwen's ``<tool_call>{...}</tool_call>`` around the JSON.
A malformed call is the model's mistake, not the server's: it becomes an error observation.
"""

from __future__ import annotations

import json
import re
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ale_rock.envs.core import Env, StepResult

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


class ToolCallError(ValueError):
    """The action is not a well-formed call of a known tool."""


@dataclass(frozen=True)
class ParsedCall:
    """A tool call: its name and its arguments object."""

    name: str
    arguments: dict[str, Any]


def parse_tool_call(action: str) -> ParsedCall:
    """Parse one tool call from an action string; raises :class:`ToolCallError`."""
    tagged = _TAGGED.findall(action)
    text = tagged[0] if tagged else action.strip()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ToolCallError(f"the action is not a JSON tool call: {e.msg} at char {e.pos}") from None
    if isinstance(obj, dict) and "tool_calls" in obj and obj["tool_calls"]:
        obj = obj["tool_calls"][0]
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ToolCallError('a tool call is an object {"name": ..., "arguments": {...}}')
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            raise ToolCallError(f"arguments are not valid JSON: {e.msg}") from None
    if not isinstance(args, dict):
        raise ToolCallError("arguments must be a JSON object")
    return ParsedCall(obj["name"], args)


def tool_schema(
    name: str, description: str, params: dict[str, str], required: list[str] | None = None
) -> dict:
    """An OpenAI function-tool schema with string/number parameters (``params``: name -> type)."""
    props = {k: {"type": t} for k, t in params.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required or list(params)},
        },
    }


class ToolEnv(Env):
    """Dispatches each parsed call to a ``tool_<name>`` method; ``submit`` ends the episode and
    :meth:`score` checks the final state. Errors from tools come back as observations."""

    max_turns: int = 30

    def __init__(self, max_turns: int = 30, seed: int | None = None) -> None:
        super().__init__(seed)
        self.max_turns = max_turns
        self.turn = 0

    @property
    def tools(self) -> list[dict[str, Any]]:
        return [*self.tool_schemas(), tool_schema("submit", "Finish the task; your work is checked.", {})]

    @abstractmethod
    def tool_schemas(self) -> list[dict[str, Any]]:
        """Schemas of the environment's tools (``submit`` is added automatically)."""

    @abstractmethod
    def score(self) -> tuple[float, dict[str, Any]]:
        """Reward of the current state and details for ``info``."""

    def _step(self, action: str) -> StepResult:
        self.turn += 1
        truncated = self.turn >= self.max_turns
        info: dict[str, Any] = {"turn": self.turn}
        try:
            call = parse_tool_call(action)
        except ToolCallError as e:
            info["error"] = "malformed_tool_call"
            return f"Error: {e}", 0.0, False, truncated, info
        info["tool"] = call.name
        if call.name == "submit":
            reward, details = self.score()
            info.update(details, success=reward >= 1.0)
            return f"Submitted. Score: {reward:.2f}", reward, True, False, info
        fn: Callable[..., str] | None = getattr(self, f"tool_{call.name}", None)
        if fn is None:
            info["error"] = "unknown_tool"
            return f"Error: unknown tool {call.name!r}", 0.0, False, truncated, info
        try:
            obs = fn(**call.arguments)
        except TypeError as e:
            info["error"] = "bad_arguments"
            obs = f"Error: bad arguments for {call.name}: {e}"
        except ToolFailure as e:
            info["error"] = "tool_failed"
            obs = f"Error: {e}"
        if truncated:
            reward, details = self.score()
            info.update(details, success=reward >= 1.0)
            return obs + "\n(turn limit reached)", reward, False, True, info
        return obs, 0.0, False, False, info


class ToolFailure(Exception):
    """A tool ran but failed (missing file, unknown invoice); shown to the model."""
