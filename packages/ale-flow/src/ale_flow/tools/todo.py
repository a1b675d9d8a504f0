"""todo and save_memory: external memory the agent keeps in files, re-read every step."""

from __future__ import annotations

import json
from typing import Any

from ale_flow.tools.base import FunctionTool, ToolContext, ToolError, obj
from ale_flow.workspace import Workspace

STATUSES = ["pending", "in_progress", "done"]


def todo_path(state_dir: str) -> str:
    return f"{state_dir}/todo.json"


def memory_path(state_dir: str) -> str:
    return f"{state_dir}/memory.md"


def load_todos(ws: Workspace, state_dir: str) -> list[dict[str, str]]:
    try:
        data = json.loads(ws.read_bytes(todo_path(state_dir)))
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    return [t for t in data if isinstance(t, dict)] if isinstance(data, list) else []


def render_todos(todos: list[dict[str, str]]) -> str:
    mark = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}
    return "\n".join(f"{i + 1}. {mark.get(t.get('status', ''), '[ ]')} {t.get('content', '')}" for i, t in enumerate(todos))


def todo(args: dict[str, Any], ctx: ToolContext) -> str:
    todos = args["todos"]
    if sum(t["status"] == "in_progress" for t in todos) > 1:
        raise ToolError("at most one todo item may be in_progress")
    ctx.workspace.write_bytes(todo_path(ctx.state_dir), json.dumps(todos, indent=1).encode())
    return "Todo list saved:\n" + (render_todos(todos) or "(empty)")


def load_memory(ws: Workspace, state_dir: str) -> str:
    try:
        return ws.read_bytes(memory_path(state_dir)).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def save_memory(args: dict[str, Any], ctx: ToolContext) -> str:
    fact = " ".join(args["fact"].split())
    if not fact:
        raise ToolError("fact must not be empty")
    current = load_memory(ctx.workspace, ctx.state_dir)
    if f"- {fact}\n" not in current:
        ctx.workspace.write_bytes(memory_path(ctx.state_dir), (current + f"- {fact}\n").encode())
    return f"Remembered: {fact}"


def memory_tools() -> list[FunctionTool]:
    item = obj({"content": {"type": "string"}, "status": {"type": "string", "enum": STATUSES}}, ["content", "status"])
    return [
        FunctionTool(
            "todo",
            "Replace the persistent todo list (your plan). Keep one item in_progress; mark items done as you finish them.",
            obj({"todos": {"type": "array", "items": item}}, ["todos"]),
            todo,
        ),
        FunctionTool(
            "save_memory",
            "Save a key fact (one sentence) that must survive context compression.",
            obj({"fact": {"type": "string"}}, ["fact"]),
            save_memory,
        ),
    ]
