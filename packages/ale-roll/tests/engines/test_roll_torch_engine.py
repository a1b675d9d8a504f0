"""The plain-torch reference TrainEngine on a tiny random-init model."""

from __future__ import annotations

import pytest
import torch
from ale_roll.engines.base import TrainEngine
from ale_roll.engines.torch_engine import OptimConfig, TorchTrainEngine
from ale_roll.models import load_model


@pytest.fixture
def engine(tiny_model_dir) -> TorchTrainEngine:
    model, _ = load_model(tiny_model_dir)
    return TorchTrainEngine(model, OptimConfig(lr=3e-3))


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 400, (4, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[:, :4] = 0  # "prompt" tokens carry no loss
    return ids, mask


def test_is_a_train_engine(engine):
    assert isinstance(engine, TrainEngine)


def test_logprobs_ignore_padding_side(engine):
    ids = torch.randint(3, 400, (1, 9), generator=torch.Generator().manual_seed(1))
    ref = engine.forward_logprobs(ids)[0]
    pad = torch.zeros((1, 3), dtype=torch.long)
    left = engine.forward_logprobs(torch.cat([pad, ids], 1), torch.cat([pad, torch.ones_like(ids)], 1))[0, 3:]
    right = engine.forward_logprobs(torch.cat([ids, pad], 1), torch.cat([torch.ones_like(ids), pad], 1))[0, :9]
    assert ref[0] == 0 and torch.all(ref[1:] < 0)
    torch.testing.assert_close(left, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(right, ref, atol=1e-5, rtol=0)


def test_steps_reduce_the_loss(engine):
    ids, mask = _batch()
    n = mask.sum()
    first = engine.backward(ids, mask, token_weights=torch.full(ids.shape, 1.0 / n))
    norm = engine.step()
    for _ in range(15):
        last = engine.backward(ids, mask, token_weights=torch.full(ids.shape, 1.0 / n))
        engine.step()
    assert norm > 0
    assert engine.policy_version == 16
    assert last < first * 0.8, (first, last)


def test_masked_tokens_get_no_gradient(engine):
    ids, mask = _batch()
    mask.zero_()
    loss = engine.backward(ids, mask, loss_fn=lambda lp, m: -(lp * m).sum())
    assert loss == 0.0
    assert all(p.grad is None or torch.count_nonzero(p.grad) == 0 for p in engine.model.parameters())


def test_backward_needs_exactly_one_loss_rule(engine):
    ids, mask = _batch()
    with pytest.raises(ValueError, match="exactly one"):
        engine.backward(ids, mask)
    with pytest.raises(ValueError, match="exactly one"):
        engine.backward(ids, mask, token_weights=torch.ones(ids.shape), loss_fn=lambda lp, m: lp.sum())


def test_checkpoint_resume_is_exact(engine, tiny_model_dir, tmp_path):
    ids, mask = _batch()

    def step() -> float:
        noise = torch.rand(())  # consumes RNG: resume must restore it
        engine.backward(ids, mask, loss_fn=lambda lp, m: -(lp * m).sum() / m.sum() * (1 + 0.1 * noise))
        engine.step()
        return float(engine.forward_logprobs(ids).sum())

    step()
    engine.save_checkpoint(tmp_path)
    expected = [step(), step()]

    model, _ = load_model(tiny_model_dir)
    resumed = TorchTrainEngine(model, OptimConfig(lr=3e-3))
    resumed.load_checkpoint(tmp_path)
    assert resumed.policy_version == 1
    engine = resumed
    assert [step(), step()] == expected
