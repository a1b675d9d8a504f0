"""task: delegate a sub-task to a sub-agent with its own bounded context and tool list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ale_flow.tools.base import FunctionTool, ToolContext, ToolError, obj
from ale_flow.types import ToolResult

SubagentRunner = Callable[[str, "str | None"], tuple[str, str, int]]
"""(prompt, agent name) -> (final answer, stop reason, steps)."""


def task(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    runner: SubagentRunner | None = ctx.services.get("subagent")
    if runner is None:
        raise ToolError("sub-agents are not available here")
    final, reason, steps = runner(args["prompt"], args.get("agent"))
    text = f"[sub-agent {args.get('agent') or 'general'} finished: {reason} after {steps} steps]\n{final}"
    return ToolResult(text, is_error=reason != "completed")


def task_tool(agent_names: dict[str, str]) -> FunctionTool:
    desc = (
        "Delegate a self-contained sub-task to a sub-agent. It starts with a fresh context (it does not "
        "see this conversation), so put everything it needs in `prompt`. Returns its final summary."
    )
    if agent_names:
        desc += " Specialised agents: " + "; ".join(f"{n}: {d}" for n, d in sorted(agent_names.items()))
    props: dict[str, Any] = {"description": {"type": "string"}, "prompt": {"type": "string"}}
    props["agent"] = {"type": "string", "enum": sorted(agent_names)} if agent_names else {"type": "string"}
    return FunctionTool("task", desc, obj(props, ["prompt"]), task)
