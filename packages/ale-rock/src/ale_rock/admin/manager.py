"""The sandbox lifecycle: admission, placement, the state machine, TTL/idle cleanup, lost workers.

Plain Python over the store and a :class:`~ale_rock.admin.workers.WorkerClient` per worker. All
methods run on the Admin's event loop; admission + placement + insert happen without an ``await``
in between, so concurrent creates cannot overshoot a quota.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ale_rock.admin import quotas
from ale_rock.admin.config import AdminConfig
from ale_rock.admin.errors import AdminError, Code, not_found
from ale_rock.admin.scheduler import Demand, pick_worker
from ale_rock.admin.state import ACTIVE, State, can_transition, check_transition
from ale_rock.admin.store import SandboxRecord, Store, WorkerRecord
from ale_rock.admin.workers import CommitInfo, WorkerCallError, WorkerClient, WorkerClientFactory

log = logging.getLogger("ale_rock.admin")

ALIVE_ON_WORKER = (State.PENDING, State.RUNNING, State.STOPPED)


@dataclass
class CreateRequest:
    """A validated create request, defaults filled in."""

    namespace: str
    spec: dict[str, Any]
    cpu_millis: int
    memory_bytes: int
    ttl_seconds: int
    idle_timeout_s: int
    backend: str = ""
    gpus: int = 0
    request_id: str = ""


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


def new_sandbox_id() -> str:
    return "sb-" + secrets.token_hex(6)


class SandboxManager:
    """Owns sandbox and worker state; the servicers call it."""

    def __init__(self, config: AdminConfig, store: Store, client_factory: WorkerClientFactory) -> None:
        self.config = config
        self.store = store
        self._factory = client_factory
        self._clients: dict[str, WorkerClient] = {}
        self._workers: dict[str, WorkerRecord] = {}
        self._last_seen: dict[str, float] = {}
        self._lost_since: dict[str, float] = {}
        """Lost workers whose sandboxes still wait out ``lost_worker_grace_s`` (monotonic time)."""
        self._reconciling: set[str] = set()
        self._stopping: set[str] = set()  # stops in flight (a FAILED heartbeat must not win)
        self._lost_reason: dict[str, str] = {}
        self._last_active: dict[str, float] = {}
        self._watchers: list[_Watcher] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._starts: dict[str, asyncio.Task[None]] = {}
        self._cleaning: set[str] = set()
        # Read-through cache of live records: the manager is the store's only writer, so it stays
        # coherent, and the exec hot path skips an SQLite read and a JSON parse.
        self._records: dict[str, SandboxRecord] = {}
        self.port = config.port
        """The port this Admin serves on (set once bound)."""

    # -- recovery ----------------------------------------------------------------------------
    def recover(self) -> None:
        """Rebuild in-memory state from the store after a (re)start.

        Live workers get a fresh lost-timeout to heartbeat again; sandboxes caught PENDING by a
        crash are failed (their start call died with the old process, the worker reaps them).
        """
        # A future "last seen" gives recovered workers the grace period on top of the lost-timeout.
        seen = time.monotonic() + max(0.0, self.config.recovery_grace_s - self.config.worker_lost_after_s)
        for w in self.store.list_workers():
            self._workers[w.id] = w
            if w.alive:
                self._last_seen[w.id] = seen
            else:
                self._lost_since[w.id] = time.monotonic()
        for r in self.store.list_sandboxes(states=[State.PENDING]):
            self._transition(r.id, State.FAILED, "admin restarted while the sandbox was starting")
        for r in self.store.list_sandboxes(states=[State.RUNNING]):
            self._last_active[r.id] = time.time()
        log.info("recovered", extra={"workers": len(self._workers)})

    def client(self, worker_id: str) -> WorkerClient:
        w = self._workers.get(worker_id)
        if w is None:
            raise AdminError(Code.UNAVAILABLE, f"worker {worker_id} is unknown")
        c = self._clients.get(worker_id)
        if c is None:
            c = self._clients[worker_id] = self._factory(w.address, w.secret)
        return c

    def egress_protected(self) -> list[tuple[str, int]]:
        """ALE services no egress rule may name: this Admin, every known worker, ``egress_denied``."""
        out = [(h, self.port) for h in ("127.0.0.1", self.config.host, socket.gethostname()) if self.port]
        for address in [*self.config.egress_denied, *(w.address for w in self._workers.values())]:
            host, _, port = address.rpartition(":")
            if host and port.isdigit():
                out.append((host.strip("[]"), int(port)))
        return out

    def worker_address(self, worker_id: str) -> str:
        w = self._workers.get(worker_id)
        if w is None or not w.alive:
            raise AdminError(Code.UNAVAILABLE, f"worker {worker_id} is not available")
        return w.address

    # -- state changes -----------------------------------------------------------------------
    def _transition(self, sandbox_id: str, new: State, message: str = "", **changes: Any) -> SandboxRecord | None:
        rec = self.store.get_sandbox(sandbox_id)
        if rec is None or not can_transition(rec.state, new):
            return None
        previous = rec.state
        self.store.update_sandbox(sandbox_id, state=new, message=message, **changes)
        updated = self.store.get_sandbox(sandbox_id)
        assert updated is not None
        if new == State.DELETED:
            self._records.pop(sandbox_id, None)
        else:
            self._records[sandbox_id] = updated
        log.info("sandbox state", extra={"sandbox_id": sandbox_id, "from": previous.value, "to": new.value,
                                         "detail": message})
        if new not in ACTIVE:
            self._last_active.pop(sandbox_id, None)
        self._notify(Change(updated, previous))
        return updated

    def _notify(self, change: Change) -> None:
        for w in self._watchers:
            if w.namespace == change.record.namespace and (not w.ids or change.record.id in w.ids):
                w.queue.put_nowait(change)

    async def watch(self, namespace: str, ids: set[str], send_initial: bool) -> AsyncIterator[Change]:
        """Yield state changes of the namespace's sandboxes until the caller stops iterating."""
        watcher = _Watcher(namespace, ids)
        self._watchers.append(watcher)
        try:
            if send_initial:
                for r in self.store.list_sandboxes(namespace=namespace):
                    if r.state != State.DELETED and (not ids or r.id in ids):
                        yield Change(r, None)
            while True:
                yield await watcher.queue.get()
        finally:
            self._watchers.remove(watcher)

    # -- lookups -----------------------------------------------------------------------------
    def get(self, namespace: str, sandbox_id: str) -> SandboxRecord:
        rec = self._records.get(sandbox_id)
        if rec is None:
            rec = self.store.get_sandbox(sandbox_id)
            if rec is not None and rec.state != State.DELETED:
                self._records[sandbox_id] = rec
        if rec is None or rec.namespace != namespace:
            raise not_found(sandbox_id)
        return rec

    def running(self, namespace: str, sandbox_id: str) -> SandboxRecord:
        """The sandbox if it accepts commands; records activity for idle cleanup."""
        rec = self.get(namespace, sandbox_id)
        if rec.state == State.LOST:
            raise AdminError(Code.LOST, f"sandbox {sandbox_id} was lost: {rec.message}", field="sandbox_id")
        if rec.state != State.RUNNING:
            raise AdminError(
                Code.FAILED_PRECONDITION, f"sandbox {sandbox_id} is {rec.state.value.lower()}, not running",
                field="sandbox_id", state=rec.state.value,
            )
        self._last_active[sandbox_id] = time.time()
        return rec

    def list_sandboxes(self, namespace: str, states: list[State]) -> list[SandboxRecord]:
        wanted = states or [s for s in State if s != State.DELETED]
        return self.store.list_sandboxes(namespace=namespace, states=wanted)

    def is_known_image(self, image: str, namespace: str) -> bool:
        """Whether a create may name ``image``: the allow-list, or a commit of ``namespace`` (another
        namespace's commit of the same name does not count)."""
        images = self.config.images
        return (images is None or image == "" or image in images
                or self.store.has_image(_image_key(namespace, image)))

    # -- create ------------------------------------------------------------------------------
    async def create(self, req: CreateRequest, wait: bool) -> SandboxRecord:
        if req.request_id:
            existing = self.store.find_by_request_id(req.namespace, req.request_id)
            if existing is not None:
                return await self._maybe_wait(existing, wait)
        quotas.admit(
            req.namespace, req.cpu_millis, req.memory_bytes, self.config.quota_for(req.namespace),
            self.store.usage(namespace=req.namespace), self.store.usage().sandboxes,
            self.config.max_concurrent_sandboxes,
        )
        allocated = {wid: self.store.usage(worker_id=wid) for wid, w in self._workers.items() if w.alive}
        worker = pick_worker(
            list(self._workers.values()), allocated,
            Demand(req.cpu_millis, req.memory_bytes, req.backend, req.gpus),
        )
        now = time.time()
        rec = SandboxRecord(
            id=new_sandbox_id(), namespace=req.namespace, state=State.PENDING, spec=req.spec,
            cpu_millis=req.cpu_millis, memory_bytes=req.memory_bytes, expire_time=now + req.ttl_seconds,
            idle_timeout_s=req.idle_timeout_s, worker_id=worker.id, request_id=req.request_id,
            create_time=now, update_time=now,
        )
        self.store.insert_sandbox(rec)
        self._records[rec.id] = rec
        self._notify(Change(rec, None))
        task = asyncio.get_running_loop().create_task(self._start(rec))
        self._starts[rec.id] = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await self._maybe_wait(rec, wait)

    async def _maybe_wait(self, rec: SandboxRecord, wait: bool) -> SandboxRecord:
        task = self._starts.get(rec.id)
        if wait and task is not None:
            # shield: a client that gives up must not cancel the start half-way.
            await asyncio.shield(task)
        return self.store.get_sandbox(rec.id) or rec

    async def _start(self, rec: SandboxRecord) -> None:
        try:
            try:
                state, message = await self.client(rec.worker_id).start(
                    rec.id, rec.namespace, rec.spec, self.config.start_timeout_s
                )
            except (WorkerCallError, AdminError) as e:
                state, message = State.FAILED, f"worker {rec.worker_id}: {e}"
            current = self.store.get_sandbox(rec.id)
            if current is None or current.state != State.PENDING:
                # deleted, stopped or lost while starting: make sure the worker lets it go.
                await self._reap_quietly(rec)
                return
            if state == State.RUNNING:
                self._last_active[rec.id] = time.time()
                self._transition(rec.id, State.RUNNING)
            else:
                self._transition(rec.id, State.FAILED, message or "the worker could not start it")
                await self._reap_quietly(rec)
        except Exception:  # pragma: no cover - defensive: a start must never kill the loop
            log.exception("start failed", extra={"sandbox_id": rec.id})
            self._transition(rec.id, State.FAILED, "internal error while starting")
        finally:
            self._starts.pop(rec.id, None)

    async def _reap_quietly(self, rec: SandboxRecord) -> None:
        try:
            await self.client(rec.worker_id).remove(rec.id, timeout=30)
        except (WorkerCallError, AdminError) as e:
            log.warning("reap failed", extra={"sandbox_id": rec.id, "detail": str(e)})

    # -- stop / delete / commit --------------------------------------------------------------
    async def stop(self, namespace: str, sandbox_id: str, grace_ms: int, reason: str = "stopped by client") -> SandboxRecord:
        rec = self.get(namespace, sandbox_id)
        if rec.state == State.STOPPED:
            return rec
        check_transition(sandbox_id, rec.state, State.STOPPED)
        if rec.state == State.PENDING and (task := self._starts.get(sandbox_id)) is not None:
            await asyncio.shield(task)
            return await self.stop(namespace, sandbox_id, grace_ms, reason)
        # While the worker stops it, its processes die: a heartbeat in that window reports it
        # FAILED, which must not win over the stop the client asked for.
        self._stopping.add(sandbox_id)
        try:
            await self.client(rec.worker_id).stop(sandbox_id, grace_ms, timeout=grace_ms / 1000 + 30)
        except WorkerCallError as e:
            raise AdminError(Code.UNAVAILABLE, f"worker {rec.worker_id} could not stop it: {e}") from e
        finally:
            self._stopping.discard(sandbox_id)
        return self._transition(sandbox_id, State.STOPPED, reason) or self.get(namespace, sandbox_id)

    async def delete(self, namespace: str, sandbox_id: str, reason: str = "deleted by client") -> None:
        rec = self.get(namespace, sandbox_id)
        if rec.state == State.DELETED:
            return
        if rec.state == State.PENDING and (task := self._starts.get(sandbox_id)) is not None:
            await asyncio.shield(task)
            rec = self.get(namespace, sandbox_id)
        if rec.state != State.LOST and rec.worker_id in self._workers and self._workers[rec.worker_id].alive:
            try:
                await self.client(rec.worker_id).remove(sandbox_id, timeout=60)
            except WorkerCallError as e:
                if not e.unavailable:
                    raise AdminError(Code.UNAVAILABLE, f"worker {rec.worker_id} could not remove it: {e}") from e
                # unreachable worker: it reaps the sandbox when it re-registers (not in keep list).
        self._transition(sandbox_id, State.DELETED, reason)

    async def commit(self, namespace: str, sandbox_id: str, name: str, fmt: int) -> CommitInfo:
        rec = self.get(namespace, sandbox_id)
        if rec.state not in (State.RUNNING, State.STOPPED):
            raise AdminError(Code.FAILED_PRECONDITION, f"sandbox {sandbox_id} is {rec.state.value.lower()}",
                             field="sandbox_id")
        try:
            info = await self.client(rec.worker_id).commit(sandbox_id, name, fmt, timeout=600)
        except WorkerCallError as e:
            raise AdminError(Code.UNAVAILABLE if e.unavailable else Code.INTERNAL, f"commit failed: {e}") from e
        self.store.add_image(_image_key(namespace, info.image), sandbox_id)
        if name:
            self.store.add_image(_image_key(namespace, name), sandbox_id)
        return info

    def update_spec(self, sandbox_id: str, spec: dict[str, Any]) -> None:
        self.store.update_sandbox(sandbox_id, spec=json.dumps(spec))
        if (rec := self.store.get_sandbox(sandbox_id)) is not None:
            self._records[sandbox_id] = rec

    # -- workers -----------------------------------------------------------------------------
    def register_worker(self, w: WorkerRecord, running: list[str]) -> list[str]:
        """Record a (re)joining worker; returns the sandbox ids it should keep."""
        old = self._workers.get(w.id)
        if old is not None and (old.address, old.secret) != (w.address, w.secret) and w.id in self._clients:
            self._spawn(self._clients.pop(w.id).close())
        w.alive = True
        self._workers[w.id] = w
        self._last_seen[w.id] = time.monotonic()
        self._lost_since.pop(w.id, None)  # back within the grace: its sandboxes are still RUNNING
        self.store.upsert_worker(w)
        reported = set(running)
        keep = []
        for rec in self.store.list_sandboxes(worker_id=w.id, states=ALIVE_ON_WORKER):
            # stopped sandboxes have no processes to report; their files are the worker's to keep
            if rec.id in reported or rec.id in self._starts or rec.state == State.STOPPED:
                keep.append(rec.id)
            else:
                self._transition(rec.id, State.LOST, f"worker {w.id} restarted without it")
        log.info("worker registered", extra={"worker_id": w.id, "address": w.address, "keep": len(keep)})
        return keep

    def heartbeat(self, worker_id: str, statuses: list[tuple[str, State, str]]) -> bool:
        """Record a heartbeat; False when the worker is unknown or was declared lost."""
        w = self._workers.get(worker_id)
        if w is None or not w.alive:
            return False
        self._last_seen[worker_id] = time.monotonic()
        for sid, state, message in statuses:
            rec = self._records.get(sid) or self.store.get_sandbox(sid)
            if not self._live_on(worker_id, sid, rec):
                self._reconcile(worker_id, sid)
                continue
            if state != State.FAILED:
                continue  # only failures carry news; the Admin drives every other transition
            if rec is not None and rec.state == State.RUNNING and sid not in self._stopping:
                self._transition(sid, State.FAILED, message or "its processes died")
        return True

    def _live_on(self, worker_id: str, sandbox_id: str, rec: SandboxRecord | None) -> bool:
        """Whether this Admin wants ``sandbox_id`` to exist on ``worker_id``."""
        if sandbox_id in self._starts:
            return True
        return rec is not None and rec.worker_id == worker_id and rec.state in ALIVE_ON_WORKER

    def _reconcile(self, worker_id: str, sandbox_id: str) -> None:
        """A worker holds a sandbox this Admin does not consider live (it failed, was deleted or
        forgotten while the Admin was down — a kill -9 mid-create): remove it from the worker."""
        if sandbox_id in self._reconciling or sandbox_id in self._cleaning:
            return
        self._reconciling.add(sandbox_id)

        async def remove() -> None:
            try:
                await self.client(worker_id).remove(sandbox_id, timeout=60)
                log.info("removed a sandbox the admin does not hold", extra={"sandbox_id": sandbox_id,
                                                                              "worker_id": worker_id})
            except (WorkerCallError, AdminError) as e:
                log.warning("reconcile failed", extra={"sandbox_id": sandbox_id, "detail": str(e)})
            finally:
                self._reconciling.discard(sandbox_id)

        self._spawn(remove())

    def deregister_worker(self, worker_id: str) -> None:
        if worker_id in self._workers:
            # A worker that leaves removed its sandboxes itself: nothing to wait for.
            self._mark_worker_lost(worker_id, f"worker {worker_id} left the cluster", grace=False)

    def _mark_worker_lost(self, worker_id: str, reason: str, grace: bool = True) -> None:
        w = self._workers[worker_id]
        w.alive = False
        self.store.set_worker_alive(worker_id, False)
        if (c := self._clients.pop(worker_id, None)) is not None:
            self._spawn(c.close())
        log.warning("worker lost", extra={"worker_id": worker_id, "detail": reason})
        self._lost_since[worker_id] = time.monotonic()
        self._lost_reason[worker_id] = reason
        if not grace or self.config.lost_worker_grace_s == 0:
            self._lose_sandboxes(worker_id)

    def _lose_sandboxes(self, worker_id: str) -> None:
        """The lost worker's grace is over: its sandboxes become LOST."""
        self._lost_since.pop(worker_id, None)
        reason = self._lost_reason.pop(worker_id, f"worker {worker_id} was lost")
        for rec in self.store.list_sandboxes(worker_id=worker_id, states=ALIVE_ON_WORKER):
            self._transition(rec.id, State.LOST, reason)

    def live_workers(self) -> list[WorkerRecord]:
        return [w for w in self._workers.values() if w.alive]

    # -- background upkeep -------------------------------------------------------------------
    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def upkeep_once(self) -> None:
        """One pass of heartbeat, TTL, idle and retention checks."""
        mono, now = time.monotonic(), time.time()
        for wid, w in list(self._workers.items()):
            if w.alive and mono - self._last_seen.get(wid, mono) > self.config.worker_lost_after_s:
                self._mark_worker_lost(wid, f"worker {wid} stopped heart-beating")
            elif not w.alive and mono - self._lost_since.get(wid, mono) > self.config.lost_worker_grace_s:
                self._lose_sandboxes(wid)
        for rec in self.store.list_sandboxes(states=[State.PENDING, State.RUNNING, State.STOPPED, State.FAILED,
                                                     State.LOST]):
            if rec.id in self._cleaning or rec.id in self._starts:
                continue
            if rec.expire_time <= now:
                self._spawn(self._safe(rec.id, self.delete(rec.namespace, rec.id, "ttl expired")))
            elif rec.state == State.RUNNING and rec.idle_timeout_s:
                idle = now - self._last_active.get(rec.id, now)
                if idle > rec.idle_timeout_s:
                    self._last_active[rec.id] = now  # one stop attempt per idle period
                    self._spawn(self._safe(rec.id, self.stop(rec.namespace, rec.id, 5000, "idle timeout")))
        if self.config.deleted_retention_s:
            self.store.purge_deleted(now - self.config.deleted_retention_s)

    async def _safe(self, sandbox_id: str, coro: Any) -> None:
        self._cleaning.add(sandbox_id)
        try:
            await coro
        except AdminError as e:
            log.warning("cleanup failed", extra={"sandbox_id": sandbox_id, "detail": e.message})
        finally:
            self._cleaning.discard(sandbox_id)

    async def run_upkeep(self) -> None:
        while True:
            await asyncio.sleep(self.config.reaper_interval_s)
            try:
                await self.upkeep_once()
            except Exception:  # pragma: no cover - keep the loop alive
                log.exception("upkeep failed")

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        for c in self._clients.values():
            await c.close()
        self._clients.clear()


def _image_key(namespace: str, image: str) -> str:
    """The images table's key: commit names are per namespace (two namespaces may both commit
    ``app:v1``). The unit separator cannot occur in a validated namespace or image name."""
    return f"{namespace}\x1f{image}"
