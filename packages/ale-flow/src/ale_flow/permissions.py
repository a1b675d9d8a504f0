"""Modes decide which tool calls need the user's approval."""

from __future__ import annotations

from collections.abc import Callable

from ale_flow.tools.base import Tool
from ale_flow.types import ToolCall

INTERNAL = {"todo", "save_memory", "task"}
"""Tools that only touch the agent's own state (sub-agents re-check their own calls)."""
EDIT_TOOLS = {"write_file", "edit", "multi_edit"}

Confirm = Callable[[ToolCall], bool]


def check(mode: str, tool: Tool, call: ToolCall, confirm: Confirm | None) -> str | None:
    """None when the call may run, else the refusal shown to the model."""
    if mode == "yolo" or tool.read_only or call.name in INTERNAL:
        return None
    if mode == "plan":
        return f"Refused: plan mode is read-only, {call.name} would change the environment. Describe the change in your plan instead."
    if mode == "accept-edits" and call.name in EDIT_TOOLS:
        return None
    if confirm is not None and confirm(call):
        return None
    how = "the user declined it" if confirm is not None else "no user is present to approve it"
    return f"Refused: {call.name} needs approval in {mode} mode and {how}. Use another approach or ask for yolo mode."
