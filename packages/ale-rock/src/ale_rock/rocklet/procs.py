"""Find and kill every process a command started, even those that left its process group.

A timed-out command gets SIGTERM to its process group, then SIGKILL after the grace; a
descendant that called setsid(2) or double-forked is in no group of ours, so each command's
processes also carry a tag in their environment (``ALE_PROC_TAG``, inherited across fork and
exec) and :func:`sweep` kills every process whose initial environment holds it. A process that
re-execs with a scrubbed environment drops the tag; that is the one escape left (the sandbox's
own teardown still ends it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid

from ale_rock.rocklet.types import RockletError

TAG_VAR = "ALE_PROC_TAG"
"""Environment variable that marks a command's processes."""
OOM_SCORE_PREFIX = "{ echo 1000 >/proc/self/oom_score_adj; } 2>/dev/null; "
"""Shell text run before a command: the OOM killer takes commands before the Rocklet (raising
one's own score needs no privilege; doing it in the child before exec leaves no window)."""


def new_tag() -> str:
    """A fresh, unguessable tag for one command."""
    return uuid.uuid4().hex


def tagged_pids(tag: str) -> list[int]:
    """Live (non-zombie) processes whose initial environment carries ``tag``."""
    needle = f"{TAG_VAR}={tag}\0".encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
            if needle not in env:
                continue
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue  # gone, or not ours to read
        if state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def signal_tagged(tag: str, sig: int) -> int:
    """Send ``sig`` to every tagged process; returns how many there were."""
    pids = tagged_pids(tag)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return len(pids)


def sweep(tag: str, pgid: int, deadline_s: float = 2.0) -> list[int]:
    """SIGKILL the group (``pgid`` > 0) and every tagged process until none is left (or the
    deadline passes).

    Loops because a process may fork between the scan and the kill. Returns the pids still alive
    at the deadline (empty when the sweep succeeded).
    """
    if pgid > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    end = time.monotonic() + deadline_s
    while True:
        left = tagged_pids(tag)
        if not left:
            return []
        if time.monotonic() >= end:
            return left
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def other_pids() -> list[int]:
    """Live (non-zombie) processes of this sandbox other than this one and its init (pid 1)."""
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):  # thread-group leaders only: our own threads are not listed
        if not name.isdigit() or int(name) in (1, me):
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue  # gone
        if state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def kill_others(deadline_s: float = 5.0) -> int:
    """SIGKILL every other process of the sandbox until none is left; returns how many there were.

    ``kill(-1)`` reaches every process this one may signal except itself and pid 1 — in the
    sandbox's pid namespace, the sandbox's processes (all run as the Rocklet's uid) — in one pass
    the kernel makes under its task-list lock, so a process forking as fast as it can leaves no
    child behind it; the loop catches what was still being created and waits out the dying. No
    tag is needed, so a process that scrubbed its environment (``env -i``) goes too. Raises
    ``RockletError`` if something is still alive at the deadline.
    """
    before = other_pids()
    end = time.monotonic() + deadline_s
    while True:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # none left / none ours
            os.kill(-1, signal.SIGKILL)
        left = other_pids()
        if not left:
            return len(before)
        if time.monotonic() >= end:
            raise RockletError("internal", f"{len(left)} processes still alive after {deadline_s:g} s: "
                                           f"pids {left[:8]}", "all_processes")
        time.sleep(0.002)  # the killed are exiting: a short wait, not a tick


def wait_gone(tag: str, until: float) -> bool:
    """Poll until no tagged process is left or ``until`` (monotonic) passes; True when none is."""
    while True:
        if not tagged_pids(tag):
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.02)


def oom_kill_count() -> int:
    """OOM kills so far in this process's memory cgroup (v2 or v1), else machine-wide; -1 unknown."""
    with contextlib.suppress(OSError, ValueError):
        for line in open("/proc/self/cgroup").read().splitlines():  # noqa: SIM115 - tiny file
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                files = [f"/sys/fs/cgroup{path}/memory.events", "/sys/fs/cgroup/memory.events"]
            elif "memory" in controllers.split(","):
                files = [f"/sys/fs/cgroup/memory{path}/memory.oom_control", "/sys/fs/cgroup/memory/memory.oom_control"]
            else:
                continue
            for name in files:
                with contextlib.suppress(OSError, ValueError):
                    return _field(open(name).read(), "oom_kill")  # noqa: SIM115 - tiny file
    with contextlib.suppress(OSError, ValueError):
        return _field(open("/proc/vmstat").read(), "oom_kill")  # noqa: SIM115 - tiny file
    return -1


def _field(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    raise ValueError(key)
