"""Chunk-level initialized resampling: crucial-fork search and the imitation fallback (Eq. 10).

Take an expert trajectory τ* with K chunks (a teacher's, or the policy's own success). Let
p(j) be the success rate when the first j expert chunks are prefilled and the rest is resampled
by the policy (p(K) = 1: the expert succeeds). Chunk f (1-based) is resampled at prefix f−1 and
prefilled at prefix f; it is a *crucial fork* when

    p(f) − p(f−1) ≥ fork_gap         (resampling it loses much of the success)

Two schedules, both driven by `rollout_from(prefix_chunks) -> success` so they need no engine:

- sequential rollback: prefixes K−1, K−2, …, 0 (last chunk toward first, a curriculum); the
  first fork met is the latest one.
- parallel initialization: random anchors evaluated at once (a thread pool), then the
  interval with the largest drop is refined to a single chunk.

`asequential_rollback` / `aparallel_initialization` are the same schedules for an async
`arollout_from` (the trainer's episode runner): the rollouts of one prefix run concurrently.

Where resampling from the fork yields no success (p(f−1) = 0) the RL signal there is empty and
an imitation term on the expert chunks up to the fork is added (Eq. 10):

    L = λ_IL · L_IL + λ_RL · L_chunk-RL,   L_IL = − Σ_{k≤f} G_k log π_θ(c*_k | τ*_<k) / Σ|c*_k|

with G_k = γ^(K−k) · 1 (the expert's reward is 1).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch
from pydantic import BaseModel, ConfigDict, Field

from ale_roll.algorithms.base import masked_sum
from ale_roll.algorithms.ipa import chunk_returns

RolloutFrom = Callable[[int], bool]
"""rollout_from(j): prefill the first j expert chunks, resample the rest, return success."""
ARolloutFrom = Callable[[int], Awaitable[bool]]
"""The async form of `RolloutFrom`."""


class ForkSearchConfig(BaseModel):
    """Crucial-fork search and the imitation fallback of Eq. 10."""

    model_config = ConfigDict(extra="forbid")

    rollouts_per_anchor: int = Field(default=8, ge=1)
    """Rollouts used to estimate each p(j)."""
    fork_gap: float = Field(default=0.5, gt=0.0, le=1.0)
    """Minimal drop p(f) − p(f−1) that makes chunk f a crucial fork."""
    num_anchors: int = Field(default=4, ge=1)
    """Parallel initialization: random anchors evaluated in the first round."""
    max_workers: int = Field(default=8, ge=1)
    """Parallel initialization: concurrent `rollout_from` calls."""
    gamma: float = Field(default=0.95, gt=0.0, le=1.0)
    """Chunk discount γ of the imitation term's G_k."""
    lambda_il: float = 1.0
    """λ_IL: weight of the imitation term."""
    lambda_rl: float = 1.0
    """λ_RL: weight of the chunk-level RL loss."""
    seed: int | None = None
    """Seed for the random anchors (None: nondeterministic)."""


@dataclass
class ForkSearchResult:
    """Outcome of a fork search."""

    fork: int | None
    """1-based crucial fork chunk f, or None when no prefix loses ≥ fork_gap."""
    success_rates: dict[int, float] = field(default_factory=dict)
    """p(j) for every evaluated prefix length j (and p(K) = 1)."""
    rollouts: int = 0
    """Number of `rollout_from` calls made."""

    @property
    def needs_imitation(self) -> bool:
        """True when resampling from the fork never succeeded (p(f−1) = 0): add the L_IL term."""
        return self.fork is not None and self.success_rates.get(self.fork - 1, 1.0) == 0.0


def _start(num_chunks: int) -> ForkSearchResult:
    if num_chunks < 1:
        raise ValueError("an expert trajectory needs at least one chunk")
    return ForkSearchResult(fork=None, success_rates={num_chunks: 1.0})


def _record(result: ForkSearchResult, prefixes: list[int], outcomes: list[object], n: int) -> None:
    """Store p(j) for each probed prefix from its n outcomes (in `prefixes` order, n per prefix)."""
    for i, j in enumerate(prefixes):
        result.success_rates[j] = sum(bool(o) for o in outcomes[i * n:(i + 1) * n]) / n
    result.rollouts += n * len(prefixes)


def _next_rollback(result: ForkSearchResult, prefix: int, config: ForkSearchConfig) -> list[int]:
    """Sequential rollback's decision after probing `prefix`: [] when done (fork set or none left)."""
    if result.success_rates[prefix + 1] - result.success_rates[prefix] >= config.fork_gap:
        result.fork = prefix + 1
        return []
    return [prefix - 1] if prefix > 0 else []


