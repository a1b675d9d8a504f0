"""Context compression: lossless first (offload large outputs, collapse duplicates), then a lossy
summary of older turns. The most recent turns stay verbatim and cuts fall only between turns.

The task message is pinned and never touched; the todo list and saved facts live in files that
the context builder re-reads every step, so a compressed history still carries all three.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from ale_flow.types import Message
from ale_flow.workspace import Workspace

SUMMARY_PREFIX = "[Summary of earlier work, written during context compression]"


class CompressionConfig(BaseModel):
    """When and how history is compressed."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Turn compression off entirely (the run stops at the window instead)."""
    threshold: float = 0.6
    """Compress when the estimated prompt passes this fraction of the context window."""
    keep_recent_fraction: float = 0.3
    """Fraction of the window kept verbatim at the end of the history."""
    keep_recent_turns: int = 4
    """At least this many recent turns are always kept verbatim."""
    offload_chars: int = 4000
    """Tool outputs longer than this (outside the recent turns) are moved to files."""
    preview_chars: int = 800
    """How much of an offloaded output stays inline as a preview."""


def estimate_tokens(messages: list[Message]) -> int:
    """Cheap token estimate (≈4 characters per token) that needs no tokenizer."""
    n = 0
    for m in messages:
        n += len(m.content) // 4 + 4
        for c in m.tool_calls:
            n += (len(c.name) + len(str(c.arguments))) // 4 + 4
    return n


@dataclass
class CompressionResult:
    history: list[Message]
    before_tokens: int
    after_tokens: int
    pruned_turns: set[int] = field(default_factory=set)
    """Turns whose content was dropped or replaced (marked irrelevant in the trajectory)."""
    lossy: bool = False
    offloaded_files: list[str] = field(default_factory=list)


Summarizer = Callable[[list[Message]], str]


def _turn_order(history: list[Message]) -> list[int]:
    seen: list[int] = []
    for m in history:
        if not m.pinned and (not seen or seen[-1] != m.turn):
            seen.append(m.turn)
    return seen


def _recent_turns(history: list[Message], cfg: CompressionConfig, window: int) -> set[int]:
    """Turns kept verbatim: the last `keep_recent_fraction` of the window, at least `keep_recent_turns`."""
    order = _turn_order(history)
    budget = int(window * cfg.keep_recent_fraction)
    by_turn: dict[int, list[Message]] = {}
    for m in history:
        by_turn.setdefault(m.turn, []).append(m)
    keep: list[int] = []
    used = 0
    for t in reversed(order):
        cost = estimate_tokens(by_turn[t])
        if len(keep) >= cfg.keep_recent_turns and used + cost > budget:
            break
        keep.append(t)
        used += cost
    return set(keep)


def lossless(history: list[Message], cfg: CompressionConfig, ws: Workspace, state_dir: str, recent: set[int]) -> CompressionResult:
    """Offload large old tool outputs to files and collapse duplicate outputs (keep the latest)."""
    before = estimate_tokens(history)
    out: list[Message] = []
    pruned: set[int] = set()
    files: list[str] = []
    latest_by_hash: dict[str, int] = {}
    for i, m in enumerate(history):
        if m.role == "tool":
            latest_by_hash[hashlib.sha1(m.content.encode()).hexdigest()] = i
    for i, m in enumerate(history):
        if m.role != "tool" or m.turn in recent or m.pinned:
            out.append(m)
            continue
        h = hashlib.sha1(m.content.encode()).hexdigest()
        if latest_by_hash[h] != i and len(m.content) > 200:
            later = history[latest_by_hash[h]]
            out.append(_replace(m, f"[duplicate output collapsed: identical to the later result of {later.name} ({later.tool_call_id})]"))
            pruned.add(m.turn)
        elif len(m.content) > cfg.offload_chars:
            path = f"{state_dir}/outputs/{m.tool_call_id or i}.txt"
            ws.write_bytes(path, m.content.encode())
            files.append(path)
            p = cfg.preview_chars
            out.append(_replace(m, f"{m.content[:p]}\n[... output of {len(m.content)} characters saved to {path}; read it with read_file ...]\n{m.content[-p // 2:]}"))
        else:
            out.append(m)
    return CompressionResult(out, before, estimate_tokens(out), pruned, False, files)


def _replace(m: Message, content: str) -> Message:
    return Message(m.role, content, m.tool_calls, m.tool_call_id, m.name, m.turn, m.pinned)


def lossy(history: list[Message], recent: set[int], summarize: Summarizer) -> tuple[list[Message], set[int]]:
    """Replace every non-pinned, non-recent turn with one model-written summary message."""
    old = [m for m in history if not m.pinned and m.turn not in recent]
    if not old:
        return history, set()
    summary = summarize(old).strip() or "(no summary)"
    first_recent = next((i for i, m in enumerate(history) if not m.pinned and m.turn in recent), len(history))
    pinned = [m for m in history if m.pinned]
    turn = min(m.turn for m in old)
    kept = [m for m in history[first_recent:] if not m.pinned]
    summary_msg = Message("user", f"{SUMMARY_PREFIX}\n{summary}", turn=turn)
    return pinned + [summary_msg] + kept, {m.turn for m in old}


def mechanical_summary(old: list[Message]) -> str:
    """A summary that needs no model: the actions taken and whether they failed."""
    lines = []
    for m in old:
        for c in m.tool_calls:
            lines.append(f"- called {c.name}({str(c.arguments)[:120]})")
        if m.role == "assistant" and m.content and not m.tool_calls:
            lines.append(f"- said: {m.content[:200]}")
        if m.role == "tool" and m.content.startswith("Error"):
            lines.append(f"  -> failed: {m.content[:160]}")
    return "\n".join(lines[-200:])


def compress(
    history: list[Message],
    cfg: CompressionConfig,
    window: int,
    ws: Workspace,
    state_dir: str,
    summarize: Summarizer | None = None,
    force: bool = False,
) -> CompressionResult | None:
    """Compress when over the threshold (or `force`); None when nothing needed doing."""
    before = estimate_tokens(history)
    limit = int(window * cfg.threshold)
    if not force and before <= limit:
        return None
    recent = _recent_turns(history, cfg, window)
    res = lossless(history, cfg, ws, state_dir, recent)
    if res.after_tokens > limit or force:
        new_hist, summarized = lossy(res.history, recent, summarize or mechanical_summary)
        if summarized:
            res = CompressionResult(new_hist, before, estimate_tokens(new_hist), res.pruned_turns | summarized, True, res.offloaded_files)
    res.before_tokens = before
    return res
