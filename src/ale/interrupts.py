"""SIGTERM unwinds `ale up` and `ale eval` as Ctrl-C does, so what they started gets stopped.

The services run in their own sessions (a Ctrl-C meant for `ale up` must not reach them first), so
without this a terminated `ale up` (a CI timeout, `kill`, systemd) left them running.

Only the *first* stop signal raises. A second one while the program unwinds is noted and ignored:
raised inside the cleanup it cut the cleanup short, and raised inside a library's critical section
(gRPC's channel state) it could leave a lock held that a later channel close waits on forever — a
twice-SIGTERMed `ale up` was seen stuck in ``_ChannelCallState.__del__`` → ``Channel.close``. And
from the first signal on the process has a deadline: SIGALRM with its default action, so the
kernel ends a process whose cleanup is stuck even where no Python code can run any more.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

STOP_DEADLINE_S = 60.0
"""Seconds a stopping `ale up` / `ale eval` has to end after its first SIGTERM or Ctrl-C; the
cleanup's own waits are bounded well inside it (`Stack.stop_all`: a 10 s grace, then SIGKILL)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is. A subclass on purpose: when an *exact*
    KeyboardInterrupt passes through code that was run from a source string (``exec(str)``, as
    dataclasses and namedtuple do while a module imports), CPython marks it unhandled even if a
    caller catches it, and `python -m ale.cli` then ends killed by SIGINT (-2) instead of with its
    exit code (130) — a SIGTERM landing during a lazy import did exactly that in CI."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) inside :func:`sigterm_interrupts`; a subclass for the reason above."""


@contextlib.contextmanager
def sigterm_interrupts(deadline_s: float = STOP_DEADLINE_S) -> Iterator[None]:
    """While inside, the first SIGTERM raises :class:`Terminated` (Ctrl-C :class:`Interrupted`) in
    the main thread and arms the stop deadline (``deadline_s``; 0 arms none); later ones are ignored,
    inside the block and after it.

    Only for a process's entry point: once a stop signal came, the process ends by the deadline
    whether or not it has left the block.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def interrupt(signum: int, frame: Any) -> None:
        nonlocal stopping
        if stopping:
            # os.write, not print: the signal may have landed inside a write to stderr's buffer.
            os.write(2, f"ale: already stopping; {signal.Signals(signum).name} ignored (the process ends within "
                        f"{deadline_s:.0f} s of the first)\n".encode())
            return
        stopping = True
        if deadline_s > 0:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(max(1, math.ceil(deadline_s)))
        raise Terminated if signum == signal.SIGTERM else Interrupted

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        # A stopping process keeps ignoring stop signals until it ends (by the deadline at the
        # latest): one landing between here and the exit would otherwise kill it with -15 after
        # a clean stop, or raise in whatever runs last.
        for s, handler in previous.items():
            signal.signal(s, interrupt if stopping else handler)
