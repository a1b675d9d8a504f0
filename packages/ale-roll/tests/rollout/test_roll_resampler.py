"""Chunk-level initialized resampling (Eq. 10) inside real training: DigitLock, tiny random-init model.

An untrained policy never opens a lock, so every fork search over an expert's binary-search demo
finds the fork at the last chunk it cannot play itself, the group is played from there, and a
group that still never succeeds adds the imitation term — all counted in `resampling/*`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from ale_roll.config import ConfigError, load_config
from ale_roll.metrics import read_jsonl
from ale_roll.rollout.replay import load_trajectories
from ale_roll.trainer.controller import Controller

pytest.importorskip("ale_rock.envs", reason="ale-rock (environments) is not installed")

CONFIG = """
name: lock-resampling
iterations: 2
model:
  tiny: {arch: llama, vocab_size: 300, hidden_size: 64, num_layers: 1, num_heads: 2, num_kv_heads: 2,
         head_dim: 32, intermediate_size: 128, max_position_embeddings: 128, seed: 0}
  word_vocab: ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "start", "higher", "lower", "correct",
               "invalid", ":"]
engine: {train: torch, inference: hf, torch_threads: 1}
rollout:
  batch_size: 16
  group_size: 4
  episodes_in_flight: 16
  async_ratio: 0
  max_turns: 5
  max_new_tokens: 3
  observation_template: "{observation} :"
  observation_rewrite: [['^A lock with.*$', 'start'], ['^invalid.*$', 'invalid']]
  env_threads: false
  filters: [env_noise]
  batch_window_ms: 5
algorithm:
  loss: ipa
  config: {gamma: 0.95, advantage: {group_norm: true}}
  resampling: {enabled: true, expert_data: experts.jsonl, rollouts_per_anchor: 2}
