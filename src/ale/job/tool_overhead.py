"""What a shell tool call in a sandbox costs beyond the command itself.

    tool_call_overhead(client)   # {"tool_call_overhead_p50_ms": ..., "sandbox_shell_tool_p50_ms": ..., ...}

A shell tool call (ale-flow's ``shell`` tool on a ``SandboxWorkspace``: one RPC SDK → Admin → Worker
→ the Rocklet's session) minus the same command run as a local subprocess (``bash -c``), both p50,
interleaved so both see the same load. ``bench/flow.py`` reports the same figure
(``sandbox_tool_overhead_p50_ms``); ``ale up``'s agent-native job measures it on its own stack.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from typing import Any


def subprocess_p50_ms(command: str, n: int) -> float:
    """The command as a plain local subprocess: what a tool call cannot avoid."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def shell_p50_ms(ws: Any, command: str, n: int) -> float:
    """The command as ale-flow's shell tool on workspace ``ws`` (the session opened first, unmeasured)."""
    from ale_flow.tools import ToolContext, ToolRegistry, builtin_tools

    reg = ToolRegistry(builtin_tools())
    ctx = ToolContext(ws)
    reg.invoke("shell", {"command": command}, ctx)  # opens the session
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = reg.invoke("shell", {"command": command}, ctx)
        times.append(time.perf_counter() - t0)
        if r.is_error:
            raise RuntimeError(f"shell tool failed: {r.content[:300]}")
    return statistics.median(times) * 1000


def tool_call_overhead(client: Any, command: str = "echo hi", rounds: int = 3, n: int = 20) -> dict[str, float]:
    """p50 of the shell tool in a fresh sandbox of ``client`` (an ale-rock ``Client``) minus the local
    subprocess's, over ``rounds`` interleaved rounds of ``n`` calls each."""
    from ale_flow.sandbox_workspace import SandboxWorkspace
    from ale_rock import Sandbox

    with Sandbox.create(client=client, ttl=300, cpu=0.25, memory="256Mi", labels={"ale-up": "tool-overhead"}) as sb:
        ws = SandboxWorkspace(sb)
        pairs = [(shell_p50_ms(ws, command, n), subprocess_p50_ms(command, n)) for _ in range(rounds)]
    tool, local = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    return {"tool_call_overhead_p50_ms": round(tool - local, 3), "sandbox_shell_tool_p50_ms": round(tool, 3),
            "local_subprocess_p50_ms": round(local, 3)}
