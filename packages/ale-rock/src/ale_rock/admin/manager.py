"""The Admin's parts, composed: the servicers call this.

Each part has one job — :class:`~ale_rock.admin.worker_registry.WorkerRegistry` (registration,
heartbeats, lost workers), :class:`~ale_rock.admin.lifecycle.SandboxLifecycle` (sandbox states),
:class:`~ale_rock.admin.feed.ChangeFeed` (watch fan-out), :class:`~ale_rock.admin.records.Records`
(the store and its cache), :class:`~ale_rock.admin.reconcile.Reconciler` (what worker reports mean
for their sandboxes) — and this class wires each worker event to the parts it concerns.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

from ale_rock.admin.config import AdminConfig
from ale_rock.admin.feed import Change, ChangeFeed
from ale_rock.admin.lifecycle import CreateRequest, SandboxLifecycle
from ale_rock.admin.reconcile import Reconciler
from ale_rock.admin.records import Records
from ale_rock.admin.state import State
from ale_rock.admin.store import SandboxRecord, Store, WorkerRecord
from ale_rock.admin.tasks import Tasks
from ale_rock.admin.worker_registry import WorkerRegistry
from ale_rock.admin.workers import CommitInfo, WorkerClient, WorkerClientFactory

log = logging.getLogger("ale_rock.admin")


class SandboxManager:
    """Owns sandbox and worker state through its parts; the servicers call it."""

    def __init__(self, config: AdminConfig, store: Store, client_factory: WorkerClientFactory) -> None:
        self.config = config
        self.store = store
        self.tasks = Tasks()
        self.workers = WorkerRegistry(config, store, client_factory, self.tasks)
        self.feed = ChangeFeed()
        records = Records(store)
        self.sandboxes = SandboxLifecycle(config, records, self.workers, self.feed, self.tasks)
        self.reconciler = Reconciler(self.sandboxes, records, self.workers, self.tasks)
        self.port = config.port
        """The port this Admin serves on (set once bound)."""
        self._protected: tuple[int, list[tuple[str, int]]] | None = None
        """(port, egress_protected()) — dropped when a worker (re)registers or state is recovered."""

    def recover(self) -> None:
        """Rebuild in-memory state from the store after a (re)start."""
        self.workers.recover()
        self._protected = None
        self.sandboxes.recover()
        log.info("recovered", extra={"workers": len(self.workers)})

    # -- workers -----------------------------------------------------------------------------
    def client(self, worker_id: str) -> WorkerClient:
        return self.workers.client(worker_id)

    def worker_address(self, worker_id: str) -> str:
        return self.workers.address(worker_id)

    def live_workers(self) -> list[WorkerRecord]:
        return self.workers.live()

    def egress_protected(self) -> list[tuple[str, int]]:
        """ALE services no egress rule may name: this Admin, every known worker, ``egress_denied``.
        Every create validates against it: computed once per (port, set of workers)."""
        if self._protected is not None and self._protected[0] == self.port:
            return self._protected[1]
        out = [(h, self.port) for h in ("127.0.0.1", self.config.host, socket.gethostname()) if self.port]
        for address in [*self.config.egress_denied, *(w.address for w in self.workers.records())]:
            host, _, port = address.rpartition(":")
            if host and port.isdigit():
                out.append((host.strip("[]"), int(port)))
        self._protected = (self.port, out)
        return out

    def register_worker(self, w: WorkerRecord, running: list[str]) -> list[str]:
        """Record a (re)joining worker; returns the sandbox ids it should keep."""
        self.workers.register(w)
        self._protected = None  # a new worker, or a new address
        keep = self.reconciler.keep_on_register(w.id, running)
        log.info("worker registered", extra={"worker_id": w.id, "address": w.address, "keep": len(keep)})
        return keep

    def heartbeat(self, worker_id: str, statuses: list[tuple[str, State, str]]) -> bool:
        """Record a heartbeat; False when the worker is unknown or was declared lost."""
        if not self.workers.heartbeat(worker_id):
            return False
        self.reconciler.apply_statuses(worker_id, statuses)
        return True

    def deregister_worker(self, worker_id: str) -> None:
        # A worker that leaves removed its sandboxes itself: nothing to wait for.
        if self.workers.mark_lost(worker_id, f"worker {worker_id} left the cluster", grace=False):
            self._lose(worker_id)

    def _lose(self, worker_id: str) -> None:
        self.reconciler.lose_sandboxes(worker_id, self.workers.end_grace(worker_id))

    # -- sandboxes ---------------------------------------------------------------------------
    def get(self, namespace: str, sandbox_id: str) -> SandboxRecord:
        return self.sandboxes.get(namespace, sandbox_id)

    def running(self, namespace: str, sandbox_id: str) -> SandboxRecord:
        return self.sandboxes.running(namespace, sandbox_id)

    def list_sandboxes(self, namespace: str, states: list[State]) -> list[SandboxRecord]:
        return self.sandboxes.list_sandboxes(namespace, states)

    def is_known_image(self, image: str, namespace: str) -> bool:
        return self.sandboxes.is_known_image(image, namespace)

    async def create(self, req: CreateRequest, wait: bool) -> SandboxRecord:
        return await self.sandboxes.create(req, wait)

    async def stop(self, namespace: str, sandbox_id: str, grace_ms: int, reason: str = "stopped by client") -> SandboxRecord:
        return await self.sandboxes.stop(namespace, sandbox_id, grace_ms, reason)

    async def delete(self, namespace: str, sandbox_id: str, reason: str = "deleted by client") -> None:
        await self.sandboxes.delete(namespace, sandbox_id, reason)

    async def commit(self, namespace: str, sandbox_id: str, name: str, fmt: int) -> CommitInfo:
        return await self.sandboxes.commit(namespace, sandbox_id, name, fmt)

    def update_spec(self, sandbox_id: str, spec: dict[str, Any]) -> None:
        self.sandboxes.update_spec(sandbox_id, spec)

    def watch(self, namespace: str, ids: set[str], send_initial: bool) -> AsyncIterator[Change]:
        """Yield state changes of the namespace's sandboxes until the caller stops iterating."""
        initial = (lambda: self.store.list_sandboxes(namespace=namespace)) if send_initial else None
        return self.feed.watch(namespace, ids, initial)

    # -- background upkeep -------------------------------------------------------------------
    async def upkeep_once(self) -> None:
        """One pass of heartbeat, TTL, idle and retention checks."""
        for wid in self.workers.check():
            self._lose(wid)
        self.sandboxes.expire()

    async def run_upkeep(self) -> None:
        while True:
            await asyncio.sleep(self.config.reaper_interval_s)
            try:
                await self.upkeep_once()
            except Exception:  # pragma: no cover - keep the loop alive
                log.exception("upkeep failed")

    async def close(self) -> None:
        self.tasks.cancel_all()
        await self.workers.close()
