"""RolloutScheduler: N episodes in flight, each on its own, under the staleness bound.

The scheduler draws initial states from a cursor (state k has seed `seed_of(k)`), issues each one
`group_size` times into the SampleBuffer's frontier, and runs every episode as its own asyncio
task (filtering + resampling from the same initial state, `algorithms.filtering`). Finished
trajectories go into the buffer; an initial state given up on is `abandon`ed (counted).

Two gates decide when a new group may start:

- capacity: at most `capacity` episodes in flight (the worker slots; the resource manager
  shrinks it while training runs and expands it after);
- staleness: with async ratio η, an episode started at version v must be consumed by a batch at
  version ≤ v + η. The trainer consumes one batch per version bump, so at version v at most
  `(v − v0 + η + 1) · batch_size` episodes may have been issued since the scheduler started at
  version v0 (plus those already consumed or lost then, and those lost to filtering or staleness
  since — they never reach a batch). Counting from v0 keeps the gate right when the version does
  not start at 0 (after an SFT warm-up, or a resume). A batch counts only once its version bump
  happened, so nothing is issued at a version that is about to be left behind. η = 0 is
  synchronous training: the next batch starts only after the weights of the previous step are in.

With a `batch_fn` (GEM mode on in-process envs: `EpisodeRunner.run_batch`), the groups that pass the
gates at one wake-up start as *one* task that plays them together (one batched generation per
turn), not one task per episode: the per-episode asyncio work was most of a synchronous step's
Python time. Its results are judged by the same filters; a rejected or failed episode is resampled
on its own (the per-episode path, with its backoff), so filtering, staleness and the frontier
behave as before.

While `run()` runs, the objects that existed before it (the model, the tokenizer, every imported
module: ~400k with torch and transformers) are frozen out of the cyclic GC (`gc.freeze`, undone
when it returns): the rollout allocates thousands of objects per step, and each full collection
they trigger walked all of those (~0.1–0.3 s every few steps, on the event loop).

`reissue_frontier` on start re-runs exactly the episodes that were in flight at the checkpoint,
with their original ids, so a resumed run loses and repeats nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Awaitable, Callable, Sequence

from ale_roll.algorithms.filtering import (
    ROLLOUT_EXCEPTION,
    FilterStats,
    TrajectoryFilter,
    arollout_with_resampling,
    first_rejection,
)
from ale_roll.buffer.sample_buffer import FrontierEntry, SampleBuffer
from ale_roll.types import Trajectory

EpisodeFn = Callable[[FrontierEntry], Awaitable[Trajectory]]
BatchEpisodeFn = Callable[[Sequence[FrontierEntry]], Awaitable[Sequence[Trajectory | BaseException]]]
"""Plays several episodes together; per entry its trajectory or the exception that ended it."""


class RolloutScheduler:
    """Keeps episodes in flight and feeds the SampleBuffer (see the module docstring)."""

    def __init__(self, buffer: SampleBuffer, episode_fn: EpisodeFn, *, batch_size: int, group_size: int = 1,
                 episodes_in_flight: int = 32, async_ratio: int = 1, max_attempts: int = 3,
                 filters: Sequence[TrajectoryFilter] = (), seed_of: Callable[[int], int] = lambda k: k,
                 retry_backoff_s: float = 0.5, batch_fn: BatchEpisodeFn | None = None) -> None:
        if batch_size % group_size:
            raise ValueError("batch_size must be a multiple of group_size")
        self.buffer = buffer
        self.episode_fn = episode_fn
        self.batch_size = batch_size
        self.group_size = group_size
        self.capacity = episodes_in_flight
        self.async_ratio = async_ratio
        self.max_attempts = max_attempts
        self.filters = list(filters)
        self.seed_of = seed_of
        self.retry_backoff_s = retry_backoff_s
        self.batch_fn = batch_fn
        self.stats = FilterStats()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self.max_issued_seen = 0
        self._v0 = self._lost0 = self._settled0 = 0

    # -- gates -----------------------------------------------------------------------------
    def _lost(self) -> int:
        return sum(self.buffer.dropped.values())

    def issue_limit(self) -> int:
        """How many episodes may have been issued in total at the current version (the staleness gate)."""
        batches = self.buffer.version - self._v0 + self.async_ratio + 1
        return self._settled0 + batches * self.batch_size + self._lost() - self._lost0

    def _may_issue(self, collected: int = 0) -> bool:
        return (len(self._tasks) + collected + self.group_size <= self.capacity
                and self.buffer.issued_total + self.group_size <= self.issue_limit())

    def wake(self) -> None:
        """Re-check the gates (after a version bump or a capacity change)."""
        if self._wake is not None:
            self._wake.set()

    def set_capacity(self, slots: int) -> None:
        """Change how many episodes may be in flight (running ones finish either way)."""
        self.capacity = max(self.group_size, slots)
        self.wake()

    @property
    def in_flight(self) -> int:
        """Episodes running now."""
        return len(self._tasks)

    # -- running ---------------------------------------------------------------------------
    def _start(self, entry: FrontierEntry, attempt: int = 1, backoff: bool = False) -> None:
        task = asyncio.get_running_loop().create_task(self._episode(entry, attempt, backoff),
                                                      name=f"episode-{entry.episode_id[:8]}")
        self._tasks[entry.episode_id] = task

    async def _episode(self, entry: FrontierEntry, attempt: int = 1, backoff: bool = False) -> None:
        try:
            if backoff and self.retry_backoff_s > 0:  # the first attempt (in a batch) failed
                await asyncio.sleep(self.retry_backoff_s)
            traj = await arollout_with_resampling(self.episode_fn, entry, self.filters, self.max_attempts - attempt + 1,
                                                  self.stats, episode_id=entry.episode_id,
                                                  retry_backoff_s=self.retry_backoff_s * 2 ** (attempt - 1))
            if traj is None:
                self.buffer.abandon(entry.episode_id, "exhausted")
            else:
                traj.metadata["attempts"] = int(traj.metadata.get("attempts", 1)) + attempt - 1
                self.buffer.put(traj)
        finally:
            if self._tasks.get(entry.episode_id) is asyncio.current_task():
                del self._tasks[entry.episode_id]
            self.wake()

    def _issue_group(self, start: bool = True) -> list[FrontierEntry]:
        k = self.buffer.issued_total // self.group_size
        group_id = f"g{k}"
        # Issued synchronously (no await between members) so a checkpoint never sees half a group.
        entries = [self.buffer.issue(f"state-{k}", seed=self.seed_of(k), group_id=group_id)
                   for _ in range(self.group_size)]
        if start:
            for entry in entries:
                self._start(entry)
        self.max_issued_seen = max(self.max_issued_seen, self.buffer.issued_total)
        return entries

    def _issue(self) -> None:
        """Start every group the gates allow now: one task per episode, or one for all (`batch_fn`)."""
        if self.batch_fn is None:
            while not self._stopping and self._may_issue():
                self._issue_group()
            return
        entries: list[FrontierEntry] = []
        while not self._stopping and self._may_issue(len(entries)):
            entries += self._issue_group(start=False)
        if entries:
            self._start_batch(entries)

    def _start_batch(self, entries: list[FrontierEntry]) -> None:
        task = asyncio.get_running_loop().create_task(self._batch(entries), name=f"episodes-{len(entries)}")
        for entry in entries:
            self._tasks[entry.episode_id] = task

    async def _batch(self, entries: list[FrontierEntry]) -> None:
        assert self.batch_fn is not None
        try:
            results = await self.batch_fn(entries)
            for entry, result in zip(entries, results, strict=True):
                traj = result if isinstance(result, Trajectory) else None
                reason = ROLLOUT_EXCEPTION if traj is None else first_rejection(traj, self.filters)
                if traj is not None and reason is None:
                    self.stats.accepted += 1
                    traj.metadata["attempts"] = 1
                    traj.episode_id = entry.episode_id
                    self.buffer.put(traj)
                    self._tasks.pop(entry.episode_id, None)
                    continue
                self.stats.rejected[reason or ROLLOUT_EXCEPTION] += 1
                if self.max_attempts <= 1:
                    self.stats.exhausted += 1
                    self.buffer.abandon(entry.episode_id, "exhausted")
                    self._tasks.pop(entry.episode_id, None)
                else:  # resampled on its own, with the attempts left (and the backoff after a failure)
                    self._start(entry, attempt=2, backoff=traj is None)
        finally:
            task = asyncio.current_task()
            for entry in entries:
                if self._tasks.get(entry.episode_id) is task:
                    del self._tasks[entry.episode_id]
            self.wake()

    async def run(self) -> None:
        """Run until `stop()`; cancelling it cancels every episode (they stay in the frontier)."""
        self._wake = asyncio.Event()
        self._stopping = False
        # The gate's origin: what was already consumed or lost when this run started.
        self._v0 = self.buffer.version
        self._lost0 = self._lost()
        self._settled0 = self.buffer.consumed + self._lost0
        for entry in self.buffer.reissue_frontier():
            if entry.episode_id not in self._tasks:
                self._start(entry)
        gc.freeze()  # O(1); garbage frozen here is collectable again after `unfreeze`
        try:
            while not self._stopping:
                self._issue()
                self._wake.clear()
                await self._wake.wait()
        finally:
            gc.unfreeze()
            await self._cancel_all()

    def stop(self) -> None:
        """Ask `run()` to return (in-flight episodes are cancelled and stay in the frontier)."""
        self._stopping = True
        self.wake()

    async def _cancel_all(self) -> None:
        tasks = list({id(t): t for t in self._tasks.values()}.values())  # a batch's task is several episodes'
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
