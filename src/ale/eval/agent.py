"""The agent of an episode: ale-flow's CLI, run unmodified inside the sandbox.

Sandboxes see the host's Python runtime read-only but not ale-flow's source tree, so ale-flow
travels into each sandbox as one zip (pure Python with its bytecode; zipimport runs it) next to the
task files. The command moves it out of the work dir first, so the agent (and the hidden tests)
never see it. Model calls go to ``$OPENAI_BASE_URL``, the episode's ModelProxy URL, through the
sandbox's egress gateway. After the agent exits, its trajectory JSONL is printed after a marker so
it comes back with the command's output.
"""

from __future__ import annotations

import functools
import io
import json
import shlex
import sys
import zipfile
from pathlib import Path
from typing import Any

AGENT_ZIP = ".ale_agent/ale_flow.zip"
"""Where the zip lands in the work dir (moved to /tmp before the agent starts)."""
TRAJECTORY_MARKER = "===ALE-FLOW-TRAJECTORY==="
_AGENT_DIR = "/tmp/.ale_agent"
_TRAJECTORY = "/tmp/.ale_agent/trajectory.jsonl"
_DOCKER_RUNTIME = "/opt/ale"
"""ale_rock.backends.docker_runtime.RUNTIME_ROOT (not imported: this module stays light)."""


@functools.lru_cache(maxsize=1)
def agent_zip() -> bytes:
    """ale-flow's package as a zip (built once per process)."""
    import ale_flow

    root = Path(ale_flow.__file__).parent
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(root.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
                name = f"ale_flow/{p.relative_to(root).as_posix()}"
                z.write(p, name)
                if p.suffix == ".py":
                    z.writestr(name + "c", _bytecode(p.read_bytes(), f"{_AGENT_DIR}/ale_flow.zip/{name}"))
    return buf.getvalue()


def _bytecode(source: bytes, filename: str) -> bytes:
    """``source`` compiled as an unchecked hash-based .pyc: zipimport loads it next to its .py
    without compiling (the sandbox may not write bytecode; compiling ale-flow on every agent start
    cost ~70 ms). Another Python version rejects its magic number and compiles the .py instead."""
    import importlib.util
    import marshal

    code = compile(source, filename, "exec", dont_inherit=True)
    flags = (0b01).to_bytes(4, "little")  # PEP 552: hash-based, not checked against the source
    return importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(source) + marshal.dumps(code)


def agent_command(
    prompt: str,
    *,
    max_turns: int,
    max_tokens: int,
    temperature: float,
    native_tools: bool,
    time_limit_s: float,
    settings: list[str] | None = None,
    python: str = sys.executable,
) -> str:
    """The shell command that runs ale-flow on ``prompt`` in the work dir (the agent's exit code is
    the command's). ``settings`` are ale-flow ``key=value`` overrides."""
    overrides = [
        f"model.max_tokens={max_tokens}",
        f"model.temperature={temperature}",
        "model.max_retries=1",
        f"limits.time_limit_s={time_limit_s:g}",
        *(settings or []),
    ]
    argv = [python, "-m", "ale_flow.cli", "-p", prompt, "--yolo", "--max-steps", str(max_turns),
            "--trajectory", _TRAJECTORY]  # fmt: skip
    if not native_tools:
        argv.append("--text-tools")
    for o in overrides:
        argv += ["-c", o]
    run = " ".join(['"$ALE_PY"', *(shlex.quote(a) for a in argv[1:])])
    return (
        f"mkdir -p {_AGENT_DIR} && mv {AGENT_ZIP} {_AGENT_DIR}/ && rmdir .ale_agent && "
        # No pydantic plugins: looking for them reads every installed package's metadata (~60 ms a start).
        f"export PYTHONPATH={_AGENT_DIR}/ale_flow.zip PYTHONDONTWRITEBYTECODE=1 PYDANTIC_DISABLE_PLUGINS=__all__ && "
        # bubblewrap sandboxes see the host's interpreter; a docker sandbox has the image's python3 and
        # the worker's site-packages read-only under /opt/ale (docker_runtime.RUNTIME_ROOT), ale-flow's deps too.
        f"ALE_PY={shlex.quote(python)}; if [ ! -x \"$ALE_PY\" ]; then ALE_PY=python3; "
        f"for d in {_DOCKER_RUNTIME}/p*; do PYTHONPATH=\"$PYTHONPATH:$d\"; done; fi; "
        # the agent's own stdout goes to stderr: stdout carries only the marker and the trajectory
        f'{run} --base-url "$OPENAI_BASE_URL" --model "$OPENAI_MODEL" 1>&2; rc=$?; '
        f"echo {TRAJECTORY_MARKER}; cat {_TRAJECTORY} 2>/dev/null; exit $rc"
    )


def split_output(output: str) -> tuple[list[dict[str, Any]], str]:
    """(the agent's trajectory lines, the rest of the output: the agent's log)."""
    head, sep, tail = output.partition(TRAJECTORY_MARKER + "\n")
    if not sep:
        return [], output
    lines: list[dict[str, Any]] = []
    rest: list[str] = []
    for line in tail.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            rest.append(line)
            continue
        if isinstance(rec, dict) and "type" in rec:
            lines.append(rec)
        else:
            rest.append(line)
    return lines, head + "\n".join(rest)


def stop_reason(trajectory: list[dict[str, Any]]) -> str:
    """How the agent's run ended (``"killed"`` when it wrote no end line)."""
    for rec in reversed(trajectory):
        if rec.get("type") == "end":
            return str(rec.get("stop_reason", ""))
    return "killed"
