"""The worker registry: who is registered, how to call them, and who stopped heart-beating.

It knows nothing of sandboxes: it says when a lost worker's grace is over, and the caller decides
what that means for the sandboxes placed there.
"""

from __future__ import annotations

import logging
import time

from ale_rock.admin.config import AdminConfig
from ale_rock.admin.errors import AdminError, Code
from ale_rock.admin.store import Store, WorkerRecord
from ale_rock.admin.tasks import Tasks
from ale_rock.admin.workers import WorkerClient, WorkerClientFactory

log = logging.getLogger("ale_rock.admin")


class WorkerRegistry:
    """Registered workers, their clients, their heartbeats and the grace of lost ones."""

    def __init__(self, config: AdminConfig, store: Store, client_factory: WorkerClientFactory, tasks: Tasks) -> None:
        self.config = config
        self._store = store
        self._factory = client_factory
        self._tasks = tasks
        self._workers: dict[str, WorkerRecord] = {}
        self._clients: dict[str, WorkerClient] = {}
        self._last_seen: dict[str, float] = {}
        """Monotonic time of each live worker's last heartbeat (or registration)."""
        self._lost_since: dict[str, float] = {}
        """Lost workers whose sandboxes still wait out ``lost_worker_grace_s`` (monotonic time)."""
        self._lost_reason: dict[str, str] = {}

    def recover(self) -> None:
        """Load the workers from the store after a (re)start; live ones get a fresh lost-timeout
        to heartbeat again, plus ``recovery_grace_s``."""
        # A future "last seen" gives recovered workers the grace period on top of the lost-timeout.
        seen = time.monotonic() + max(0.0, self.config.recovery_grace_s - self.config.worker_lost_after_s)
        for w in self._store.list_workers():
            self._workers[w.id] = w
            if w.alive:
                self._last_seen[w.id] = seen
            else:
                self._lost_since[w.id] = time.monotonic()

    def __len__(self) -> int:
        return len(self._workers)

    # -- lookups -----------------------------------------------------------------------------
    def records(self) -> list[WorkerRecord]:
        """Every known worker, live or lost."""
        return list(self._workers.values())

    def live(self) -> list[WorkerRecord]:
        return [w for w in self._workers.values() if w.alive]

    def is_alive(self, worker_id: str) -> bool:
        w = self._workers.get(worker_id)
        return w is not None and w.alive

    def client(self, worker_id: str) -> WorkerClient:
        """The client of a known worker (made on first use); UNAVAILABLE for an unknown one."""
        w = self._workers.get(worker_id)
        if w is None:
            raise AdminError(Code.UNAVAILABLE, f"worker {worker_id} is unknown")
        c = self._clients.get(worker_id)
        if c is None:
            c = self._clients[worker_id] = self._factory(w.address, w.secret)
        return c

    def address(self, worker_id: str) -> str:
        """The address of a live worker; UNAVAILABLE otherwise."""
        w = self._workers.get(worker_id)
        if w is None or not w.alive:
            raise AdminError(Code.UNAVAILABLE, f"worker {worker_id} is not available")
        return w.address

    # -- membership --------------------------------------------------------------------------
    def register(self, w: WorkerRecord) -> None:
        """Record a (re)joining worker as alive; a changed address or credential gets a new client."""
        old = self._workers.get(w.id)
        if old is not None and (old.address, old.secret) != (w.address, w.secret) and w.id in self._clients:
            self._tasks.spawn(self._clients.pop(w.id).close())
        w.alive = True
        self._workers[w.id] = w
        self._last_seen[w.id] = time.monotonic()
        self._lost_since.pop(w.id, None)  # back within the grace: its sandboxes are still RUNNING
        self._store.upsert_worker(w)

    def heartbeat(self, worker_id: str) -> bool:
        """Record a heartbeat; False when the worker is unknown or was declared lost."""
        w = self._workers.get(worker_id)
        if w is None or not w.alive:
            return False
        self._last_seen[worker_id] = time.monotonic()
        return True

    def mark_lost(self, worker_id: str, reason: str, grace: bool = True) -> bool:
        """Declare a known worker lost; True when its grace is already over (none asked or
        configured): the caller loses its sandboxes now, after :meth:`end_grace`."""
        if worker_id not in self._workers:
            return False
        self._workers[worker_id].alive = False
        self._store.set_worker_alive(worker_id, False)
        # Its client stays open: a worker too busy to heart-beat still answers the calls in flight
        # (closing the channel would cancel them), and one back at the same address reuses it.
        log.warning("worker lost", extra={"worker_id": worker_id, "detail": reason})
        self._lost_since[worker_id] = time.monotonic()
        self._lost_reason[worker_id] = reason
        return not grace or self.config.lost_worker_grace_s == 0

    def end_grace(self, worker_id: str) -> str:
        """Close a lost worker's grace (and its client: calls still in flight end UNAVAILABLE);
        returns why it was lost."""
        self._lost_since.pop(worker_id, None)
        if (c := self._clients.pop(worker_id, None)) is not None:
            self._tasks.spawn(c.close())
        return self._lost_reason.pop(worker_id, f"worker {worker_id} was lost")

    def check(self) -> list[str]:
        """Declare silent workers lost; returns the workers whose grace is over now (their
        sandboxes are to be lost, after :meth:`end_grace`)."""
        mono = time.monotonic()
        over = []
        for wid, w in list(self._workers.items()):
            if w.alive and mono - self._last_seen.get(wid, mono) > self.config.worker_lost_after_s:
                if self.mark_lost(wid, f"worker {wid} stopped heart-beating"):
                    over.append(wid)
            elif not w.alive and mono - self._lost_since.get(wid, mono) > self.config.lost_worker_grace_s:
                over.append(wid)
        return over

    async def close(self) -> None:
        for c in self._clients.values():
            await c.close()
        self._clients.clear()
