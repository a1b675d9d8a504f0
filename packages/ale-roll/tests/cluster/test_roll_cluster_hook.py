"""The Ray hook of `ale-roll train|eval` and the TrainerService: with cluster.mode=ray the Controller
gets the cluster's policy and env factory, and the cluster is torn down after the command.

`build_ray_cluster` is replaced by a recording stand-in (starting Ray takes tens of seconds; the
real cluster runs in test_roll_ray_cluster.py); everything else is real: a tiny random-init policy,
GuessTheNumber in-process, the real CLI and the real job runner.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from ale_roll.config import RunConfig, build_config

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason="cluster.mode=ray needs ray installed to validate (pip install 'ale-roll[ray]')"),
    pytest.mark.skipif(importlib.util.find_spec("ale_rock") is None, reason="ale-rock (environments) is not installed"),
]
WORDS = [str(i) for i in range(1, 21)] + ["higher", "lower"]
TINY = {"arch": "llama", "vocab_size": 300, "hidden_size": 64, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2,
        "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 256}


def _raw(out: Path, mode: str) -> dict[str, Any]:
    return {"name": "hook", "output_dir": str(out), "iterations": 0, "model": {"tiny": TINY, "word_vocab": WORDS},
            "rollout": {"max_new_tokens": 1, "observation_template": "{observation} :", "batch_size": 2,
                        "episodes_in_flight": 2},
            "eval": {"episodes": 2}, "checkpoint": {"resume": False},
            "metrics": {"tensorboard": False, "plot": False, "progress": False},
            "cluster": {"mode": mode}}


class FakeRayCluster:
    """Stands in for RayCluster: a real local policy and env factory, and a record of its life."""

    def __init__(self, cfg: RunConfig) -> None:
        from ale_roll.trainer.controller import make_env_factory
        from ale_roll.trainer.setup import build_policy

        self.cfg = cfg
        self.policy = build_policy(cfg)
        factory = make_env_factory(cfg.env, cfg.rollout.env_timeout_s)
        self.env_calls = 0

        def env_factory() -> Any:
            self.env_calls += 1
            return factory()

        self.env_factory: Callable[[], Any] = env_factory
        self.entered = self.exited = False

    def __enter__(self) -> FakeRayCluster:
        self.entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.exited = True


@pytest.fixture
def hooked(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Records every FakeRayCluster built and every Controller constructed."""
    import ale_roll.cluster
    from ale_roll.trainer.controller import Controller

    seen: dict[str, list[Any]] = {"clusters": [], "controllers": []}

    def build(cfg: RunConfig) -> FakeRayCluster:
        cluster = FakeRayCluster(cfg)
        seen["clusters"].append(cluster)
        return cluster

    real_init = Controller.__init__

    def init(self: Controller, cfg: RunConfig, **kwargs: Any) -> None:
        real_init(self, cfg, **kwargs)
        seen["controllers"].append(self)

    monkeypatch.setattr(ale_roll.cluster, "build_ray_cluster", build)
    monkeypatch.setattr(Controller, "__init__", init)
    return seen


def _check_used(seen: dict[str, list[Any]], evaluations: int = 1) -> None:
    (cluster,), (ctl,) = seen["clusters"], seen["controllers"]
    assert cluster.entered and cluster.exited  # torn down when the command ended
    assert ctl.policy is cluster.policy and ctl.env_factory is cluster.env_factory
    # The eval episodes' environments (2 per evaluation) came from the cluster's factory.
    assert cluster.env_calls == 2 * evaluations


@pytest.mark.parametrize("command", ["train", "eval"])
def test_cli_takes_the_ray_hook(command: str, hooked: dict[str, list[Any]], tmp_path: Path) -> None:
    from ale_roll.cli import app
    from typer.testing import CliRunner

    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(_raw(tmp_path / "run", "ray")))
    result = CliRunner().invoke(app, [command, "-c", str(path)])
    assert result.exit_code == 0, result.output
    _check_used(hooked, evaluations=2 if command == "train" else 1)  # train: before and after


def test_cli_local_mode_builds_no_cluster(hooked: dict[str, list[Any]], tmp_path: Path) -> None:
    from ale_roll.cli import app
    from typer.testing import CliRunner

    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(_raw(tmp_path / "run", "local")))
    result = CliRunner().invoke(app, ["eval", "-c", str(path)])
    assert result.exit_code == 0, result.output
    assert hooked["clusters"] == [] and len(hooked["controllers"]) == 1


def test_trainer_service_job_takes_the_ray_hook(hooked: dict[str, list[Any]], tmp_path: Path) -> None:
    from ale_proto.v1 import trainer_pb2
    from ale_roll.service import JobRecord, TrainerServicer

    job = JobRecord("j1", trainer_pb2.JOB_KIND_EVAL, build_config(_raw(tmp_path / "run", "ray")))
    TrainerServicer()._run(job)  # the job thread's body, run here
    assert job.state == "succeeded", job.message
    assert "eval/success" in job.metrics
    _check_used(hooked)
