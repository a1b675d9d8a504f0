"""Polling for tests: wait for the event itself, never a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float = 15.0, what: str = "condition", interval: float = 0.05) -> T:
    """Call ``check`` every ``interval`` s until it returns something truthy, and return that;
    raise ``AssertionError`` naming ``what`` after ``timeout`` s (``check`` is tried once more at the end)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
