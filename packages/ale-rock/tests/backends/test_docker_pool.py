"""WarmPools without an engine: demand sizing per shape, caps, parallel refill, shrink, backoff,
and that no slot is ever handed out twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

import pytest
from ale_rock.backends.docker_pool import POOL_PREFIX, WarmPools


def _wait(pred: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.005)
    return pred()


class _Engine:
    """Records launches (optionally slow or failing per shape) and discards."""

    def __init__(self, delay_s: float = 0.0, fail: Hashable | None = None) -> None:
        self.delay_s = delay_s
        self.fail = fail
        self.launched: list[tuple[str, Hashable]] = []
        self.discarded: list[str] = []
        self.running = 0
        self.max_running = 0
        self.lock = threading.Lock()

    def launch(self, key: str, shape: Hashable) -> None:
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            time.sleep(self.delay_s)
            if shape == self.fail:
                raise RuntimeError("no such image")
            with self.lock:
                self.launched.append((key, shape))
        finally:
            with self.lock:
                self.running -= 1

    def discard(self, key: str) -> None:
        with self.lock:
            self.discarded.append(key)


def _pools(engine: _Engine, **kw: object) -> WarmPools:
    pools = WarmPools(engine.launch, engine.discard, **kw)  # type: ignore[arg-type]
    pools.start()
    return pools


def test_floor_then_demand_sizes_each_shape_within_caps() -> None:
    engine = _Engine()
    pools = _pools(engine, floors={"base": 2}, max_per_shape=3, max_total=4, window_s=30)
    try:
        assert _wait(lambda: pools.ready("base") == 2)
        assert pools.claim("task-image") is None  # first ask of a new shape: a miss, but counted
        assert _wait(lambda: pools.ready("task-image") == 1)
        for _ in range(5):
            pools.claim("task-image")
        assert pools.target("task-image") == 3  # demand, capped per shape
        assert _wait(lambda: pools.ready() == 4)  # ...and in total: 2 base + 2 task-image
        time.sleep(0.05)
        assert pools.ready("task-image") == 2 and pools.ready("base") == 2
    finally:
        pools.close()
    assert pools.ready() == 0 and len(engine.discarded) == 4  # close discards every ready slot


def test_no_slot_is_handed_out_twice_under_concurrent_claims() -> None:
    engine = _Engine()
    pools = _pools(engine, floors={"s": 8}, max_per_shape=8, max_total=8, refillers=4)
    got: list[str] = []
    lock = threading.Lock()

    def claimer() -> None:
        for _ in range(40):
            key = pools.claim("s")
            if key is not None:
                with lock:
                    got.append(key)
                pools.release(key)
            time.sleep(0.001)

    try:
        assert _wait(lambda: pools.ready("s") == 8)
        threads = [threading.Thread(target=claimer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        pools.close()
    assert len(got) >= 8 and len(got) == len(set(got))  # every claimed slot was a fresh launch
    assert all(k.startswith(POOL_PREFIX) for k in got)
    assert set(got) <= {k for k, _ in engine.launched}
    assert set(got).isdisjoint(engine.discarded)  # claimed slots belong to the caller, not the pool


def test_refills_run_in_parallel_so_back_to_back_claims_do_not_drain() -> None:
    engine = _Engine(delay_s=0.1)
    pools = _pools(engine, floors={"s": 4}, max_per_shape=4, max_total=4, refillers=4)
    try:
        assert _wait(lambda: pools.ready("s") == 4)
        assert engine.max_running >= 2  # slots start side by side, not one after another
        served = 0
        for _ in range(8):  # two pools' worth, one every 60 ms: refills (100 ms, 4 wide) keep up
            served += pools.claim("s") is not None
            time.sleep(0.06)
        assert served == 8
    finally:
        pools.close()


def test_surplus_shrinks_after_the_window_and_failures_back_off_per_shape() -> None:
    engine = _Engine(fail="broken")
    pools = _pools(engine, max_per_shape=4, max_total=8, window_s=0.3)
    try:
        pools.claim("s")
        pools.claim("broken")
        assert _wait(lambda: pools.ready("s") == 1)
        assert _wait(lambda: pools.target("s") == 0)  # demand aged out of the window
        assert _wait(lambda: pools.ready("s") == 0, 3)  # ...and the idle surplus slot went
        assert pools.ready("broken") == 0
        failed = [k for k in engine.discarded if k not in {k for k, _ in engine.launched}]
        assert 1 <= len(failed) <= 3  # retried with backoff, not in a tight loop
    finally:
        pools.close()


def test_disabled_pools_never_launch() -> None:
    engine = _Engine()
    pools = _pools(engine, floors={"s": 2}, enabled=False)
    assert pools.claim("s") is None
    time.sleep(0.05)
    pools.close()
    assert engine.launched == [] and pools.keys() == set()


@pytest.mark.parametrize("claims", [0, 1])
def test_keys_cover_ready_pending_and_claimed(claims: int) -> None:
    engine = _Engine()
    pools = _pools(engine, floors={"s": 2}, max_per_shape=2, max_total=2)
    try:
        assert _wait(lambda: pools.ready("s") == 2)
        held = [pools.claim("s") for _ in range(claims)]
        assert set(held) <= pools.keys()  # claimed but not yet renamed: not an orphan to reap
        for key in held:
            assert key is not None
            pools.release(key)
            slots = pools.keys()
            assert key not in slots
    finally:
        pools.close()


def test_a_claim_holds_its_shapes_refill_back_once_per_delay_without_starving_it() -> None:
    """The claimed sandbox's first commands must not share the CPU with a slot starting up; a
    stream of claims must still get its refills (the delay is not extended by every claim)."""
    engine = _Engine()
    pools = _pools(engine, floors={"s": 1}, max_per_shape=1, max_total=1, refill_delay_s=0.2)
    try:
        assert _wait(lambda: pools.ready("s") == 1)
        t0 = time.monotonic()
        assert pools.claim("s") is not None
        assert _wait(lambda: pools.ready("s") == 1)
        assert time.monotonic() - t0 >= 0.19  # refilled, but not before the delay
        # Claims every 0.1 s (half the delay) keep being served: no starvation.
        served = 0
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            served += pools.claim("s") is not None
            time.sleep(0.1)
        assert served >= 3  # one per delay window or so (about 7); a delay extended by each claim gives 1
    finally:
        pools.close()
