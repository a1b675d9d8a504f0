"""Capped output capture: keep the first N bytes in memory, spill everything to a file beyond."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO


class CappedOutput:
    """Collects one output stream.

    The first ``cap`` bytes are kept in memory. As soon as more arrive, the whole stream (the kept
    part included) goes to ``spill_path`` so the caller can read the full text later.
    """

    def __init__(self, cap: int, spill_path: Path) -> None:
        self.cap = cap
        self.spill_path = spill_path
        self._head = bytearray()
        self._spill: BinaryIO | None = None
        self.total = 0
        self._spilled = False

    def write(self, data: bytes) -> None:
        """Append a chunk."""
        if not data:
            return
        self.total += len(data)
        if self._spill is not None:
            self._spill.write(data)
            return
        if len(self._head) + len(data) <= self.cap:
            self._head += data
            return
        self.spill_path.parent.mkdir(parents=True, exist_ok=True)
        self._spill = open(self.spill_path, "wb")  # noqa: SIM115 - closed in close()
        self._spilled = True
        self._spill.write(self._head)
        self._spill.write(data)
        room = self.cap - len(self._head)
        self._head += data[:room]

    @property
    def truncated(self) -> bool:
        """True once the stream went past the cap."""
        return self._spilled

    def value(self) -> bytes:
        """The kept bytes (at most ``cap``)."""
        return bytes(self._head)

    def close(self) -> None:
        """Flush and close the spill file, if any."""
        if self._spill is not None:
            self._spill.close()
            self._spill = None
