"""Fixtures of the Admin's tests: a real Admin subprocess with stand-in workers (real processes)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_rock.local_cluster import LocalCluster, real_worker_argv

FAKE_WORKER = Path(__file__).with_name("rock_fake_worker.py")


def fake_worker_argv(cpu_millis: int = 8000, memory_bytes: int = 16 * 2**30) -> Any:
    def argv(admin: str, secrets_file: Path, wid: str, state: Path) -> list[str]:
        return [sys.executable, str(FAKE_WORKER), "--admin", admin, "--secrets", str(secrets_file), "--id", wid,
                "--cpu-millis", str(cpu_millis), "--memory-bytes", str(memory_bytes)]

    return argv


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    """Factory: ``make_cluster(workers=1, admin_config={...}, namespaces={...})`` → a started cluster."""
    made: list[LocalCluster] = []

    def make(workers: int = 1, worker_argv: Any = None, real: bool = False, **kwargs: Any) -> LocalCluster:
        """``real=True`` runs real ``ale-rock worker`` processes (bubblewrap backend)."""
        if real and shutil.which("bwrap") is None:
            pytest.skip("bubblewrap (apt bubblewrap) is not installed")
        argv = real_worker_argv({"heartbeat_interval_s": 0.2, "retry_interval_s": 0.2, "pool_size": 0}) if real else fake_worker_argv()
        c = LocalCluster(workers=workers, worker_argv=worker_argv or argv,
                         workdir=tmp_path / f"cluster{len(made)}", **kwargs)
        c.workdir.mkdir()  # type: ignore[union-attr]
        made.append(c)
        return c.start()

    yield make
    for c in made:
        c.stop()


@pytest.fixture(scope="module")
def fake_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One Admin + one stand-in worker shared by a module (for fuzzing)."""
    c = LocalCluster(workers=1, worker_argv=fake_worker_argv(), workdir=tmp_path_factory.mktemp("fuzz"),
                     admin_config={"images": ["", "base:1"], "max_command_bytes": 4096})
    with c:
        yield c
