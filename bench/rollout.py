"""Benchmark: synchronous batched rollout vs ale-roll's fine-grained async rollout.

    python bench/rollout.py [--json] [--batches 8] [--batch-size 32] [--turns 4]

The workload (no model; costs simulated with asyncio sleeps, identical in every mode):
- `batches × batch_size` episodes of `turns` turns each; episode k is initial state k;
- each turn: a fixed generation cost `gen_ms` (a batched engine serves concurrent requests in the
  same time), then an environment step whose latency is **lognormal**: median `env_median_ms`,
  shape σ = `env_sigma` (σ = 1: mean = 1.65 × median, p99 ≈ 10 × median — the long tail of real
  sandboxes/tools). The latency of (episode k, turn t) is drawn from a seeded RNG keyed by (k, t),
  so every mode sees the same episodes. Costs are tens of milliseconds so that the OS's timer
  and scheduling jitter on a busy 2-core machine (a 4 ms sleep can take 10 ms) stays small;
- each training step costs `train_ms`, the weight sync `sync_ms`.

Modes, with equal workers (`workers = batch_size` episode slots):
- sync: a batch runs in lock-step — every turn waits for the slowest env step of the batch —
  then trains while rollout idles;
- async (ratio 1 and 2): `RolloutScheduler` + `SampleBuffer` (the real classes) keep `workers`
  episodes in flight, each pipelined on its own, training overlapping rollout under the staleness
  bound.

`ideal_speedup` = sync_s / critical-path bound, where the bound is
max(total episode work / workers + train_ms + sync_ms, first batch + batches × (train + sync)):
no schedule on these workers can finish sooner. Goal: speedup ≥ 2.5× and ≥ 80% of ideal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "ale-roll" / "src"))

from ale_roll.buffer.sample_buffer import BufferConfig, FrontierEntry, SampleBuffer  # noqa: E402
from ale_roll.rollout.scheduler import RolloutScheduler  # noqa: E402
from ale_roll.types import Trajectory, Turn  # noqa: E402


@dataclass(frozen=True)
class Workload:
    """The simulated episodes (see the module docstring)."""

    batches: int = 8
    batch_size: int = 32
    turns: int = 4
    gen_ms: float = 20.0
    env_median_ms: float = 50.0
    env_sigma: float = 1.0
    train_ms: float = 150.0
    sync_ms: float = 10.0
    seed: int = 0

    def env_s(self, state: int, turn: int) -> float:
        rng = random.Random(self.seed * 1_000_003 + state * 101 + turn)
        return self.env_median_ms / 1000 * math.exp(self.env_sigma * rng.gauss(0.0, 1.0))

    def episode_s(self, state: int) -> float:
        return sum(self.gen_ms / 1000 + self.env_s(state, t) for t in range(self.turns))

    @property
    def episodes(self) -> int:
        return self.batches * self.batch_size


def _traj(state: int, version: int) -> Trajectory:
    return Trajectory([Turn([0], [1], [0.0], policy_version=version)], reward=1.0,
                      initial_state_id=f"state-{state}", seed=state, policy_version=version)


async def run_sync(w: Workload) -> float:
    """Lock-step batches: each turn waits for the slowest env step, training does not overlap."""
    t0 = time.perf_counter()
    for b in range(w.batches):
        states = range(b * w.batch_size, (b + 1) * w.batch_size)
        for t in range(w.turns):
            await asyncio.sleep(w.gen_ms / 1000)  # one batched generation call
            await asyncio.gather(*(asyncio.sleep(w.env_s(s, t)) for s in states))
        await asyncio.sleep(w.train_ms / 1000)
        await asyncio.sleep(w.sync_ms / 1000)
    return time.perf_counter() - t0


async def run_async(w: Workload, async_ratio: int) -> dict[str, Any]:
    """The real scheduler and buffer; training/sync are sleeps in the controller's loop order."""
    buffer = SampleBuffer(BufferConfig(async_ratio=async_ratio))

    async def episode(entry: FrontierEntry) -> Trajectory:
        version = buffer.version
        for t in range(w.turns):
            await asyncio.sleep(w.gen_ms / 1000)
            await asyncio.sleep(w.env_s(int(entry.seed or 0), t))
        return _traj(int(entry.seed or 0), version)

    sched = RolloutScheduler(buffer, episode, batch_size=w.batch_size, episodes_in_flight=w.batch_size,
                             async_ratio=async_ratio)
    t0 = time.perf_counter()
    task = asyncio.create_task(sched.run())
    staleness: list[int] = []
    for _ in range(w.batches):
        batch = await buffer.aget_batch(w.batch_size, timeout=120, poll_s=0.002)
        staleness += [buffer.version - t.version for t in batch]
        await asyncio.sleep(w.train_ms / 1000)
        await asyncio.sleep(w.sync_ms / 1000)
        buffer.set_version(buffer.version + 1)
        sched.wake()
    elapsed = time.perf_counter() - t0
    sched.stop()
    await task
    return {"seconds": elapsed, "max_staleness": max(staleness), "dropped": sum(buffer.dropped.values())}


def critical_path_s(w: Workload) -> float:
    work = sum(w.episode_s(k) for k in range(w.episodes))
    step = (w.train_ms + w.sync_ms) / 1000
    first_batch = sorted(w.episode_s(k) for k in range(w.episodes))[w.batch_size - 1]
    return max(work / w.batch_size + step, first_batch + w.batches * step)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    for name, default in Workload().__dict__.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    args = p.parse_args(argv)
    w = Workload(**{k: getattr(args, k) for k in Workload().__dict__})
    sync_s = asyncio.run(run_sync(w))
    a1 = asyncio.run(run_async(w, 1))
    a2 = asyncio.run(run_async(w, 2))
    bound = critical_path_s(w)
    best = min(a1["seconds"], a2["seconds"])
    result = {
        "workload": w.__dict__,
        "env_latency": f"lognormal(median={w.env_median_ms} ms, sigma={w.env_sigma})",
        "sync_s": round(sync_s, 3),
        "async_s": round(best, 3),
        "async_ratio_1_s": round(a1["seconds"], 3),
        "async_ratio_2_s": round(a2["seconds"], 3),
        "speedup": round(sync_s / best, 2),
        "speedup_ratio_1": round(sync_s / a1["seconds"], 2),
        "speedup_ratio_2": round(sync_s / a2["seconds"], 2),
        "ideal_speedup": round(sync_s / bound, 2),
        "fraction_of_ideal": round(bound / best, 3),
        "max_staleness": {"ratio_1": a1["max_staleness"], "ratio_2": a2["max_staleness"]},
        "dropped": {"ratio_1": a1["dropped"], "ratio_2": a2["dropped"]},
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
        print(f"\nsync {sync_s:.2f}s | async η=1 {a1['seconds']:.2f}s | async η=2 {a2['seconds']:.2f}s | "
              f"speedup {result['speedup']}x of ideal {result['ideal_speedup']}x ({result['fraction_of_ideal']:.0%})")
    return result


if __name__ == "__main__":
    main()
