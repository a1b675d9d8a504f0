"""Chunk-level initialized resampling in training (Eq. 10), for the controller's GEM rollout.

Per rollout group whose state (seed) has an expert trajectory τ* with K chunks:
1. fork search (once per group, shared by its episodes): rollouts that replay τ*'s first j chunks
   and sample the rest estimate p(j); sequential rollback (j = K−1 … 0) or parallel initialization
   finds the crucial fork f (`algorithms/resampling.py`);
2. the group's episodes all start from the fork: τ*'s chunks 1..f−1 are replayed (context, no
   loss) and the policy re-initializes chunks f..K, the episodes running in parallel as usual;
3. at the training step, a resampled group none of whose rollouts succeeded contributes the
   imitation term λ_IL · L_IL on τ*'s chunks ≤ f (its RL advantages are all zero there), added to
   the gradient of the step's first update.
A state without an expert, or whose search finds no fork (the policy does as well alone), is
played normally. Counters (`resampling/*`) say how often each part fired.
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ale_roll.algorithms.resampling import (
    ForkSearchConfig,
    ForkSearchResult,
    aparallel_initialization,
    asequential_rollback,
    imitation_loss,
)
from ale_roll.config import ResamplingConfig
from ale_roll.engines.base import TrainEngine
from ale_roll.types import Trajectory, collate, flatten_trajectory

PlayFrom = Callable[..., Awaitable[Trajectory]]
"""runner.run-like: play(seed=, initial_state_id=, group_id=, episode_id=, prefix=, prefix_chunks=)."""

_MAX_GROUPS = 4096  # plans kept for the imitation decision; far more than a batch spans


@dataclass
class GroupPlan:
    """The fork search's outcome for one group, shared by its episodes."""

    expert: Trajectory
    search: ForkSearchResult

    @property
    def start(self) -> int:
        """Expert chunks replayed before the policy takes over: f − 1 (0 when there is no fork)."""
        return self.search.fork - 1 if self.search.fork is not None else 0


