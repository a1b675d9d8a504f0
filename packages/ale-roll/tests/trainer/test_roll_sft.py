"""Masked SFT: the loss ignores masked turns; the `ale-roll sft` command trains and saves a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from ale_roll.cli import app
from ale_roll.config import build_config
from ale_roll.engines.torch_engine import TorchTrainEngine
from ale_roll.models import load_model
from ale_roll.trainer.setup import prepare_model_dir
from ale_roll.trainer.step import train_step
from ale_roll.types import Trajectory, Turn
from typer.testing import CliRunner

WORDS = [str(i) for i in range(1, 21)] + ["higher", "lower", "wrong", "Invalid", "Correct", "guess", ".", ";"]
TINY = {"arch": "llama", "vocab_size": 300, "hidden_size": 64, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2,
        "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 256}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sft")
    return prepare_model_dir(build_config({"output_dir": str(out), "model": {"tiny": TINY, "word_vocab": WORDS}}))


def _traj(bad_tokens: list[int]) -> Trajectory:
    # Turn 2 is an erroring tool call, turn 3 is off-task: masked SFT must ignore both.
    return Trajectory([
        Turn([5, 6, 7], [10, 2], [0.0, 0.0], observation_ids=[8, 9]),
        Turn([], bad_tokens, [0.0] * len(bad_tokens), error=True, observation_ids=[8]),
        Turn([], [12, 2], [0.0, 0.0], observation_ids=[9]),
        Turn([], bad_tokens, [0.0] * len(bad_tokens), relevant=False),
    ])


def test_masked_sft_loss_ignores_masked_turns(model_dir: Path) -> None:
    torch.manual_seed(0)
    engine = TorchTrainEngine(load_model(model_dir)[0])
    traj = _traj([15, 16, 2])
    # The expected loss by hand: mean NLL over the unmasked completion tokens only (Eq. 1).
    ids = [5, 6, 7, 10, 2, 8, 9, 15, 16, 2, 8, 12, 2, 9, 15, 16, 2]
    keep = [3, 4, 11, 12]
    lp = engine.forward_logprobs(torch.tensor([ids]))[0]
    expected = -float(lp[keep].mean())
    metrics = train_step(engine, [traj], "sft")
    assert metrics["train/loss"] == pytest.approx(expected, rel=1e-5)
    assert metrics["train/tokens"] == 4

    # Only-masked turns carry no loss (and, with fresh Adam moments, change no weight).
    engine = TorchTrainEngine(load_model(model_dir)[0])
    before = {k: v.clone() for k, v in engine.model.state_dict().items()}
    masked_only = Trajectory([Turn([5, 6], [15, 2], [0.0, 0.0], error=True)])
    m = train_step(engine, [masked_only], "sft")
    assert m["train/loss"] == 0.0 and m["train/tokens"] == 0
    assert all(torch.equal(before[k], v) for k, v in engine.model.state_dict().items())


def test_sft_command_trains_on_a_trajectories_file(model_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "trajs.jsonl"
    data.write_text("".join(json.dumps(_traj([15 + i, 2]).to_dict()) + "\n" for i in range(4)))
    cfg = {"output_dir": str(tmp_path / "out"), "model": {"path": str(model_dir)},
           "sft": {"data": str(data), "steps": 12, "lr": 3e-3, "batch_size": 4},
           "metrics": {"tensorboard": False, "progress": False}}
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    result = CliRunner().invoke(app, ["sft", "-c", str(cfg_path)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.rindex('{"steps"'):])
    lines = [json.loads(x) for x in Path(summary["metrics"]).read_text().splitlines()]
    assert len(lines) == 12 and lines[-1]["train/loss"] < lines[0]["train/loss"]
    assert all(x["train/tokens"] == 16 for x in lines)  # 4 trajectories x 4 unmasked tokens
    assert (Path(summary["model_dir"]) / "config.json").exists()


def test_cli_reports_config_errors_with_the_key(tmp_path: Path) -> None:
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump({"model": {"tiny": TINY}, "rollout": {"batchsize": 3}}))
    result = CliRunner().invoke(app, ["train", "-c", str(cfg_path)])
    assert result.exit_code == 2
    assert "rollout.batchsize" in result.output


def test_one_sft_loop_trains_at_sft_lr_then_hands_over_the_rl_lr_and_fresh_moments(model_dir: Path) -> None:
    # `sft_steps` is the loop of both `ale-roll sft` and the controller's warm-up before RL.
    from ale_roll.config import SFTConfig
    from ale_roll.engines.torch_engine import OptimConfig
    from ale_roll.trainer.setup import Policy
    from ale_roll.trainer.sft import sft_steps

    model, tok = load_model(model_dir)
    engine = TorchTrainEngine(model, OptimConfig(lr=1e-4))
    policy = Policy(model_dir=model_dir, tokenizer=tok, train=engine, inference=None)  # type: ignore[arg-type]
    lrs: list[float] = []
    trajs = [_traj([15 + i, 2]) for i in range(4)]
    metrics = sft_steps(policy, trajs, SFTConfig(steps=3, lr=3e-3, batch_size=2), seed=0, restore_lr=1e-4,
                        on_step=lambda _s, _m: lrs.append(engine.get_lr()))
    assert lrs == [3e-3] * 3 and metrics["train/tokens"] > 0 and engine.policy_version == 3
    assert engine.get_lr() == 1e-4
    # The next (RL) step is exactly a fresh optimizer's first step at the RL lr from these weights.
    fresh = TorchTrainEngine(load_model(model_dir)[0], OptimConfig(lr=1e-4))
    fresh.model.load_state_dict(engine.model.state_dict())
    for e in (engine, fresh):
        train_step(e, trajs[:2], "sft")
    assert all(torch.equal(v, fresh.model.state_dict()[k]) for k, v in engine.model.state_dict().items())
    engine.close()  # the torch engine's close is a no-op (the Protocol's, for DeepSpeed's process group)


def test_every_train_engine_implements_the_whole_protocol() -> None:
    # The controller, SFT and actors call only the Protocol: each engine must have all of it.
    import inspect

    from ale_roll.engines.base import TrainEngine
    from ale_roll.engines.deepspeed_engine import DeepSpeedTrainEngine

    members = {n for n, _ in inspect.getmembers(TrainEngine) if not n.startswith("_")}
    assert {"get_lr", "set_lr", "reset_optimizer", "save_model", "close", "save_checkpoint"} <= members
    engines: list[type] = [TorchTrainEngine, DeepSpeedTrainEngine]
    try:
        from ale_roll.cluster.actors import TrainActor
        from ale_roll.cluster.proxies import RemoteTrainEngine

        engines.append(RemoteTrainEngine)
        # The actor exposes every Protocol method the proxy forwards (the version is a plain call).
        assert members - {"policy_version"} <= {n for n in dir(TrainActor) if not n.startswith("_")}
    except ImportError:  # ray is an extra
        pass
    for cls in engines:
        assert members <= set(dir(cls)), (cls.__name__, members - set(dir(cls)))


def test_every_inference_engine_implements_the_whole_protocol() -> None:
    # The servers and the controller call only the Protocol (max_model_len, close included).
    import inspect

    from ale_roll.engines.base import InferenceEngine
    from ale_roll.engines.hf_engine import HFInferenceEngine
    from ale_roll.engines.inference_client import InferenceClient
    from ale_roll.engines.vllm_engine import VLLMInferenceEngine

    members = {n for n, _ in inspect.getmembers(InferenceEngine) if not n.startswith("_")}
    assert {"generate", "update_weights", "max_model_len", "close"} <= members
    engines: list[type] = [HFInferenceEngine, VLLMInferenceEngine, InferenceClient]
    try:
        from ale_roll.cluster.proxies import RemoteInferenceEngine

        engines.append(RemoteInferenceEngine)
    except ImportError:  # ray is an extra
        pass
    for cls in engines:
        assert members <= set(dir(cls)), (cls.__name__, members - set(dir(cls)))
