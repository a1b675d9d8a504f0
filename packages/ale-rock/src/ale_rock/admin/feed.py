"""The change feed: every sandbox state change, fanned out to the WatchSandboxes streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field

from ale_rock.admin.state import State
from ale_rock.admin.store import SandboxRecord


@dataclass
class Change:
    """One state change, as WatchSandboxes streams it."""

    record: SandboxRecord
    previous: State | None


@dataclass
class _Watcher:
    namespace: str
    ids: set[str]
    queue: asyncio.Queue[Change] = field(default_factory=asyncio.Queue)

    def wants(self, rec: SandboxRecord) -> bool:
        return self.namespace == rec.namespace and (not self.ids or rec.id in self.ids)


class ChangeFeed:
    """Publishes changes to the watchers of their namespace (and ids). Unbounded queues: a change
    is never dropped; a watcher that stops reading is removed when its stream ends."""

    def __init__(self) -> None:
        self._watchers: list[_Watcher] = []

    def publish(self, change: Change) -> None:
        for w in self._watchers:
            if w.wants(change.record):
                w.queue.put_nowait(change)

    async def watch(
        self, namespace: str, ids: set[str], initial: Callable[[], Iterable[SandboxRecord]] | None = None
    ) -> AsyncIterator[Change]:
        """Yield the namespace's changes until the caller stops iterating; first, when ``initial``
        is given, a ``previous=None`` change for each record it returns (read after subscribing,
        so no change falls between the snapshot and the stream)."""
        watcher = _Watcher(namespace, ids)
        self._watchers.append(watcher)
        try:
            if initial is not None:
                for r in initial():
                    if r.state != State.DELETED and watcher.wants(r):
                        yield Change(r, None)
            while True:
                yield await watcher.queue.get()
        finally:
            self._watchers.remove(watcher)
