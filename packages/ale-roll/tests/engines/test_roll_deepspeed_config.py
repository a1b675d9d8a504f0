"""The DeepSpeed JSON the engine derives: which ZeRO stage runs for a world size and the extras."""

from __future__ import annotations

import pytest
from ale_roll.engines.deepspeed_engine import DeepSpeedConfig, ds_config, effective_zero_stage


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_1_and_2_on_one_rank_run_as_stage_0(stage: int) -> None:
    cfg = DeepSpeedConfig(zero_stage=stage)  # type: ignore[arg-type]
    assert effective_zero_stage(cfg, 1) == 0
    assert ds_config(cfg, 1)["zero_optimization"]["stage"] == 0
    assert effective_zero_stage(cfg, 2) == stage  # more ranks: partitioned as asked
    assert ds_config(cfg, 4)["zero_optimization"]["stage"] == stage


def test_the_stage_is_kept_when_forced_offloaded_or_3() -> None:
    assert effective_zero_stage(DeepSpeedConfig(zero_stage=2, partition_single_rank=True), 1) == 2
    offload = {"zero_optimization": {"offload_optimizer": {"device": "cpu"}}}
    cfg = DeepSpeedConfig(zero_stage=2, extra=offload)
    assert effective_zero_stage(cfg, 1) == 2  # ZeRO-Offload on one GPU is the point of stage 2 there
    assert ds_config(cfg, 1)["zero_optimization"] == {"stage": 2, "offload_optimizer": {"device": "cpu"}}
    assert effective_zero_stage(DeepSpeedConfig(zero_stage=3), 1) == 3
    assert effective_zero_stage(DeepSpeedConfig(zero_stage=0), 8) == 0