env: {id: "game:DigitLock-v0", seed: 0}
checkpoint: {every: 0, resume: false}
eval: {episodes: 0}
metrics: {tensorboard: false, plot: false, progress: false}
"""


def write_expert_demos(path: Path, seeds: range) -> None:
    """The per-digit binary search (DigitLock's own expert) played on each seed, as demo lines."""
    from ale_rock.envs.games.digit_lock import expert_actions

    path.write_text("".join(json.dumps({"seed": seed, "actions": expert_actions(seed)}) + "\n" for seed in seeds))


@pytest.fixture(scope="module")
def lock_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("lock")
    (d / "lock.yaml").write_text(CONFIG)
    write_expert_demos(d / "experts.jsonl", range(32))
    return d


def test_resampling_fires_in_real_training_steps(lock_dir: Path) -> None:
    out = lock_dir / "run"
    ctl = Controller(load_config(lock_dir / "lock.yaml", [f"output_dir={out}"]))
    before = {k: v.clone() for k, v in ctl.policy.train.export_weights().items()}
    ctl.run()
    steps = [r for r in read_jsonl(out / "metrics.jsonl") if "resampling/fired" in r]
    assert [s["step"] for s in steps] == [1, 2]
    for s in steps:
        # Every group (4 per step) had an expert: searched, a fork found, all 16 episodes from it.
        assert s["resampling/fired"] > 0 and s["resampling/searches"] >= s["resampling/fired"]
        assert s["resampling/episodes"] == 16 and s["resampling/rollbacks"] >= 2 * s["resampling/searches"]
        assert 1 <= s["resampling/fork_mean"] <= 4 and s["resampling/start_mean"] == s["resampling/fork_mean"] - 1
        # An untrained policy fails from the fork too: no RL signal, the imitation term acts instead.
        assert s["reward/mean"] == 0 and s["resampling/imitation"] > 0 and s["resampling/imitation_loss"] > 0
    after = ctl.policy.train.export_weights()
    assert any(not before[k].equal(after[k]) for k in before)  # the imitation gradient was applied


def test_an_episode_from_the_fork_replays_the_expert_prefix(lock_dir: Path) -> None:
    ctl = Controller(load_config(lock_dir / "lock.yaml", [f"output_dir={lock_dir / 'prefix'}"]))
    expert = next(t for t in load_trajectories(lock_dir / "experts.jsonl", ctl.env_factory, ctl.fmt) if t.seed == 3)

    async def play(j: int) -> Any:
        try:
            return await ctl.runner.run(seed=3, initial_state_id="s", prefix=expert, prefix_chunks=j)
        finally:
            await ctl.generator.close()

    traj = asyncio.run(play(2))
    prefill: list[int] = list(expert.turns[0].prompt_ids)
    for turn in expert.turns[:2]:
        prefill += turn.completion_ids + turn.observation_ids
    # The expert's first two guesses and the game's answers are the context; the policy plays on.
    assert traj.turns[0].prompt_ids == prefill
    assert 1 <= len(traj.turns) <= 5 - 2 and traj.metadata["prefilled_chunks"] == 2


def test_config_refuses_resampling_where_it_cannot_roll_back(lock_dir: Path) -> None:
    agent_native = ["rollout.mode=agent_native", "agent.tasks=[t]", "agent.sandbox_address=localhost:1"]
    # ale-flow's loop in the trainer replays an expert's replies; a command agent cannot be driven so.
    assert load_config(lock_dir / "lock.yaml", agent_native).algorithm.resampling.enabled
    with pytest.raises(ConfigError, match=r"only ale-flow's loop .*agent\.kind=flow"):
        load_config(lock_dir / "lock.yaml", [*agent_native, "agent.kind=command", "agent.command=my-agent"])
    with pytest.raises(ConfigError, match="needs algorithm.resampling.expert_data"):
        load_config(lock_dir / "lock.yaml", ["algorithm.resampling.expert_data=null"])


def test_a_spoiled_search_rollout_is_played_again_not_read_as_a_failure() -> None:
    # Logic only: a play function standing in for the runner. Chunk j of the two-chunk expert
    # succeeds from a prefix of 1 (p(1) = 1) and fails from 0 (p(0) = 0): the fork is chunk 1.
    from ale_roll.config import ResamplingConfig
    from ale_roll.rollout.resampler import ChunkResampler
    from ale_roll.types import StopReason, Trajectory, Turn

    expert = Trajectory([Turn([1], [2], [-0.1], stop_reason=StopReason.TOOL_CALL), Turn([], [3], [-0.1])], seed=7)
    cfg = ResamplingConfig(enabled=True, expert_data="x", rollouts_per_anchor=1)
    calls: list[tuple[str, int]] = []
    broken = {"search": 1}  # the first search rollout's sandbox is lost

    async def play(*, seed: int, initial_state_id: str, group_id: str, episode_id: str | None = None,
                   prefix: Any = None, prefix_chunks: int = 0) -> Trajectory:
        calls.append((group_id, prefix_chunks))
        if group_id.endswith("-search") and broken["search"] > 0:
            broken["search"] -= 1
            raise RuntimeError("sandbox lost")
        return Trajectory([Turn([1], [5], [-0.1])], seed=seed, metadata={"success": prefix_chunks >= 1})

    rs = ChunkResampler(cfg, [expert])
    traj = asyncio.run(rs.play(play, seed=7, initial_state_id="s", group_id="g", episode_id="e"))
    # Rollback probes j = 1 (spoiled, played again: success), then j = 0 (failure); then the group plays.
    assert calls == [("g-search", 1), ("g-search", 1), ("g-search", 0), ("g", 0)]
    assert traj.metadata["resampling_fork"] == 1
    counts = rs.take_metrics()
    assert counts["resampling/search_errors"] == 1 and counts["resampling/fired"] == 1
    # Three spoiled rollouts in a row fail this plan; the group's next attempt searches afresh.
    broken["search"], calls[:] = 3, []
    with pytest.raises(RuntimeError, match="sandbox lost"):
        asyncio.run(rs.play(play, seed=7, initial_state_id="s", group_id="g2", episode_id="e"))
    assert len(calls) == 3 and "g2" not in rs._plans
    traj = asyncio.run(rs.play(play, seed=7, initial_state_id="s", group_id="g2", episode_id="e"))
    assert traj.metadata["resampling_fork"] == 1
