"""Metrics JSONL (resume keeps one lineage) and the curves PNG."""

from __future__ import annotations

from pathlib import Path

import pytest
from ale_roll.metrics import MetricsLogger, plot_curves, read_jsonl


def test_jsonl_records_and_resume_truncation(tmp_path: Path) -> None:
    log = MetricsLogger(tmp_path, tensorboard=False)
    for step in range(1, 6):
        log.log(step, {"reward/mean": step / 10, "batch/states": [f"s{step}"]})
    log.close()
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 6, "rew')  # a torn line from kill -9
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2, 3, 4, 5]
    resumed = MetricsLogger(tmp_path, tensorboard=False, resume_step=3)
    resumed.log(4, {"reward/mean": 0.9})
    records = read_jsonl(resumed.path)
    assert [r["step"] for r in records] == [1, 2, 3, 4] and records[-1]["reward/mean"] == 0.9
    fresh = MetricsLogger(tmp_path, tensorboard=False)  # a new run starts a new file
    assert read_jsonl(fresh.path) == []


def test_tensorboard_events_when_installed(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="tensorboard is not installed")
    log = MetricsLogger(tmp_path, tensorboard=True)
    log.log(1, {"reward/mean": 0.5, "note": "text is skipped"})
    log.close()
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_curves_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    log = MetricsLogger(tmp_path, tensorboard=False)
    for step in range(1, 4):
        log.log(step, {"reward/mean": step / 10, "train/loss": 1.0 / step})
    png = plot_curves(log.path, tmp_path / "curves.png")
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_curves(tmp_path / "missing.jsonl", tmp_path / "none.png") is None
