"""Fixtures for worker tests: a standalone worker on a real port, and a leak check."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_proto.v1 import rocklet_pb2_grpc, worker_pb2_grpc
from ale_rock.worker.auth import worker_channel
from ale_rock.worker.config import WorkerConfig
from ale_rock.worker.server import WorkerHandle, serve_worker


def state_leaks(state_dir: Path, ignore: frozenset[int] = frozenset()) -> list[str]:
    """Processes, mounts and sandbox dirs of a worker's state dir still around."""
    state = str(state_dir.resolve())
    found = [
        f"mount {line.split()[1]}" for line in Path("/proc/mounts").read_text().splitlines() if state in line
    ]
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid() and int(pid) not in ignore:
            try:
                if state.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(f"process {pid}")
            except OSError:
                pass
    sandboxes = state_dir / "sandboxes"
    if sandboxes.exists():
        found += [f"dir {p.name}" for p in sandboxes.iterdir()]
    return found


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerHandle]:
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("needs bubblewrap and root")
    state = tmp_path_factory.mktemp("worker")
    handle = serve_worker(
        WorkerConfig(state_dir=state, pool_size=1, worker_id="test-worker", max_sandboxes=3, kill_grace_s=0.5)
    )
    yield handle
    handle.stop(grace_s=1)
    assert state_leaks(state) == []


@pytest.fixture(scope="module")
def stubs(worker: WorkerHandle) -> Iterator[Any]:
    channel = worker_channel(worker.address, worker.secret)
    yield worker_pb2_grpc.WorkerServiceStub(channel), rocklet_pb2_grpc.RockletServiceStub(channel)
    channel.close()


@pytest.fixture
def leaks_of() -> Any:
    return state_leaks
