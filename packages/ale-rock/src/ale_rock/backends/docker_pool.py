"""A pool of pre-started sandboxes, refilled by one background thread.

A container starts in about the time of ``docker run``, but the Rocklet's Python + gRPC imports
take as long again; a claimed warm sandbox skips both, so create -> first exec costs a rename and
a settings rewrite. The pool knows only slot keys; launching and discarding belong to the backend.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable

log = logging.getLogger(__name__)

POOL_PREFIX = "_pool-"
"""Slot keys start with this; sandbox ids never do (they must start with a letter or digit)."""


class WarmPool:
    """Keeps ``size`` ready slots; ``claim`` hands one out and wakes the refiller."""

    def __init__(self, size: int, launch: Callable[[str], None], discard: Callable[[str], None]) -> None:
        self.size = size
        self._launch = launch
        self._discard = discard
        self._lock = threading.Lock()
        self._ready: list[str] = []
        self._pending: set[str] = set()
        self._claimed: set[str] = set()  # handed out, not yet renamed: still not an orphan
        self._closed = False
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the refill thread (no-op for size 0 or when already started)."""
        if self.size and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="docker-pool", daemon=True)
            self._thread.start()

    def claim(self) -> str | None:
        """A ready slot key, or None when the pool is empty; ``release`` it once adopted."""
        with self._lock:
            key = self._ready.pop(0) if self._ready else None
            if key is not None:
                self._claimed.add(key)
        self._wakeup.set()
        return key

    def release(self, key: str) -> None:
        """The claimed slot ``key`` is no longer the pool's (renamed or discarded)."""
        with self._lock:
            self._claimed.discard(key)

    def keys(self) -> set[str]:
        """Slots that are ready or being started (not orphans)."""
        with self._lock:
            return set(self._ready) | self._pending | self._claimed

    def ready(self) -> int:
        """Number of slots ready to claim."""
        with self._lock:
            return len(self._ready)

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop refilling and discard every ready slot."""
        with self._lock:
            self._closed = True
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        with self._lock:
            keys, self._ready = self._ready, []
        for key in keys:
            self._discard(key)

    def _loop(self) -> None:
        failures = 0
        while True:
            with self._lock:
                if self._closed:
                    return
                short = self.size - len(self._ready) - len(self._pending) > 0
                key = f"{POOL_PREFIX}{uuid.uuid4().hex[:10]}" if short else ""
                if key:
                    self._pending.add(key)
            if not key:
                self._wakeup.wait(1.0)
                self._wakeup.clear()
                continue
            ok = False
            try:
                self._launch(key)
                ok, failures = True, 0
            except Exception:  # noqa: BLE001 - a failed refill must not kill the pool
                failures += 1
                log.exception("warm sandbox %s failed to start", key)
            with self._lock:
                self._pending.discard(key)
                keep = ok and not self._closed
                if keep:
                    self._ready.append(key)
            if not keep:
                self._discard(key)
            if failures:
                self._wakeup.wait(min(30.0, 0.5 * 2**failures))
