"""The shell tool: one persistent bash per agent, one round trip per command.

The bash is a `ShellSession` of the workspace: a pty bash on this machine, a Rocklet session in
an ale-rock sandbox (one `RunInSession` RPC per call). `cd` and `export` persist in the shell
itself. Both sides receive the same script (built here) and return the terminal's bytes, so the
tool's text is the same in training and locally:

- stdout and stderr are merged (`2>&1`) in the order they were written; stdin is /dev/null;
- the command is passed as data (`eval` of a quoted string typed in short lines, control
  characters escaped), so any text - heredocs, quotes, long lines, a syntax error - is run or
  reported by bash exactly as `bash -c` would, never mangled by the terminal's line editing;
- after it, a trailer prints the exit status and the working directory (parsed off here);
- a timeout interrupts the command (Ctrl-C, then SIGKILL of its job), and a second call kills
  the background jobs that command started; the session stays usable and the result says so;
- `exit N` ends the shell: its EXIT trap saves the exported variables, and the next call opens a
  new session in the same directory with them restored.

Workspaces without `open_shell` (third-party ones) get the former file-based emulation over
`Workspace.exec`.
"""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import dataclass
from typing import Any

from ale_flow.shell_session import SessionRun, ShellHost, ShellSession
from ale_flow.tools.base import FunctionTool, ToolContext, obj
from ale_flow.types import ToolResult

MAX_OUTPUT_CHARS = 30_000
DEFAULT_TIMEOUT_S = 120.0
MAX_SESSION_OUTPUT = 1 << 20
"""Bytes of terminal output kept per command (the head), the same cap on both sides."""
_CHUNK_BYTES = 900
"""Raw command bytes per typed line; quoted, a line stays far below the tty's 4095-byte limit."""
_TRAILER = re.compile(rb"\x1eALE(FLOW|EXIT):(-?\d+):([^\x1e]*)\x1e")
_SERVICE = "shell_session"


