"""One JSON object per step in `metrics.jsonl`, mirrored to TensorBoard when it is installed.

On resume the logger drops lines of steps after the checkpoint (they are replayed), so the file
always describes one lineage of the run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """All records of a metrics file (an incomplete last line, e.g. after kill -9, is skipped)."""
    p = Path(path)
    if not p.exists():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


class MetricsLogger:
    """Appends `{"step": n, "time": t, ...metrics}` lines; TensorBoard scalars alongside (lazy import)."""

    def __init__(self, directory: str | Path, *, tensorboard: bool = True, resume_step: int | None = None,
                 filename: str = "metrics.jsonl") -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / filename
        if resume_step is not None:
            kept = [r for r in read_jsonl(self.path) if int(r.get("step", 0)) <= resume_step]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        elif self.path.exists():
            self.path.unlink()
        self._tb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.dir / "tb"))
            except ImportError:  # tensorboard is an optional extra
                self._tb = None

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Write one record (non-numeric values go to JSONL only)."""
        record = {"step": step, "time": time.time(), **metrics}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    self._tb.add_scalar(k, v, step)

    def close(self) -> None:
        """Flush TensorBoard."""
        if self._tb is not None:
            self._tb.close()