def _anchors(num_chunks: int, config: ForkSearchConfig) -> list[int]:
    rng = random.Random(config.seed)
    return sorted(rng.sample(range(num_chunks), min(config.num_anchors, num_chunks)))


def _next_refinement(result: ForkSearchResult, config: ForkSearchConfig) -> list[int]:
    """Parallel initialization's decision: the prefixes inside the steepest known drop, or [] when
    done (the drop is one chunk wide: `result.fork` is set; or no drop reaches `fork_gap`)."""
    known = sorted(result.success_rates)
    drops = [(result.success_rates[b] - result.success_rates[a], a, b) for a, b in zip(known, known[1:])]
    best = max(drops, default=None)
    if best is None or best[0] < config.fork_gap:
        return []
    _, a, b = best
    if b == a + 1:
        result.fork = b
        return []
    return list(range(a + 1, b))


def sequential_rollback(rollout_from: RolloutFrom, num_chunks: int, config: ForkSearchConfig) -> ForkSearchResult:
    """Evaluate prefixes K−1 … 0 and stop at the first (latest) crucial fork."""
    result, n = _start(num_chunks), config.rollouts_per_anchor
    probe = [num_chunks - 1]
    while probe:
        _record(result, probe, [rollout_from(probe[0]) for _ in range(n)], n)
        probe = _next_rollback(result, probe[0], config)
    return result


def parallel_initialization(rollout_from: RolloutFrom, num_chunks: int, config: ForkSearchConfig) -> ForkSearchResult:
    """Random anchors in one parallel round, then refine the steepest interval to one chunk."""
    result, n = _start(num_chunks), config.rollouts_per_anchor
    probe = _anchors(num_chunks, config)
    with ThreadPoolExecutor(max_workers=config.max_workers) as pool:
        while probe:
            futures = [pool.submit(rollout_from, j) for j in probe for _ in range(n)]
            _record(result, probe, [f.result() for f in futures], n)
            probe = _next_refinement(result, config)
    return result


async def asequential_rollback(arollout_from: ARolloutFrom, num_chunks: int, config: ForkSearchConfig) -> ForkSearchResult:
    """`sequential_rollback` with each prefix's rollouts run concurrently."""
    result, n = _start(num_chunks), config.rollouts_per_anchor
    probe = [num_chunks - 1]
    while probe:
        _record(result, probe, list(await asyncio.gather(*(arollout_from(probe[0]) for _ in range(n)))), n)
        probe = _next_rollback(result, probe[0], config)
    return result


async def aparallel_initialization(arollout_from: ARolloutFrom, num_chunks: int,
                                   config: ForkSearchConfig) -> ForkSearchResult:
    """`parallel_initialization` on the event loop (all anchors' rollouts at once)."""
    result, n = _start(num_chunks), config.rollouts_per_anchor
    probe = _anchors(num_chunks, config)
    while probe:
        _record(result, probe, list(await asyncio.gather(*(arollout_from(j) for j in probe for _ in range(n)))), n)
        probe = _next_refinement(result, config)
    return result


def imitation_loss(logprobs: torch.Tensor, mask: torch.Tensor, chunk_ids: torch.Tensor, fork: int,
                   gamma: float, num_chunks: torch.Tensor | None = None) -> torch.Tensor:
    """L_IL on expert rows: − Σ_{k≤f} G_k Σ_{t∈c*_k} log π_θ(t) / (tokens in those chunks).

    `fork` is 1-based, so 0-based chunk ids 0..fork−1 are imitated; G_k = γ^(K−k) (R* = 1).
    """
    returns = chunk_returns(torch.ones(logprobs.shape[0]), chunk_ids, gamma, num_chunks)
    keep = mask.to(logprobs.dtype) * ((chunk_ids >= 0) & (chunk_ids < fork)).to(logprobs.dtype)
    return -masked_sum(returns * logprobs, keep) / keep.sum().clamp(min=1.0)


def resampling_objective(rl_loss: torch.Tensor, il_loss: torch.Tensor | None, config: ForkSearchConfig) -> torch.Tensor:
    """Eq. 10: λ_IL · L_IL + λ_RL · L_RL (just λ_RL · L_RL without an imitation term)."""
    total = config.lambda_rl * rl_loss
    return total if il_loss is None else total + config.lambda_il * il_loss
