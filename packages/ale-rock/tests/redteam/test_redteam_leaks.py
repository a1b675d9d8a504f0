"""Red team, leaks and silent loss (issue 11 findings 9 and 10), on real admin + worker processes.

Attacks: kill -9 the admin while a create is in flight and restart it (the worker must not keep
the orphan); silence a worker past the lost-worker timeout and bring it back (its healthy
sandboxes must come back RUNNING, not be removed).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from ale_proto.v1 import worker_pb2, worker_pb2_grpc
from ale_rock.local_cluster import LocalCluster
from ale_rock.sdk import Sandbox
from ale_rock.worker.auth import worker_channel

from . import _cluster_fixtures as fx


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    fx.need_local_backend()
    # No warm pool: a create is a cold start (~1 s), a window to kill the admin in.
    c = fx.start_cluster(tmp_path_factory.mktemp("redteam-leaks"), pool_size=0)
    yield c
    c.stop()


def _on_worker(cluster: LocalCluster) -> set[str]:
    worker = fx.worker_of(cluster)
    with worker_channel(worker["address"], worker["secret"]) as ch:
        listed = worker_pb2_grpc.WorkerServiceStub(ch).ListWorkerSandboxes(
            worker_pb2.ListWorkerSandboxesRequest(), timeout=10)
    return {s.sandbox_id for s in listed.sandboxes}


def _admin_state(cluster: LocalCluster, sandbox_id: str) -> str:
    with sqlite3.connect(str(cluster.dir / "admin.db"), timeout=5) as db:
        row = db.execute("SELECT state FROM sandboxes WHERE id = ?", (sandbox_id,)).fetchone()
    return str(row[0]) if row else ""


def test_kill_9_of_the_admin_mid_create_leaves_no_sandbox_on_the_worker(cluster: LocalCluster) -> None:
    before = _on_worker(cluster)
    slots = cluster.worker_state_dir("w1") / "sandboxes"
    known = set(slots.iterdir())
    creating = threading.Thread(
        target=lambda: _swallow(lambda: Sandbox.create(client=cluster.client(timeout=20), ttl=600)), daemon=True)
    creating.start()
    # kill -9 the admin once the worker has begun starting the sandbox (its directory appears).
    fx.wait_until(lambda: set(slots.iterdir()) - known, timeout=20, what="the worker to begin the start")
    cluster.kill_admin(signal.SIGKILL)
    (pending,) = _pending(cluster)  # the admin died with the create in flight
    creating.join(timeout=30)
    # The worker finishes the start nobody waits for any more: without reconciliation, an orphan.
    fx.wait_until(lambda: pending in _on_worker(cluster), timeout=20, what="the start to finish on the worker")
    cluster.start_admin()
    # Within about one heartbeat (0.2 s here) the worker is told to drop what the admin does not hold.
    fx.wait_until(lambda: pending not in _on_worker(cluster), timeout=5, what="the orphan removed")
    assert _admin_state(cluster, pending) == "FAILED"
    assert pending not in before


def _pending(cluster: LocalCluster) -> list[str]:
    with sqlite3.connect(str(cluster.dir / "admin.db"), timeout=5) as db:
        return [str(r[0]) for r in db.execute("SELECT id FROM sandboxes WHERE state = 'PENDING'")]


def test_a_worker_silent_past_the_timeout_keeps_its_sandboxes_within_the_grace(cluster: LocalCluster) -> None:
    with Sandbox.create(client=cluster.client(), ttl=600) as sb:
        sb.write("/workspace/work.txt", "hours of work")
        pid = cluster.worker_pids()["w1"]
        os.kill(pid, signal.SIGSTOP)  # a worker that hangs, or a partition: no heartbeats
        try:
            fx.wait_until(lambda: not _worker_alive(cluster), timeout=10, what="the admin to lose the worker")
            assert sb.refresh().state == "running"  # not LOST: the grace (60 s here) has not passed
        finally:
            os.kill(pid, signal.SIGCONT)
        fx.wait_until(lambda: _worker_alive(cluster), timeout=10, what="the worker to re-register")
        assert sb.refresh().state == "running"
        assert sb.read("/workspace/work.txt") == b"hours of work"
        assert sb.id in _on_worker(cluster)


def _worker_alive(cluster: LocalCluster) -> bool:
    with sqlite3.connect(str(cluster.dir / "admin.db"), timeout=5) as db:
        row = db.execute("SELECT alive FROM workers WHERE id = 'w1'").fetchone()
    return bool(row and row[0])


def _swallow(fn: Any) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - the admin dies under this create on purpose
        pass
