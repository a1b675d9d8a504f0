"""SIGTERM unwinds `ale up` and `ale eval` as Ctrl-C does, so what they started gets stopped.

The services run in their own sessions (a Ctrl-C meant for `ale up` must not reach them first), so
without this a terminated `ale up` (a CI timeout, `kill`, systemd) left them running.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is. A subclass on purpose: when an *exact*
    KeyboardInterrupt passes through code that was run from a source string (``exec(str)``, as
    dataclasses and namedtuple do while a module imports), CPython marks it unhandled even if a
    caller catches it, and `python -m ale.cli` then ends killed by SIGINT (-2) instead of with its
    exit code (130) — a SIGTERM landing during a lazy import did exactly that in CI."""


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Terminated` (a KeyboardInterrupt) in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
