"""Dynamic trajectory filtering and on-the-fly resampling of the same initial state."""

from __future__ import annotations

import asyncio

from ale_roll.algorithms import (
    EnvironmentNoiseFilter,
    FilterStats,
    RepeatedIllegalToolCallFilter,
    TruncatedFilter,
    arollout_with_resampling,
    default_filters,
    first_rejection,
    rollout_with_resampling,
)
from ale_roll.types import StopReason, Trajectory, Turn


def traj(*turns: Turn, **metadata: object) -> Trajectory:
    return Trajectory(list(turns), reward=1.0, metadata=dict(metadata))


def turn(stop: StopReason = StopReason.TOOL_CALL, error: bool = False) -> Turn:
    return Turn([1], [2], [-0.1], stop_reason=stop, error=error)


def test_builtin_filters() -> None:
    clean = traj(turn(), turn(error=True), turn(StopReason.STOP))
    assert first_rejection(clean, default_filters()) is None  # one agent tool error is signal, not noise
    assert EnvironmentNoiseFilter()(traj(turn(), env_failure=True)) == "env_noise:env_failure"
    assert EnvironmentNoiseFilter()(traj(turn(), nondeterministic=True)) == "env_noise:nondeterministic"
    assert EnvironmentNoiseFilter()(traj(turn(StopReason.ABORTED))) == "env_noise:aborted"
    looping = traj(turn(), turn(error=True), turn(error=True), turn(error=True), turn(StopReason.STOP))
    assert RepeatedIllegalToolCallFilter(max_repeats=3)(looping) == "repeated_illegal_tool_calls"
    broken_run = traj(turn(error=True), turn(error=True), turn(), turn(error=True), turn(error=True))
    assert RepeatedIllegalToolCallFilter(max_repeats=3)(broken_run) is None
    assert TruncatedFilter()(traj(turn(), turn(StopReason.LENGTH))) == "truncated"
    assert TruncatedFilter()(traj(turn(StopReason.STOP), truncated=True)) == "truncated"


class FlakyEnv:
    """Fails the first `bad` rollouts of every initial state (noise, then a crash), then succeeds."""

    def __init__(self, bad: int) -> None:
        self.bad = bad
        self.seen: list[str] = []

    def outcome(self, state: str) -> Trajectory:
        self.seen.append(state)
        attempt = self.seen.count(state)
        if attempt == 2:
            raise ConnectionError("sandbox killed mid-episode")
        t = traj(turn(StopReason.STOP), env_failure=attempt <= self.bad)
        t.initial_state_id = state
        return t

    def __call__(self, state: str) -> Trajectory:
        return self.outcome(state)


def test_resampling_reruns_the_same_initial_state() -> None:
    env, stats = FlakyEnv(bad=2), FilterStats()
    kept = rollout_with_resampling(env, "task-3", default_filters(), max_attempts=5, stats=stats)
    assert kept is not None and kept.initial_state_id == "task-3"
    assert env.seen == ["task-3"] * 3
    assert kept.metadata["attempts"] == 3
    assert stats.accepted == 1
    assert stats.rejected == {"env_noise:env_failure": 1, "rollout_exception": 1}
    assert stats.as_metrics()["filter/rejected/rollout_exception"] == 1.0


def test_resampling_gives_up_after_max_attempts() -> None:
    env, stats = FlakyEnv(bad=10), FilterStats()
    assert rollout_with_resampling(env, "s", default_filters(), max_attempts=3, stats=stats) is None
    assert stats.exhausted == 1 and sum(stats.rejected.values()) == 3 and stats.accepted == 0


def test_async_resampling() -> None:
    env, stats = FlakyEnv(bad=1), FilterStats()

    async def rollout(state: str) -> Trajectory:
        await asyncio.sleep(0)
        return env.outcome(state)

    async def main() -> list[Trajectory | None]:
        return await asyncio.gather(*(arollout_with_resampling(rollout, s, default_filters(), 4, stats) for s in "abc"))

    results = asyncio.run(main())
    assert [r.initial_state_id for r in results if r is not None] == ["a", "b", "c"]
    assert sorted(env.seen) == sorted("abc" * 3)  # noise, crash, then clean for each state
    assert stats.accepted == 3


def test_resampling_closes_the_buffer_frontier() -> None:
    from ale_roll.buffer import SampleBuffer

    buf, stats = SampleBuffer(), FilterStats()
    good, hopeless = buf.issue("task-1"), buf.issue("task-2")
    kept = rollout_with_resampling(FlakyEnv(bad=1), good.initial_state_id, default_filters(), 4, stats,
                                   episode_id=good.episode_id)
    assert kept is not None and buf.put(kept)
    lost = rollout_with_resampling(FlakyEnv(bad=10), hopeless.initial_state_id, default_filters(), 2, stats,
                                   episode_id=hopeless.episode_id)
    assert lost is None
    buf.abandon(hopeless.episode_id, reason="filter_exhausted")
    assert buf.in_flight() == [] and len(buf) == 1
    assert buf.dropped == {"filter_exhausted": 1}
