"""Train–rollout multiplexing: the resource manager and the bubble simulator."""

from __future__ import annotations

import pytest
from ale_roll.trainer.multiplex_sim import SimConfig, compare, simulate
from ale_roll.trainer.resources import ResourceManager


def test_resource_manager_shrinks_and_expands_rollout() -> None:
    seen: list[int] = []
    rm = ResourceManager(16, 4, seen.append)
    assert rm.rollout_slots == 16
    rm.shrink()
    rm.shrink()  # idempotent while training
    assert rm.rollout_slots == 12 and rm.training
    rm.expand()
    assert rm.rollout_slots == 16 and seen == [12, 16] and rm.shrinks == 1
    ResourceManager(8, 0, seen.append).shrink()  # no multiplexing: nothing changes
    assert seen == [12, 16]
    with pytest.raises(ValueError, match="train_slots"):
        ResourceManager(4, 4, seen.append)


def test_multiplexing_removes_bubble_when_rollout_is_the_bottleneck() -> None:
    out = compare(SimConfig(train_work=4.0))
    assert out["multiplex"]["bubble"] < out["static"]["bubble"] - 0.05
    assert out["speedup"] > 1.05


def test_simulation_finishes_every_step_in_both_modes() -> None:
    cfg = SimConfig(steps=5, slots=8, train_slots=2, batch_size=8)
    for mode in ("static", "multiplex"):
        r = simulate(cfg, mode)  # type: ignore[arg-type]
        assert r["seconds"] > 0 and 0 <= r["bubble"] < 1
        assert r["steps_per_s"] == pytest.approx(5 / r["seconds"], rel=1e-2)
