"""A client-side QPS limit (token bucket), as kubectl and client-go keep one."""

from __future__ import annotations

import threading
import time


class RateLimiter:
    """Blocks callers so that at most ``qps`` calls per second pass, after a burst of ``burst``."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        """Take one token, sleeping until one is there."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0  # may go negative: later callers queue behind this one
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            time.sleep(wait)