class ChunkResampler:
    """Plans and plays resampled groups, and builds their imitation term (module docstring)."""

    def __init__(self, cfg: ResamplingConfig, experts: Sequence[Trajectory], seed: int = 0) -> None:
        self.cfg = cfg
        self.search_cfg = ForkSearchConfig(rollouts_per_anchor=cfg.rollouts_per_anchor, fork_gap=cfg.fork_gap,
                                           num_anchors=cfg.num_anchors, gamma=cfg.gamma, lambda_il=cfg.lambda_il,
                                           seed=seed)
        self.experts = {int(t.seed): t for t in experts if t.seed is not None and t.num_chunks >= 1}
        self._rng = random.Random(seed)
        self._plans: OrderedDict[str, asyncio.Task[GroupPlan | None]] = OrderedDict()
        self._done: OrderedDict[str, GroupPlan] = OrderedDict()
        self.counts: dict[str, float] = {}

    def _count(self, key: str, n: float = 1.0) -> None:
        self.counts[key] = self.counts.get(key, 0.0) + n

    async def _plan(self, play: PlayFrom, seed: int, state_id: str, group_id: str) -> GroupPlan | None:
        expert = self.experts.get(seed)
        if expert is None or self._rng.random() >= self.cfg.fraction:
            return None

        async def success_from(j: int) -> bool:
            traj = await play(seed=seed, initial_state_id=state_id, group_id=f"{group_id}-search",
                              prefix=expert, prefix_chunks=j)
            return bool(traj.metadata.get("success"))

        search = (asequential_rollback if self.cfg.search == "sequential" else aparallel_initialization)
        result = await search(success_from, expert.num_chunks, self.search_cfg)
        self._count("resampling/searches")
        self._count("resampling/rollbacks", result.rollouts)
        plan = GroupPlan(expert, result)
        if result.fork is None:
            self._count("resampling/no_fork")
            return None
        self._count("resampling/fired")
        self._count("resampling/fork_sum", result.fork)
        self._count("resampling/start_sum", plan.start)
        self._done[group_id] = plan
        while len(self._done) > _MAX_GROUPS:
            self._done.popitem(last=False)
        return plan

    async def play(self, play: PlayFrom, *, seed: int | None, initial_state_id: str, group_id: str,
                   episode_id: str | None) -> Trajectory:
        """One episode of a group: from the group's fork when it has one, else as usual."""
        plan: GroupPlan | None = None
        if seed is not None and int(seed) in self.experts:
            task = self._plans.get(group_id)
            if task is None:
                task = asyncio.get_running_loop().create_task(self._plan(play, int(seed), initial_state_id, group_id))
                self._plans[group_id] = task
                while len(self._plans) > _MAX_GROUPS:
                    self._plans.popitem(last=False)
            plan = await asyncio.shield(task)
        if plan is None:
            return await play(seed=seed, initial_state_id=initial_state_id, group_id=group_id, episode_id=episode_id)
        traj = await play(seed=seed, initial_state_id=initial_state_id, group_id=group_id, episode_id=episode_id,
                          prefix=plan.expert, prefix_chunks=plan.start)
        traj.metadata["resampling_fork"] = plan.search.fork
        self._count("resampling/episodes")
        return traj

    def close(self) -> None:
        """Cancel fork searches still running (rollout is stopping; their episodes are cancelled)."""
        for task in self._plans.values():
            task.cancel()
        self._plans.clear()

    def imitation_targets(self, batch: Sequence[Trajectory]) -> list[tuple[Trajectory, int]]:
        """(expert, fork) of every resampled group in `batch` none of whose rollouts succeeded."""
        groups: dict[str, list[Trajectory]] = {}
        for t in batch:
            if "resampling_fork" in t.metadata:
                groups.setdefault(t.group_id, []).append(t)
        out = []
        for group_id, trajs in groups.items():
            plan = self._done.get(group_id)
            if plan is not None and plan.search.fork is not None and not any(t.metadata.get("success") for t in trajs):
                out.append((plan.expert, plan.search.fork))
        return out

    def imitation_backward(self, engine: TrainEngine, targets: Sequence[tuple[Trajectory, int]],
                           pad_id: int = 0) -> float:
        """Accumulate λ_IL · mean over groups of L_IL (Eq. 10) into the engine's gradients; the next
        optimizer step (the RL update's) applies it together with the RL gradient."""
        if not targets:
            return 0.0
        batch = collate([flatten_trajectory(t) for t, _ in targets], pad_id)
        forks = [f for _, f in targets]
        lam, gamma = self.cfg.lambda_il, self.cfg.gamma

        def loss_fn(logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            terms = [imitation_loss(logprobs[i:i + 1], mask[i:i + 1], batch.chunk_ids[i:i + 1].to(logprobs.device),
                                    f, gamma, batch.num_chunks[i:i + 1].to(logprobs.device))
                     for i, f in enumerate(forks)]
            return lam * torch.stack(terms).mean()

        loss = engine.backward(batch.input_ids, batch.loss_mask, attention_mask=batch.attention_mask, loss_fn=loss_fn)
        self._count("resampling/imitation", len(targets))
        return float(loss)

    def take_metrics(self) -> dict[str, Any]:
        """Counters since the last call (per training step), with the mean fork and start chunk."""
        c, self.counts = self.counts, {}
        fired = c.get("resampling/fired", 0.0)
        out = {k: v for k, v in c.items() if not k.endswith("_sum")}
        for key in ("resampling/fired", "resampling/searches", "resampling/rollbacks", "resampling/imitation",
                    "resampling/episodes", "resampling/no_fork"):
            out.setdefault(key, 0.0)
        if fired:
            out["resampling/fork_mean"] = c.get("resampling/fork_sum", 0.0) / fired
            out["resampling/start_mean"] = c.get("resampling/start_sum", 0.0) / fired
        return out
