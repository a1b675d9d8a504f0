"""Trajectory recording: one JSONL file per run, appended after every step (flushed
at once, fsynced by a background thread).

Lines: a `header`, one `turn` per assistant turn (with its observations), `irrelevant` marks
written when compression prunes or summarizes turns, and an `end` line. A run killed with
SIGKILL leaves every completed step on disk; `load_trajectory` ignores a torn last line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any


@dataclass
class ObservationRecord:
    tool_call_id: str
    content: str
    is_error: bool = False


@dataclass
class TurnRecord:
    """One assistant turn and the observations it got back."""

    index: int
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """[{"id", "name", "arguments"}]"""
    observations: list[ObservationRecord] = field(default_factory=list)
    error: bool = False
    """A tool or execution error happened in this turn (masked out of SFT)."""
    relevant: bool = True
    """False once compression pruned or summarized the turn (masked out of SFT)."""
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    completion_token_ids: list[int] = field(default_factory=list)
    completion_logprobs: list[float] = field(default_factory=list)
    chunk_index: int = 0


@dataclass
class TrajectoryRecord:
    """A whole run, as read back from disk."""

    id: str
    task: str
    turns: list[TurnRecord] = field(default_factory=list)
    stop_reason: str | None = None
    """None when the run did not finish (killed)."""
    metadata: dict[str, str] = field(default_factory=dict)
    start_time: float = 0.0
    end_time: float | None = None


class TrajectoryWriter:
    """Appends records durably.

    Every line is written and flushed to the kernel before the step continues, so a killed
    process (even SIGKILL) loses nothing. `fsync` decides when the kernel is forced to disk
    (which only matters for a machine crash): "sync" after every line (slow on busy disks),
    "async" (default) by a background thread right after every line, "off" never.
    """

    def __init__(self, path: str | os.PathLike[str], fsync: str = "async") -> None:
        if fsync not in ("sync", "async", "off"):
            raise ValueError(f"fsync must be sync, async or off, not {fsync!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (held open for the run)
        self._mode = fsync
        self._dirty = threading.Event()
        self._closing = False
        self._syncer: threading.Thread | None = None
        if fsync == "async":
            self._syncer = threading.Thread(target=self._sync_loop, name="trajectory-fsync", daemon=True)
            self._syncer.start()

    def _sync_loop(self) -> None:
        while not self._closing:
            self._dirty.wait()
            self._dirty.clear()
            f = self._f
            if f is not None:
                try:
                    os.fsync(f.fileno())
                except (OSError, ValueError):
                    return

    def _write(self, rec: dict[str, Any]) -> None:
        if self._f is None:
            return
        self._f.write(json.dumps(rec, default=str) + "\n")
        self._f.flush()
        if self._mode == "sync":
            os.fsync(self._f.fileno())
        elif self._mode == "async":
            self._dirty.set()

    def header(self, traj_id: str, task: str, metadata: dict[str, str]) -> None:
        self._write({"type": "header", "id": traj_id, "task": task, "metadata": metadata, "time": time.time()})

    def turn(self, t: TurnRecord) -> None:
        d = {k: getattr(t, k) for k in t.__dataclass_fields__}  # shallow: faster than asdict
        d["observations"] = [o.__dict__ for o in t.observations]
        self._write({"type": "turn", **d})

    def mark_irrelevant(self, indices: list[int]) -> None:
        if indices:
            self._write({"type": "irrelevant", "turns": sorted(indices)})

    def end(self, stop_reason: str, detail: str = "") -> None:
        self._write({"type": "end", "stop_reason": stop_reason, "detail": detail, "time": time.time()})

    def close(self) -> None:
        if self._f is None:
            return
        if self._syncer is not None:
            self._closing = True
            self._dirty.set()
            self._syncer.join(timeout=5)
        if self._mode != "off":
            os.fsync(self._f.fileno())
        self._f.close()
        self._f = None


def load_trajectory(path: str | os.PathLike[str]) -> TrajectoryRecord:
    """Fold a JSONL file back into a `TrajectoryRecord`."""
    rec = TrajectoryRecord(id="", task="")
    by_index: dict[int, TurnRecord] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn final line from a kill
            typ = d.pop("type", None)
            if typ == "header":
                rec.id, rec.task, rec.metadata, rec.start_time = d["id"], d["task"], d.get("metadata", {}), d.get("time", 0.0)
            elif typ == "turn":
                d["observations"] = [ObservationRecord(**o) for o in d.get("observations", [])]
                t = TurnRecord(**d)
                by_index[t.index] = t
                rec.turns.append(t)
            elif typ == "irrelevant":
                for i in d["turns"]:
                    if i in by_index:
                        by_index[i].relevant = False
            elif typ == "end":
                rec.stop_reason, rec.end_time = d["stop_reason"], d.get("time")
    return rec
