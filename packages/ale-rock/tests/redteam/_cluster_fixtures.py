"""A real local cluster (admin + worker processes, local backend) for the red-team tests, and
the worker's address and credential as the admin holds them (its 0600 store; tests run as root)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import grpc
import pytest
from ale_rock.local_cluster import LocalCluster, real_worker_argv

from .._wait import wait_until  # noqa: F401 - the redteam tests call it as fx.wait_until

FAST_ADMIN = {"heartbeat_interval_ms": 200, "reaper_interval_s": 0.2, "worker_lost_after_s": 1.5,
              "lost_worker_grace_s": 60}


def need_local_backend() -> None:
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("needs bubblewrap and root")


def start_cluster(workdir: Path, pool_size: int = 1, **admin: Any) -> LocalCluster:
    argv = real_worker_argv({"pool_size": pool_size, "retry_interval_s": 0.2})
    cluster = LocalCluster(workers=0, worker_argv=argv,
                           admin_config={**FAST_ADMIN, **admin}, workdir=workdir)
    try:
        cluster.start()
        cluster.start_worker("w1")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def worker_of(cluster: LocalCluster, worker_id: str = "w1") -> dict[str, Any]:
    """{"address": ..., "secret": ...} of a worker, from the admin's store."""
    with sqlite3.connect(str(cluster.dir / "admin.db"), timeout=5) as db:
        row = db.execute("SELECT info FROM workers WHERE id = ?", (worker_id,)).fetchone()
    assert row is not None, f"worker {worker_id} not registered"
    return dict(json.loads(row[0]))


def slot_of(cluster: LocalCluster, sandbox_id: str, worker_id: str = "w1") -> Path:
    """The local backend's directory of a sandbox on the worker."""
    for meta in (cluster.worker_state_dir(worker_id) / "sandboxes").glob("*/meta.json"):
        try:
            if json.loads(meta.read_text()).get("sandbox_id") == sandbox_id:
                return meta.parent
        except (OSError, ValueError):
            continue
    raise AssertionError(f"no slot for {sandbox_id}")


def unauthenticated(call: Any) -> None:
    """Assert that ``call()`` (a unary call, or a stream: its first message) is refused UNAUTHENTICATED."""
    with pytest.raises(grpc.RpcError) as e:
        out = call()
        if hasattr(out, "__next__"):
            next(out)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, e.value
