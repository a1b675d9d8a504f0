"""SampleBuffer: finished trajectories between rollout and training, under a staleness bound.

Every trajectory carries the policy version that *started* it. With the *async ratio* η, a
trajectory is usable while `current_version − version ≤ η`; older ones are dropped and counted
(on `put`, and whenever `set_version` advances the policy). η = 0 is synchronous training.

Groups (rollouts of one initial state, for group normalization) stay together: a group enters
batches only when complete, and a stale group is dropped whole (members still in flight are
dropped when they arrive). A member given up on (`abandon`) shrinks its group's expected size.

The *frontier* is the set of episodes handed out (`issue`) but not yet returned. `state_dict`
holds the ready and pending trajectories, the frontier, the counters and `issued_total` (how
many initial states were drawn, i.e. the data cursor), so a resumed run re-runs exactly the
in-flight episodes (`reissue_frontier`), loses no buffered trajectory and repeats none.

Thread-safe (one lock + condition); `aget_batch` awaits without blocking the event loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ale_roll.types import Trajectory

_DEDUP_MEMORY = 100_000


class BufferConfig(BaseModel):
    """Staleness bound and grouping of the SampleBuffer."""

    model_config = ConfigDict(extra="forbid")

    async_ratio: int = Field(default=1, ge=0)
    """η: max allowed current_version − trajectory version; 0 = synchronous training."""
    group_size: int = Field(default=1, ge=1)
    """Trajectories per group; batches hold whole groups only."""


@dataclass
class FrontierEntry:
    """An episode handed out to rollout and not yet returned."""

    episode_id: str
    initial_state_id: str
    seed: int | None
    group_id: str
    policy_version: int
    restarts: int = 0


@dataclass
class _Group:
    members: list[Trajectory] = field(default_factory=list)
    abandoned: int = 0


class SampleBuffer:
    """Version-tagged, group-aware, checkpointable trajectory buffer (see the module docstring)."""

    def __init__(self, config: BufferConfig | None = None, version: int = 0) -> None:
        self.config = config or BufferConfig()
        self._cond = threading.Condition()
        self._version = version
        self._ready: deque[list[Trajectory]] = deque()
        self._pending: dict[str, _Group] = {}
        self._dead_groups: set[str] = set()
        self._frontier: dict[str, FrontierEntry] = {}
        self._retired: deque[str] = deque(maxlen=_DEDUP_MEMORY)
        self._retired_set: set[str] = set()
        self.dropped: Counter[str] = Counter()
        self.staleness_histogram: Counter[int] = Counter()
        self.consumed = 0
        self.issued_total = 0

    # -- policy version ------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The trainer's current policy version."""
        return self._version

    def set_version(self, version: int) -> int:
        """Advance the policy version; drops (and returns the count of) now-stale trajectories."""
        with self._cond:
            if version < self._version:
                raise ValueError(f"policy version cannot go back ({self._version} -> {version})")
            self._version = version
            before = sum(self.dropped.values())
            self._ready = deque(g for g in self._ready if not self._drop_if_stale(g))
            for gid in [gid for gid, g in self._pending.items() if self._drop_if_stale(g.members)]:
                del self._pending[gid]
                self._dead_groups.add(gid)
            self._cond.notify_all()
            return sum(self.dropped.values()) - before

    def is_stale(self, traj: Trajectory) -> bool:
        """Whether `traj` is beyond the async ratio at the current version."""
        return self._version - traj.version > self.config.async_ratio

    def _drop_if_stale(self, group: list[Trajectory]) -> bool:
        if any(self.is_stale(t) for t in group):
            self.dropped["stale"] += len(group)
            return True
        return False

    # -- frontier ------------------------------------------------------------------------
    def issue(self, initial_state_id: str, seed: int | None = None, group_id: str = "",
              episode_id: str | None = None) -> FrontierEntry:
        """Record that an episode on `initial_state_id` starts now with the current version."""
        with self._cond:
            entry = FrontierEntry(episode_id or uuid.uuid4().hex, initial_state_id, seed, group_id, self._version)
            self._frontier[entry.episode_id] = entry
            self.issued_total += 1
            return entry

    def in_flight(self) -> list[FrontierEntry]:
        """Episodes handed out and not yet returned (oldest first)."""
        with self._cond:
            return list(self._frontier.values())

    def reissue_frontier(self) -> list[FrontierEntry]:
        """After a resume: restamp every in-flight episode with the current version and return them to re-run."""
        with self._cond:
            for entry in self._frontier.values():
                entry.policy_version = self._version
                entry.restarts += 1
            return list(self._frontier.values())

    def abandon(self, episode_id: str, reason: str = "abandoned") -> FrontierEntry | None:
        """An issued episode produced no usable trajectory: forget it, count it, shrink its group."""
        with self._cond:
            entry = self._frontier.pop(episode_id, None)
            if entry is None:
                return None
            self._retire(episode_id)
            self.dropped[reason] += 1
            if self.config.group_size > 1 and entry.group_id not in self._dead_groups:
                group = self._pending.setdefault(entry.group_id, _Group())
                group.abandoned += 1
                self._maybe_complete(entry.group_id)
            return entry

    def _retire(self, episode_id: str) -> None:
        if len(self._retired) == self._retired.maxlen:
            self._retired_set.discard(self._retired[0])
        self._retired.append(episode_id)
        self._retired_set.add(episode_id)

    # -- data ----------------------------------------------------------------------------
    def put(self, traj: Trajectory) -> bool:
        """Add a finished trajectory; False (and counted) when stale, duplicate or of a dropped group."""
        with self._cond:
            if traj.episode_id in self._retired_set:
                self.dropped["duplicate"] += 1
                return False
            self._frontier.pop(traj.episode_id, None)
            self._retire(traj.episode_id)
            if self.config.group_size == 1:
                if self._drop_if_stale([traj]):
                    return False
                self._ready.append([traj])
                self._cond.notify_all()
                return True
            if not traj.group_id:
                raise ValueError("group_size > 1 needs trajectories with a group_id")
            if traj.group_id in self._dead_groups:
                self.dropped["stale_group"] += 1
                return False
            if self.is_stale(traj):
                group = self._pending.pop(traj.group_id, _Group())
                self.dropped["stale"] += 1 + len(group.members)
                self._dead_groups.add(traj.group_id)
                return False
            self._pending.setdefault(traj.group_id, _Group()).members.append(traj)
            self._maybe_complete(traj.group_id)
            return True

    def _maybe_complete(self, group_id: str) -> None:
        group = self._pending[group_id]
        if len(group.members) + group.abandoned < self.config.group_size:
            return
        del self._pending[group_id]
        if group.members:
            self._ready.append(group.members)
            self._cond.notify_all()

    def __len__(self) -> int:
        """Trajectories ready for a batch (members of complete groups only)."""
        with self._cond:
            return sum(len(g) for g in self._ready)

    def _take(self, n: int) -> list[Trajectory] | None:
        """Pop the n // group_size oldest complete groups, or None when fewer are ready."""
        groups = n // self.config.group_size
        if len(self._ready) < groups:
            return None
        batch: list[Trajectory] = []
        for _ in range(groups):
            batch.extend(self._ready.popleft())
        for traj in batch:
            self.staleness_histogram[self._version - traj.version] += 1
        self.consumed += len(batch)
        return batch

    def get_batch(self, n: int, timeout: float | None = None) -> list[Trajectory]:
        """Block until n // group_size groups are ready and return them (oldest first, flattened).

        `n` must be a multiple of group_size. A group shrunk by `abandon` makes the batch smaller
        than `n` rather than split another group. TimeoutError after `timeout` seconds.
        """
        if n < 1 or n % self.config.group_size:
            raise ValueError(f"batch size {n} must be a positive multiple of group_size {self.config.group_size}")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                batch = self._take(n)
                if batch is not None:
                    return batch
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"{len(self._ready)} groups ready, needed {n} trajectories within {timeout}s")
                self._cond.wait(remaining)

    async def aget_batch(self, n: int, timeout: float | None = None, poll_s: float = 0.005) -> list[Trajectory]:
        """asyncio twin of `get_batch`: polls without blocking the loop; cancellation-safe."""
        if n < 1 or n % self.config.group_size:
            raise ValueError(f"batch size {n} must be a positive multiple of group_size {self.config.group_size}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._cond:
                batch = self._take(n)
            if batch is not None:
                return batch
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"needed {n} trajectories within {timeout}s")
            await asyncio.sleep(poll_s)

    def metrics(self) -> dict[str, float]:
        """Flat metrics: ready, in flight, consumed, dropped by reason, staleness histogram."""
        with self._cond:
            out = {
                "buffer/ready": float(sum(len(g) for g in self._ready)),
                "buffer/in_flight": float(len(self._frontier)),
                "buffer/consumed": float(self.consumed),
                "buffer/dropped": float(sum(self.dropped.values())),
            }
            out.update({f"buffer/dropped/{k}": float(v) for k, v in self.dropped.items()})
            out.update({f"buffer/staleness/{k}": float(v) for k, v in sorted(self.staleness_histogram.items())})
            return out

    # -- checkpointing -------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A JSON-compatible snapshot: trajectories, frontier, counters, version, data cursor."""
        with self._cond:
            return {
                "config": self.config.model_dump(),
                "version": self._version,
                "ready": [[t.to_dict() for t in g] for g in self._ready],
                "pending": {gid: {"members": [t.to_dict() for t in g.members], "abandoned": g.abandoned}
                            for gid, g in self._pending.items()},
                "dead_groups": sorted(self._dead_groups),
                "frontier": [asdict(e) for e in self._frontier.values()],
                "retired": list(self._retired),
                "dropped": dict(self.dropped),
                "staleness_histogram": {str(k): v for k, v in self.staleness_histogram.items()},
                "consumed": self.consumed,
                "issued_total": self.issued_total,
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a `state_dict` snapshot (replaces everything in this buffer)."""
        with self._cond:
            self.config = BufferConfig.model_validate(state["config"])
            self._version = int(state["version"])
            self._ready = deque([Trajectory.from_dict(t) for t in g] for g in state["ready"])
            self._pending = {
                gid: _Group([Trajectory.from_dict(t) for t in g["members"]], int(g["abandoned"]))
                for gid, g in state["pending"].items()
            }
            self._dead_groups = set(state["dead_groups"])
            self._frontier = {e["episode_id"]: FrontierEntry(**e) for e in state["frontier"]}
            self._retired = deque(state.get("retired", []), maxlen=_DEDUP_MEMORY)
            self._retired_set = set(self._retired)
            self.dropped = Counter(state["dropped"])
            self.staleness_histogram = Counter({int(k): v for k, v in state["staleness_histogram"].items()})
            self.consumed = int(state["consumed"])
            self.issued_total = int(state["issued_total"])
            self._cond.notify_all()
