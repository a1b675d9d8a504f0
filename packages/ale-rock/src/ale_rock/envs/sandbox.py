"""How environments get a sandbox: a small Protocol with a local and an SDK-backed implementation.

Text games need none and run in the env server's process; terminal tasks need one. Environments
see only :class:`SandboxProvider`; :class:`ProviderRunner` adapts one sandbox to the task suite's
``TaskRunner`` so the suite's setup / hidden-test phases run unchanged inside it.
"""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ale_rock.envs.errors import SandboxLost
from ale_rock.envs.sandbox_spec import SandboxPolicy, SandboxSpec, SandboxSpecRefused

__all__ = [
    "CommandOutput", "LocalDirProvider", "ProviderRunner", "SandboxPolicy", "SandboxProvider", "SandboxSpec",
    "SandboxSpecRefused", "SdkProvider",
]


@dataclass(frozen=True)
class CommandOutput:
    """Result of one command an environment ran in its sandbox, stdout and stderr merged as text.

    The env layer's view; the SDK's full result (separate bytes, end reason) is
    ``ale_rock.sdk.types.ExecResult`` and the Rocklet's own ``ale_rock.rocklet.types.ExecOutcome``."""

    exit_code: int
    output: str
    timed_out: bool = False
    duration_s: float = 0.0
    safety_events: list[dict[str, Any]] = field(default_factory=list)
    """Safety events the sandbox reported for this command (kind, command, detail, time)."""


@runtime_checkable
class SandboxProvider(Protocol):
    """Creates, runs commands in, and deletes sandboxes. Raises :class:`SandboxLost` when a
    sandbox died under an operation."""

    def create(self, labels: Mapping[str, str] | None = None, spec: SandboxSpec | None = None) -> str:
        """Start a sandbox with an empty work dir as ``spec`` asks (None: the provider's defaults),
        within the provider's :class:`SandboxPolicy` (:class:`SandboxSpecRefused` beyond it); returns its id."""

    def exec(self, sandbox_id: str, command: str, timeout_s: float) -> CommandOutput:
        """Run ``bash -c command`` in the work dir."""

    def upload(self, sandbox_id: str, files: Mapping[str, bytes]) -> None:
        """Write files (path relative to the work dir -> content)."""

    def stop_processes(self, sandbox_id: str) -> None:
        """Kill every process in the sandbox but its own agent (the Rocklet): what the episode's
        agent left running, before the hidden tests run."""

    def delete(self, sandbox_id: str) -> None:
        """Destroy the sandbox (idempotent)."""


class LocalDirProvider:
    """Sandboxes as temp dirs with plain subprocesses: no isolation, for development and tests.

    Uses the task suite's ``LocalDirRunner``, so commands see the same clean environment the task
    validator uses. Of a :class:`SandboxSpec` it applies ``env`` (and ``policy``'s bounds); a temp
    dir has no image, fixed work dir, resource limits or network policy of its own.
    """

    def __init__(self, policy: SandboxPolicy | None = None) -> None:
        from ale_rock.tasks.runner import LocalDirRunner

        self.policy = policy or SandboxPolicy()
        self._runner_cls = LocalDirRunner
        self._runners: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _get(self, sandbox_id: str) -> Any:
        runner = self._runners.get(sandbox_id)
        if runner is None or not runner.workdir.exists():
            raise SandboxLost(f"sandbox {sandbox_id} is gone", sandbox_id=sandbox_id)
        return runner

    def create(self, labels: Mapping[str, str] | None = None, spec: SandboxSpec | None = None) -> str:
        admitted = self.policy.admit(spec or SandboxSpec())
        sid = f"local-{uuid.uuid4().hex[:12]}"
        with self._lock:
            self._runners[sid] = self._runner_cls(env=admitted.env)
        return sid

    def exec(self, sandbox_id: str, command: str, timeout_s: float) -> CommandOutput:
        res = self._get(sandbox_id).run(command, timeout_s)
        events = []
        if res.timed_out:
            events.append({"kind": "limit_hit", "command": command, "detail": f"wall-clock {timeout_s:g}s"})
        return CommandOutput(res.exit_code, res.output, res.timed_out, res.duration_s, events)

    def upload(self, sandbox_id: str, files: Mapping[str, bytes]) -> None:
        self._get(sandbox_id).upload(files)

    def stop_processes(self, sandbox_id: str) -> None:
        self._get(sandbox_id).stop_processes()

    def delete(self, sandbox_id: str) -> None:
        with self._lock:
            runner = self._runners.pop(sandbox_id, None)
        if runner is not None:
            runner.close()

    def kill(self, sandbox_id: str) -> None:
        """Destroy a sandbox's work dir behind the environment's back (simulates a crash)."""
        shutil.rmtree(self._runners[sandbox_id].workdir, ignore_errors=True)


