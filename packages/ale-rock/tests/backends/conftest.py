"""Fixtures for real bubblewrap sandboxes: a local backend with an egress gateway, sandbox helpers,
and a leak check (processes, mounts, dirs, cgroups)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_rock.backends.base import Limits, SandboxConfig
from ale_rock.backends.limits import CGROUP_ROOT
from ale_rock.backends.local import LocalBackend
from ale_rock.backends.local_uids import pids_of_uid
from ale_rock.egress.gateway import EgressGateway

from ._box import Box
from ._local import local_backend, running_gateway

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0,
    reason="needs bubblewrap and root (tmpfs mounts, cgroups)",
)


def leaks(backend: LocalBackend) -> list[str]:
    """Everything of the backend's state dir still alive: processes, mounts, dirs, cgroups."""
    state = str(backend.config.state_dir.resolve())
    found = []
    for line in Path("/proc/mounts").read_text().splitlines():
        if state in line:
            found.append(f"mount {line.split()[1]}")
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if state in cmd:
                found.append(f"process {pid}")
    # bwrap's command line names no host path (its options come through a pipe): a sandbox's
    # processes are also known by their host uid, free once no sandbox holds it.
    for uid in sorted(backend.uids.issued):
        if backend.uids.is_free(uid):
            found += [f"process {pid} (uid {uid})" for pid in pids_of_uid(uid)]
    found += [f"dir {p}" for p in backend.sandboxes_dir.iterdir()]
    for ctl in ("memory", "pids", "cpu"):
        parent = CGROUP_ROOT / ctl / backend.cgroup_parent
        if parent.is_dir():
            found += [f"cgroup {c}" for c in parent.iterdir() if c.is_dir()]
    return found


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EgressGateway]:
    yield from running_gateway(tmp_path_factory.mktemp("egress"))


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory, gateway: EgressGateway) -> Iterator[LocalBackend]:
    made = local_backend(tmp_path_factory.mktemp("local-backend"), gateway)
    b = next(made)
    yield b
    next(made, None)  # closes the backend
    assert leaks(b) == []


@pytest.fixture
def make_box(backend: LocalBackend, gateway: EgressGateway) -> Iterator[Any]:
    made: list[str] = []

    def make(limits: Limits | None = None, **config: Any) -> Box:
        sid = f"t-{uuid.uuid4().hex[:8]}"
        handle = backend.start(sid, SandboxConfig(limits=limits or Limits(), **config))
        made.append(sid)
        gateway.register(sid, handle.extra["egress_token"], [])
        return Box(handle.rocklet_socket, backend, sid)

    yield make
    for sid in made:
        backend.remove(sid)
        gateway.forget(sid)


@pytest.fixture
def find_leaks() -> Any:
    """The leak check, for tests that run their own backend."""
    return leaks


@pytest.fixture
def box_for() -> Any:
    """Wrap (backend, sandbox id, socket) of a test's own backend in a Box."""
    return lambda backend, sandbox_id, socket: Box(socket, backend, sandbox_id)
