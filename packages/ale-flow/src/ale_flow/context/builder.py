"""Context assembly: system prompt + memory + key facts + todo + environment, then the history."""

from __future__ import annotations

from typing import Any

from ale_flow.types import Message

DEFAULT_SYSTEM_PROMPT = """You are ale-flow, a careful software agent working in a workspace through tools.
Work step by step: inspect before you change, keep a todo list for multi-step tasks, verify your work
(run tests or read the result), and save key facts with save_memory so they survive context compression.
When the task is done, reply with a short final answer and no tool call."""

MODE_NOTES = {
    "plan": "You are in PLAN mode: only read-only tools run. Investigate and reply with a plan.",
    "default": "Risky tools (shell, file changes) need the user's approval.",
    "accept-edits": "File edits are pre-approved; shell commands need the user's approval.",
    "yolo": "All tools are pre-approved.",
}

SUMMARY_SYSTEM = (
    "[ale-flow summary request] Summarize the conversation excerpt below for your own later use: "
    "what was done, what was found (paths, names, numbers, errors), what remains. Be concise and factual."
)


def system_prompt(
    base: str | None,
    mode: str,
    memory_files: list[tuple[str, str]],
    facts: str,
    todos: str,
    env: str,
) -> str:
    parts = [base or DEFAULT_SYSTEM_PROMPT, MODE_NOTES.get(mode, "")]
    for source, text in memory_files:
        parts.append(f"# Instructions from {source}\n{text.strip()}")
    if facts.strip():
        parts.append(f"# Key facts you saved\n{facts.strip()}")
    if todos.strip():
        parts.append(f"# Your todo list\n{todos.strip()}")
    parts.append(f"# Environment\n{env}")
    return "\n\n".join(p for p in parts if p)


def assemble(system: str, history: list[Message], native_tools: bool = True) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}] + [m.to_openai(native_tools) for m in history]


def render_for_summary(old: list[Message]) -> str:
    lines = []
    for m in old:
        if m.role == "assistant":
            calls = "; ".join(f"{c.name}({str(c.arguments)[:300]})" for c in m.tool_calls)
            lines.append(f"ASSISTANT: {m.content[:2000]}" + (f" [calls: {calls}]" if calls else ""))
        elif m.role == "tool":
            lines.append(f"TOOL {m.name}: {m.content[:2000]}")
        else:
            lines.append(f"{m.role.upper()}: {m.content[:2000]}")
    return "\n".join(lines)
