"""Reminders: short notes injected when the environment changed behind the model's back."""

from __future__ import annotations

from dataclasses import dataclass, field

from ale_flow.tools.base import EnvState
from ale_flow.tools.files import digest
from ale_flow.tools.todo import render_todos
from ale_flow.workspace import Workspace

MAX_TRACKED_FILES = 50


@dataclass
class ReminderTracker:
    """Remembers what the model last saw (files, tool set, todo) and reports differences."""

    tool_names: list[str] | None = None
    todo_status: dict[str, str] = field(default_factory=dict)

    def check(self, ws: Workspace, env: EnvState, tool_names: list[str], todos: list[dict[str, str]]) -> list[str]:
        notes: list[str] = []
        for path in list(env.files_read)[-MAX_TRACKED_FILES:]:
            try:
                h = digest(ws.read_bytes(path))
            except (FileNotFoundError, IsADirectoryError, PermissionError):
                notes.append(f"{path} was deleted or became unreadable since you last accessed it.")
                env.files_read.pop(path, None)
                continue
            if h != env.files_read[path]:
                notes.append(f"{path} was modified outside your tools since you last read it; re-read it before editing.")
                env.files_read[path] = h
        if self.tool_names is not None and tool_names != self.tool_names:
            added = sorted(set(tool_names) - set(self.tool_names))
            removed = sorted(set(self.tool_names) - set(tool_names))
            notes.append(f"The available tools changed. Added: {added or 'none'}; removed: {removed or 'none'}.")
        self.tool_names = list(tool_names)
        status = {t.get("content", ""): t.get("status", "") for t in todos}
        newly_done = [c for c, s in status.items() if s == "done" and self.todo_status.get(c) not in (None, "done")]
        if newly_done:
            left = [t for t in todos if t.get("status") != "done"]
            if left:
                notes.append(f"Todo done: {'; '.join(newly_done)}. Remaining:\n{render_todos(left)}")
            else:
                notes.append("All todo items are done. If the task is complete, give your final answer without calling tools.")
        self.todo_status = status
        return notes


def env_summary(env: EnvState, limit: int = 20) -> str:
    """The environment block of the system prompt: cwd and files touched."""
    lines = [f"Shell working directory: {env.cwd}"]
    if env.files_written:
        written = sorted(env.files_written)
        lines.append("Files you changed: " + ", ".join(written[:limit]) + (" …" if len(written) > limit else ""))
    return "\n".join(lines)
