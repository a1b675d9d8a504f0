"""Built-in tools and the aggregation layer."""

from __future__ import annotations

from ale_flow.tools.base import FunctionTool, Tool, ToolContext, ToolError, ToolRegistry, obj, validate
from ale_flow.tools.files import file_tools
from ale_flow.tools.shell import shell_tool
from ale_flow.tools.todo import memory_tools
from ale_flow.tools.web import web_fetch_tool


def builtin_tools(allow_network: bool = False) -> list[Tool]:
    """shell, file tools, todo, save_memory (+ web_fetch when network is allowed). `task` is added by the agent."""
    tools: list[Tool] = [shell_tool(), *file_tools(), *memory_tools()]
    if allow_network:
        tools.append(web_fetch_tool())
    return tools


__all__ = ["FunctionTool", "Tool", "ToolContext", "ToolError", "ToolRegistry", "builtin_tools", "obj", "validate"]
