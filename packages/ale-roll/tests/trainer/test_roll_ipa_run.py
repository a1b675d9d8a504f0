"""Short real IPA runs (tiny model, the GuessTheNumber example): the chunk ratio acts and is logged.

- async ratio 1, one update per batch: from the second step on, batches hold samples one version
  stale, and ρ_c (against μ, the generating policy) clips some negative-return chunks;
- async ratio 0, `algorithm.epochs=2 algorithm.minibatches=4`: on-policy batches, the ratio acts
  after the first mini-batch; the rollout's policy version still bumps once per batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ale_roll.config import load_config
from ale_roll.metrics import read_jsonl
from ale_roll.trainer.controller import Controller

pytest.importorskip("ale_rock.envs", reason="ale-rock (environments) is not installed")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "guess_number.yaml"
SHORT = ["rollout.batch_size=32", "rollout.group_size=8", "rollout.episodes_in_flight=32", "rollout.max_batch=32",
         "algorithm.loss=ipa", "algorithm.config={advantage: {group_norm: true}}", "sft.steps=0", "eval.episodes=0",
         "checkpoint.every=0", "checkpoint.resume=false", "metrics.plot=false", "metrics.tensorboard=false",
         "metrics.progress=false"]


def _run(out: Path, *overrides: str) -> list[dict[str, float]]:
    cfg = load_config(EXAMPLE, [f"output_dir={out}", *SHORT, *overrides])
    Controller(cfg).run()
    return [r for r in read_jsonl(out / "metrics.jsonl") if "ipa/clipped_fraction" in r]


def test_async_ratio_1_clips_stale_negative_chunks(tmp_path: Path) -> None:
    steps = _run(tmp_path, "iterations=3", "rollout.async_ratio=1")
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert steps[0]["staleness/mean"] == 0 and steps[0]["ipa/clipped_fraction"] == 0  # on-policy: ρ_c = 1
    stale = [s for s in steps[1:] if s["staleness/mean"] > 0]
    assert stale, "no batch held a stale sample"
    assert all(s["ipa/clipped_fraction"] > 0 and s["ipa/ratio_std"] > 0 for s in stale)
    assert all("ipa/mismatch_masked_fraction" in s for s in steps)


def test_epochs_and_minibatches_clip_within_a_batch(tmp_path: Path) -> None:
    steps = _run(tmp_path, "iterations=2", "rollout.async_ratio=0", "algorithm.epochs=2", "algorithm.minibatches=4")
    assert len(steps) == 2
    for i, s in enumerate(steps, 1):
        assert s["staleness/mean"] == 0 and s["train/updates"] == 8
        assert s["later/ipa/clipped_fraction"] > 0 and s["later/ipa/ratio_std"] > 0
        assert s["policy_version"] == i and s["train/optimizer_steps"] == 8 * i
    # Resumed from the final checkpoint, the version keeps counting batches, not optimizer steps.
    resumed = _run(tmp_path, "iterations=3", "rollout.async_ratio=0", "algorithm.epochs=2", "algorithm.minibatches=4",
                   "checkpoint.resume=true")
    assert resumed[-1]["step"] == 3 and resumed[-1]["policy_version"] == 3
    assert resumed[-1]["train/optimizer_steps"] == 24
