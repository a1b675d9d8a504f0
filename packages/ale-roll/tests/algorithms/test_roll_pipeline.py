"""From trajectories to a loss: flatten → collate → causal-LM logprobs → registered loss."""

from __future__ import annotations

import math

import pytest
import torch
from ale_roll.algorithms import LossInputs, get_loss, token_logprobs
from ale_roll.types import StopReason, Trajectory, Turn, collate, flatten_trajectory

VOCAB = 32


def episode(reward: float, group: str, error_turn: int | None = None, shift: int = 0) -> Trajectory:
    """Prompt | 2 tokens + tool call, 2 observation tokens | 3 tokens + call, 1 obs | 1 answer token."""
    call = StopReason.TOOL_CALL
    # The engine's logprobs are close to a uniform model's (-log V), as a near-identical engine would be.
    mu = [-math.log(VOCAB) + 0.01 * i for i in range(6)]
    turns = [
        Turn([1, 2, 3], [10 + shift, 11], mu[:2], stop_reason=call, observation_ids=[20, 21]),
        Turn([], [12, 13 + shift, 14], mu[2:5], stop_reason=call, observation_ids=[22]),
        Turn([], [15 + shift], mu[5:]),
    ]
    if error_turn is not None:
        turns[error_turn].error = True
    return Trajectory(turns, reward=reward, group_id=group)


def test_token_logprobs_are_aligned_with_input_ids() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 5, VOCAB)
    ids = torch.randint(0, VOCAB, (2, 5))
    lp = token_logprobs(logits, ids)
    assert lp.shape == (2, 5) and lp[:, 0].abs().sum() == 0
    expected = torch.log_softmax(logits[1, 2], -1)[ids[1, 3]]
    assert lp[1, 3].item() == pytest.approx(expected.item(), abs=1e-6)


def test_uniform_model_gives_closed_form_losses() -> None:
    batch = collate([flatten_trajectory(episode(1.0, "g", error_turn=1))])
    logits = torch.zeros(1, batch.input_ids.shape[1], VOCAB, requires_grad=True)  # uniform: every logprob is -log V
    lp = token_logprobs(logits, batch.input_ids)
    # masked SFT skips the erroring turn: mean over the 3 remaining tokens of log V
    sft = get_loss("sft")(LossInputs.from_batch(batch, lp, sft=True), None)
    assert sft.loss.item() == pytest.approx(math.log(VOCAB), abs=1e-5)
    # IPA, gamma 0.5, chunks with 2, 3, 1 loss tokens: log V * (0.25*2 + 0.5*3 + 1*1) / 6
    ipa = get_loss("ipa")(LossInputs.from_batch(batch, lp), {"gamma": 0.5})
    assert ipa.loss.item() == pytest.approx(0.5 * math.log(VOCAB), abs=1e-5)
    assert 0 < ipa.metrics["mismatch/kl"] < 1e-3  # the engine's logprobs differ slightly from the model's
    assert ipa.metrics["mismatch/chunk_masked_fraction"] == 0.0


def test_group_of_episodes_trains_through_an_embedding_model() -> None:
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(VOCAB, 16)
    model = torch.nn.Sequential(embedding, torch.nn.Linear(16, VOCAB))
    batch = collate([flatten_trajectory(episode(1.0, "g")), flatten_trajectory(episode(0.0, "g", shift=1)),
                     flatten_trajectory(episode(1.0, "h", shift=2))])
    assert batch.group_ids.tolist() == [0, 0, 1]
    lp = token_logprobs(model(batch.input_ids), batch.input_ids)
    out = get_loss("ipa")(LossInputs.from_batch(batch, lp), {"advantage": {"group_norm": True}})
    # group g normalizes to ±1, group h (one member) to 0: rows 0 and 1 pull in opposite directions
    assert out.metrics["advantage/positive_fraction"] == pytest.approx(1 / 3)
    out.loss.backward()
    grad = embedding.weight.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0


def test_an_engine_far_from_the_trainer_is_masked_out() -> None:
    traj = episode(1.0, "g")
    for turn in traj.turns:  # the engine claims near-certainty; the (uniform) trainer disagrees by e^3
        turn.logprobs = [-0.1] * len(turn.logprobs)
    batch = collate([flatten_trajectory(traj)])
    lp = token_logprobs(torch.zeros(1, batch.input_ids.shape[1], VOCAB, requires_grad=True), batch.input_ids)
    out = get_loss("ipa")(LossInputs.from_batch(batch, lp), None)
    assert out.metrics["mismatch/chunk_masked_fraction"] == 1.0
    assert out.loss.item() == 0.0 and out.metrics["tokens"] == 0.0
