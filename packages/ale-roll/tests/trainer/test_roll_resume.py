"""kill -9 of a real `ale-roll train` process, then resume: no trajectory lost, none repeated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from ale_roll.checkpoint import latest_checkpoint
from ale_roll.metrics import read_jsonl

pytest.importorskip("ale_rock.envs", reason="ale-rock (environments) is not installed")
WORDS = [str(i) for i in range(1, 21)] + ["higher", "lower", "wrong", "Invalid", "Correct", "guess", ".", ";"]


def _config(out: Path, iterations: int) -> dict:
    return {
        "name": "resume", "output_dir": str(out), "iterations": iterations, "seed": 1,
        "model": {"tiny": {"arch": "llama", "vocab_size": 300, "hidden_size": 64, "num_layers": 1, "num_heads": 2,
                           "num_kv_heads": 2, "head_dim": 32, "intermediate_size": 128,
                           "max_position_embeddings": 256}, "word_vocab": WORDS},
        "engine": {"torch_threads": 1},
        "rollout": {"batch_size": 8, "episodes_in_flight": 8, "async_ratio": 2, "max_turns": 5, "max_new_tokens": 1,
                    "filters": ["env_noise"], "observation_template": "{observation} :"},
        "algorithm": {"loss": "reinforce"},
        "checkpoint": {"every": 1, "keep": 3},
        "eval": {"episodes": 0},
        "metrics": {"tensorboard": False, "plot": False, "progress": False},
    }


def _train(cfg_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "ale_roll.cli", "train", "-c", str(cfg_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)


@pytest.mark.slow
def test_resume_after_kill_9_loses_and_repeats_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(out, iterations=40)))
    proc = _train(cfg_path)
    deadline = time.monotonic() + 240
    try:
        while True:
            ck = latest_checkpoint(out / "checkpoints")
            if ck is not None and ck.step >= 2:
                break
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:] if proc.stdout else ""
            assert time.monotonic() < deadline, "no checkpoint within 240 s"
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    killed_at = latest_checkpoint(out / "checkpoints")
    assert killed_at is not None and killed_at.step < 40

    # Resume with a smaller target so the test stays short: a few steps past the checkpoint.
    target = killed_at.step + 3
    cfg_path.write_text(yaml.safe_dump(_config(out, iterations=target)))
    resumed = subprocess.run([sys.executable, "-m", "ale_roll.cli", "train", "-c", str(cfg_path)],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout[resumed.stdout.rindex('{"resumed_from"'):])
    assert summary["resumed_from"] == killed_at.step and summary["step"] == target

    records = [r for r in read_jsonl(out / "metrics.jsonl") if "batch/states" in r]
    assert [r["step"] for r in records] == list(range(1, target + 1))  # one lineage, no gap
    consumed = [s for r in records for s in r["batch/states"]]
    assert len(consumed) == len(set(consumed)), "a trajectory was trained on twice"

    final = latest_checkpoint(out / "checkpoints")
    assert final is not None and final.step == target
    buf = final.buffer_state()
    held = [t["initial_state_id"] for g in buf["ready"] for t in g]
    held += [t["initial_state_id"] for g in buf["pending"].values() for t in g["members"]]
    frontier = [e["initial_state_id"] for e in buf["frontier"]]
    accounted = consumed + held + frontier
    assert len(accounted) == len(set(accounted))
    issued = {f"state-{k}" for k in range(buf["issued_total"])}
    assert set(accounted) <= issued
    # Every issued initial state is consumed, buffered, in flight, or counted as dropped.
    assert len(issued - set(accounted)) == sum(buf["dropped"].values())
