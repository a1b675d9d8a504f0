"""Config loading: YAML + dotted overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from ale_roll.config import ConfigError, build_config, load_config

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "guess_number.yaml"
BASE = {"model": {"tiny": {"seed": 0}}}


def test_example_loads_and_overrides_are_typed_by_the_schema() -> None:
    cfg = load_config(EXAMPLE, ["rollout.batch_size=16", "rollout.temperature=0.5", "metrics.plot=false",
                                "rollout.filters=[env_noise, truncated]"])
    assert cfg.rollout.batch_size == 16 and isinstance(cfg.rollout.batch_size, int)
    assert cfg.rollout.temperature == 0.5
    assert cfg.metrics.plot is False
    assert cfg.rollout.filters == ["env_noise", "truncated"]
    assert cfg.resolve(cfg.sft.data or "").exists()  # relative to the YAML file


def test_unknown_key_is_named_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'rollout.batchsize' \(did you mean 'rollout.batch_size'\?\)"):
        build_config(BASE, ["rollout.batchsize=4"])


def test_wrong_type_names_key_and_value() -> None:
    with pytest.raises(ConfigError, match=r"rollout.batch_size: .*integer.*'many'"):
        build_config(BASE, ["rollout.batch_size=many"])


def test_impossible_resource_splits() -> None:
    with pytest.raises(ConfigError, match=r"rollout.batch_size \(10\) must be a multiple of rollout.group_size \(4\)"):
        build_config(BASE, ["rollout.batch_size=10", "rollout.group_size=4"])
    with pytest.raises(ConfigError, match=r"resources.train_slots \(8\) must be < rollout.episodes_in_flight \(8\)"):
        build_config(BASE, ["rollout.episodes_in_flight=8", "resources.train_slots=8"])
    with pytest.raises(ConfigError, match="episodes_in_flight"):
        build_config(BASE, ["rollout.group_size=16", "rollout.batch_size=16", "rollout.episodes_in_flight=8"])


def test_loss_name_and_loss_config_are_validated() -> None:
    with pytest.raises(ConfigError, match="unknown loss 'ppo'"):
        build_config(BASE, ["algorithm.loss=ppo"])
    with pytest.raises(ConfigError, match="gama"):
        build_config(BASE, ["algorithm.loss=ipa", "algorithm.config.gama=0.9"])
    assert build_config(BASE, ["algorithm.loss=ipa", "algorithm.config.gamma=0.9"]).algorithm.config == {"gamma": 0.9}


def test_model_source_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="exactly one of model.path and model.tiny"):
        build_config({"model": {}})
    with pytest.raises(ConfigError, match="missing key 'model'"):
        build_config({})
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)
    with pytest.raises(ConfigError, match="not key=value"):
        build_config(BASE, ["rollout.batch_size"])
