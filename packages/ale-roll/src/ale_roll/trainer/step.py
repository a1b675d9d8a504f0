"""One optimizer step on a batch of trajectories: RL (any registered loss) or masked SFT.

The losses come from `algorithms.registry` by name; the engine runs forward/backward and calls
the loss on the per-token logprobs it computed (`TrainEngine.backward(loss_fn=...)`). One
optimizer step per batch means π_θold is the weights at the start of the step, i.e. the current
logprobs (detached); μ (the inference engine's behaviour logprobs, possibly from an older
version) enters through `LossInputs.behaviour_logprobs`, so the mismatch metrics measure both
staleness and the train–inference numerical gap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ale_roll.algorithms.base import LossInputs
from ale_roll.algorithms.registry import get_loss
from ale_roll.engines.base import TrainEngine
from ale_roll.types import (
    FlatTrajectory,
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


def train_step(engine: TrainEngine, trajs: Sequence[Trajectory], loss: str, loss_config: Any = None,
               *, pad_id: int = 0) -> dict[str, float]:
    """Backward + step on `trajs` with the registered loss `loss`; returns its metrics."""
    spec = get_loss(loss)
    cfg = spec.make_config(loss_config)
    sft = loss == "sft"
    batch = collate(flatten_all(trajs), pad_id)
    captured: dict[str, float] = {}

    def loss_fn(logprobs: Any, _mask: Any) -> Any:
        out = spec(LossInputs.from_batch(batch, logprobs, sft=sft), cfg)
        captured.update(out.metrics)
        return out.loss

    mask = batch.sft_mask if sft else batch.loss_mask
    engine.backward(batch.input_ids, mask, attention_mask=batch.attention_mask, loss_fn=loss_fn)
    captured["grad_norm"] = engine.step()
    return {(k if "/" in k else f"train/{k}"): float(v) for k, v in captured.items()}


def set_lr(engine: TrainEngine, lr: float) -> bool:
    """Set the learning rate of an engine exposing a torch `optimizer`; False when it has none."""
    opt = getattr(engine, "optimizer", None)
    if opt is None:
        return False
    for group in opt.param_groups:
        group["lr"] = lr
    return True
