"""Crucial-fork search (sequential rollback, parallel initialization) and the imitation term (Eq. 10)."""

from __future__ import annotations

import random
import threading

import pytest
import torch
from ale_roll.algorithms import (
    ForkSearchConfig,
    imitation_loss,
    parallel_initialization,
    resampling_objective,
    sequential_rollback,
)


class SyntheticTask:
    """Success model of an expert trajectory with K chunks and one crucial fork.

    With j expert chunks prefilled the policy succeeds with probability `high` if the fork chunk
    is among them (j ≥ fork) and `low` otherwise. Thread-safe; records every prefix it was asked.
    """

    def __init__(self, fork: int, low: float, high: float, seed: int = 0) -> None:
        self.fork, self.low, self.high = fork, low, high
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.calls: list[int] = []

    def __call__(self, prefix: int) -> bool:
        with self.lock:
            self.calls.append(prefix)
            return self.rng.random() < (self.high if prefix >= self.fork else self.low)


def test_sequential_rollback_finds_the_latest_fork_last_to_first() -> None:
    task = SyntheticTask(fork=4, low=0.0, high=1.0)
    result = sequential_rollback(task, num_chunks=6, config=ForkSearchConfig(rollouts_per_anchor=4))
    assert result.fork == 4
    assert result.needs_imitation  # p(3) = 0: resampling chunk 4 never succeeds
    assert task.calls == [5] * 4 + [4] * 4 + [3] * 4  # rolled back from the last chunk, stopped at the fork
    assert result.success_rates == {6: 1.0, 5: 1.0, 4: 1.0, 3: 0.0}
    assert result.rollouts == 12


def test_sequential_rollback_with_noisy_success() -> None:
    task = SyntheticTask(fork=2, low=0.1, high=0.9, seed=3)
    result = sequential_rollback(task, 5, ForkSearchConfig(rollouts_per_anchor=64, fork_gap=0.5))
    assert result.fork == 2
    assert not result.needs_imitation  # resampling the fork sometimes still succeeds
    assert result.success_rates[1] < 0.3 < 0.7 < result.success_rates[2]


def test_no_fork_when_the_policy_solves_it_alone() -> None:
    task = SyntheticTask(fork=0, low=1.0, high=1.0)
    result = sequential_rollback(task, 3, ForkSearchConfig(rollouts_per_anchor=2))
    assert result.fork is None and not result.needs_imitation
    assert sorted(set(task.calls)) == [0, 1, 2]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_parallel_initialization_refines_to_the_fork(seed: int) -> None:
    task = SyntheticTask(fork=7, low=0.05, high=0.95, seed=seed)
    cfg = ForkSearchConfig(rollouts_per_anchor=32, num_anchors=3, seed=seed, max_workers=4)
    result = parallel_initialization(task, num_chunks=12, config=cfg)
    assert result.fork == 7
    assert result.success_rates[6] < 0.3 and result.success_rates[7] > 0.7
    assert result.rollouts == len(task.calls) < 12 * 32  # fewer than evaluating every prefix


def test_imitation_loss_and_objective() -> None:
    lp = torch.tensor([[-1.0, -1.0, -2.0, -5.0]], requires_grad=True)
    chunk_ids = torch.tensor([[0, 0, 1, 2]])
    # K = 3, gamma = 0.5, fork f = 2 -> chunks 1..2 imitated with G = 0.5^2 = 0.25 and 0.5^1 = 0.5
    # L_IL = -(0.25*(-2) + 0.5*(-2)) / 3 = 0.5; chunk 3 (after the fork) gets no gradient
    il = imitation_loss(lp, torch.ones(1, 4), chunk_ids, fork=2, gamma=0.5)
    assert il.item() == pytest.approx(0.5)
    il.backward()
    assert lp.grad is not None and lp.grad[0, 3].item() == 0.0
    cfg = ForkSearchConfig(lambda_il=2.0, lambda_rl=1.0)
    assert resampling_objective(torch.tensor(0.3), il.detach(), cfg).item() == pytest.approx(1.3)
    assert resampling_objective(torch.tensor(0.3), None, cfg).item() == pytest.approx(0.3)