class SdkProvider:
    """Sandboxes from the ale-rock Admin through the SDK (``ale_rock.sdk.Sandbox``). ``allow``
    lists egress hosts every sandbox may reach (the operator's: e.g. ``model-proxy`` for
    agent-native runs); a :class:`SandboxSpec` adds its task's own allow-list to them, and its
    image, work dir, env, CPUs and memory, within ``policy``. ``backend`` ("" = the server's
    default) is the backend sandboxes are asked on."""

    def __init__(
        self,
        address: str,
        api_key: str | None = None,
        image: str = "",
        workdir: str = "/workspace",
        allow: tuple[str, ...] = (),
        policy: SandboxPolicy | None = None,
        backend: str = "",
    ) -> None:
        from ale_rock.sdk import Client

        self.client = Client(address, api_key)
        self.image, self.workdir, self.allow = image, workdir.rstrip("/"), allow
        self.policy, self.backend = policy or SandboxPolicy(), backend
        self._sandboxes: dict[str, Any] = {}
        self._workdirs: dict[str, str] = {}
        self._events_seen: dict[str, int] = {}

    def _get(self, sandbox_id: str) -> Any:
        sb = self._sandboxes.get(sandbox_id)
        if sb is None:
            raise SandboxLost(f"sandbox {sandbox_id} is gone", sandbox_id=sandbox_id)
        return sb

    def _new_safety_events(self, sandbox_id: str) -> list[dict[str, Any]]:
        """Events the sandbox recorded since the last call (blocked egress, denied files, limits)."""
        stats = self._guard(sandbox_id, lambda sb: sb.stats())
        seen = self._events_seen.get(sandbox_id, 0)
        self._events_seen[sandbox_id] = stats.safety_event_count
        fresh = stats.safety_event_count - seen
        return [dict(e) for e in stats.recent_safety_events[-fresh:]] if fresh > 0 else []

    def _guard(self, sandbox_id: str, fn: Any) -> Any:
        # A sandbox that vanished, stopped or lost its worker cannot continue the episode: LOST.
        from ale_rock.sdk.errors import FailedPrecondition, SandboxNotFound, Unavailable

        try:
            return fn(self._get(sandbox_id))
        except (Unavailable, SandboxNotFound, FailedPrecondition) as e:
            raise SandboxLost(f"sandbox {sandbox_id} lost: {e}", sandbox_id=sandbox_id) from e

    def create(self, labels: Mapping[str, str] | None = None, spec: SandboxSpec | None = None) -> str:
        from ale_rock.sdk import Sandbox

        admitted = self.policy.admit(spec or SandboxSpec()).for_backend(self.backend)
        kw = admitted.create_kwargs()
        kw["image"] = admitted.image or self.image
        kw["workdir"] = workdir = (admitted.workdir or self.workdir).rstrip("/") or "/"
        # The operator's hosts (the model proxy) and the task's own allow-list, nothing else.
        kw["allow"] = [*self.allow, *(r for r in admitted.allow if r not in self.allow)]
        if self.backend:
            kw["backend"] = self.backend
        sb = Sandbox.create(client=self.client, labels=labels, **kw)
        self._sandboxes[sb.id] = sb
        self._workdirs[sb.id] = workdir
        return str(sb.id)

    def workdir_of(self, sandbox_id: str) -> str:
        """The work dir ``sandbox_id`` was created with (its task's, or the provider's)."""
        return self._workdirs.get(sandbox_id, self.workdir)

    def exec(self, sandbox_id: str, command: str, timeout_s: float) -> CommandOutput:
        cwd = self.workdir_of(sandbox_id)
        r = self._guard(
            sandbox_id, lambda sb: sb.exec(["bash", "-c", command], cwd=cwd, timeout=timeout_s)
        )
        timed_out = r.end_reason in ("timeout", "idle_timeout")
        events = self._new_safety_events(sandbox_id)
        if timed_out:
            events.append({"kind": "limit_hit", "command": command, "detail": r.end_reason})
        return CommandOutput(r.exit_code, r.stdout + r.stderr, timed_out, r.duration_s, events)

    def upload(self, sandbox_id: str, files: Mapping[str, bytes]) -> None:
        root = self.workdir_of(sandbox_id).rstrip("/")

        def write_all(sb: Any) -> None:
            for rel, data in files.items():
                sb.write(f"{root}/{rel}", data)

        self._guard(sandbox_id, write_all)

    def stop_processes(self, sandbox_id: str) -> None:
        self._guard(sandbox_id, lambda sb: sb.kill_all())

    def delete(self, sandbox_id: str) -> None:
        sb = self._sandboxes.pop(sandbox_id, None)
        self._events_seen.pop(sandbox_id, None)
        self._workdirs.pop(sandbox_id, None)
        if sb is not None:
            try:
                sb.delete()
            except Exception:  # already gone: deleting is best effort
                pass


class ProviderRunner:
    """One sandbox of a provider as the task suite's ``TaskRunner``; ``reset`` replaces the sandbox
    with a new one of ``spec`` (the task's environment; None: the provider's defaults)."""

    def __init__(self, provider: SandboxProvider, labels: Mapping[str, str] | None = None,
                 spec: SandboxSpec | None = None) -> None:
        self.provider = provider
        self.labels = dict(labels or {})
        self.spec = spec
        self.sandbox_id = ""
        self.safety_events: list[dict[str, Any]] = []

    def reset(self) -> None:
        self.close()
        self.sandbox_id = self.provider.create(self.labels, self.spec)

    def upload(self, files: Mapping[str, bytes]) -> None:
        self.provider.upload(self.sandbox_id, files)

    def stop_processes(self) -> None:
        self.provider.stop_processes(self.sandbox_id)

    def run(self, command: str, timeout_s: float) -> Any:
        from ale_rock.tasks.runner import CommandResult

        out = self.provider.exec(self.sandbox_id, command, timeout_s)
        self.safety_events.extend(out.safety_events)
        return CommandResult(out.exit_code, out.output, out.timed_out, out.duration_s)

    def close(self) -> None:
        if self.sandbox_id:
            self.provider.delete(self.sandbox_id)
            self.sandbox_id = ""
