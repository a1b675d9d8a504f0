"""Capped output capture: keep the first N bytes in memory, spill the rest to a file, within bounds.

The spill dir (/tmp/.ale) usually sits on memory-backed tmpfs charged to the sandbox's memory
limit, so unbounded spills let one chatty command (``head -c 1G /dev/zero``) push the sandbox into
the OOM killer, which could take the Rocklet. Spills are therefore capped per stream and per
directory (:class:`SpillBudget`); beyond the caps the output is counted, not kept, and the result
says so (``spill_truncated`` and the totals).
"""

from __future__ import annotations

import contextlib
import os
import threading
from io import RawIOBase
from pathlib import Path

SPILL_STREAM_CAP = 64 << 20
"""Most bytes one output stream may spill."""
SPILL_DIR_CAP = 256 << 20
"""Most bytes all spill files together may hold (also counts files left by earlier commands)."""


def _dir_bytes(directory: Path) -> int:
    total = 0
    with contextlib.suppress(OSError), os.scandir(directory) as it:
        for entry in it:
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total


class SpillBudget:
    """Bytes the spill files of one directory may still take (shared by every stream)."""

    def __init__(self, directory: Path, per_stream: int = SPILL_STREAM_CAP, total: int = SPILL_DIR_CAP) -> None:
        self.directory = directory
        self.per_stream = per_stream
        self.total = total
        self._lock = threading.Lock()
        self._others = 0
        """Bytes on disk that no open stream of ours is writing (rescanned when a stream opens)."""
        self._open: dict[int, int] = {}
        """Bytes written so far by each open stream, by id()."""

    def open(self, key: int) -> None:
        """A stream starts spilling: re-measure the directory (files may have been deleted)."""
        with self._lock:
            self._others = max(0, _dir_bytes(self.directory) - sum(self._open.values()))
            self._open[key] = 0

    def grant(self, key: int, want: int) -> int:
        """How many of ``want`` more bytes stream ``key`` may write (0 when a cap is reached)."""
        with self._lock:
            mine = self._open.get(key, 0)
            room = min(self.per_stream - mine, self.total - self._others - sum(self._open.values()))
            granted = max(0, min(want, room))
            self._open[key] = mine + granted
            return granted

    def close(self, key: int) -> None:
        """The stream's file is complete: its bytes now count as the directory's."""
        with self._lock:
            self._others += self._open.pop(key, 0)


class CappedOutput:
    """Collects one output stream.

    The first ``cap`` bytes are kept in memory. As soon as more arrive, the stream (the kept part
    included) goes to ``spill_path``, as far as ``budget`` allows, so the caller can read it later.
    """

    def __init__(self, cap: int, spill_path: Path, budget: SpillBudget | None = None) -> None:
        self.cap = cap
        self.spill_path = spill_path
        self.budget = budget or SpillBudget(spill_path.parent, total=SPILL_STREAM_CAP)
        self._head = bytearray()
        self._spill: RawIOBase | None = None
        self.total = 0
        """Bytes the command wrote to this stream, kept or not."""
        self.spilled = 0
        """Bytes in the spill file."""
        self._spilled = False
        self.spill_truncated = False
        """True when the spill file holds less than the whole stream (cap reached, disk full)."""

    def write(self, data: bytes) -> None:
        """Append a chunk."""
        if not data:
            return
        self.total += len(data)
        if not self._spilled and len(self._head) + len(data) <= self.cap:
            self._head += data
            return
        if not self._spilled:
            self._spilled = True
            self._open_spill()
            room = self.cap - len(self._head)
            pending = bytes(self._head) + data
            self._head += data[:room]
            data = pending
        self._to_spill(data)

    def _open_spill(self) -> None:
        try:
            self.spill_path.parent.mkdir(parents=True, exist_ok=True)
            # Unbuffered: a full disk shows up at this write, not at a flush we cannot attribute.
            self._spill = open(self.spill_path, "wb", buffering=0)  # noqa: SIM115 - closed in close()
        except OSError:
            self._spill = None
            self.spill_truncated = True
            return
        self.budget.open(id(self))

    def _to_spill(self, data: bytes) -> None:
        if self._spill is None:
            self.spill_truncated = True
            return
        granted = self.budget.grant(id(self), len(data))
        written = 0
        try:
            if granted:
                written = self._spill.write(data[:granted]) or 0
        except OSError:  # the sandbox's disk is full: keep counting, stop keeping
            written = 0
            granted = -1
        self.spilled += written
        if written < granted or granted < len(data):
            self.spill_truncated = True
            self._close_spill()  # nothing more will fit: release the file now

    def _close_spill(self) -> None:
        if self._spill is not None:
            with contextlib.suppress(OSError):
                self._spill.close()
            self._spill = None
            self.budget.close(id(self))

    @property
    def truncated(self) -> bool:
        """True once the stream went past the cap."""
        return self._spilled

    def value(self) -> bytes:
        """The kept bytes (at most ``cap``)."""
        return bytes(self._head)

    def close(self) -> None:
        """Flush and close the spill file, if any."""
        self._close_spill()