def truncate_middle(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n[... {len(text) - limit} characters omitted ...]\n" + text[-half:]


def _sq(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _quote(text: str) -> str:
    """A bash word for `text` with no terminal control character left raw (CR, ^C, ^D, DEL...)."""
    parts: list[str] = []
    plain: list[str] = []
    for ch in text:
        o = ord(ch)
        if (o < 0x20 and ch not in "\n\t") or o == 0x7F:
            if plain:
                parts.append(_sq("".join(plain)))
                plain = []
            parts.append(f"$'\\x{o:02x}'")
        else:
            plain.append(ch)
    if plain or not parts:
        parts.append(_sq("".join(plain)))
    return "".join(parts)


def _chunks(text: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for ch in text:
        n = len(ch.encode())
        if size + n > _CHUNK_BYTES and cur:
            out.append("".join(cur))
            cur, size = [], 0
        cur.append(ch)
        size += n
    out.append("".join(cur))
    return out


def command_script(command: str) -> str:
    """The lines typed for one command: store it, run it merged and stdin-less, print the trailer."""
    lines = [f"__ale_c{'+' if i else ''}={_quote(c)}" for i, c in enumerate(_chunks(command))]
    lines.append(
        'jobs -p >"$__ale_jf" 2>/dev/null; { eval "$__ale_c"; } </dev/null 2>&1; __ale_rc=$?; unset __ale_c; '
        "printf '\\036ALEFLOW:%d:%s\\036' \"$__ale_rc\" \"$PWD\"; __ale_ret \"$__ale_rc\""
    )
    return "\n".join(lines)


def _init_script(tag: str, restore: State | None) -> str:
    q = shlex.quote
    lines = [
        "set +H; export PAGER=cat GIT_PAGER=cat; __ale_ret() { return \"$1\"; }",
        f"__ale_jf=/tmp/.ale-flow-{tag}.jobs; __ale_ef=/tmp/.ale-flow-{tag}.env",
        # On `exit`, report like a command and keep the exported variables for the next session.
        "trap 'printf \"\\036ALEEXIT:%d:%s\\036\" \"$?\" \"$PWD\"; export -p >\"$__ale_ef\" 2>/dev/null' EXIT",
    ]
    if restore is not None:
        lines.append(f"{{ [ -f {q(restore.env_file)} ] && . {q(restore.env_file)}; rm -f {q(restore.env_file)}; cd {q(restore.cwd)}; }} >/dev/null 2>&1")
    return "\n".join(lines)


_KILL_NEW_JOBS = (
    'for __ale_p in $(jobs -p); do grep -qx -- "$__ale_p" "$__ale_jf" 2>/dev/null || '
    '{ kill -9 -- -"$__ale_p"; disown "$__ale_p"; }; done >/dev/null 2>&1; '
    "printf '\\036ALEFLOW:0:%s\\036' \"$PWD\""
)


@dataclass
class State:
    """The agent's shell: its session and where to pick up if the shell exits."""

    session: ShellSession | None
    tag: str
    cwd: str
    env_file: str = ""
    fresh: bool = True


def _state(ctx: ToolContext) -> State:
    st = ctx.services.get(_SERVICE)
    if not isinstance(st, State):
        st = State(None, uuid.uuid4().hex[:12], ctx.workspace.root)
        ctx.services[_SERVICE] = st
    return st


def _run(ctx: ToolContext, st: State, script: str, timeout: float) -> SessionRun:
    """Run on the agent's session, opening (or reopening, after an exit) one as needed."""
    assert isinstance(ctx.workspace, ShellHost)
    # Where a reopened shell picks up: the last session's saved variables and cwd (kept across a
    # failed first try, whose own files would be empty).
    restore = None if st.fresh else State(None, st.tag, st.cwd, st.env_file)
    for attempt in (0, 1):
        full = script
        if st.session is None:
            tag = uuid.uuid4().hex[:12]
            full = _init_script(tag, restore) + "\n" + script
            st.session = ctx.workspace.open_shell()
            st.tag, st.env_file, st.fresh = tag, f"/tmp/.ale-flow-{tag}.env", False
        try:
            return st.session.run(full, timeout, MAX_SESSION_OUTPUT, ctx.cancel)
        except OSError:
            # The shell is gone (it exited past our trap, the sandbox restarted it): reopen once.
            st.session = None
            if attempt:
                raise
    raise AssertionError("unreachable")


def _relative(root: str, cwd: str) -> str:
    root = root.rstrip("/") or "/"
    if cwd == root:
        return "."
    if cwd.startswith(root.rstrip("/") + "/"):
        return cwd[len(root.rstrip("/")) + 1 :]
    return cwd


def session_shell(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    command = str(args["command"])
    timeout = float(args.get("timeout", DEFAULT_TIMEOUT_S))
    if "\0" in command:
        return ToolResult("the command contains a NUL byte", is_error=True)
    st = _state(ctx)
    res = _run(ctx, st, command_script(command), timeout)
    raw = res.output
    exited = False
    found = list(_TRAILER.finditer(raw))
    rc = res.exit_code
    if found:
        m = found[-1]
        kind, rc, cwd = m.group(1), int(m.group(2)), m.group(3).decode("utf-8", "replace")
        st.cwd = cwd
        exited = kind == b"EXIT"
        raw = raw[: m.start()] + raw[m.end() :]
        if exited and raw.endswith(b"exit\n"):
            raw = raw[: -len(b"exit\n")]  # interactive bash announces `exit`; bash -c does not
    if exited:
        st.session = None  # the next call opens a new one, restoring cwd and exported variables
    notes: list[str] = []
    if res.end != "exited" and st.session is not None:
        # Kill what the stopped command left in the background; it also reports the cwd.
        after = st.session.run(_KILL_NEW_JOBS, 10.0, 1 << 16)
        tail = list(_TRAILER.finditer(after.output))
        if tail:
            st.cwd = tail[-1].group(3).decode("utf-8", "replace")
    ctx.env.cwd = _relative(ctx.workspace.root, st.cwd)
    out = truncate_middle(raw.decode("utf-8", errors="replace"))
    if res.truncated:
        notes.append(f"[output over {MAX_SESSION_OUTPUT} bytes: only the first {MAX_SESSION_OUTPUT} were kept]")
    if res.end == "timeout":
        return ToolResult("\n".join([out, *notes, f"[command timed out after {timeout:g}s and was killed; the shell session is still usable]"]), is_error=True)
    if res.end == "interrupted":
        return ToolResult("\n".join([out, *notes, "[command interrupted]"]), is_error=True)
    if exited:
        notes.append("[the shell exited; the next command starts a new one in the same directory with the same exported variables]")
    if rc:
        notes.append(f"[exit code {rc}]")
    if not notes:
        return ToolResult(out or "[no output]")
    return ToolResult("\n".join([out, *notes]) if out else "\n".join(notes), is_error=rc != 0)


# -- fallback for workspaces without sessions -----------------------------------------------


def _wrap(command: str, state: str, cwd_file: str, start_dir: str) -> str:
    q = shlex.quote
    return (
        f"mkdir -p {q(state)}; "
        f"if [ -f {q(cwd_file)} ]; then cd \"$(cat {q(cwd_file)})\" 2>/dev/null || cd {q(start_dir)}; else cd {q(start_dir)}; fi; "
        f"[ -f {q(state)}/env.sh ] && source {q(state)}/env.sh >/dev/null 2>&1; "
        f"{{ {command}\n}} 2>&1; __ale_rc=$?; "
        f"export -p | grep -v -E '^declare -x (PWD|OLDPWD|SHLVL|_)=' > {q(state)}/env.sh; "
        f"pwd > {q(cwd_file)}; exit $__ale_rc"
    )


def exec_shell(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """cwd and exported variables saved to files after each command and restored before the next."""
    root = ctx.workspace.root.rstrip("/")
    state = f"{root}/{ctx.state_dir}/shell"
    cwd_file = f"{state}/cwd"
    timeout = float(args.get("timeout", DEFAULT_TIMEOUT_S))
    res = ctx.workspace.exec(_wrap(args["command"], state, cwd_file, root), timeout=timeout, cancel=ctx.cancel)
    try:
        ctx.env.cwd = _relative(root, ctx.workspace.read_bytes(cwd_file).decode().strip())
    except (FileNotFoundError, PermissionError):
        pass
    out = truncate_middle(res.output)
    if res.timed_out:
        return ToolResult(f"{out}\n[command timed out after {timeout:g}s and was killed]", is_error=True)
    if res.interrupted:
        return ToolResult(f"{out}\n[command interrupted]", is_error=True)
    text = f"{out}\n[exit code {res.exit_code}]" if res.exit_code else (out or "[no output]")
    return ToolResult(text, is_error=res.exit_code != 0)


def shell(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    if isinstance(ctx.workspace, ShellHost):
        return session_shell(args, ctx)
    return exec_shell(args, ctx)


def shell_tool() -> FunctionTool:
    return FunctionTool(
        "shell",
        "Run a bash command in a persistent session (cwd and exported variables carry over). "
        "Output is stdout+stderr; long-running commands are killed after `timeout` seconds.",
        obj({"command": {"type": "string"}, "timeout": {"type": "number"}}, ["command"]),
        shell,
    )
