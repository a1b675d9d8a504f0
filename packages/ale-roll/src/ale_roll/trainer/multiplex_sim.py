"""Simulator: train–rollout multiplexing vs a static split of the same worker slots.

    python -m ale_roll.trainer.multiplex_sim [--slots 16] [--train-slots 4] ...

Episodes take lognormal time on one slot; a training step takes `train_work` slot-seconds and
runs on `train_slots` slots. Both modes use the same episodes and the staleness gate of the
scheduler (at most (v + η + 1)·batch episodes issued at version v).

- static: `slots − train_slots` slots always roll out, `train_slots` always train (idle while
  waiting for a batch — the bubble);
- multiplex (`ResourceManager`): all slots roll out; when a batch is ready, new episodes stop
  going to the training subset, training starts as soon as those slots have drained (stragglers
  finish elsewhere), and the slots return to rollout after the step.

The bubble is the fraction of slot-time spent idle until the last step ends.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
from dataclasses import asdict, dataclass
from typing import Literal


@dataclass(frozen=True)
class SimConfig:
    """Workload and resources of one simulation."""

    slots: int = 16
    train_slots: int = 4
    batch_size: int = 32
    steps: int = 20
    async_ratio: int = 1
    episode_median_s: float = 1.0
    episode_sigma: float = 0.8
    train_work: float = 8.0
    """Slot-seconds of one training step (2 s on 4 slots)."""
    seed: int = 0


def simulate(cfg: SimConfig, mode: Literal["static", "multiplex"]) -> dict[str, float]:
    """Total time, bubble fraction and steps/s of one mode."""
    rng = random.Random(cfg.seed)
    durations = [rng.lognormvariate(0, cfg.episode_sigma) * cfg.episode_median_s
                 for _ in range((cfg.steps + cfg.async_ratio + 2) * cfg.batch_size)]
    t, used_integral = 0.0, 0.0
    running: list[float] = []
    issued = finished = version = 0
    train_end: float | None = None
    total_episodes = cfg.steps * cfg.batch_size
    while version < cfg.steps:
        batch_ready = finished - version * cfg.batch_size >= cfg.batch_size
        shrunk = mode == "static" or train_end is not None or batch_ready
        cap = cfg.slots - cfg.train_slots if shrunk else cfg.slots
        limit = min((version + cfg.async_ratio + 1) * cfg.batch_size, total_episodes)
        while len(running) < cap and issued < limit:
            heapq.heappush(running, t + durations[issued])
            issued += 1
        if batch_ready and train_end is None and len(running) <= cfg.slots - cfg.train_slots:
            train_end = t + cfg.train_work / cfg.train_slots
        nxt = min([x for x in (running[0] if running else None, train_end) if x is not None])
        used = len(running) + (cfg.train_slots if train_end is not None else 0)
        used_integral += used * (nxt - t)
        t = nxt
        while running and running[0] <= t:
            heapq.heappop(running)
            finished += 1
        if train_end is not None and train_end <= t:
            train_end = None
            version += 1
    return {"seconds": round(t, 3), "bubble": round(1 - used_integral / (cfg.slots * t), 4),
            "steps_per_s": round(cfg.steps / t, 4)}


def compare(cfg: SimConfig) -> dict[str, object]:
    """Both modes on the same workload."""
    static, multiplex = simulate(cfg, "static"), simulate(cfg, "multiplex")
    return {"config": asdict(cfg), "static": static, "multiplex": multiplex,
            "speedup": round(static["seconds"] / multiplex["seconds"], 3),
            "bubble_removed": round(static["bubble"] - multiplex["bubble"], 4)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Train–rollout multiplexing vs a static split (simulated).")
    for name, default in asdict(SimConfig()).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    args = p.parse_args(argv)
    print(json.dumps(compare(SimConfig(**vars(args))), indent=2))


if __name__ == "__main__":
    main()
