"""A short real RL run: tiny model, GuessTheNumber through the real EnvService, reward rises.

The run is the documented example shortened (masked-SFT warm-up, then 6 async REINFORCE steps of
64 episodes), so the rise over the untrained start is the whole pipeline's — most of it comes from
the warm-up. The RL-only gain needs ~100 steps of 512 episodes (docs/roll.md: sampled success
0.51 → 0.68 per batch), several minutes on a 2-core CPU — too long for the suite; the pieces it
depends on (logprob alignment, weight sync, no [UNK] observations) are checked in
test_roll_alignment.py, the update direction in test_roll_step.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ale_roll.config import load_config
from ale_roll.metrics import read_jsonl
from ale_roll.trainer.controller import Controller

pytest.importorskip("ale_rock.envs.server", reason="ale-rock (EnvService) is not installed")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "guess_number.yaml"


@pytest.mark.slow
def test_rl_run_through_the_env_service_beats_the_untrained_start(tmp_path: Path) -> None:
    from ale_rock.envs.server import EnvServerConfig, serve_env_service

    server = serve_env_service(EnvServerConfig(port=0))
    try:
        # The documented example, shortened: SFT warm-up (early-stopped) + 6 async RL steps.
        cfg = load_config(EXAMPLE, [f"output_dir={tmp_path / 'run'}", f"env.address={server.address}",
                                    "iterations=6", "rollout.batch_size=64", "rollout.episodes_in_flight=64",
                                    "eval.episodes=64", "eval.every=0", "checkpoint.every=0",
                                    "engine.torch_threads=1", "metrics.progress=false"])
        summary = Controller(cfg).run()
    finally:
        server.stop()
    untrained = summary["start"]["eval/success_untrained"]
    final = summary["final"]["eval/success"]
    assert final >= untrained + 0.15, summary
    records = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "reward/mean" in r]
    assert len(records) == 6
    rl_reward = sum(r["reward/mean"] for r in records) / len(records)
    assert rl_reward > untrained + 0.1  # sampled RL episodes succeed far more often than the untrained policy
    assert max(r["staleness/max"] for r in records) <= cfg.rollout.async_ratio
    assert (tmp_path / "run" / "curves.png").exists()
    assert (tmp_path / "run" / "checkpoints" / "step-000006" / "buffer.json").exists()
