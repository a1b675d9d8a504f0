"""One RL train step through the real engine: rewarded completions become more likely, multi-turn aligned."""

from __future__ import annotations

import pytest
import torch
from ale_roll.engines.torch_engine import OptimConfig, TorchTrainEngine
from ale_roll.trainer.step import train_step
from ale_roll.types import Trajectory, Turn


def _engine() -> TorchTrainEngine:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, head_dim=32)
    return TorchTrainEngine(LlamaForCausalLM(cfg), OptimConfig(lr=1e-2))


def _traj(second_action: int, reward: float, group: str, mu: list[float]) -> Trajectory:
    # Two turns: the first action is shared, the second differs; an observation sits between them.
    # `mu` are the behaviour logprobs (as the inference engine would report them for these weights).
    return Trajectory([Turn([3, 4, 5], [7], [mu[0]], observation_ids=[8, 9]),
                       Turn([], [second_action], [mu[1]])], reward=reward, group_id=group)


@pytest.mark.parametrize("loss", ["reinforce", "tis", "topr", "ipa"])
def test_rewarded_second_turn_action_becomes_more_likely(loss: str) -> None:
    engine = _engine()
    ids = torch.tensor([[3, 4, 5, 7, 8, 9, 11], [3, 4, 5, 7, 8, 9, 12]])

    def p_good() -> float:
        lp = engine.forward_logprobs(ids)
        return float(lp[0, 6].exp()), float(lp[1, 6].exp())  # type: ignore[return-value]

    before_good, before_bad = p_good()
    lp = engine.forward_logprobs(ids)
    good = _traj(11, 1.0, "g", [float(lp[0, 3]), float(lp[0, 6])])
    bad = _traj(12, 0.0, "g", [float(lp[1, 3]), float(lp[1, 6])])
    batch = [good, bad] * 4
    for _ in range(5):
        m = train_step(engine, batch, loss, {"advantage": {"group_norm": True}})
    after_good, after_bad = p_good()
    assert after_good > before_good * 1.5 and after_bad < before_bad
    if loss == "reinforce":  # two completion tokens per trajectory; prompt/observation carry none
        assert m["train/tokens"] == 16
