"""`ale up job.roll.algorithm.loss=<other>` (the quickstart's example): the embedded default's
IPA config (`gamma`) must not follow the job to a loss that does not know it."""

from __future__ import annotations

import pytest
from ale_roll.config import RunConfig

from ale.config import load_config
from ale.job.pipeline import roll_raw


@pytest.mark.parametrize("mode", ["agent_native", "gem"])
def test_switching_the_loss_drops_the_default_loss_config(mode: str) -> None:
    # load_config validates the job's ale-roll config: it raised "unknown key 'algorithm.gamma'".
    cfg = load_config(None, [f"job.mode={mode}", "job.roll.algorithm.loss=reinforce"])
    algo = roll_raw(cfg.job)["algorithm"]
    assert algo["loss"] == "reinforce"
    assert "gamma" not in algo.get("config", {})
    if mode == "gem":  # complete as it is (agent-native's tasks and addresses come at run time)
        assert RunConfig.model_validate({"config_dir": ".", **roll_raw(cfg.job)}).algorithm.loss == "reinforce"


def test_the_new_loss_config_and_the_same_loss_config_still_merge() -> None:
    cfg = load_config(None, ["job.roll.algorithm.loss=reinforce", "job.roll.algorithm.config.advantage.group_norm=false"])
    assert roll_raw(cfg.job)["algorithm"]["config"] == {"advantage": {"group_norm": False}}
    cfg = load_config(None, ["job.roll.algorithm.loss=ipa", "job.roll.algorithm.config.gamma=0.9"])
    config = roll_raw(cfg.job)["algorithm"]["config"]
    assert config["gamma"] == 0.9 and config["advantage"] == {"group_norm": True}  # the default's keys kept
