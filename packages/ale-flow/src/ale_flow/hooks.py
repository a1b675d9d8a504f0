"""Hooks: user commands run at lifecycle events, with JSON on stdin.

Exit code 2 blocks (PreToolUse: the tool call does not run; UserPromptSubmit: the prompt is
refused; Stop: the agent is told to continue) and the hook's stderr is shown to the model.
Other non-zero exits and timeouts are reported as warnings and never block. A built-in guard
refuses destructive shell commands and file writes outside the workspace before any hook runs.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

HookEvent = Literal["PreToolUse", "PostToolUse", "UserPromptSubmit", "PreCompress", "Stop", "SessionStart", "SessionEnd"]
BLOCK_EXIT_CODE = 2


class HookSpec(BaseModel):
    """One hook command."""

    model_config = ConfigDict(extra="forbid")

    command: str
    """Shell command; receives the event as JSON on stdin."""
    matcher: str | None = None
    """Regex on the tool name (tool events only); None matches every tool."""
    timeout_s: float = 30.0
    """The hook is killed after this many seconds (and does not block)."""


@dataclass
class HookOutcome:
    blocked: bool = False
    message: str = ""
    warnings: list[str] = field(default_factory=list)


_DESTRUCTIVE = [
    re.compile(p)
    for p in [
        r"\brm\s+(-[a-zA-Z]*\s+)*-[a-zA-Z]*[rR][a-zA-Z]*\s+(-[a-zA-Z-]+\s+)*(/|/\*|~|~/|\$HOME|/\s*\*)(\s|$|;|&)",
        r"\brm\s+(-[a-zA-Z]*\s+)*--no-preserve-root",
        r"\bmkfs(\.\w+)?\b",
        r"\bdd\s+.*\bof=/dev/(sd|nvme|hd|xvd|vd)",
        r":\(\)\s*\{\s*:\|:&\s*\};:",
        r"\bchmod\s+-R\s+\d+\s+/(\s|$)",
        r">\s*/dev/(sd|nvme|hd)[a-z]",
    ]
]
_PATH_TOOLS = {"write_file", "edit", "multi_edit"}


def guard(tool: str, args: dict[str, Any], workspace_root: str) -> str | None:
    """The built-in PreToolUse check; returns a refusal message or None."""
    if tool == "shell":
        cmd = str(args.get("command", ""))
        for rx in _DESTRUCTIVE:
            if rx.search(cmd):
                return f"Blocked by the safety guard: {cmd[:200]!r} looks destructive (matches {rx.pattern!r})."
    if tool in _PATH_TOOLS and "path" in args:
        p = str(args["path"])
        root = workspace_root.rstrip("/")
        full = posixpath.normpath(p if p.startswith("/") else f"{root}/{p}")
        if full != root and not full.startswith(root + "/"):
            return f"Blocked by the safety guard: {p!r} is outside the workspace {root}."
    return None


class HookRunner:
    """Runs configured hooks; one instance per agent session."""

    def __init__(self, hooks: Mapping[str, list[HookSpec]], cwd: str, builtin_guard: bool = True) -> None:
        self.hooks = hooks
        self.cwd = cwd
        self.builtin_guard = builtin_guard

    def run(self, event: HookEvent, payload: dict[str, Any], tool: str | None = None) -> HookOutcome:
        out = HookOutcome()
        for spec in self.hooks.get(event, []):
            if tool is not None and spec.matcher and not re.search(spec.matcher, tool):
                continue
            blocked, msg, warn = self._run_one(spec, {"hook_event_name": event, **payload})
            if warn:
                out.warnings.append(warn)
            if blocked:
                out.blocked = True
                out.message = msg
                break
        return out

    def _run_one(self, spec: HookSpec, payload: dict[str, Any]) -> tuple[bool, str, str]:
        proc = subprocess.Popen(
            ["bash", "-c", spec.command],
            cwd=self.cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, "ALE_HOOK_EVENT": str(payload["hook_event_name"])},
        )
        try:
            stdout, stderr = proc.communicate(json.dumps(payload, default=str).encode(), timeout=spec.timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            return False, "", f"hook {spec.command!r} timed out after {spec.timeout_s:g}s and was killed"
        except BrokenPipeError:
            stdout, stderr = b"", b""
            proc.wait()
        text = (stderr or stdout).decode("utf-8", errors="replace").strip()
        if proc.returncode == BLOCK_EXIT_CODE:
            return True, text or f"blocked by hook {spec.command!r}", ""
        if proc.returncode != 0:
            return False, "", f"hook {spec.command!r} exited with {proc.returncode}: {text[:300]}"
        return False, text, ""
