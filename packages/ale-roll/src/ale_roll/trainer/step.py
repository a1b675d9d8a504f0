"""The updates on one batch of trajectories: RL (any registered loss) or masked SFT.

The losses come from `algorithms.registry` by name; the engine runs forward/backward and calls
the loss on the per-token logprobs it computed (`TrainEngine.backward(loss_fn=...)`).

A batch takes `epochs` × `minibatches` optimizer steps (default 1 × 1). Mini-batches split the
batch by rollout group, so group normalization sees whole groups. The proximal logprobs π_prox
(`LossInputs.old_logprobs`: the weights at the start of the batch's updates) are the current
logprobs, detached, when there is one update — no extra forward — and one no-grad forward over
the batch before the first update otherwise. μ (the inference engine's behaviour logprobs,
possibly from an older version) enters through `LossInputs.behaviour_logprobs`; IPA's ρ_c is
against μ by default (algorithms/ipa.py), so it acts both under staleness and after the first
mini-batch.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

from ale_roll.algorithms.base import LossInputs
from ale_roll.algorithms.registry import get_loss
from ale_roll.engines.base import TrainEngine
from ale_roll.types import (
    FlatTrajectory,
    TokenBatch,
    Trajectory,
    collate,
    flatten_trajectory,
    flatten_turns,
    is_prefix_consistent,
)


def flatten_all(trajs: Sequence[Trajectory]) -> list[FlatTrajectory]:
    """One row per prefix-consistent trajectory, one per turn otherwise."""
    rows: list[FlatTrajectory] = []
    for t in trajs:
        rows.extend([flatten_trajectory(t)] if is_prefix_consistent(t) else flatten_turns(t))
    return rows


def trajectory_metrics(trajs: Sequence[Trajectory], version: int) -> dict[str, float]:
    """Reward, success, length and staleness of the batch."""
    n = max(len(trajs), 1)
    stale = [version - t.version for t in trajs]
    return {
        "reward/mean": sum(t.reward for t in trajs) / n,
        "success/rate": sum(bool(t.metadata.get("success")) for t in trajs) / n,
        "episode/turns": sum(len(t.turns) for t in trajs) / n,
        "episode/completion_tokens": sum(len(tt.completion_ids) for t in trajs for tt in t.turns) / n,
        "staleness/mean": sum(stale) / n,
        "staleness/max": float(max(stale, default=0)),
    }


def select_rows(batch: TokenBatch, rows: Sequence[int]) -> TokenBatch:
    """The sub-batch of `rows` (same padding width)."""
    import torch

    idx = torch.tensor(list(rows), dtype=torch.long)
    return TokenBatch(**{name: getattr(batch, name)[idx] for name in TokenBatch.__dataclass_fields__})


def group_minibatches(group_ids: Sequence[int], minibatches: int, rng: random.Random) -> list[list[int]]:
    """Row indices split into at most `minibatches` parts of whole groups (shuffled, sizes within one group)."""
    groups: dict[int, list[int]] = {}
    for row, g in enumerate(group_ids):
        groups.setdefault(int(g), []).append(row)
    order = list(groups.values())
    rng.shuffle(order)
    parts = min(max(minibatches, 1), len(order))
    # Rows in batch order within a part: a part holding every row is then the batch itself.
    return [sorted(row for members in order[k::parts] for row in members) for k in range(parts)]


def train_step(engine: TrainEngine, trajs: Sequence[Trajectory], loss: str, loss_config: Any = None,
               *, pad_id: int = 0, epochs: int = 1, minibatches: int = 1, seed: int = 0) -> dict[str, float]:
    """`epochs` passes of `minibatches` optimizer steps on `trajs` with the registered loss `loss`.

    Metrics are the mean over the updates; `train/updates` counts them, `ipa/*` and `is/*` of the
    updates after the first are also reported as `later/...` (where the ratio acts within a batch).
    """
    spec = get_loss(loss)
    cfg = spec.make_config(loss_config)
    sft = loss == "sft"
    batch = collate(flatten_all(trajs), pad_id)
    updates = max(epochs, 1) * max(minibatches, 1)
    prox = None
    metrics: dict[str, float] = {}
    if updates > 1 and not sft:
        t0 = time.perf_counter()
        prox = engine.forward_logprobs(batch.input_ids, batch.attention_mask).float().cpu()
        metrics["time/proximal_logprobs_s"] = time.perf_counter() - t0
    rng = random.Random(seed)
    history: list[dict[str, float]] = []
    for _ in range(max(epochs, 1)):
        for rows in group_minibatches(batch.group_ids.tolist(), minibatches, rng):
            part = batch if len(rows) == len(batch.rewards) else select_rows(batch, rows)
            part_old = None if prox is None else prox[rows]
            history.append(_update(engine, spec, cfg, part, part_old, sft))
    for key in history[0]:
        values = [h[key] for h in history if key in h]
        metrics[key] = sum(values) / len(values)
    for key in history[0]:
        if len(history) > 1 and key.startswith(("ipa/", "is/")):
            later = [h[key] for h in history[1:] if key in h]
            metrics[f"later/{key}"] = sum(later) / len(later)
    metrics["updates"] = float(len(history))
    return {(k if "/" in k else f"train/{k}"): float(v) for k, v in metrics.items()}


def _update(engine: TrainEngine, spec: Any, cfg: Any, batch: TokenBatch, old: Any, sft: bool) -> dict[str, float]:
    """One backward + optimizer step on `batch` (π_prox = `old`, or the current logprobs when None)."""
    captured: dict[str, float] = {}

    def loss_fn(logprobs: Any, _mask: Any) -> Any:
        out = spec(LossInputs.from_batch(batch, logprobs, None if old is None else old.to(logprobs.device), sft=sft), cfg)
        captured.update(out.metrics)
        return out.loss

    mask = batch.sft_mask if sft else batch.loss_mask
    engine.backward(batch.input_ids, mask, attention_mask=batch.attention_mask, loss_fn=loss_fn)
    captured["grad_norm"] = engine.step()
    return captured

