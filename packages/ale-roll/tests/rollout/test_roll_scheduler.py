"""RolloutScheduler: the staleness bound, the frontier, resampling of failed episodes."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import pytest
from ale_roll.algorithms.filtering import EnvironmentNoiseFilter
from ale_roll.buffer.sample_buffer import BufferConfig, FrontierEntry, SampleBuffer
from ale_roll.rollout.scheduler import BatchEpisodeFn, EpisodeFn, RolloutScheduler
from ale_roll.types import Trajectory, Turn


def _traj(entry: FrontierEntry, version: int) -> Trajectory:
    return Trajectory([Turn([0], [1], [0.0], policy_version=version)], reward=1.0,
                      initial_state_id=entry.initial_state_id, seed=entry.seed, group_id=entry.group_id,
                      policy_version=version)


def _batched(episode: EpisodeFn, calls: list[int] | None = None) -> BatchEpisodeFn:
    """A `batch_fn` that plays its entries together (what `EpisodeRunner.run_batch` does for the scheduler)."""

    async def play(entries: Sequence[FrontierEntry]) -> list[Any]:
        if calls is not None:
            calls.append(len(entries))
        return list(await asyncio.gather(*(episode(e) for e in entries), return_exceptions=True))

    return play


async def _train(async_ratio: int, group_size: int = 1, steps: int = 6, batch: int = 8, start_version: int = 0,
                 batched: bool = False) -> dict:
    """Long-tailed fake episodes (logic test); a trainer loop consuming batches and bumping versions."""
    buffer = SampleBuffer(BufferConfig(async_ratio=async_ratio, group_size=group_size), version=start_version)
    rng = random.Random(0)
    issued_at: list[tuple[int, int]] = []  # (issued_total, version) whenever an episode starts

    async def episode(entry: FrontierEntry) -> Trajectory:
        version = buffer.version
        issued_at.append((buffer.issued_total, version))
        await asyncio.sleep(0.001 * rng.lognormvariate(0, 1.2))
        return _traj(entry, version)

    calls: list[int] = []
    sched = RolloutScheduler(buffer, episode, batch_size=batch, group_size=group_size, episodes_in_flight=16,
                             async_ratio=async_ratio, seed_of=lambda k: 100 + k,
                             batch_fn=_batched(episode, calls) if batched else None)
    task = asyncio.create_task(sched.run())
    staleness = []
    states: list[str] = []
    for _ in range(steps):
        got = await buffer.aget_batch(batch, timeout=30)
        staleness += [buffer.version - t.version for t in got]
        states += [t.initial_state_id for t in got]
        await asyncio.sleep(0.003)  # "training"
        buffer.set_version(buffer.version + 1)
        sched.wake()
    sched.stop()
    await asyncio.wait_for(task, 10)
    return {"staleness": staleness, "issued_at": issued_at, "buffer": buffer, "states": states, "sched": sched,
            "calls": calls}


@pytest.mark.parametrize("batched", [False, True], ids=["per-episode", "batched"])
@pytest.mark.parametrize("ratio", [0, 1, 2])
def test_staleness_bound_is_enforced_by_the_scheduler(ratio: int, batched: bool) -> None:
    out = asyncio.run(_train(ratio, batched=batched))
    assert out["staleness"] and max(out["staleness"]) <= ratio
    buffer = out["buffer"]
    # The gate: an episode starting at version v is at most the ((v + η + 1)·B + lost)-th issued.
    lost = sum(buffer.dropped.values())
    for issued, version in out["issued_at"]:
        assert issued <= (version + ratio + 1) * 8 + lost
    if ratio == 0:
        assert set(out["staleness"]) == {0} and lost == 0  # synchronous training, same code
    if batched and ratio == 0:  # synchronous: each step's episodes start together, as one batch
        assert out["calls"][:6] == [8] * 6


@pytest.mark.parametrize("ratio", [0, 1])
def test_staleness_bound_holds_when_the_version_does_not_start_at_zero(ratio: int) -> None:
    # E.g. after an SFT warm-up of 15 steps: the gate counts outstanding episodes, not version * batch.
    out = asyncio.run(_train(ratio, start_version=15))
    assert max(out["staleness"]) <= ratio
    assert sum(out["buffer"].dropped.values()) == 0 or ratio > 0
    assert max(v for _, v in out["issued_at"]) <= 15 + 6
    assert max(i for i, v in out["issued_at"] if v == 15) <= (ratio + 1) * 8


def test_async_ratio_lets_rollout_run_ahead() -> None:
    sync, async_ = asyncio.run(_train(0)), asyncio.run(_train(2))
    assert max(v for _, v in sync["issued_at"]) <= 6
    # With η = 2, episodes of later batches start before the earlier batches were trained on.
    assert any(issued > 8 for issued, v in async_["issued_at"] if v == 0)
    assert not any(issued > 8 for issued, v in sync["issued_at"] if v == 0)


def test_groups_stay_whole_and_states_are_not_repeated() -> None:
    out = asyncio.run(_train(1, group_size=4, steps=4))
    states = out["states"]
    assert len(states) == 32
    for k in set(states):
        assert states.count(k) == 4


@pytest.mark.parametrize("batched", [False, True], ids=["per-episode", "batched"])
def test_a_failing_episode_is_resampled_from_the_same_state_and_never_crashes(batched: bool) -> None:
    buffer = SampleBuffer(BufferConfig(async_ratio=1))
    attempts: dict[str, int] = {}

    async def episode(entry: FrontierEntry) -> Trajectory:
        attempts[entry.initial_state_id] = attempts.get(entry.initial_state_id, 0) + 1
        if entry.seed is not None and entry.seed % 3 == 0 and attempts[entry.initial_state_id] == 1:
            raise ConnectionError("sandbox died mid-episode")
        traj = _traj(entry, buffer.version)
        if entry.seed == 4 and attempts[entry.initial_state_id] == 1:
            traj.metadata["env_failure"] = True  # flagged noise is filtered and resampled too
        return traj

    async def go() -> list[Trajectory]:
        sched = RolloutScheduler(buffer, episode, batch_size=8, episodes_in_flight=8, async_ratio=1,
                                 filters=[EnvironmentNoiseFilter()], retry_backoff_s=0.0,
                                 batch_fn=_batched(episode) if batched else None)
        task = asyncio.create_task(sched.run())
        batch = await buffer.aget_batch(8, timeout=30)
        sched.stop()
        await task
        assert sched.stats.rejected["rollout_exception"] >= 3
        assert sched.stats.rejected["env_noise:env_failure"] == 1
        return batch

    batch = asyncio.run(go())
    by_state = {t.initial_state_id: t for t in batch}
    assert by_state["state-0"].metadata["attempts"] == 2
    assert by_state["state-4"].metadata["attempts"] == 2
    assert len(by_state) == 8


@pytest.mark.parametrize("max_attempts", [1, 2])
@pytest.mark.parametrize("batched", [False, True], ids=["per-episode", "batched"])
def test_an_initial_state_given_up_on_is_abandoned_and_counted(batched: bool, max_attempts: int) -> None:
    buffer = SampleBuffer(BufferConfig(async_ratio=0))

    async def episode(entry: FrontierEntry) -> Trajectory:
        if entry.seed == 2:
            raise RuntimeError("always broken")
        return _traj(entry, buffer.version)

    async def go() -> list[Trajectory]:
        sched = RolloutScheduler(buffer, episode, batch_size=4, episodes_in_flight=4, async_ratio=0,
                                 max_attempts=max_attempts, retry_backoff_s=0.01,
                                 batch_fn=_batched(episode) if batched else None)
        task = asyncio.create_task(sched.run())
        batch = await buffer.aget_batch(4, timeout=30)  # the lost episode is replaced by a new state
        sched.stop()
        await task
        return batch

    batch = asyncio.run(go())
    assert "state-2" not in {t.initial_state_id for t in batch}
    assert buffer.dropped["exhausted"] == 1


def test_a_batch_counts_each_episode_in_flight_and_a_stop_leaves_them_in_the_frontier() -> None:
    buffer = SampleBuffer(BufferConfig(async_ratio=0, group_size=4))
    started = asyncio.Event()

    async def never(entries: Sequence[FrontierEntry]) -> list[Any]:
        started.set()
        await asyncio.Event().wait()  # a batch still generating when rollout stops
        raise AssertionError("unreachable")

    async def episode(entry: FrontierEntry) -> Trajectory:
        raise AssertionError("the batch path plays first attempts")

    async def go() -> RolloutScheduler:
        sched = RolloutScheduler(buffer, episode, batch_size=8, group_size=4, episodes_in_flight=12, async_ratio=0,
                                 batch_fn=never)
        task = asyncio.create_task(sched.run())
        await asyncio.wait_for(started.wait(), 10)
        assert sched.in_flight == 8  # one task, eight episodes: the capacity gate counts episodes
        sched.stop()
        await asyncio.wait_for(task, 10)
        assert sched.in_flight == 0
        return sched

    asyncio.run(go())
    assert buffer.metrics()["buffer/in_flight"] == 8  # cancelled, not lost: a resume re-runs them
    assert [e.group_id for e in buffer.reissue_frontier()] == ["g0"] * 4 + ["g1"] * 4
