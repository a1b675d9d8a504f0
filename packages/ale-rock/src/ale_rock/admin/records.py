"""The sandbox records: the durable :class:`~ale_rock.admin.store.Store` with a read-through cache.

The lifecycle is the store's only writer of sandboxes and writes through here, so the cache stays
coherent, and the exec hot path skips an SQLite read and a JSON parse. For the same reason it keeps
what the active sandboxes hold, per namespace and per worker, in memory: admission and placement
read it on every create, where an SQL aggregate per worker made a create cost O(workers) queries.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ale_rock.admin.state import ACTIVE, State
from ale_rock.admin.store import SandboxRecord, Store, Usage


def _add(table: dict[str, Usage], key: str, cpu: int, mem: int, sign: int) -> None:
    u = table.get(key)
    if u is None:
        u = table[key] = Usage()
    u.sandboxes += sign
    u.cpu_millis += sign * cpu
    u.memory_bytes += sign * mem
    if u.sandboxes == 0:
        del table[key]


class Records:
    """Sandbox records by id: reads served from memory when possible, writes committed first."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._live: dict[str, SandboxRecord] = {}
        """Records read or written since start that are not DELETED."""
        self._held: dict[str, tuple[str, str, int, int]] = {}
        """Active sandboxes → (namespace, worker, cpu, memory) they count for in the totals below."""
        self._by_namespace: dict[str, Usage] = {}
        self._by_worker: dict[str, Usage] = {}
        self._total = Usage()
        for rec in store.list_sandboxes(states=ACTIVE):
            self._account(rec)

    def _account(self, rec: SandboxRecord) -> None:
        """Make the usage totals count ``rec`` as it is now (active or not)."""
        old = self._held.pop(rec.id, None)
        if old is not None:
            self._count(*old, sign=-1)
        if rec.state in ACTIVE:
            held = (rec.namespace, rec.worker_id, rec.cpu_millis, rec.memory_bytes)
            self._held[rec.id] = held
            self._count(*held, sign=1)

    def _count(self, namespace: str, worker_id: str, cpu: int, mem: int, sign: int) -> None:
        _add(self._by_namespace, namespace, cpu, mem, sign)
        _add(self._by_worker, worker_id, cpu, mem, sign)
        self._total.sandboxes += sign
        self._total.cpu_millis += sign * cpu
        self._total.memory_bytes += sign * mem

    def usage(self, namespace: str | None = None, worker_id: str | None = None) -> Usage:
        """What the active sandboxes of a namespace or a worker (all when both None) hold: as
        :meth:`Store.usage`, from memory. A copy."""
        if namespace is not None and worker_id is not None:
            raise ValueError("usage of a namespace on one worker is not tracked")
        if namespace is not None:
            u = self._by_namespace.get(namespace)
        elif worker_id is not None:
            u = self._by_worker.get(worker_id)
        else:
            u = self._total
        return Usage() if u is None else Usage(u.sandboxes, u.cpu_millis, u.memory_bytes)

    def usage_by_worker(self) -> Mapping[str, Usage]:
        """Worker id → what its active sandboxes hold (absent: nothing). A read-only live view,
        for placement: valid until the next write."""
        return MappingProxyType(self._by_worker)

    def get(self, sandbox_id: str) -> SandboxRecord | None:
        """The record (cached once read; DELETED ones are not cached)."""
        rec = self._live.get(sandbox_id)
        if rec is None:
            rec = self.store.get_sandbox(sandbox_id)
            if rec is not None and rec.state != State.DELETED:
                self._live[sandbox_id] = rec
        return rec

    def peek(self, sandbox_id: str) -> SandboxRecord | None:
        """The record, from the cache or the store, without caching it (heartbeats name ids the
        Admin may have forgotten)."""
        return self._live.get(sandbox_id) or self.store.get_sandbox(sandbox_id)

    def load(self, sandbox_id: str) -> SandboxRecord | None:
        """The record as the store holds it now: the cached one when cached (every write goes
        through here and re-reads the row, so the two are the same; a create read it back three
        times), else from the store."""
        return self._live.get(sandbox_id) or self.store.get_sandbox(sandbox_id)

    def insert(self, rec: SandboxRecord) -> None:
        self.store.insert_sandbox(rec)
        self._live[rec.id] = rec
        self._account(rec)

    def update(self, sandbox_id: str, **changes: Any) -> SandboxRecord | None:
        """Write ``changes`` (see :meth:`Store.update_sandbox`); returns the record as stored."""
        self.store.update_sandbox(sandbox_id, **changes)
        rec = self.store.get_sandbox(sandbox_id)
        if rec is None or rec.state == State.DELETED:
            self._live.pop(sandbox_id, None)
        else:
            self._live[sandbox_id] = rec
        if rec is not None:
            self._account(rec)
        return rec
