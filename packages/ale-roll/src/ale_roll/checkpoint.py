"""Atomic checkpoints: model + optimizer + RNG (the engine's), SampleBuffer + frontier, run state.

Layout: `<output_dir>/checkpoints/step-000012/{engine/, buffer.json, state.json}`. A checkpoint is
written into `step-000012.tmp` and renamed into place only when complete, so `kill -9` at any
moment leaves either the previous checkpoint or the new one — never a torn one. `latest` picks the
highest complete step; older ones beyond `keep` are deleted.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ale_roll.engines.base import TrainEngine

_PREFIX = "step-"


@dataclass
class Checkpoint:
    """A complete checkpoint on disk."""

    path: Path
    step: int

    @property
    def engine_dir(self) -> Path:
        return self.path / "engine"

    def buffer_state(self) -> dict[str, Any]:
        """The SampleBuffer's state_dict."""
        data: dict[str, Any] = json.loads((self.path / "buffer.json").read_text())
        return data

    def run_state(self) -> dict[str, Any]:
        """Controller state (step, metrics counters, python RNG is in the engine's RNG state)."""
        data: dict[str, Any] = json.loads((self.path / "state.json").read_text())
        return data


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(root: str | Path, step: int, engine: TrainEngine, buffer_state: dict[str, Any],
                    run_state: dict[str, Any], keep: int = 2) -> Checkpoint:
    """Write a checkpoint atomically (tmp dir + rename) and prune old ones."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{_PREFIX}{step:06d}"
    tmp = root / f"{final.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    engine.save_checkpoint(tmp / "engine")
    for name, data in (("buffer.json", buffer_state), ("state.json", {**run_state, "step": step})):
        with (tmp / name).open("w") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
    if final.exists():  # re-saving the same step (resume that did no new step)
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(root)
    for old in list_checkpoints(root)[:-keep]:
        shutil.rmtree(old.path, ignore_errors=True)
    return Checkpoint(final, step)


def list_checkpoints(root: str | Path) -> list[Checkpoint]:
    """Complete checkpoints, oldest first (leftover `.tmp` dirs are ignored)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        if p.is_dir() and p.name.startswith(_PREFIX) and not p.name.endswith(".tmp") and (p / "state.json").exists():
            found.append(Checkpoint(p, int(p.name[len(_PREFIX):])))
    return sorted(found, key=lambda c: c.step)


def latest_checkpoint(root: str | Path) -> Checkpoint | None:
    """The newest complete checkpoint, or None."""
    found = list_checkpoints(root)
    return found[-1] if found else None
