"""The sandbox records: the durable :class:`~ale_rock.admin.store.Store` with a read-through cache.

The lifecycle is the store's only writer of sandboxes and writes through here, so the cache stays
coherent, and the exec hot path skips an SQLite read and a JSON parse.
"""

from __future__ import annotations

from typing import Any

from ale_rock.admin.state import State
from ale_rock.admin.store import SandboxRecord, Store


class Records:
    """Sandbox records by id: reads served from memory when possible, writes committed first."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._live: dict[str, SandboxRecord] = {}
        """Records read or written since start that are not DELETED."""

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
        """The record as the store holds it now."""
        return self.store.get_sandbox(sandbox_id)

    def insert(self, rec: SandboxRecord) -> None:
        self.store.insert_sandbox(rec)
        self._live[rec.id] = rec

    def update(self, sandbox_id: str, **changes: Any) -> SandboxRecord | None:
        """Write ``changes`` (see :meth:`Store.update_sandbox`); returns the record as stored."""
        self.store.update_sandbox(sandbox_id, **changes)
        rec = self.store.get_sandbox(sandbox_id)
        if rec is None or rec.state == State.DELETED:
            self._live.pop(sandbox_id, None)
        else:
            self._live[sandbox_id] = rec
        return rec
