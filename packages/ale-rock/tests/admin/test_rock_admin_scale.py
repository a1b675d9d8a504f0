"""What keeps a create cheap at scale: admission and placement read what the active sandboxes hold
from memory (kept by Records, the only writer), never an SQL aggregate per worker; the in-memory
totals always equal the store's, across every transition and a restart."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ale_rock.admin.config import AdminConfig, QuotaConfig
from ale_rock.admin.errors import AdminError, Code
from ale_rock.admin.lifecycle import CreateRequest
from ale_rock.admin.manager import SandboxManager
from ale_rock.admin.records import Records
from ale_rock.admin.state import State
from ale_rock.admin.store import SandboxRecord, Store, WorkerRecord
from ale_rock.admin.workers import CommitInfo


class InstantWorker:
    """A WorkerClient that starts everything at once (``image="bad"`` fails)."""

    rocklet: Any = None
    worker: Any = None
    metadata: tuple[tuple[str, str], ...] = ()

    async def start(self, sandbox_id: str, namespace: str, spec: dict[str, Any], timeout: float) -> tuple[State, str]:
        return (State.FAILED, "bad image") if spec.get("image") == "bad" else (State.RUNNING, "")

    async def stop(self, sandbox_id: str, grace_ms: int, timeout: float) -> None:
        pass

    async def remove(self, sandbox_id: str, timeout: float) -> None:
        pass

    async def commit(self, sandbox_id: str, name: str, fmt: int, timeout: float) -> CommitInfo:
        return CommitInfo(name, 1, "d")

    async def close(self) -> None:
        pass


class CountingStore(Store):
    """A Store that counts its reads (commits it counts itself)."""

    reads = 0

    def _read(self, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
        self.reads += 1
        return super()._read(sql, args)


def _manager(db: Path, **cfg: Any) -> SandboxManager:
    config = AdminConfig(db_path=db, lost_worker_grace_s=0, **cfg)
    return SandboxManager(config, CountingStore(db), lambda address, secret="": InstantWorker())


def _join(m: SandboxManager, wid: str) -> None:
    m.register_worker(WorkerRecord(id=wid, address=f"10.0.0.{len(m.workers) + 1}:7701", cpu_millis=4000,
                                   memory_bytes=2**34, max_sandboxes=0), [])


def _req(ns: str, cpu: int = 100, image: str = "") -> CreateRequest:
    return CreateRequest(namespace=ns, spec={"image": image}, cpu_millis=cpu, memory_bytes=cpu * 2**20,
                         ttl_seconds=3600, idle_timeout_s=0)


def _agrees(records: Records, store: Store, namespaces: list[str], workers: list[str]) -> None:
    assert records.usage() == store.usage()
    for ns in namespaces:
        assert records.usage(namespace=ns) == store.usage(namespace=ns), ns
    for wid in workers:
        assert records.usage(worker_id=wid) == store.usage(worker_id=wid), wid
        assert records.usage_by_worker().get(wid, store.usage(worker_id=wid)) == store.usage(worker_id=wid)


def test_in_memory_usage_equals_the_store_through_every_transition_and_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    nss, wids = ["a", "b"], ["w1", "w2", "w3"]

    async def first() -> None:
        m = _manager(db)
        for w in wids:
            _join(m, w)
        records, store = m.sandboxes.records, m.store
        made = [await m.create(_req(nss[i % 2], cpu=100 + i), wait=True) for i in range(12)]
        bad = await m.create(_req("a", image="bad"), wait=True)  # PENDING → FAILED frees what it held
        assert bad.state == State.FAILED
        pending = await m.create(_req("b", cpu=7), wait=False)  # PENDING counts as held
        _agrees(records, store, nss, wids)
        await m.stop("a", made[0].id, 0)  # RUNNING → STOPPED
        await m.delete("b", made[1].id)  # RUNNING → DELETED
        m.deregister_worker(made[2].worker_id)  # its sandboxes → LOST
        _agrees(records, store, nss, wids)
        while m.sandboxes.is_starting(pending.id):  # its start finishes (on a lost worker or not)
            await asyncio.sleep(0.01)
        _agrees(records, store, nss, wids)
        assert store.usage().sandboxes > 0  # something is still held: the restart below has work
        await m.close()
        store.close()

    async def restarted() -> None:
        m = _manager(db)
        m.recover()
        _agrees(m.sandboxes.records, m.store, nss, wids)  # rebuilt from the store
        await m.close()
        m.store.close()

    asyncio.run(first())
    asyncio.run(restarted())


def test_a_create_costs_the_same_store_work_with_1_or_60_workers(tmp_path: Path) -> None:
    """Before: one ``SELECT SUM(...)`` per live worker per create (placement) plus two for quotas.
    Now: a fixed, small number of reads and two commits (PENDING, RUNNING), whatever the cluster size."""

    async def cost(workers: int, db: Path) -> tuple[int, int]:
        m = _manager(db)
        for i in range(workers):
            _join(m, f"w{i}")
        store = m.store
        assert isinstance(store, CountingStore)
        await m.create(_req("a"), wait=True)  # warm (first-time caches)
        reads, commits = store.reads, store.commits
        await m.create(_req("a"), wait=True)
        out = (store.reads - reads, store.commits - commits)
        await m.close()
        store.close()
        return out

    small = asyncio.run(cost(1, tmp_path / "one.db"))
    large = asyncio.run(cost(60, tmp_path / "sixty.db"))
    assert large == small
    assert small[1] == 2 and small[0] <= 2  # e.g. the RUNNING row read back; none per worker


def test_quotas_and_placement_still_see_every_sandbox(tmp_path: Path) -> None:
    async def main() -> None:
        m = _manager(tmp_path / "q.db", quotas={"a": QuotaConfig(max_sandboxes=3)}, max_concurrent_sandboxes=5)
        _join(m, "w1")
        _join(m, "w2")
        # concurrent creates, none awaited before the next is admitted: still no overshoot
        results = await asyncio.gather(*(m.create(_req("a"), wait=True) for _ in range(5)), return_exceptions=True)
        refused = [r for r in results if isinstance(r, AdminError)]
        assert len(refused) == 2 and all(r.code == Code.RESOURCE_EXHAUSTED for r in refused)
        placed = [r.worker_id for r in results if not isinstance(r, BaseException)]
        assert sorted(placed) in (["w1", "w1", "w2"], ["w1", "w2", "w2"])  # spread by what each holds
        await m.create(_req("b"), wait=True)
        await m.create(_req("b"), wait=True)
        with pytest.raises(AdminError, match="max_concurrent_sandboxes"):
            await m.create(_req("b"), wait=True)
        first = next(r for r in results if not isinstance(r, BaseException))
        await m.delete("a", first.id)  # frees a place in both the namespace and the global cap
        assert (await m.create(_req("a"), wait=True)).state == State.RUNNING
        await m.close()
        m.store.close()

    asyncio.run(main())


def test_egress_protection_is_cached_until_a_worker_joins(tmp_path: Path) -> None:
    async def main() -> None:
        m = _manager(tmp_path / "e.db")
        m.port = 7700
        _join(m, "w1")
        first = m.egress_protected()
        assert ("10.0.0.1", 7701) in first and ("127.0.0.1", 7700) in first
        assert m.egress_protected() is first  # no recomputation per create
        _join(m, "w2")
        assert ("10.0.0.2", 7701) in m.egress_protected()  # a new worker is protected at once
        m.port = 7800
        assert ("127.0.0.1", 7800) in m.egress_protected()
        await m.close()
        m.store.close()

    asyncio.run(main())


def test_a_burst_of_thousands_of_calls_is_served_not_cancelled(tmp_path: Path) -> None:
    """gRPC's default pending-call limits (1,000 soft, 3,000 hard) CANCEL calls of a burst that
    arrive before the Admin asks for them: 4,000 at once lost about a third."""
    import grpc
    from ale_rock.admin.server import start_admin
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async def main() -> dict[str, int]:
        config = AdminConfig(port=0, db_path=tmp_path / "burst.db", envs={"enabled": False}, envhub=None)
        admin = await start_admin(config)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{admin.port}")
        stub = health_pb2_grpc.HealthStub(channel)
        codes: dict[str, int] = {}

        async def check() -> None:
            try:
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=60)
                code = "OK"
            except grpc.aio.AioRpcError as e:
                code = e.code().name
            codes[code] = codes.get(code, 0) + 1

        try:
            await asyncio.gather(*(check() for _ in range(4000)))
        finally:
            await channel.close()
            await admin.stop(0)
        return codes

    assert asyncio.run(main()) == {"OK": 4000}


def _record(i: int) -> SandboxRecord:
    return SandboxRecord(id=f"sb-{i:012x}", namespace="ns", state=State.RUNNING, spec={"image": "x" * 2000},
                         cpu_millis=100, memory_bytes=2**20, expire_time=time.time() + 3600, worker_id="w")


def test_checkpoints_run_off_the_callers_thread(tmp_path: Path) -> None:
    """The WAL reaches the database file by the checkpoint thread, not inside a commit."""
    db = tmp_path / "c.db"
    store = Store(db)
    try:
        assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        empty = db.stat().st_size
        for i in range(300):  # ~1,500 WAL pages: past SQLite's automatic threshold (1,000)
            store.insert_sandbox(_record(i))
        deadline = time.monotonic() + 10
        while db.stat().st_size == empty and time.monotonic() < deadline:
            time.sleep(0.05)
        assert db.stat().st_size > empty  # the thread checkpointed
    finally:
        store.close()


_KILLER = """
import os, signal, sys, time
sys.path.insert(0, sys.argv[2])
from test_rock_admin_scale import _record
from ale_rock.admin.store import Store
store = Store(sys.argv[1])
for i in range(400):
    store.insert_sandbox(_record(i))  # returned: committed
    if i == 399:
        print("written", flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no close, no final checkpoint
"""


def test_every_returned_commit_survives_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    out = subprocess.run([sys.executable, "-c", _KILLER, str(db), str(Path(__file__).parent)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL and out.stdout == "written\n", out.stderr[-2000:]
    again = Store(db)
    try:
        assert len(again.list_sandboxes()) == 400
        assert again.usage(namespace="ns").sandboxes == 400
    finally:
        again.close()


def test_memoised_spec_conversion_equals_json_format_and_hands_out_fresh_objects() -> None:
    from ale_proto.v1 import common_pb2, sandbox_pb2
    from ale_rock.admin.convert import spec_from_dict, spec_to_dict
    from google.protobuf import json_format

    spec = sandbox_pb2.SandboxSpec(image="python:3.11", env={"A": "1"}, ttl_seconds=60,
                                   resources=common_pb2.Resources(cpu_millis=100, memory_bytes=2**26))
    for _ in range(2):  # a miss, then a hit
        d = spec_to_dict(spec)
        assert d == json_format.MessageToDict(spec, preserving_proto_field_name=True)
        back = spec_from_dict(d)
        assert back == json_format.ParseDict(d, sandbox_pb2.SandboxSpec(), ignore_unknown_fields=True) == spec
        d["image"] = "changed"  # callers own what they get: the next call is unaffected
        back.image = "changed"
    big = sandbox_pb2.SandboxSpec(env={f"K{i}": "v" * 100 for i in range(300)})  # past the cache's size bound
    assert spec_from_dict(spec_to_dict(big)) == big
    with pytest.raises(json_format.ParseError):
        spec_from_dict({"ttl_seconds": "not a number"})


def test_a_cleanup_pass_reads_only_the_sandboxes_it_may_act_on(tmp_path: Path) -> None:
    """Each pass (every second) parsed every live row: at 16k sandboxes, most of a core's second."""
    store = Store(tmp_path / "x.db")
    try:
        now = time.time()
        for i in range(50):  # long TTL, no idle timeout: nothing to do
            store.insert_sandbox(_record(i))
        rows = {
            "expired": _record(100), "expired_stopped": _record(101), "idle": _record(102),
            "idle_but_stopped": _record(103), "deleted_expired": _record(104),
        }
        rows["expired"].expire_time = rows["expired_stopped"].expire_time = now - 1
        rows["deleted_expired"].expire_time = now - 1
        rows["idle"].idle_timeout_s = rows["idle_but_stopped"].idle_timeout_s = 60
        rows["expired_stopped"].state = rows["idle_but_stopped"].state = State.STOPPED
        rows["deleted_expired"].state = State.DELETED
        for r in rows.values():
            store.insert_sandbox(r)
        got = {r.id for r in store.cleanup_candidates(now)}
        assert got == {rows[k].id for k in ("expired", "expired_stopped", "idle")}
    finally:
        store.close()
