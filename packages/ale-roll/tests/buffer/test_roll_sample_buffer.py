"""SampleBuffer: staleness bound, groups, blocking batches, frontier and checkpoint round trip."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time

import pytest
from ale_roll.buffer import BufferConfig, FrontierEntry, SampleBuffer
from ale_roll.types import Trajectory, Turn
from pydantic import ValidationError


def make(version: int, group: str = "", state: str = "s", episode_id: str | None = None) -> Trajectory:
    t = Trajectory([Turn([1, 2], [3], [-0.5], policy_version=version)], reward=1.0, initial_state_id=state,
                   group_id=group)
    if episode_id is not None:
        t.episode_id = episode_id
    return t


def test_staleness_bound_on_put_and_on_version_change() -> None:
    buf = SampleBuffer(BufferConfig(async_ratio=1), version=3)
    assert not buf.put(make(1))  # 3 - 1 = 2 > 1
    assert buf.put(make(2)) and buf.put(make(3))
    assert buf.dropped["stale"] == 1
    assert buf.set_version(4) == 1  # the version-2 sample is now 2 behind
    assert [t.version for t in buf.get_batch(1, timeout=1)] == [3]
    assert buf.dropped["stale"] == 2
    assert buf.staleness_histogram == {1: 1}
    with pytest.raises(ValueError, match="cannot go back"):
        buf.set_version(2)


def test_sync_training_is_ratio_zero() -> None:
    buf = SampleBuffer(BufferConfig(async_ratio=0), version=5)
    assert not buf.put(make(4)) and buf.put(make(5))


def test_get_batch_blocks_until_ready_and_times_out() -> None:
    buf = SampleBuffer()
    with pytest.raises(TimeoutError):
        buf.get_batch(2, timeout=0.05)

    def produce() -> None:
        for _ in range(3):
            time.sleep(0.02)
            buf.put(make(0))

    producer = threading.Thread(target=produce)
    producer.start()
    batch = buf.get_batch(3, timeout=5)
    producer.join(timeout=5)
    assert len(batch) == 3 and len(buf) == 0 and buf.consumed == 3


def test_groups_stay_together() -> None:
    buf = SampleBuffer(BufferConfig(group_size=2))
    buf.put(make(0, "a"))
    buf.put(make(0, "b"))
    assert len(buf) == 0  # no group complete yet
    buf.put(make(0, "b"))
    assert len(buf) == 2
    with pytest.raises(ValueError, match="multiple of group_size"):
        buf.get_batch(3, timeout=0)
    assert {t.group_id for t in buf.get_batch(2, timeout=1)} == {"b"}
    with pytest.raises(ValueError, match="group_id"):
        buf.put(make(0, ""))


def test_stale_group_is_dropped_whole_including_late_members() -> None:
    buf = SampleBuffer(BufferConfig(group_size=3, async_ratio=0))
    buf.put(make(0, "g"))
    buf.put(make(0, "g"))
    buf.set_version(1)
    assert buf.dropped["stale"] == 2
    assert not buf.put(make(0, "g"))  # the third member arrives late
    assert buf.dropped["stale_group"] == 1 and len(buf) == 0


def test_abandoned_member_shrinks_its_group() -> None:
    buf = SampleBuffer(BufferConfig(group_size=2))
    e1, e2 = buf.issue("s", group_id="g"), buf.issue("s", group_id="g")
    buf.put(make(0, "g", episode_id=e1.episode_id))
    assert buf.abandon(e2.episode_id, reason="filter_exhausted") is not None
    assert len(buf) == 1 and buf.dropped["filter_exhausted"] == 1
    assert len(buf.get_batch(2, timeout=1)) == 1  # a shrunken group is never split or stuck


def test_duplicates_are_rejected() -> None:
    buf = SampleBuffer()
    t = make(0)
    assert buf.put(t) and not buf.put(t)
    assert buf.dropped["duplicate"] == 1


def test_checkpoint_round_trip_loses_nothing_and_repeats_nothing() -> None:
    buf = SampleBuffer(BufferConfig(group_size=2, async_ratio=2), version=1)
    entries = {gid: [buf.issue(f"state-{gid}", seed=7, group_id=gid) for _ in range(2)] for gid in "abc"}
    for gid in "ab":  # groups a and b finish, c has one member back and one still running
        for e in entries[gid]:
            buf.put(make(1, gid, e.initial_state_id, e.episode_id))
    buf.put(make(1, "c", "state-c", entries["c"][0].episode_id))
    consumed = buf.get_batch(2, timeout=1)  # the trainer already used group a
    assert {t.group_id for t in consumed} == {"a"}

    state = json.loads(json.dumps(buf.state_dict()))  # survives a JSON checkpoint
    resumed = SampleBuffer()
    resumed.load_state_dict(state)
    resumed.set_version(2)
    assert resumed.issued_total == 6 and resumed.consumed == 2
    in_flight = resumed.reissue_frontier()
    assert [e.episode_id for e in in_flight] == [entries["c"][1].episode_id]
    assert in_flight[0].initial_state_id == "state-c" and in_flight[0].policy_version == 2
    assert in_flight[0].restarts == 1
    # the restarted episode completes group c; group b was kept; group a is not served again
    assert not resumed.put(make(1, "a", "state-a", entries["a"][0].episode_id))  # a replayed zombie
    resumed.put(make(2, "c", "state-c", in_flight[0].episode_id))
    batch = resumed.get_batch(4, timeout=1)
    assert sorted(t.group_id for t in batch) == ["b", "b", "c", "c"]
    assert resumed.in_flight() == [] and len(resumed) == 0
    assert resumed.staleness_histogram == {0: 2 + 1, 1: 3}  # a at v1; b, c0 at v1 vs 2; c1 at v2


def test_async_get_batch() -> None:
    buf = SampleBuffer()

    async def main() -> list[Trajectory]:
        async def produce() -> None:
            for _ in range(2):
                await asyncio.sleep(0.01)
                buf.put(make(0))

        task = asyncio.create_task(produce())
        batch = await buf.aget_batch(2, timeout=5)
        await task
        with pytest.raises(TimeoutError):
            await buf.aget_batch(1, timeout=0.02)
        return batch

    assert len(asyncio.run(main())) == 2


def test_concurrent_producers_and_metrics() -> None:
    buf = SampleBuffer(BufferConfig(async_ratio=1))
    threads = [threading.Thread(target=lambda: [buf.put(make(0)) for _ in range(50)]) for _ in range(4)]
    for th in threads:
        th.start()
    got = [t for _ in range(4) for t in buf.get_batch(50, timeout=10)]
    for th in threads:
        th.join(timeout=5)
    assert len({t.episode_id for t in got}) == 200
    metrics = buf.metrics()
    assert metrics["buffer/consumed"] == 200 and metrics["buffer/staleness/0"] == 200


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValidationError, match="async_ratio"):
        BufferConfig(async_ratio=-1)
    with pytest.raises(ValidationError, match="extra"):
        BufferConfig.model_validate({"ratio": 1})


def simulate_run(seed: int, steps: int = 400) -> tuple[SampleBuffer, list[str]]:
    """Random interleaving of rollout, training, policy updates, checkpoints and kill -9 + resume.

    Initial states come from a data stream indexed by the buffer's `issued_total` cursor. A kill
    restores the last checkpoint: the buffer, the trainer's record of what it consumed, and the
    in-flight episodes (re-run via `reissue_frontier`); work after the checkpoint is lost.
    """
    rng = random.Random(seed)
    buf = SampleBuffer(BufferConfig(async_ratio=1))
    running: dict[str, FrontierEntry] = {}
    consumed: list[str] = []
    snapshot: tuple[str, list[str]] | None = None
    for _ in range(steps):
        op = rng.random()
        if op < 0.3:
            entry = buf.issue(str(buf.issued_total))
            running[entry.episode_id] = entry
        elif op < 0.6 and running:
            entry = running.pop(rng.choice(sorted(running)))
            buf.put(make(entry.policy_version, state=entry.initial_state_id, episode_id=entry.episode_id))
        elif op < 0.7:
            buf.set_version(buf.version + 1)
        elif op < 0.85:
            try:
                consumed += [t.initial_state_id for t in buf.get_batch(2, timeout=0)]
            except TimeoutError:
                pass
        elif op < 0.93:
            snapshot = (json.dumps(buf.state_dict()), list(consumed))
        elif snapshot is not None:
            buf = SampleBuffer()
            buf.load_state_dict(json.loads(snapshot[0]))
            consumed = list(snapshot[1])
            running = {e.episode_id: e for e in buf.reissue_frontier()}
    for entry in running.values():
        buf.put(make(entry.policy_version, state=entry.initial_state_id, episode_id=entry.episode_id))
    consumed += [t.initial_state_id for t in buf.get_batch(len(buf), timeout=0)] if len(buf) else []
    return buf, consumed


@pytest.mark.parametrize("seed", range(12))
def test_resume_loses_nothing_and_repeats_nothing(seed: int) -> None:
    buf, consumed = simulate_run(seed)
    assert len(consumed) == len(set(consumed)), "an initial state was trained on twice"
    assert buf.dropped["duplicate"] == 0
    # every initial state drawn from the stream was either trained on or dropped (and counted)
    assert len(consumed) + sum(buf.dropped.values()) == buf.issued_total
    assert buf.in_flight() == [] and len(buf) == 0
    assert sum(buf.staleness_histogram.values()) == buf.consumed == len(consumed)
