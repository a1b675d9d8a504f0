"""Plain result types of the SDK (no protobuf in user code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ale_proto.v1 import sandbox_pb2


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a command, client side (``ale.v1.ExecResult`` as plain Python; the Rocklet's
    server-side twin is ``rocklet.types.ExecOutcome``). Output is kept also on timeouts and interrupts."""

    exit_code: int
    stdout_bytes: bytes
    stderr_bytes: bytes
    end_reason: str
    """"exited", "signaled", "timeout", "idle_timeout", "interrupted", "background", "start_failed"."""
    signal: int = 0
    duration_s: float = 0.0
    pid: int = 0
    exec_id: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_spill_path: str = ""
    stderr_spill_path: str = ""
    error: str = ""

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode(errors="replace")

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0."""
        return self.end_reason == "exited" and self.exit_code == 0


@dataclass(frozen=True)
class ExecEvent:
    """One event of :meth:`Sandbox.exec_stream`."""

    kind: str
    """"started", "stdout", "stderr" or "exit"."""
    data: bytes = b""
    pid: int = 0
    result: ExecResult | None = None


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox as the admin reports it."""

    id: str
    namespace: str
    state: str
    """"pending", "running", "stopped", "deleted", "failed" or "lost"."""
    worker_id: str
    message: str
    image: str
    cpu_millis: int
    memory_bytes: int
    create_time: datetime
    expire_time: datetime
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SandboxChange:
    """One state change streamed by :meth:`Sandbox.watch`."""

    sandbox: SandboxInfo
    previous_state: str
    """The state before the change ("unspecified" for the initial snapshot)."""


@dataclass(frozen=True)
class FileEntry:
    """An entry of :meth:`Sandbox.ls`."""

    path: str
    size: int
    mode: int
    is_dir: bool
    is_symlink: bool
    modify_time: datetime | None


@dataclass(frozen=True)
class SandboxStats:
    """Resource usage of a sandbox."""

    cpu_seconds: float
    memory_bytes: int
    memory_peak_bytes: int
    pids: int
    disk_bytes: int
    safety_event_count: int
    recent_safety_events: list[dict[str, Any]] = field(default_factory=list)


def _dt(ts: Any) -> datetime:
    return datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, tz=timezone.utc)


def _enum_suffix(enum: Any, value: int, prefix: str) -> str:
    try:
        return str(enum.Name(value)).removeprefix(prefix).lower()
    except ValueError:
        return "unspecified"


def exec_result(r: sandbox_pb2.ExecResult) -> ExecResult:
    return ExecResult(
        exit_code=r.exit_code, stdout_bytes=r.stdout, stderr_bytes=r.stderr,
        end_reason=_enum_suffix(sandbox_pb2.ExecEndReason, r.end_reason, "EXEC_END_REASON_"), signal=r.signal,
        duration_s=r.duration_s, pid=r.pid, exec_id=r.exec_id, stdout_truncated=r.stdout_truncated,
        stderr_truncated=r.stderr_truncated, stdout_spill_path=r.stdout_spill_path,
        stderr_spill_path=r.stderr_spill_path, error=r.error,
    )


def exec_event(ev: sandbox_pb2.ExecStreamResponse) -> ExecEvent:
    kind = ev.WhichOneof("event") or ""
    if kind == "started":
        return ExecEvent("started", pid=ev.started.pid)
    if kind == "exit":
        return ExecEvent("exit", result=exec_result(ev.exit))
    return ExecEvent(kind, data=getattr(ev, kind))


def sandbox_info(s: sandbox_pb2.Sandbox) -> SandboxInfo:
    return SandboxInfo(
        id=s.id, namespace=s.namespace, state=_enum_suffix(sandbox_pb2.SandboxState, s.state, "SANDBOX_STATE_"),
        worker_id=s.worker_id, message=s.message, image=s.spec.image, cpu_millis=s.spec.resources.cpu_millis,
        memory_bytes=s.spec.resources.memory_bytes, create_time=_dt(s.create_time), expire_time=_dt(s.expire_time),
        labels=dict(s.spec.labels),
    )


def file_entry(f: sandbox_pb2.FileInfo) -> FileEntry:
    return FileEntry(
        path=f.path, size=f.size, mode=f.mode, is_dir=f.is_dir, is_symlink=f.is_symlink,
        modify_time=_dt(f.modify_time) if f.HasField("modify_time") else None,
    )


def sandbox_stats(s: sandbox_pb2.SandboxStats) -> SandboxStats:
    events = [
        {"kind": _enum_suffix(type(e).Kind, e.kind, "KIND_"), "command": e.command, "detail": e.detail}
        for e in s.recent_safety_events
    ]
    return SandboxStats(
        cpu_seconds=s.cpu_seconds, memory_bytes=s.memory_bytes, memory_peak_bytes=s.memory_peak_bytes, pids=s.pids,
        disk_bytes=s.disk_bytes, safety_event_count=s.safety_event_count, recent_safety_events=events,
    )


def sandbox_change(ev: sandbox_pb2.WatchSandboxesResponse) -> SandboxChange:
    return SandboxChange(
        sandbox_info(ev.sandbox), _enum_suffix(sandbox_pb2.SandboxState, ev.previous_state, "SANDBOX_STATE_")
    )
