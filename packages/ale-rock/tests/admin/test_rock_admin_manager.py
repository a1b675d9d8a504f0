"""The lifecycle logic (SandboxManager) against an in-process fake WorkerClient: no gRPC, fast."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from ale_rock.admin.config import AdminConfig
from ale_rock.admin.errors import AdminError, Code
from ale_rock.admin.lifecycle import CreateRequest
from ale_rock.admin.manager import SandboxManager
from ale_rock.admin.state import State
from ale_rock.admin.store import Store, WorkerRecord
from ale_rock.admin.workers import CommitInfo


class FakeWorker:
    rocklet: Any = None
    worker: Any = None
    metadata: tuple[tuple[str, str], ...] = ()

    def __init__(self) -> None:
        self.started: list[str] = []
        self.removed: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def start(self, sandbox_id: str, namespace: str, spec: dict[str, Any], timeout: float) -> tuple[State, str]:
        await self.gate.wait()
        self.started.append(sandbox_id)
        return (State.FAILED, "bad image") if spec.get("image") == "bad" else (State.RUNNING, "")

    async def stop(self, sandbox_id: str, grace_ms: int, timeout: float) -> None:
        pass

    async def remove(self, sandbox_id: str, timeout: float) -> None:
        self.removed.append(sandbox_id)

    async def commit(self, sandbox_id: str, name: str, fmt: int, timeout: float) -> CommitInfo:
        return CommitInfo(name, 1, "d")

    async def close(self) -> None:
        pass


def _manager(tmp_path: Path, **cfg: Any) -> tuple[SandboxManager, dict[str, FakeWorker]]:
    workers: dict[str, FakeWorker] = {}

    def factory(address: str, secret: str = "") -> FakeWorker:
        return workers.setdefault(address, FakeWorker())

    # No grace for lost workers unless a test asks for one: their sandboxes become LOST at once.
    config = AdminConfig(db_path=tmp_path / "a.db", worker_lost_after_s=0.2, **{"lost_worker_grace_s": 0, **cfg})
    return SandboxManager(config, Store(config.db_path), factory), workers


def _req(image: str = "", ttl: int = 3600, idle: int = 0) -> CreateRequest:
    return CreateRequest(namespace="ns", spec={"image": image}, cpu_millis=100, memory_bytes=2**20,
                         ttl_seconds=ttl, idle_timeout_s=idle)


def _join(m: SandboxManager, wid: str, running: list[str] | None = None) -> list[str]:
    return m.register_worker(WorkerRecord(id=wid, address=f"{wid}:1", cpu_millis=4000, memory_bytes=2**34,
                                          max_sandboxes=0), running or [])


def test_create_start_failure_heartbeat_failure_and_idempotency(tmp_path: Path) -> None:
    async def main() -> None:
        m, workers = _manager(tmp_path)
        _join(m, "w")
        ok = await m.create(_req(), wait=True)
        assert ok.state == State.RUNNING and workers["w:1"].started == [ok.id]
        bad = await m.create(_req("bad"), wait=True)
        assert bad.state == State.FAILED and bad.message == "bad image" and bad.id in workers["w:1"].removed
        r = _req()
        r.request_id = "same"
        first = await m.create(r, wait=True)
        assert (await m.create(r, wait=True)).id == first.id
        assert m.heartbeat("w", [(ok.id, State.FAILED, "rocklet died")])
        assert m.get("ns", ok.id).state == State.FAILED and m.get("ns", ok.id).message == "rocklet died"
        assert not m.heartbeat("unknown", [])
        with pytest.raises(AdminError) as e:
            m.get("other-ns", first.id)
        assert e.value.code == Code.NOT_FOUND

    asyncio.run(main())


def test_delete_while_pending_reaps_on_the_worker(tmp_path: Path) -> None:
    async def main() -> None:
        m, workers = _manager(tmp_path)
        _join(m, "w")
        m.client("w")
        workers["w:1"].gate.clear()  # hold the start
        rec = await m.create(_req(), wait=False)
        assert rec.state == State.PENDING
        deleting = asyncio.ensure_future(m.delete("ns", rec.id))
        await asyncio.sleep(0.05)
        workers["w:1"].gate.set()
        await deleting
        assert m.get("ns", rec.id).state == State.DELETED and rec.id in workers["w:1"].removed

    asyncio.run(main())


def test_lost_worker_reregistration_and_ttl(tmp_path: Path) -> None:
    async def main() -> None:
        m, _ = _manager(tmp_path)
        _join(m, "a")
        a1 = await m.create(_req(), wait=True)
        _join(m, "b")
        await asyncio.sleep(0.3)
        assert m.heartbeat("b", [])
        await m.upkeep_once()
        assert m.get("ns", a1.id).state == State.LOST and "heart" in m.get("ns", a1.id).message
        assert not m.heartbeat("a", [])  # told to re-register
        assert _join(m, "a", [a1.id]) == []  # a lost sandbox is not kept: the worker reaps it
        short = await m.create(_req(ttl=1), wait=True)
        await asyncio.sleep(1.1)
        m.heartbeat("a", [])
        m.heartbeat("b", [])
        await m.upkeep_once()
        await asyncio.sleep(0.05)
        assert m.get("ns", short.id).state == State.DELETED

    asyncio.run(main())


def test_restart_recovers_and_fails_pending(tmp_path: Path) -> None:
    async def main() -> None:
        m, workers = _manager(tmp_path)
        _join(m, "w")
        running = await m.create(_req(), wait=True)
        workers["w:1"].gate.clear()
        pending = await m.create(_req(), wait=False)
        m.store.close()
        m2, _ = _manager(tmp_path)
        m2.recover()
        assert m2.get("ns", running.id).state == State.RUNNING
        assert m2.get("ns", pending.id).state == State.FAILED
        assert [w.id for w in m2.live_workers()] == ["w"]
        # a restarted worker that no longer runs the sandbox gets it marked lost
        assert _join(m2, "w", []) == []
        assert m2.get("ns", running.id).state == State.LOST
        await m.close()

    asyncio.run(main())


def test_idle_stop(tmp_path: Path) -> None:
    async def main() -> None:
        m, _ = _manager(tmp_path)
        _join(m, "w")
        rec = await m.create(_req(idle=1), wait=True)
        m.sandboxes.touch(rec.id, time.time() - 5)
        await m.upkeep_once()
        await asyncio.sleep(0.05)
        assert m.get("ns", rec.id).state == State.STOPPED and "idle" in m.get("ns", rec.id).message

    asyncio.run(main())


def test_a_worker_back_within_the_grace_keeps_its_sandboxes(tmp_path: Path) -> None:
    async def main() -> None:
        m, _ = _manager(tmp_path, lost_worker_grace_s=0.5)
        _join(m, "a")
        a1 = await m.create(_req(), wait=True)
        await asyncio.sleep(0.3)
        await m.upkeep_once()  # silent past worker_lost_after_s: lost, but within the grace
        assert not m.live_workers() and m.get("ns", a1.id).state == State.RUNNING
        assert not m.heartbeat("a", [])  # told to re-register
        assert _join(m, "a", [a1.id]) == [a1.id]
        assert m.get("ns", a1.id).state == State.RUNNING
        # Silent again, past the grace this time: now its sandboxes are LOST.
        await asyncio.sleep(0.3)
        await m.upkeep_once()
        await asyncio.sleep(0.6)
        await m.upkeep_once()
        assert m.get("ns", a1.id).state == State.LOST

    asyncio.run(main())


def test_heartbeat_reconciles_sandboxes_the_admin_does_not_hold(tmp_path: Path) -> None:
    async def main() -> None:
        m, workers = _manager(tmp_path)
        _join(m, "w")
        live = await m.create(_req(), wait=True)
        failed = await m.create(_req("bad"), wait=True)
        workers["w:1"].removed.clear()
        running = (State.RUNNING, "")
        assert m.heartbeat("w", [(live.id, *running), (failed.id, *running), ("sb-0123456789ab", *running)])
        await asyncio.sleep(0.05)
        assert sorted(workers["w:1"].removed) == sorted([failed.id, "sb-0123456789ab"])
        assert m.get("ns", live.id).state == State.RUNNING

    asyncio.run(main())


def test_a_failed_heartbeat_during_a_stop_does_not_win_over_the_stop(tmp_path: Path) -> None:
    """The worker kills the processes before the stop call returns: a heartbeat in that window says
    FAILED. The client asked for a stop, so the sandbox ends STOPPED (seen flaky in a CI run)."""

    async def main() -> None:
        m, workers = _manager(tmp_path)
        _join(m, "w")
        sb = await m.create(_req(), wait=True)
        w = workers["w:1"]
        in_stop, release = asyncio.Event(), asyncio.Event()

        async def slow_stop(sandbox_id: str, grace_ms: int, timeout: float) -> None:
            in_stop.set()
            await release.wait()

        w.stop = slow_stop  # type: ignore[method-assign]
        stopping = asyncio.create_task(m.stop("ns", sb.id, 0))
        await in_stop.wait()
        assert m.heartbeat("w", [(sb.id, State.FAILED, "its processes died")])
        release.set()
        assert (await stopping).state == State.STOPPED
        assert m.get("ns", sb.id).state == State.STOPPED
        # Outside a stop, a FAILED report still fails a running sandbox.
        other = await m.create(_req(), wait=True)
        assert m.heartbeat("w", [(other.id, State.FAILED, "rocklet died")])
        assert m.get("ns", other.id).state == State.FAILED

    asyncio.run(main())


def test_a_commit_makes_its_name_known_to_its_own_namespace_only(tmp_path: Path) -> None:
    """With an image allow-list, a commit's name becomes usable by the namespace that made it —
    not by another one that commits or names the same string."""

    async def main() -> None:
        m, _ = _manager(tmp_path, images=[])
        _join(m, "w")
        sb = await m.create(_req(), wait=True)  # namespace "ns"
        assert not m.is_known_image("app:v1", "ns")
        await m.commit("ns", sb.id, "app:v1", 0)
        assert m.is_known_image("app:v1", "ns")
        assert not m.is_known_image("app:v1", "other")
        assert m.is_known_image("", "other")  # the backend default stays open to all

    asyncio.run(main())


def test_a_reused_request_id_with_another_spec_is_refused(tmp_path: Path) -> None:
    """The same request_id and spec is a retry (same sandbox); another spec under it is
    ALREADY_EXISTS naming request_id, not silently the first sandbox."""

    async def main() -> None:
        m, _ = _manager(tmp_path)
        _join(m, "w")
        first = _req("img:1")
        first.request_id = "job-7"
        sb = await m.create(first, wait=True)
        retry = _req("img:1")
        retry.request_id = "job-7"
        assert (await m.create(retry, wait=True)).id == sb.id
        other = _req("img:2")
        other.request_id = "job-7"
        with pytest.raises(AdminError) as e:
            await m.create(other, wait=True)
        assert e.value.code == Code.ALREADY_EXISTS and e.value.field == "request_id" and sb.id in e.value.message
        # The key is per namespace: another namespace may use it for its own spec.
        foreign = CreateRequest(namespace="ns2", spec={"image": "img:2"}, cpu_millis=100, memory_bytes=2**20,
                                ttl_seconds=60, idle_timeout_s=0, request_id="job-7")
        assert (await m.create(foreign, wait=True)).id != sb.id

    asyncio.run(main())


def test_a_database_from_before_request_hash_is_migrated(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, namespace TEXT NOT NULL, state TEXT NOT NULL, "
        "worker_id TEXT NOT NULL DEFAULT '', message TEXT NOT NULL DEFAULT '', spec TEXT NOT NULL, "
        "cpu_millis INTEGER NOT NULL, memory_bytes INTEGER NOT NULL, idle_timeout_s INTEGER NOT NULL DEFAULT 0, "
        "request_id TEXT NOT NULL DEFAULT '', create_time REAL NOT NULL, update_time REAL NOT NULL, "
        "expire_time REAL NOT NULL);"
        "INSERT INTO sandboxes VALUES ('sb-old', 'ns', 'RUNNING', 'w', '', '{}', 1, 1, 0, 'r', 0, 0, 9e9);"
    )
    con.close()
    rec = Store(db).get_sandbox("sb-old")
    assert rec is not None and rec.request_id == "r" and rec.request_hash == ""


def test_a_stop_its_caller_gives_up_on_still_ends_stopped(tmp_path: Path) -> None:
    """The admin-restart race, under load: the StopSandbox handler is cancelled (client deadline)
    while the worker stops the sandbox. The stop must still be recorded — before, the store kept
    RUNNING, the next heartbeat reported the dead processes, and the sandbox came back FAILED."""

    async def main() -> None:
        m, workers = _manager(tmp_path)
        _join(m, "w")
        sb = await m.create(_req(), wait=True)
        in_stop, release = asyncio.Event(), asyncio.Event()

        async def slow_stop(sandbox_id: str, grace_ms: int, timeout: float) -> None:
            in_stop.set()
            await release.wait()

        workers["w:1"].stop = slow_stop  # type: ignore[method-assign]
        caller = asyncio.create_task(m.stop("ns", sb.id, 0))
        await in_stop.wait()
        caller.cancel()  # the client's deadline passed
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert m.heartbeat("w", [(sb.id, State.FAILED, "its processes died")])
        release.set()
        for _ in range(100):
            if m.get("ns", sb.id).state != State.RUNNING:
                break
            await asyncio.sleep(0.01)
        assert m.get("ns", sb.id).state == State.STOPPED
        assert m.get("ns", sb.id).message == "stopped by client"

    asyncio.run(main())


def test_a_restarted_admin_records_the_stop_its_predecessor_did_not(tmp_path: Path) -> None:
    """kill -9 of the Admin after the worker stopped a sandbox but before the Admin wrote STOPPED:
    the restarted Admin reads RUNNING. The worker's STOPPED report (only an Admin's stop puts a
    sandbox there) makes it STOPPED — not RUNNING forever, not FAILED."""

    async def main() -> None:
        m, workers = _manager(tmp_path)
        _join(m, "w")
        sb = await m.create(_req(), wait=True)
        kept = await m.create(_req(), wait=True)
        done = await m.create(_req(), wait=True)
        await m.stop("ns", done.id, 0)
        await m.close()  # "killed": the store says RUNNING for sb, the worker has stopped it

        again = SandboxManager(m.config, Store(m.config.db_path), lambda address, secret="": workers[address])
        again.recover()
        assert again.heartbeat("w", [(sb.id, State.STOPPED, ""), (kept.id, State.RUNNING, ""),
                                     (done.id, State.FAILED, "the sandbox's main process exited")])
        assert again.get("ns", sb.id).state == State.STOPPED
        assert again.get("ns", kept.id).state == State.RUNNING
        assert again.get("ns", done.id).state == State.STOPPED  # a stopped one never turns FAILED

    asyncio.run(main())
