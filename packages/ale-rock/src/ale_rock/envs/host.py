"""Holds the live environments of an EnvService: handles, step timeouts, episode budgets,
reclaiming, safety-event counters. Plain Python; the gRPC layer is in :mod:`ale_rock.envs.server`."""

from __future__ import annotations

import collections
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from ale_rock.envs import catalog
from ale_rock.envs.errors import (
    CapacityExceeded,
    EnvDeadlineExceeded,
    EnvError,
    EnvNotFound,
    InvalidAction,
    SandboxLost,
)
from ale_rock.envs.sandbox import SandboxProvider

_TOMBSTONES = 4096  # how many reclaimed handles still answer with their reason


@dataclass
class Slot:
    """One live environment."""

    handle: str
    env_id: str
    env: Any
    step_timeout_s: float
    budget_s: float
    deadline: float
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class HostLimits:
    """Limits of an :class:`EnvHost` (see ``EnvServerConfig`` for their meaning)."""

    max_envs: int = 1024
    max_action_bytes: int = 65536
    step_timeout_s: float = 300.0
    episode_budget_s: float = 3600.0


class EnvHost:
    """Creates, steps and reclaims environments by handle; thread-safe."""

    def __init__(
        self, limits: HostLimits, provider_factory: Callable[[], SandboxProvider] | None = None
    ) -> None:
        self.limits = limits
        self._provider_factory = provider_factory
        self._provider: SandboxProvider | None = None
        self._slots: dict[str, Slot] = {}
        self._dead: collections.OrderedDict[str, EnvError] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="env-step")
        self.metrics: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()

    def start_reaper(self, interval_s: float = 1.0) -> None:
        """Reclaim envs past their budget every ``interval_s`` in a daemon thread, until shutdown."""

        def loop() -> None:
            while not self._stop.wait(interval_s):
                self.reap()

        threading.Thread(target=loop, daemon=True, name="env-reaper").start()

    # -- lifecycle -------------------------------------------------------------------------
    def make(
        self, env_id: str, kwargs: dict[str, Any], step_timeout_s: float = 0, budget_s: float = 0
    ) -> Slot:
        """Build an environment; raises EnvNotFound / InvalidAction / CapacityExceeded."""
        if not catalog.is_known(env_id):
            raise EnvNotFound(f"unknown environment id {env_id!r}", field="env_id", env_id=env_id)
        with self._lock:
            if len(self._slots) >= self.limits.max_envs:
                raise CapacityExceeded(f"the server holds its maximum of {self.limits.max_envs} environments")
        if env_id.startswith("task:") and self._provider_factory is not None:
            kwargs = {**kwargs, "sandbox_provider": self._get_provider()}
        env = catalog.make_local(env_id, **kwargs)
        budget = budget_s or self.limits.episode_budget_s
        slot = Slot(
            handle=uuid.uuid4().hex,
            env_id=env_id,
            env=env,
            step_timeout_s=step_timeout_s or self.limits.step_timeout_s,
            budget_s=budget,
            deadline=time.monotonic() + budget,
        )
        with self._lock:
            self._slots[slot.handle] = slot
        self.metrics["envs_made"] += 1
        return slot

    def _get_provider(self) -> SandboxProvider:
        if self._provider is None:
            assert self._provider_factory is not None
            self._provider = self._provider_factory()
        return self._provider

    def get(self, handle: str) -> Slot:
        """The live slot of ``handle``; a reclaimed one raises the reason it was reclaimed."""
        with self._lock:
            slot = self._slots.get(handle)
            dead = self._dead.get(handle)
        if slot is not None:
            return slot
        if dead is not None:
            raise dead
        raise EnvNotFound(f"unknown env handle {handle!r}", field="env_handle", env_handle=handle)

    def reclaim(self, handle: str, reason: EnvError | None = None) -> None:
        """Close the env and forget its handle; later calls get ``reason`` (or NOT_FOUND)."""
        with self._lock:
            slot = self._slots.pop(handle, None)
            if reason is not None:
                self._dead[handle] = reason
                while len(self._dead) > _TOMBSTONES:
                    self._dead.popitem(last=False)
        if slot is not None:
            self.metrics["envs_reclaimed" if reason else "envs_closed"] += 1
            try:
                slot.env.close()
            except Exception:  # a broken sandbox must not keep the handle alive
                self.metrics["close_errors"] += 1

    def reap(self) -> int:
        """Reclaim every env past its episode budget; returns how many."""
        now = time.monotonic()
        with self._lock:
            expired = [s for s in self._slots.values() if s.deadline < now]
        for s in expired:
            self.reclaim(s.handle, self._budget_error(s))
        return len(expired)

    def shutdown(self) -> None:
        """Stop the reaper and close every environment."""
        self._stop.set()
        for handle in list(self._slots):
            self.reclaim(handle)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __len__(self) -> int:
        return len(self._slots)

    # -- episode calls ---------------------------------------------------------------------
    def reset(self, handle: str, seed: int | None) -> tuple[str, dict[str, Any]]:
        slot = self.get(handle)
        slot.deadline = time.monotonic() + slot.budget_s  # the budget is per episode
        return self._call(slot, lambda: slot.env.reset(seed=seed))  # type: ignore[no-any-return]

    def step(self, handle: str, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if len(action.encode()) > self.limits.max_action_bytes:
            raise InvalidAction(
                f"action is {len(action.encode())} bytes; the limit is {self.limits.max_action_bytes}",
                field="action",
            )
        slot = self.get(handle)
        if time.monotonic() > slot.deadline:
            err = self._budget_error(slot)
            self.reclaim(handle, err)
            raise err
        result = self._call(slot, lambda: slot.env.step(action))
        self.metrics["steps"] += 1
        for ev in result[4].get("safety_events", ()):
            self.metrics[f"safety_{ev.get('kind', 'unspecified')}"] += 1
        return result  # type: ignore[no-any-return]

    def _budget_error(self, slot: Slot) -> EnvDeadlineExceeded:
        return EnvDeadlineExceeded(
            f"episode budget of {slot.budget_s:g}s ran out; the environment was reclaimed",
            env_handle=slot.handle,
        )

    def _call(self, slot: Slot, fn: Callable[[], Any]) -> Any:
        # Calls on one env are serialized; a step that overruns its timeout loses the env, because
        # its thread cannot be stopped and the env's state is unknown afterwards.
        timeout = max(0.001, min(slot.step_timeout_s, slot.deadline - time.monotonic()))
        with slot.lock:
            fut = self._pool.submit(fn)
            try:
                return fut.result(timeout=timeout)
            except FutureTimeout:
                err = EnvDeadlineExceeded(
                    f"the call took longer than {timeout:g}s; the environment was reclaimed",
                    env_handle=slot.handle,
                )
                with self._lock:
                    self._slots.pop(slot.handle, None)
                    self._dead[slot.handle] = err
                fut.add_done_callback(lambda _f: slot.env.close())
                self.metrics["step_timeouts"] += 1
                raise err from None
            except SandboxLost as e:
                self.reclaim(slot.handle, e)
                self.metrics["sandboxes_lost"] += 1
                raise
