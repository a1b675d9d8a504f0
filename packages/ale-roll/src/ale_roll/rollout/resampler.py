"""Chunk-level initialized resampling in training (Eq. 10), for the controller's rollout (both modes).

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

Experts are matched to states by seed in GEM mode; in agent-native mode by task (an expert's
`metadata.task_id` against the task the state's seed plays: `key_of`), and "replaying" chunks
means the agent takes the expert's recorded replies as its first ones, their tool calls running in
the episode's fresh sandbox (`AgentNativeRunner.run(prefix=...)`).
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
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
from ale_roll.rollout.replay import load_trajectories
from ale_roll.types import Trajectory, collate, flatten_trajectory, is_prefix_consistent

PlayFrom = Callable[..., Awaitable[Trajectory]]
"""runner.run-like: play(seed=, initial_state_id=, group_id=, episode_id=, prefix=, prefix_chunks=)."""

_MAX_GROUPS = 4096  # plans kept for the imitation decision; far more than a batch spans
_SEARCH_ATTEMPTS = 3


def load_agent_experts(path: str | Path) -> list[Trajectory]:
    """Agent-native experts: a JSONL of ``Trajectory.to_dict`` lines from an agent-native runner (e.g.
    `ale up`'s ``data/demos.jsonl``), each with ``metadata.task_id``, one ``metadata.assistant_messages``
    entry per turn (the replies to replay) and one token sequence (prefix-consistent: the imitation
    term trains on it). ValueError naming the line otherwise; experts that failed their task are skipped."""
    # Agent-native only: needs ale-rock and ale-flow.
    from ale_roll.rollout.agent_native import prefix_replies
    from ale_roll.rollout.agents import replay_response

    out: list[Trajectory] = []
    for n, t in enumerate(load_trajectories(path), 1):
        if not t.metadata.get("task_id"):
            raise ValueError(f"{path}: expert {n} has no metadata.task_id (agent-native experts are matched by task)")
        try:  # every reply a search could replay (all but the last chunk's) must replay
            for m in prefix_replies(t, max(t.num_chunks - 1, 0)):
                replay_response(m)
        except (ValueError, AttributeError) as e:
            raise ValueError(f"{path}: expert {n}: {e}") from None
        if not is_prefix_consistent(t):
            raise ValueError(f"{path}: expert {n} ({t.metadata['task_id']}) is not one token sequence (its agent "
                             "rewrote its context), so it cannot be imitated")
        if t.metadata.get("success", True):
            out.append(t)
    return out


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

    def __init__(self, cfg: ResamplingConfig, experts: Sequence[Trajectory], seed: int = 0,
                 expert_key: Callable[[Trajectory], Hashable | None] | None = None,
                 key_of: Callable[[int], Hashable] | None = None) -> None:
        """``expert_key`` names the state an expert belongs to (default: its seed) and ``key_of`` the
        key of a rollout seed (default: the seed itself); agent-native mode passes task ids."""
        self.cfg = cfg
        self.search_cfg = ForkSearchConfig(rollouts_per_anchor=cfg.rollouts_per_anchor, fork_gap=cfg.fork_gap,
                                           num_anchors=cfg.num_anchors, gamma=cfg.gamma, lambda_il=cfg.lambda_il,
                                           seed=seed)
        keyed = expert_key or (lambda t: int(t.seed) if t.seed is not None else None)
        self.experts: dict[Hashable, Trajectory] = {}
        for t in experts:
            key = keyed(t)
            if key is not None and t.num_chunks >= 1:
                self.experts[key] = t
        self.key_of: Callable[[int], Hashable] = key_of or (lambda s: s)
        self._rng = random.Random(seed)
        self._plans: OrderedDict[str, asyncio.Task[GroupPlan | None]] = OrderedDict()
        self._done: OrderedDict[str, GroupPlan] = OrderedDict()
        self.counts: dict[str, float] = {}

    def _count(self, key: str, n: float = 1.0) -> None:
        self.counts[key] = self.counts.get(key, 0.0) + n

    def expert_for(self, seed: int | None) -> Trajectory | None:
        """The expert of the state with this seed, if there is one."""
        return None if seed is None else self.experts.get(self.key_of(int(seed)))

    async def _plan(self, play: PlayFrom, seed: int, state_id: str, group_id: str) -> GroupPlan | None:
        expert = self.expert_for(seed)
        if expert is None or self._rng.random() >= self.cfg.fraction:
            return None

        async def success_from(j: int) -> bool:
            # A search rollout the infrastructure spoiled (agent-native: a lost sandbox) is played
            # again, never read as a failure; the third error fails the plan (the group is retried).
            for attempt in range(_SEARCH_ATTEMPTS):
                try:
                    traj = await play(seed=seed, initial_state_id=state_id, group_id=f"{group_id}-search",
                                      prefix=expert, prefix_chunks=j)
                    return bool(traj.metadata.get("success"))
                except Exception:
                    self._count("resampling/search_errors")
                    if attempt == _SEARCH_ATTEMPTS - 1:
                        raise
            raise AssertionError("unreachable")

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
        if self.expert_for(seed) is not None:
            assert seed is not None
            task = self._plans.get(group_id)
            if task is None:
                task = asyncio.get_running_loop().create_task(self._plan(play, int(seed), initial_state_id, group_id))
                self._plans[group_id] = task
                while len(self._plans) > _MAX_GROUPS:
                    self._plans.popitem(last=False)
            try:
                plan = await asyncio.shield(task)
            except Exception:
                if self._plans.get(group_id) is task:  # the next attempt of this group plans afresh
                    del self._plans[group_id]
                raise
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
