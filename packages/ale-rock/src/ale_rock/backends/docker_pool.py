"""Warm pools of pre-started sandboxes, one per shape (image, limits), sized from recent demand.

A container starts in about the time of ``docker run``, but the Rocklet's Python + gRPC imports
take about as long again; a claimed warm sandbox skips both, so create -> first exec costs a rename
and a settings rewrite. The pools know only slot keys and shapes; launching and discarding belong
to the backend.

Sizing: each shape keeps ``max(floor, claims in the last window)`` slots, capped per shape and in
total, so a shape that is asked for often (a task's own image, the benchmark's limits) gets a pool
of its own without configuration, and one nobody asks for any more shrinks back to its floor.
Several refill threads start slots in parallel so back-to-back creates do not drain a pool faster
than it refills. A claim holds its shape's refills and discards back for ``refill_delay_s`` (once per window of
that length, so a stream of claims cannot starve the refill): starting a container costs the engine
and the new Rocklet a few hundred ms of CPU, which would otherwise land on the claimed sandbox's
first commands.

A slot is handed out at most once: keys are fresh for every launch, a claimed key is never put
back, and ``claim`` asserts it (a pooled sandbox must be indistinguishable from a fresh one, so a
container a tenant has used is never given to another).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

POOL_PREFIX = "_pool-"
"""Slot keys start with this; sandbox ids never do (they must start with a letter or digit)."""


@dataclass
class _Shape:
    """One shape's slots and recent demand."""

    floor: int = 0
    ready: list[tuple[str, float]] = field(default_factory=list)  # (slot key, ready since)
    pending: set[str] = field(default_factory=set)
    claims: deque[float] = field(default_factory=deque)  # monotonic times of recent claims
    failures: int = 0
    retry_at: float = 0.0  # no launch before (a failure's backoff, a claim's refill delay)


class WarmPools:
    """Ready slots per shape; ``claim`` hands one out (or records the miss) and wakes the refillers."""

    def __init__(
        self,
        launch: Callable[[str, Hashable], None],
        discard: Callable[[str], None],
        *,
        floors: dict[Hashable, int] | None = None,
        max_per_shape: int = 8,
        max_total: int = 16,
        window_s: float = 30.0,
        refillers: int = 2,
        enabled: bool = True,
        refill_delay_s: float = 0.0,
    ) -> None:
        self._launch = launch
        self._discard = discard
        self.max_per_shape = max_per_shape
        self.max_total = max_total
        self.window_s = window_s
        self.enabled = enabled
        self.refill_delay_s = refill_delay_s
        self._refillers = max(1, refillers)
        self._lock = threading.Lock()
        self._shapes: dict[Hashable, _Shape] = {k: _Shape(floor=n) for k, n in (floors or {}).items()}
        self._claimed: set[str] = set()  # handed out, not yet renamed: still not an orphan
        self._handed_out: set[str] = set()  # every key ever claimed: none may be handed out twice
        self._closed = False
        self._wakeup = threading.Condition(self._lock)
        self._threads: list[threading.Thread] = []

    # -- public -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the refill threads (no-op when disabled or already started)."""
        if not self.enabled or self._threads:
            return
        for i in range(self._refillers):
            t = threading.Thread(target=self._loop, name=f"docker-pool-{i}", daemon=True)
            self._threads.append(t)
            t.start()

    def claim(self, shape: Hashable) -> str | None:
        """A ready slot of ``shape``, or None; the demand is recorded either way. ``release`` it."""
        if not self.enabled:
            return None
        with self._lock:
            s = self._shapes.setdefault(shape, _Shape())
            now = time.monotonic()
            s.claims.append(now)
            key = s.ready.pop(0)[0] if s.ready else None
            if key is not None and s.retry_at < now:  # not already held back: no starving
                s.retry_at = now + self.refill_delay_s
            if key is not None:
                assert key not in self._handed_out, f"warm slot {key} handed out twice"
                self._handed_out.add(key)
                self._claimed.add(key)
            self._wakeup.notify_all()
        return key

    def release(self, key: str) -> None:
        """The claimed slot ``key`` is no longer the pools' (renamed or discarded)."""
        with self._lock:
            self._claimed.discard(key)

    def keys(self) -> set[str]:
        """Slots that are ready, being started or just claimed (not orphans)."""
        with self._lock:
            out = set(self._claimed)
            for s in self._shapes.values():
                out |= {k for k, _ in s.ready} | s.pending
            return out

    def ready(self, shape: Hashable | None = None) -> int:
        """Slots ready to claim (of ``shape``, or of all shapes)."""
        with self._lock:
            shapes = [self._shapes.get(shape)] if shape is not None else list(self._shapes.values())
            return sum(len(s.ready) for s in shapes if s is not None)

    def target(self, shape: Hashable) -> int:
        """How many slots ``shape`` should hold now."""
        with self._lock:
            s = self._shapes.get(shape)
            return self._target(s, time.monotonic()) if s is not None else 0

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop refilling and discard every ready slot."""
        with self._lock:
            self._closed = True
            self._wakeup.notify_all()
        for t in self._threads:
            t.join(timeout_s)
        with self._lock:
            keys = [k for s in self._shapes.values() for k, _ in s.ready]
            for s in self._shapes.values():
                s.ready = []
        for key in keys:
            self._discard(key)

    # -- refill -----------------------------------------------------------------------------------

    def _target(self, s: _Shape, now: float) -> int:
        while s.claims and s.claims[0] < now - self.window_s:
            s.claims.popleft()
        return min(self.max_per_shape, max(s.floor, len(s.claims)))

    def _next(self, now: float) -> tuple[str, Hashable] | tuple[str, None] | None:
        """Under the lock: ("launch", shape), ("discard", None) with the key popped, or None."""
        total = sum(len(s.ready) + len(s.pending) for s in self._shapes.values())
        best: Hashable | None = None
        best_short = 0
        for shape, s in self._shapes.items():
            have = len(s.ready) + len(s.pending)
            want = self._target(s, now)
            # Shrink: demand went away; the oldest surplus slot goes (idle for a whole window), not
            # while a claim holds the shape back (removing a container costs the engine CPU too).
            if len(s.ready) and have > want and now - s.ready[0][1] > self.window_s and now >= s.retry_at:
                key = s.ready.pop(0)[0]
                return key, None
            if want - have > best_short and now >= s.retry_at:
                best, best_short = shape, want - have
        if best is None or total >= self.max_total:
            return None
        key = f"{POOL_PREFIX}{uuid.uuid4().hex[:10]}"
        self._shapes[best].pending.add(key)
        return key, best

    def _loop(self) -> None:
        while True:
            with self._lock:
                while True:
                    if self._closed:
                        return
                    now = time.monotonic()
                    job = self._next(now)
                    if job is not None:
                        break
                    held = [s.retry_at - now for s in self._shapes.values() if s.retry_at > now]
                    self._wakeup.wait(min([1.0, *held]))
            key, shape = job
            if shape is None:
                self._discard(key)
                continue
            ok = False
            try:
                self._launch(key, shape)
                ok = True
            except Exception:  # noqa: BLE001 - a failed refill must not kill the pool
                log.exception("warm sandbox %s failed to start", key)
            with self._lock:
                s = self._shapes[shape]
                s.pending.discard(key)
                if ok:
                    s.failures = 0
                else:  # back off this shape only (a bad image must not starve the others)
                    s.failures += 1
                    s.retry_at = time.monotonic() + min(30.0, 0.5 * 2**s.failures)
                keep = ok and not self._closed
                if keep:
                    s.ready.append((key, time.monotonic()))
            if not keep:
                self._discard(key)
