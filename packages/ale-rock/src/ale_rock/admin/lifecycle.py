"""The sandbox lifecycle: admission, placement, the state machine, and TTL/idle cleanup.

All methods run on the Admin's event loop; admission + placement + insert happen without an
``await`` in between, so concurrent creates cannot overshoot a quota.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from ale_rock.admin import quotas
from ale_rock.admin.config import AdminConfig
from ale_rock.admin.errors import AdminError, Code, not_found
from ale_rock.admin.feed import Change, ChangeFeed
from ale_rock.admin.records import Records
from ale_rock.admin.scheduler import Demand, pick_worker
from ale_rock.admin.state import ACTIVE, State, can_transition, check_transition
from ale_rock.admin.store import SandboxRecord, Store
from ale_rock.admin.tasks import Tasks
from ale_rock.admin.worker_registry import WorkerRegistry
from ale_rock.admin.workers import CommitInfo, WorkerCallError

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


def new_sandbox_id() -> str:
    return "sb-" + secrets.token_hex(6)


def request_hash(spec: dict[str, Any]) -> str:
    """Fingerprint of a create request's spec (defaults filled in), to tell a retry from a reuse."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class SandboxLifecycle:
    """Creates, starts, stops, deletes and commits sandboxes; owns their state transitions."""

    def __init__(self, config: AdminConfig, records: Records, workers: WorkerRegistry, feed: ChangeFeed,
                 tasks: Tasks) -> None:
        self.config = config
        self.records = records
        self.workers = workers
        self.feed = feed
        self._tasks = tasks
        self._store: Store = records.store
        self._starts: dict[str, asyncio.Task[None]] = {}
        self._stopping: set[str] = set()  # stops in flight (a FAILED heartbeat must not win)
        self._cleaning: set[str] = set()
        self._last_active: dict[str, float] = {}

    def recover(self) -> None:
        """After a (re)start: sandboxes caught PENDING by a crash are failed (their start call died
        with the old process, the worker reaps them); running ones start a fresh idle period."""
        for r in self._store.list_sandboxes(states=[State.PENDING]):
            self.transition(r.id, State.FAILED, "admin restarted while the sandbox was starting")
        for r in self._store.list_sandboxes(states=[State.RUNNING]):
            self._last_active[r.id] = time.time()

    # -- state changes -----------------------------------------------------------------------
    def transition(self, sandbox_id: str, new: State, message: str = "", **changes: Any) -> SandboxRecord | None:
        """Move a sandbox to ``new`` if the state machine allows it; publishes the change."""
        rec = self.records.load(sandbox_id)
        if rec is None or not can_transition(rec.state, new):
            return None
        previous = rec.state
        updated = self.records.update(sandbox_id, state=new, message=message, **changes)
        assert updated is not None
        log.info("sandbox state", extra={"sandbox_id": sandbox_id, "from": previous.value, "to": new.value,
                                         "detail": message})
        if new not in ACTIVE:
            self._last_active.pop(sandbox_id, None)
        self.feed.publish(Change(updated, previous))
        return updated

    # -- lookups -----------------------------------------------------------------------------
    def get(self, namespace: str, sandbox_id: str) -> SandboxRecord:
        rec = self.records.get(sandbox_id)
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

    def touch(self, sandbox_id: str, when: float) -> None:
        """Record activity on a sandbox at ``when`` (epoch seconds) for idle cleanup."""
        self._last_active[sandbox_id] = when

    def list_sandboxes(self, namespace: str, states: list[State]) -> list[SandboxRecord]:
        wanted = states or [s for s in State if s != State.DELETED]
        return self._store.list_sandboxes(namespace=namespace, states=wanted)

    def is_known_image(self, image: str, namespace: str) -> bool:
        """Whether a create may name ``image``: the allow-list, or a commit of ``namespace`` (another
        namespace's commit of the same name does not count)."""
        images = self.config.images
        return (images is None or image == "" or image in images
                or self._store.has_image(_image_key(namespace, image)))

    # -- create ------------------------------------------------------------------------------
    async def create(self, req: CreateRequest, wait: bool) -> SandboxRecord:
        if req.request_id:
            existing = self._store.find_by_request_id(req.namespace, req.request_id)
            if existing is not None:
                if existing.request_hash and existing.request_hash != request_hash(req.spec):
                    # A retry repeats its request; another spec under the same key is a client bug
                    # that would otherwise get a sandbox it did not ask for.
                    raise AdminError(
                        Code.ALREADY_EXISTS,
                        f"request_id {req.request_id!r} was used for sandbox {existing.id} with a different spec",
                        field="request_id", sandbox_id=existing.id,
                    )
                return await self._maybe_wait(existing, wait)
        quotas.admit(
            req.namespace, req.cpu_millis, req.memory_bytes, self.config.quota_for(req.namespace),
            self.records.usage(namespace=req.namespace), self.records.usage().sandboxes,
            self.config.max_concurrent_sandboxes,
        )
        allocated = self.records.usage_by_worker()
        demand = Demand(req.cpu_millis, req.memory_bytes, req.backend, req.gpus, image=bool(req.spec.get("image")))
        worker = pick_worker(self.workers.records(), allocated, demand)
        now = time.time()
        rec = SandboxRecord(
            id=new_sandbox_id(), namespace=req.namespace, state=State.PENDING, spec=req.spec,
            cpu_millis=req.cpu_millis, memory_bytes=req.memory_bytes, expire_time=now + req.ttl_seconds,
            idle_timeout_s=req.idle_timeout_s, worker_id=worker.id, request_id=req.request_id,
            create_time=now, update_time=now, request_hash=request_hash(req.spec) if req.request_id else "",
        )
        self.records.insert(rec)
        self.feed.publish(Change(rec, None))
        task = self._tasks.spawn(self._start(rec))
        self._starts[rec.id] = task
        return await self._maybe_wait(rec, wait)

    async def _maybe_wait(self, rec: SandboxRecord, wait: bool) -> SandboxRecord:
        task = self._starts.get(rec.id)
        if wait and task is not None:
            # shield: a client that gives up must not cancel the start half-way.
            await asyncio.shield(task)
        return self.records.load(rec.id) or rec

    async def _start(self, rec: SandboxRecord) -> None:
        try:
            try:
                state, message = await self.workers.client(rec.worker_id).start(
                    rec.id, rec.namespace, rec.spec, self.config.start_timeout_s
                )
            except (WorkerCallError, AdminError) as e:
                state, message = State.FAILED, f"worker {rec.worker_id}: {e}"
            current = self.records.load(rec.id)
            if current is None or current.state != State.PENDING:
                # deleted, stopped or lost while starting: make sure the worker lets it go.
                await self._reap_quietly(rec)
                return
            if state == State.RUNNING:
                self._last_active[rec.id] = time.time()
                self.transition(rec.id, State.RUNNING)
            else:
                self.transition(rec.id, State.FAILED, message or "the worker could not start it")
                await self._reap_quietly(rec)
        except Exception:  # pragma: no cover - defensive: a start must never kill the loop
            log.exception("start failed", extra={"sandbox_id": rec.id})
            self.transition(rec.id, State.FAILED, "internal error while starting")
        finally:
            self._starts.pop(rec.id, None)

    async def _reap_quietly(self, rec: SandboxRecord) -> None:
        try:
            await self.workers.client(rec.worker_id).remove(rec.id, timeout=30)
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
        # Shielded: a caller that gives up (deadline, disconnect) must not leave the worker
        # stopping the sandbox while the store still says RUNNING — the next heartbeat would then
        # report its dead processes and fail it.
        await asyncio.shield(self._tasks.spawn(self._stop_on_worker(rec, grace_ms, reason)))
        return self.get(namespace, sandbox_id)

    async def _stop_on_worker(self, rec: SandboxRecord, grace_ms: int, reason: str) -> None:
        # While the worker stops it, its processes die: a heartbeat in that window reports it
        # FAILED, which must not win over the stop the client asked for.
        self._stopping.add(rec.id)
        try:
            await self.workers.client(rec.worker_id).stop(rec.id, grace_ms, timeout=grace_ms / 1000 + 30)
        except WorkerCallError as e:
            raise AdminError(Code.UNAVAILABLE, f"worker {rec.worker_id} could not stop it: {e}") from e
        finally:
            self._stopping.discard(rec.id)
        self.transition(rec.id, State.STOPPED, reason)

    async def delete(self, namespace: str, sandbox_id: str, reason: str = "deleted by client") -> None:
        rec = self.get(namespace, sandbox_id)
        if rec.state == State.DELETED:
            return
        if rec.state == State.PENDING and (task := self._starts.get(sandbox_id)) is not None:
            await asyncio.shield(task)
            rec = self.get(namespace, sandbox_id)
        if rec.state != State.LOST and self.workers.is_alive(rec.worker_id):
            try:
                await self.workers.client(rec.worker_id).remove(sandbox_id, timeout=60)
            except WorkerCallError as e:
                if not e.unavailable:
                    raise AdminError(Code.UNAVAILABLE, f"worker {rec.worker_id} could not remove it: {e}") from e
                # unreachable worker: it reaps the sandbox when it re-registers (not in keep list).
        self.transition(sandbox_id, State.DELETED, reason)

    async def commit(self, namespace: str, sandbox_id: str, name: str, fmt: int) -> CommitInfo:
        rec = self.get(namespace, sandbox_id)
        if rec.state not in (State.RUNNING, State.STOPPED):
            raise AdminError(Code.FAILED_PRECONDITION, f"sandbox {sandbox_id} is {rec.state.value.lower()}",
                             field="sandbox_id")
        try:
            info = await self.workers.client(rec.worker_id).commit(sandbox_id, name, fmt, timeout=600)
        except WorkerCallError as e:
            raise AdminError(Code.UNAVAILABLE if e.unavailable else Code.INTERNAL, f"commit failed: {e}") from e
        self._store.add_image(_image_key(namespace, info.image), sandbox_id)
        if name:
            self._store.add_image(_image_key(namespace, name), sandbox_id)
        return info

    def update_spec(self, sandbox_id: str, spec: dict[str, Any]) -> None:
        self.records.update(sandbox_id, spec=json.dumps(spec))

    # -- what the reconciler asks -----------------------------------------------------------
    def on_worker(self, worker_id: str) -> list[SandboxRecord]:
        """The sandboxes this Admin wants to exist on ``worker_id`` (pending, running, stopped)."""
        return self._store.list_sandboxes(worker_id=worker_id, states=ALIVE_ON_WORKER)

    def is_starting(self, sandbox_id: str) -> bool:
        return sandbox_id in self._starts

    def is_stopping(self, sandbox_id: str) -> bool:
        """A stop is in flight: its own transition, not a report, decides the state."""
        return sandbox_id in self._stopping

    def is_cleaning(self, sandbox_id: str) -> bool:
        return sandbox_id in self._cleaning

    # -- cleanup -----------------------------------------------------------------------------
    def expire(self) -> None:
        """One pass of TTL, idle and retention checks (the deletes and stops run in the background)."""
        now = time.time()
        for rec in self._store.cleanup_candidates(now):
            if rec.id in self._cleaning or rec.id in self._starts:
                continue
            if rec.expire_time <= now:
                self._tasks.spawn(self._safe(rec.id, self.delete(rec.namespace, rec.id, "ttl expired")))
            elif rec.state == State.RUNNING and rec.idle_timeout_s:
                idle = now - self._last_active.get(rec.id, now)
                if idle > rec.idle_timeout_s:
                    self._last_active[rec.id] = now  # one stop attempt per idle period
                    self._tasks.spawn(self._safe(rec.id, self.stop(rec.namespace, rec.id, 5000, "idle timeout")))
        if self.config.deleted_retention_s:
            self._store.purge_deleted(now - self.config.deleted_retention_s)

    async def _safe(self, sandbox_id: str, coro: Coroutine[Any, Any, Any]) -> None:
        self._cleaning.add(sandbox_id)
        try:
            await coro
        except AdminError as e:
            log.warning("cleanup failed", extra={"sandbox_id": sandbox_id, "detail": e.message})
        finally:
            self._cleaning.discard(sandbox_id)


def _image_key(namespace: str, image: str) -> str:
    """The images table's key: commit names are per namespace (two namespaces may both commit
    ``app:v1``). The unit separator cannot occur in a validated namespace or image name."""
    return f"{namespace}\x1f{image}"
