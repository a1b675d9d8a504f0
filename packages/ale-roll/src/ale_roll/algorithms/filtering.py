"""Dynamic trajectory filtering with on-the-fly resampling from the same initial state.

Trajectories hit by environment noise (transient API / sandbox failures, non-deterministic tool
responses), stuck in repeated illegal tool calls, or truncated teach the policy nothing about
the task; they are rejected and the *same* initial state is immediately rolled out again with
the current policy, so batches stay full and the task distribution is not biased toward easy
instances.

A filter is any callable `filter(traj) -> reason | None` (the `TrajectoryFilter` Protocol);
`first_rejection` applies a list of them. `rollout_with_resampling` (and its asyncio twin)
wraps one episode: roll out, filter, retry the same initial state up to `max_attempts` times.
A rollout that *raises* (a sandbox killed mid-episode) counts as environment noise too.

With a `SampleBuffer`, pass the frontier entry's `episode_id` so the kept trajectory closes
that entry on `put`; when the helper gives up (returns None) call `buffer.abandon(episode_id)`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from ale_roll.types import StopReason, Trajectory

S = TypeVar("S")

ROLLOUT_EXCEPTION = "rollout_exception"


class TrajectoryFilter(Protocol):
    """Returns why `traj` must be rejected, or None to keep it."""

    def __call__(self, traj: Trajectory) -> str | None: ...


@dataclass
class EnvironmentNoiseFilter:
    """Rejects trajectories the infrastructure spoiled.

    Environment services set a truthy metadata flag (e.g. `env_failure`); a turn whose
    generation failed or was aborted (stop reason error / aborted) is infrastructure noise too.
    An agent's own tool errors (`Turn.error`) are *not* noise: they are learning signal.
    """

    flags: Sequence[str] = ("env_failure", "sandbox_failure", "nondeterministic")
    stop_reasons: Sequence[StopReason] = (StopReason.ERROR, StopReason.ABORTED)

    def __call__(self, traj: Trajectory) -> str | None:
        for flag in self.flags:
            if traj.metadata.get(flag):
                return f"env_noise:{flag}"
        for turn in traj.turns:
            if turn.stop_reason in self.stop_reasons:
                return f"env_noise:{turn.stop_reason.value}"
        return None


@dataclass
class RepeatedIllegalToolCallFilter:
    """Rejects trajectories with `max_repeats` or more consecutive erroring tool calls."""

    max_repeats: int = 3

    def __call__(self, traj: Trajectory) -> str | None:
        run = 0
        for turn in traj.turns:
            run = run + 1 if turn.error else 0
            if run >= self.max_repeats:
                return "repeated_illegal_tool_calls"
        return None


@dataclass
class TruncatedFilter:
    """Rejects trajectories cut off by a length or turn limit (last turn `length`, or `truncated` set)."""

    def __call__(self, traj: Trajectory) -> str | None:
        if traj.metadata.get("truncated") or (traj.turns and traj.turns[-1].stop_reason == StopReason.LENGTH):
            return "truncated"
        return None


def default_filters() -> list[TrajectoryFilter]:
    """The built-in filters, in the order they are checked."""
    return [EnvironmentNoiseFilter(), RepeatedIllegalToolCallFilter(), TruncatedFilter()]


def first_rejection(traj: Trajectory, filters: Iterable[TrajectoryFilter]) -> str | None:
    """The first filter's rejection reason, or None when every filter keeps the trajectory."""
    for f in filters:
        reason = f(traj)
        if reason is not None:
            return reason
    return None


@dataclass
class FilterStats:
    """Counters for logging: kept episodes, rejections by reason, initial states given up on."""

    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    exhausted: int = 0

    def as_metrics(self) -> dict[str, float]:
        """Flat metrics (filter/accepted, filter/exhausted, filter/rejected/<reason>)."""
        out = {"filter/accepted": float(self.accepted), "filter/exhausted": float(self.exhausted)}
        out.update({f"filter/rejected/{k}": float(v) for k, v in self.rejected.items()})
        return out


def _judge(traj: Trajectory | None, error: BaseException | None, filters: Sequence[TrajectoryFilter],
           stats: FilterStats, attempt: int, episode_id: str | None) -> Trajectory | None:
    if error is not None or traj is None:
        stats.rejected[ROLLOUT_EXCEPTION] += 1
        return None
    reason = first_rejection(traj, filters)
    if reason is not None:
        stats.rejected[reason] += 1
        return None
    stats.accepted += 1
    traj.metadata["attempts"] = attempt
    if episode_id is not None:
        traj.episode_id = episode_id
    return traj


def rollout_with_resampling(rollout: Callable[[S], Trajectory], state: S, filters: Sequence[TrajectoryFilter],
                            max_attempts: int = 3, stats: FilterStats | None = None,
                            episode_id: str | None = None) -> Trajectory | None:
    """Roll out `state` until a trajectory passes every filter; None after `max_attempts` rejections.

    Every attempt uses the same initial state with the current policy; `episode_id`, if given,
    is stamped on the kept trajectory (the buffer's frontier entry).
    """
    stats = stats if stats is not None else FilterStats()
    for attempt in range(1, max_attempts + 1):
        traj, error = None, None
        try:
            traj = rollout(state)
        except Exception as exc:  # a crashed sandbox must not crash the run
            error = exc
        kept = _judge(traj, error, filters, stats, attempt, episode_id)
        if kept is not None:
            return kept
    stats.exhausted += 1
    return None


async def arollout_with_resampling(rollout: Callable[[S], Awaitable[Trajectory]], state: S,
                                   filters: Sequence[TrajectoryFilter], max_attempts: int = 3,
                                   stats: FilterStats | None = None,
                                   episode_id: str | None = None, retry_backoff_s: float = 0.5) -> Trajectory | None:
    """asyncio twin of `rollout_with_resampling` (cancellation propagates).

    After an infrastructure failure (an exception, not a filtered trajectory) the next attempt
    waits `retry_backoff_s`, doubling each time: a lost worker or sandbox gets a moment to come
    back instead of every in-flight episode burning its attempts within milliseconds.
    """
    stats = stats if stats is not None else FilterStats()
    for attempt in range(1, max_attempts + 1):
        traj, error = None, None
        try:
            traj = await rollout(state)
        except Exception as exc:  # CancelledError is a BaseException and still propagates
            error = exc
        kept = _judge(traj, error, filters, stats, attempt, episode_id)
        if kept is not None:
            return kept
        if error is not None and attempt < max_attempts and retry_backoff_s > 0:
            await asyncio.sleep(min(retry_backoff_s * 2 ** (attempt - 1), 10.0))
    stats.exhausted += 1
    return None
