"""Long commands as detached jobs, polled with short calls.

A command that runs for minutes in one exec call (the agent of an episode) is one long gRPC call
through the admin to the worker, and such a call can be cut with ``Too many pings`` (seen at 214 s;
150 s passed): the admin pings the worker channel every 30 s, more often than the worker's gRPC
server accepts on a call that carries no data. So episodes start the agent detached in the sandbox (its
own session, output to a file), poll for its exit status with short calls, and kill its whole
process group at the budget — the same outcome as one blocking exec, without the long call. A poll
waits inside the sandbox (up to ``wait_s``, checking every ``poll_s`` for the first ``fast_s``, then
every ``slow_poll_s``) and returns as soon as the job exits: a short agent's end is seen within
``poll_s``, not at the next host-side poll a second later.
"""

from __future__ import annotations

import math
import shlex
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ale_rock.envs.sandbox import CommandOutput, SandboxProvider, SandboxSpec

_JOBS = "/tmp/.ale_exec"
_SHORT_S = 30.0


class DetachedExecProvider:
    """A :class:`SandboxProvider` whose ``exec`` runs commands longer than ``inline_s`` detached."""

    def __init__(
        self, inner: SandboxProvider, inline_s: float = 60.0, poll_s: float = 0.05, kill_grace_s: float = 2.0,
        jobs_dir: str = _JOBS, wait_s: float = 20.0, fast_s: float = 5.0, slow_poll_s: float = 0.25,
    ) -> None:
        self.inner, self.inline_s, self.poll_s, self.kill_grace_s = inner, inline_s, poll_s, kill_grace_s
        self.fast_s, self.slow_poll_s = fast_s, slow_poll_s
        self.wait_s = min(wait_s, _SHORT_S - 5)  # one poll call stays a short call
        self.jobs_dir = jobs_dir  # inside the sandbox: its own /tmp, never the work dir the tests see

    @property
    def client(self) -> Any:
        """The inner provider's SDK client (the episode runner builds Dockerfiles through it)."""
        return getattr(self.inner, "client", None)

    @property
    def backend(self) -> str:
        """The inner provider's sandbox backend ("" = the server's default)."""
        return str(getattr(self.inner, "backend", ""))

    def create(self, labels: Mapping[str, str] | None = None, spec: SandboxSpec | None = None) -> str:
        return self.inner.create(labels, spec)

    def upload(self, sandbox_id: str, files: Mapping[str, bytes]) -> None:
        self.inner.upload(sandbox_id, files)

    def stop_processes(self, sandbox_id: str) -> None:
        self.inner.stop_processes(sandbox_id)

    def delete(self, sandbox_id: str) -> None:
        self.inner.delete(sandbox_id)

    def exec(self, sandbox_id: str, command: str, timeout_s: float) -> CommandOutput:
        if timeout_s <= self.inline_s:
            return self.inner.exec(sandbox_id, command, timeout_s)
        job = f"{self.jobs_dir}/{uuid.uuid4().hex[:12]}"
        events: list[dict[str, Any]] = []

        def short(cmd: str) -> CommandOutput:
            out = self.inner.exec(sandbox_id, cmd, _SHORT_S)
            events.extend(out.safety_events)
            return out

        # The job writes its pid (= its process group: setsid made it a session leader) first and
        # its exit status last, through a rename, so a poll never sees half of it.
        inner = f"echo $$ > {job}/pid; bash {job}/cmd > {job}/out 2>&1; echo $? > {job}/rc.tmp; mv {job}/rc.tmp {job}/rc"
        started = short(
            f"mkdir -p {job} && printf '%s' {shlex.quote(command)} > {job}/cmd && "
            f"(setsid bash -c {shlex.quote(inner)} </dev/null >/dev/null 2>&1 &)"
        )
        if started.exit_code != 0:
            return CommandOutput(started.exit_code, started.output, False, 0.0, events)
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        rc: int | None = None
        while rc is None and time.monotonic() < deadline:
            # Every poll_s for the first seconds (short agents end fast), then every slow_poll_s: a
            # long agent does not fork a sleep 20 times a second for its whole run.
            now = time.monotonic()
            fast = now - t0 < self.fast_s
            step = self.poll_s if fast else max(self.poll_s, self.slow_poll_s)
            span = min(self.fast_s - (now - t0) if fast else self.wait_s, deadline - now)
            checks = max(1, math.ceil(span / step))
            polled = short(f"n=0; while [ ! -e {job}/rc ] && [ $n -lt {checks} ]; do sleep {step:g}; "
                           f"n=$((n+1)); done; cat {job}/rc 2>/dev/null")
            if polled.output.strip().lstrip("-").isdigit():
                rc = int(polled.output.strip())
        timed_out = rc is None
        if timed_out:
            g = f"-$(cat {job}/pid)"
            short(f"kill -TERM -- {g} 2>/dev/null; sleep {self.kill_grace_s:g}; kill -KILL -- {g} 2>/dev/null; true")
            events.append({"kind": "limit_hit", "command": command, "detail": f"wall-clock {timeout_s:g}s"})
        out = short(f"cat {job}/out; rm -rf {job}")
        return CommandOutput(124 if timed_out else int(rc or 0), out.output, timed_out, time.monotonic() - t0, events)
