"""Bring your own task from YAML alone: `ale-roll train` on a task defined in a module it writes.

- `env.id: module:Class`, a gem-style env in a user file next to the config, built with `env.kwargs`;
- `env.data` + `env.reward_fn`, single-turn RLVR with a TRL-style reward function.
Each runs the real CLI command (in-process) for 2 steps on a tiny word-level model.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from ale_roll.cli import app
from ale_roll.config import ConfigError, load_config
from ale_roll.metrics import read_jsonl
from ale_roll.user_tasks import DatasetEnv, import_object, is_import_spec, local_env_factory
from typer.testing import CliRunner

WORDS = ["yes", "no", "maybe", "start", "say", ":"]
BASE = {
    "iterations": 2,
    "model": {"tiny": {"arch": "llama", "vocab_size": 300, "hidden_size": 64, "num_layers": 1, "num_heads": 2,
                       "num_kv_heads": 2, "head_dim": 32, "intermediate_size": 64, "max_position_embeddings": 64,
                       "seed": 0},
              "word_vocab": WORDS},
    "engine": {"torch_threads": 1},
    "rollout": {"batch_size": 8, "group_size": 4, "episodes_in_flight": 8, "max_turns": 1, "max_new_tokens": 1,
                "async_ratio": 0, "observation_template": "{observation} :", "env_threads": False,
                "filters": ["env_noise"]},
    "algorithm": {"loss": "ipa", "config": {"advantage": {"group_norm": True}}},
    "eval": {"episodes": 4},
    "checkpoint": {"every": 0, "resume": False},
    "metrics": {"tensorboard": False, "plot": False, "progress": False},
}


def _train(tmp_path: Path, env: dict[str, object]) -> list[dict[str, object]]:
    cfg = {**BASE, "output_dir": str(tmp_path / "run"), "env": env}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg))
    result = CliRunner().invoke(app, ["train", "-c", str(tmp_path / "run.yaml")])
    assert result.exit_code == 0, result.output + repr(result.exception)
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["step"] == 2
    return read_jsonl(tmp_path / "run" / "metrics.jsonl")


def test_env_class_from_a_user_module(tmp_path: Path) -> None:
    (tmp_path / "byo_env_task.py").write_text(textwrap.dedent('''
        class SayTheWord:
            """Say `word` in one go: reward 1, else 0. Logs every action it gets."""

            def __init__(self, word, log):
                self.word, self.log = word, log

            def reset(self, seed=None):
                return "say", {}

            def step(self, action):
                with open(self.log, "a") as f:
                    f.write(action.strip() + "\\n")
                ok = action.strip() == self.word
                return "", float(ok), True, False, {"success": ok}

            def close(self):
                pass
    '''))
    log = tmp_path / "actions.log"
    rows = _train(tmp_path, {"id": "byo_env_task:SayTheWord", "kwargs": {"word": "yes", "log": str(log)}})
    steps = [r for r in rows if "reward/mean" in r]
    assert [r["step"] for r in steps] == [1, 2]
    # Times are per step: generation's wall time within the step, not a sum over its 8 episodes;
    # per-episode means are separate.
    assert all(0 < r["time/generate_s"] <= r["time/step_s"] for r in steps), steps
    assert all(r["episode/generate_s"] > 0 and "episode/env_s" in r and "time/env_s" not in r for r in steps)
    actions = log.read_text().splitlines()
    # 2 evaluations (before and after) x 4 + 2 steps x 8 episodes, all through the user's env
    assert len(actions) == 2 * 4 + 2 * 8 and set(actions) <= set(WORDS) | {"[UNK]", ""}
    said_yes = sum(a == "yes" for a in actions[4:12]) / 8  # the first training batch
    assert steps[0]["reward/mean"] == pytest.approx(said_yes)


def test_dataset_and_trl_style_reward_function(tmp_path: Path) -> None:
    (tmp_path / "byo_rlvr_task.py").write_text(textwrap.dedent('''
        import json

        LOG = []

        def reward(prompts, completions, answer, **kwargs):
            LOG.append(json.dumps([prompts[0], completions[0], answer[0]]))
            return [float(c.strip() == a) for c, a in zip(completions, answer)]
    '''))
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"prompt": "say yes", "answer": "yes"}, {"prompt": "say no", "answer": "no"}]))
    (tmp_path / "held_out.jsonl").write_text(json.dumps({"prompt": "say maybe", "answer": "maybe"}) + "\n")
    rows = _train(tmp_path, {"data": "train.jsonl", "eval_data": "held_out.jsonl", "reward_fn": "byo_rlvr_task:reward"})
    assert [r["step"] for r in rows if "reward/mean" in r] == [1, 2]
    assert any("eval/success" in r for r in rows)
    calls = [json.loads(c) for c in import_object("byo_rlvr_task:LOG")]
    assert len(calls) == 2 * 4 + 2 * 8
    assert {(p, a) for p, _, a in calls} == {("say yes", "yes"), ("say no", "no"), ("say maybe", "maybe")}
    assert {(p, a) for p, _, a in calls[-4:]} == {("say maybe", "maybe")}  # evaluation plays the held-out rows


def test_config_errors_and_resolution(tmp_path: Path) -> None:
    assert is_import_spec("my.tasks:Env") and not is_import_spec("game:DigitLock-v0")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**BASE, "env": {"data": "x.jsonl"}}))
    with pytest.raises(ConfigError, match="env.data and env.reward_fn go together"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**BASE, "env": {"id": "m:C", "address": "localhost:1"}}))
    with pytest.raises(ConfigError, match="runs in-process"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**BASE, "env": {"data": "x.jsonl", "reward_fn": "m:f"}}))
    cfg = load_config(tmp_path / "c.yaml")
    assert cfg.env.data == str(tmp_path / "x.jsonl") and str(tmp_path) in cfg.env.search_path
    with pytest.raises(ValueError, match="not a registered ale-rock id.*cannot import 'no_such_module_here'"):
        local_env_factory("no_such_module_here:X", {}, [tmp_path])
    env = DatasetEnv([{"prompt": [{"role": "user", "content": "hi"}], "k": 2}], lambda **kw: kw["k"][0] * 1.5)
    assert env.reset(7) == ("hi", {}) and env.step("x")[1] == 3.0
