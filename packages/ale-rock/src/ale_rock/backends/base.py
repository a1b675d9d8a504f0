"""The sandbox backend interface: how a Worker starts, stops and reaps sandboxes on its machine.

A backend knows nothing about gRPC: it starts a sandbox whose only door is a Rocklet listening on
a Unix socket (``SandboxHandle.rocklet_socket``), bound in from the host, and it guarantees that
``remove`` (and ``reap_orphans`` after a worker restart) leaves no process, mount, container or
temp dir behind.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Resource limits of one sandbox (0 = the backend's default)."""

    model_config = ConfigDict(extra="forbid")

    cpu_millis: int = Field(default=1000, ge=0)
    """CPU in millicores (1000 = one core)."""
    memory_bytes: int = Field(default=512 * 2**20, ge=0)
    """Memory limit in bytes."""
    disk_bytes: int = Field(default=1 * 2**30, ge=0)
    """Writable disk in bytes (largest file size where quotas are unavailable)."""
    max_pids: int = Field(default=256, ge=0)
    """Maximum number of processes/threads."""
    max_open_files: int = Field(default=1024, ge=0)
    """Maximum open files per process."""


class EgressRuleModel(BaseModel):
    """One allowed egress destination."""

    model_config = ConfigDict(extra="forbid")

    host: str
    """Host name or IP (exact), or "*" for any."""
    port: int = Field(default=0, ge=0, le=65535)
    """TCP port; 0 = any."""


class SandboxConfig(BaseModel):
    """What a backend needs to start a sandbox (plain-Python form of the contract's SandboxSpec)."""

    model_config = ConfigDict(extra="forbid")

    image: str = ""
    """Image: a rootfs directory (local), a Docker image (docker), or "" for the default base."""
    limits: Limits = Field(default_factory=Limits)
    """Resource limits."""
    allow: list[EgressRuleModel] = Field(default_factory=list)
    """Egress allow-list (deny by default)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for every command."""
    workdir: str = "/workspace"
    """Working directory inside the sandbox."""
    read_only_root: bool = False
    """Mount the root file system read-only (the work dir stays writable)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels (kept by the backend for reconciliation)."""
    namespace: str = ""
    """Owning namespace: scopes the sandbox's commits (snapshots) and the images it may start from."""
    ttl_seconds: int = Field(default=0, ge=0)
    """The sandbox's TTL (0 = none given). The Admin enforces it; a backend may also bind it (the
    kubernetes backend's ``activeDeadlineSeconds``), so a sandbox outlives no lost Admin."""


@dataclass
class SandboxHandle:
    """A running sandbox as its backend sees it."""

    sandbox_id: str
    rocklet_socket: Path
    """Host path of the Unix socket the sandbox's Rocklet serves RockletService on."""
    host_dir: Path
    """Host directory holding the sandbox's writable state (removed by ``remove``)."""
    pid: int = 0
    """Host pid of the sandbox's init process (local backend), 0 if not applicable."""
    extra: dict[str, str] = field(default_factory=dict)
    """Backend-specific details (e.g. the container id)."""


@dataclass
class Usage:
    """Resource usage of a sandbox."""

    cpu_seconds: float = 0.0
    memory_bytes: int = 0
    memory_peak_bytes: int = 0
    pids: int = 0
    disk_bytes: int = 0


@runtime_checkable
class SandboxBackend(Protocol):
    """Starts and reaps sandboxes on one machine."""

    name: str
    """Short name ("local", "docker")."""

    def start(self, sandbox_id: str, config: SandboxConfig) -> SandboxHandle:
        """Start a sandbox and return once its Rocklet answers on ``rocklet_socket``."""
        ...

    def stop(self, sandbox_id: str, grace_s: float = 5.0) -> None:
        """SIGTERM every process of the sandbox, SIGKILL after ``grace_s``; keep its files."""
        ...

    def remove(self, sandbox_id: str) -> None:
        """Stop (if needed) and delete everything the sandbox left. Idempotent."""
        ...

    def list(self) -> list[str]:
        """Ids of the sandboxes this backend holds on this machine (running or stopped)."""
        ...

    def is_running(self, sandbox_id: str) -> bool:
        """True while the sandbox's processes are alive."""
        ...

    def usage(self, sandbox_id: str) -> Usage:
        """Current resource usage."""
        ...

    def commit(self, sandbox_id: str, name: str) -> tuple[str, int, str]:
        """Snapshot the sandbox's writable file system; returns (image or path, size, digest)."""
        ...

    def reap_orphans(self, keep: set[str]) -> builtins.list[str]:  # `list` is a method here
        """Remove every sandbox of this backend not in ``keep`` (after a worker restart)."""
        ...
