"""The shell tool: a persistent session over `Workspace.exec`.

Each command runs in a fresh bash, but the session's working directory and exported variables
are saved to the workspace after every command and restored before the next one, so
`cd src && export X=1` carries over. This works on any workspace (local or sandbox) because it
only needs `exec`. Shell functions and unexported variables do not persist.
"""

from __future__ import annotations

import shlex
from typing import Any

from ale_flow.tools.base import FunctionTool, ToolContext, obj
from ale_flow.types import ToolResult

MAX_OUTPUT_CHARS = 30_000
DEFAULT_TIMEOUT_S = 120.0


def _wrap(command: str, state: str, cwd_file: str, start_dir: str) -> str:
    q = shlex.quote
    return (
        f"mkdir -p {q(state)}; "
        f"if [ -f {q(cwd_file)} ]; then cd \"$(cat {q(cwd_file)})\" 2>/dev/null || cd {q(start_dir)}; else cd {q(start_dir)}; fi; "
        f"[ -f {q(state)}/env.sh ] && source {q(state)}/env.sh >/dev/null 2>&1; "
        f"{{ {command}\n}}; __ale_rc=$?; "
        f"export -p | grep -v -E '^declare -x (PWD|OLDPWD|SHLVL|_)=' > {q(state)}/env.sh; "
        f"pwd > {q(cwd_file)}; exit $__ale_rc"
    )


def truncate_middle(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n[... {len(text) - limit} characters omitted ...]\n" + text[-half:]


def shell(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    root = ctx.workspace.root.rstrip("/")
    state = f"{root}/{ctx.state_dir}/shell"
    cwd_file = f"{state}/cwd"
    timeout = float(args.get("timeout", DEFAULT_TIMEOUT_S))
    res = ctx.workspace.exec(_wrap(args["command"], state, cwd_file, root), timeout=timeout, cancel=ctx.cancel)
    try:
        cwd_abs = ctx.workspace.read_bytes(cwd_file).decode().strip()
        if cwd_abs == root:
            ctx.env.cwd = "."
        elif cwd_abs.startswith(root + "/"):
            ctx.env.cwd = cwd_abs[len(root) + 1 :]
        else:
            ctx.env.cwd = cwd_abs
    except (FileNotFoundError, PermissionError):
        pass
    out = truncate_middle(res.output)
    if res.timed_out:
        return ToolResult(f"{out}\n[command timed out after {timeout:g}s and was killed]", is_error=True)
    if res.interrupted:
        return ToolResult(f"{out}\n[command interrupted]", is_error=True)
    text = f"{out}\n[exit code {res.exit_code}]" if res.exit_code else (out or "[no output]")
    return ToolResult(text, is_error=res.exit_code != 0)


def shell_tool() -> FunctionTool:
    return FunctionTool(
        "shell",
        "Run a bash command in a persistent session (cwd and exported variables carry over). "
        "Output is stdout+stderr; long-running commands are killed after `timeout` seconds.",
        obj({"command": {"type": "string"}, "timeout": {"type": "number"}}, ["command"]),
        shell,
    )
