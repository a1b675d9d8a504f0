"""Hooks: user commands run at lifecycle events, with JSON on stdin.

The rule follows Claude Code's hooks. Exit code 2 blocks where blocking means something
(`BLOCKING_EVENTS`: PreToolUse: the tool call does not run; UserPromptSubmit: the prompt is
refused; Stop: the agent is told to continue; PostToolUse: stderr is added to the tool result)
and the hook's stderr is shown to the model. Every other failure never blocks, for every event:
a hook that cannot start, exits non-zero (a missing command is bash's 127), times out, or exits 2
on an event that cannot block (SessionStart, SessionEnd, PreCompress) is a `HookFailure`, which
the agent yields as a `HookFailed` event (the CLI prints a warning line). A built-in guard
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
BLOCKING_EVENTS = frozenset({"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop"})
"""Events where exit code 2 blocks; elsewhere it is a failure like any other non-zero exit."""


class HookSpec(BaseModel):
    """One hook command."""

    model_config = ConfigDict(extra="forbid")

    command: str
    """Shell command; receives the event as JSON on stdin."""
    matcher: str | None = None
    """Regex on the tool name (tool events only); None matches every tool."""
    timeout_s: float = 30.0
    """The hook is killed after this many seconds (and does not block)."""


@dataclass(frozen=True)
class HookFailure:
    """A hook that failed without blocking."""

    event: str
    command: str
    exit_code: int | None
    """None when the hook timed out or could not be started."""
    error: str
    """Why: the hook's stderr (or stdout; may be empty), "timed out after Ns", or the OS error."""

    def line(self) -> str:
        status = f"exited with {self.exit_code}" if self.exit_code is not None else "failed"
        return f"{self.event} hook {self.command!r} {status}" + (f": {self.error[:300]}" if self.error else "")


@dataclass
class HookOutcome:
    blocked: bool = False
    message: str = ""
    failures: list[HookFailure] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return [f.line() for f in self.failures]


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
            blocked, msg, failure = self._run_one(spec, {"hook_event_name": event, **payload})
            if failure is not None:
                out.failures.append(failure)
            if blocked:
                out.blocked = True
                out.message = msg
                break
        return out

    def _run_one(self, spec: HookSpec, payload: dict[str, Any]) -> tuple[bool, str, HookFailure | None]:
        event = str(payload["hook_event_name"])

        def failed(code: int | None, error: str) -> tuple[bool, str, HookFailure]:
            return False, "", HookFailure(event, spec.command, code, error)

        try:
            proc = subprocess.Popen(
                ["bash", "-c", spec.command],
                cwd=self.cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env={**os.environ, "ALE_HOOK_EVENT": event},
            )
        except OSError as e:  # no bash, or the workspace directory is gone
            return failed(None, f"could not start: {e}")
        try:
            stdout, stderr = proc.communicate(json.dumps(payload, default=str).encode(), timeout=spec.timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            return failed(None, f"timed out after {spec.timeout_s:g}s and was killed")
        except BrokenPipeError:
            stdout, stderr = b"", b""
            proc.wait()
        text = (stderr or stdout).decode("utf-8", errors="replace").strip()
        if proc.returncode == BLOCK_EXIT_CODE and event in BLOCKING_EVENTS:
            return True, text or f"blocked by hook {spec.command!r}", None
        if proc.returncode != 0:
            return failed(proc.returncode, text)
        return False, text, None
