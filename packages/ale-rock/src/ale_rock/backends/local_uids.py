"""Host uids for local sandboxes: one non-root uid per live sandbox, never two sandboxes at once.

A sandbox's processes run as its uid on the host (bubblewrap maps it to uid 1000 inside), so a
sandbox owns nothing of the host and nothing of another sandbox. Each uid in use is held by an
``flock`` on ``<lock_dir>/<uid>``: the lock dies with the process that holds it, so every local
backend on the machine (several workers, test sessions) shares one range without ever handing out
a uid that a live sandbox still has, and a restarted worker can take the uids of its dead
predecessor's sandboxes back (after killing whatever still runs under them, see ``kill_uid``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
from pathlib import Path


class UidPool:
    """Allocates host uids from ``[start, start + size)``, first free first."""

    def __init__(self, start: int, size: int, lock_dir: Path) -> None:
        self.start = start
        self.size = size
        self.lock_dir = lock_dir
        lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._held: dict[int, int] = {}  # uid -> fd holding its lock
        self.issued: set[int] = set()
        """Every uid this pool ever handed out (leak checks)."""
        self._lock = threading.Lock()

    def allocate(self) -> int:
        """A uid no live sandbox on this machine has; held until ``release``."""
        with self._lock:
            for uid in range(self.start, self.start + self.size):
                if uid not in self._held and (fd := self._try_lock(uid)) is not None:
                    self._held[uid] = fd
                    self.issued.add(uid)
                    return uid
        raise RuntimeError(f"no free sandbox uid in [{self.start}, {self.start + self.size})")

    def hold(self, uid: int) -> bool:
        """Take ``uid`` if nobody holds it (a dead worker's sandbox being reaped)."""
        with self._lock:
            if uid in self._held or not self.start <= uid < self.start + self.size:
                return False
            fd = self._try_lock(uid)
            if fd is None:
                return False
            self._held[uid] = fd
            return True

    def release(self, uid: int) -> None:
        """Give ``uid`` back (its sandbox is gone). Idempotent."""
        with self._lock:
            fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)  # closing the only descriptor drops the flock

    def is_free(self, uid: int) -> bool:
        """True when no backend on this machine holds ``uid``."""
        with self._lock:
            if uid in self._held:
                return False
            fd = self._try_lock(uid)
        if fd is None:
            return False
        os.close(fd)
        return True

    def close(self) -> None:
        """Release every uid."""
        for uid in list(self._held):
            self.release(uid)

    def _try_lock(self, uid: int) -> int | None:
        # Lock files are never unlinked: unlinking races with another process opening the file.
        fd = os.open(self.lock_dir / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd


def pids_of_uid(uid: int) -> list[int]:
    """Live processes (zombies excluded) whose real, effective or saved uid is ``uid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = dict(
                    line.split(":", 1) for line in Path(f"/proc/{entry}/status").read_text().splitlines()
                )
                if fields["State"].split()[0] in ("Z", "X"):
                    continue  # dead, waiting for its parent: nothing runs any more
                if uid in {int(v) for v in fields["Uid"].split()[:3]}:
                    found.append(int(entry))
    return found


def kill_uid(uid: int) -> list[int]:
    """SIGKILL every process running as ``uid`` (only for a uid this process holds)."""
    pids = pids_of_uid(uid)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return pids
