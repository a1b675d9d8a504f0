"""Settings of the Docker backend (one per worker); see ``docker.py`` for what they govern."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ale_rock.backends.base import Limits
from ale_rock.backends.docker_runtime import default_base_image

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
"""Sandbox ids and worker names (they end up in container names and host paths)."""


def _default_worker() -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname()) or "worker"
    return name[:63]


class DockerBackendConfig(BaseModel):
    """Settings of the Docker backend (one per worker)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["docker"] = "docker"
    """Discriminator for the backend union."""
    worker: str = Field(default_factory=_default_worker, pattern=NAME_RE.pattern)
    """This worker's name: the ``ale.worker`` label, so workers sharing an engine never reap
    each other's containers."""
    base_image: str = Field(default_factory=default_base_image)
    """Image used when a sandbox asks for "" (built by ``scripts/build_base_image.sh``)."""
    root_dir: Path | None = None
    """Host dir for per-sandbox state; default ``/tmp/ale-docker/<worker>``."""
    docker_host: str = ""
    """Engine address (``unix:///var/run/docker.sock``); "" = ``DOCKER_HOST`` or the default."""
    user: str = ""
    """``uid:gid`` inside; "" = 1000:1000 for a root worker, else the worker's own uid:gid (so
    the worker can always reach the Rocklet's socket)."""
    rocklet_module: str = "ale_rock.rocklet"
    """Module run with ``python3 -m`` as the container's main process."""
    egress_socket: Path | None = None
    """The worker's EgressService socket; its directory is bound read-only at
    ``/run/ale-egress`` (a directory, so a restarted gateway's new socket is seen)."""
    start_timeout_s: float = Field(default=60.0, gt=0)
    """How long ``start`` waits for the Rocklet to answer."""
    tmp_size_bytes: int = Field(default=256 * 2**20, gt=0)
    """Size of the ``/tmp`` tmpfs when the root is read-only."""
    init: bool = True
    """Run Docker's init (tini) as pid 1, so orphaned processes are reaped and signals forwarded."""
    pool_size: int = Field(default=2, ge=0, le=32)
    """Pre-started sandboxes always kept warm for the default shape (base image, ``pool_limits``);
    0 turns every warm pool off. A request is served from the pool of its shape (image, limits)
    when it asks for the default work dir and a writable root; env and labels may differ. Claimed
    sandboxes keep the container's ``ale.sandbox_id`` label empty and its slot name (labels are
    immutable, a rename costs the engine hundreds of ms): the backend's map, persisted in each
    host dir (``docker_index.py``), is the identity."""
    pool_limits: Limits = Field(default_factory=Limits)
    """Limits of the default shape's pooled sandboxes."""
    pool_max: int = Field(default=8, ge=0, le=64)
    """Most warm sandboxes of one shape: every shape (the default included) keeps as many as it
    was asked for in the last ``pool_window_s``, up to this."""
    pool_max_total: int = Field(default=16, ge=0, le=256)
    """Most warm sandboxes over all shapes (they hold memory while idle)."""
    pool_window_s: float = Field(default=30.0, gt=0)
    """How far back demand is counted; a surplus slot idle this long is discarded."""
    pool_refillers: int = Field(default=2, ge=1, le=16)
    """Warm sandboxes started in parallel, so back-to-back creates do not outrun the refill."""
    pool_refill_delay_s: float = Field(default=0.25, ge=0, le=5)
    """After a claim, its shape's refill waits this long (at most once per such interval), so the
    claimed sandbox's first commands do not share the CPU with a container starting up."""
    disk_quota: Literal["require", "per_file"] = "require"
    """How ``disk_bytes`` binds. ``require``: the container's layer gets ``--storage-opt size=``
    (btrfs, zfs, overlay2 on xfs+pquota: ``scripts/docker_engine.sh`` starts such an engine); an
    engine that cannot do it makes every start fail with :class:`DiskQuotaUnsupported`.
    ``per_file``: an explicit opt-in to the weak fallback on such engines, an ``fsize`` ulimit
    only (a sandbox can fill the engine's disk with many files); logged at every start."""

    def resolved_root(self) -> Path:
        """The per-worker host dir."""
        return self.root_dir or Path("/tmp/ale-docker") / self.worker

    def resolved_user(self) -> tuple[int, int]:
        """(uid, gid) of the sandbox's processes."""
        if self.user:
            uid, _, gid = self.user.partition(":")
            return int(uid), int(gid or uid)
        if os.getuid() == 0:
            return 1000, 1000
        return os.getuid(), os.getgid()


def _check_id(sandbox_id: str) -> None:
    if not NAME_RE.match(sandbox_id):
        raise ValueError(f"sandbox_id: {sandbox_id!r} is not [A-Za-z0-9][A-Za-z0-9_.-]{{0,127}}")


_SYSTEM_DIRS = ("/proc", "/sys", "/dev", "/run/ale", "/opt/ale", "/etc", "/usr", "/bin", "/sbin", "/lib")


def _check_workdir(workdir: str) -> None:
    path = os.path.normpath(workdir)
    if (
        not workdir.startswith("/")
        or path == "/"
        or any(path == d or path.startswith(d + "/") or path.startswith(d + "-") for d in _SYSTEM_DIRS)
    ):
        raise ValueError(f"workdir: {workdir!r} must be an absolute path outside system dirs")


def _with_defaults(limits: Limits) -> Limits:
    """Zero fields mean "the backend's default" (see ``Limits``): the defaults of ``Limits``."""
    defaults = Limits()
    return Limits(**{k: v or getattr(defaults, k) for k, v in limits.model_dump().items()})
