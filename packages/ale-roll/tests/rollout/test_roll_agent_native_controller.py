"""rollout.mode=agent_native from a config: a real Controller trains on agent episodes.

The controller serves its own InferenceService over the rollout's generator, starts a ModelProxy in
its process, and its scheduler drives an AgentNativeRunner: ale-flow's agent loop with its tools in
real bubblewrap sandboxes (LocalCluster), the proxy's token records as trajectories, a tiny real
TorchTrainEngine stepping on them and pushing verified weights to the (scripted) inference engine.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
from ale_roll.config import ConfigError, build_config

pytest.importorskip("ale_rock.proxy", reason="ale-rock is not installed")
pytest.importorskip("ale_flow", reason="ale-flow is not installed")

TRAIN_TASKS = ["csv-sales-rollup", "dedupe-contacts"]  # the scripted policy solves the first only


def _raw(stack: Any, out: Path, model_dir: Path, **agent: Any) -> dict[str, Any]:
    return {
        "name": "agent-native", "output_dir": str(out), "iterations": 2, "seed": 0,
        "model": {"path": str(model_dir)},
        "rollout": {"mode": "agent_native", "batch_size": 2, "episodes_in_flight": 2, "async_ratio": 1,
                    "max_new_tokens": 2048, "temperature": 0.0, "filters": ["env_noise"], "generate_timeout_s": 60,
                    "retry_backoff_s": 0},
        "agent": {"tasks": TRAIN_TASKS, "eval_tasks": ["csv-sales-rollup"], "sandbox_address": stack.cluster.address,
                  "sandbox_api_key": stack.cluster.api_key(), "budget_s": 60, "setup_timeout_s": 60,
                  "verify_timeout_s": 60, **agent},
        "algorithm": {"loss": "reinforce"},
        "checkpoint": {"every": 0, "resume": False},
        "eval": {"episodes": 1},
        "metrics": {"tensorboard": False, "plot": False, "progress": False},
    }


def _f32(values: list[float]) -> list[float]:
    return [struct.unpack("f", struct.pack("f", v))[0] for v in values]


def _port_open(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, int(port))) == 0


@pytest.mark.slow
def test_controller_trains_on_agent_native_episodes(agent_stack: Any, tmp_path: Path,
                                                    trained_batches: list[list[Any]]) -> None:
    from ale_rock.sdk import Sandbox
    from ale_roll.trainer.controller import Controller

    stack = agent_stack
    policy = stack.trainable_policy(tmp_path)
    engine = policy.inference
    cfg = build_config(_raw(stack, tmp_path / "run", policy.model_dir))
    batches = trained_batches
    seen: dict[str, Any] = {}

    def on_step(step: int, metrics: dict[str, Any]) -> None:
        # While training runs the services are up: the proxy is ours, in-process, and holds every
        # trained episode's records (closed), bound to that episode's sandbox.
        live = ctl.agent_stack
        assert live is not None and live.own_proxy is not None
        seen["inference"], seen["proxy"] = live.inference_address, live.proxy_address
        for traj in batches[step - 1]:
            ep = live.own_proxy.proxy.book.get(traj.metadata["proxy_episode"])
            assert ep is not None and ep.closed and ep.sandbox_id == traj.metadata["sandbox_id"]
        seen.setdefault("metrics", []).append(metrics)

    ctl = Controller(cfg, policy=policy, on_step=on_step)
    summary = ctl.run()

    # Two training steps, each followed by a verified push: versions 0 (start), 1 and 2 reached the engine.
    assert summary["step"] == 2 and policy.train.policy_version == 2
    assert engine.loads == [0, 1, 2] and engine.policy_version == 2
    assert [len(b) for b in batches] == [2, 2]
    assert all("train/loss" in m and m["time/sync_s"] > 0 for m in seen["metrics"])
    # Every trained trajectory is the proxy's record of the engine's generations, token for token.
    # (The same prompt recurs across episodes and versions: key by both.)
    by_prompt = {(tuple(g.prompt_token_ids), g.policy_version): g for g in engine.scripted.log}
    for traj in (t for b in batches for t in b):
        assert traj.metadata["task_id"] in TRAIN_TASKS and traj.metadata["calls"] == len(traj.turns) == 2
        solved = traj.metadata["task_id"] == "csv-sales-rollup"
        assert traj.metadata["success"] == solved and (traj.reward == 1.0) == solved
        context: list[int] = []
        for turn in traj.turns:
            gen = by_prompt[(tuple(turn.prompt_ids or context), turn.policy_version)]
            assert turn.completion_ids == gen.token_ids and turn.logprobs == _f32(gen.logprobs)
            # An episode is tagged with the version it started at; a sync may land between its calls.
            assert traj.policy_version is not None and traj.policy_version <= turn.policy_version <= 2
            context = list(turn.prompt_ids or context) + turn.completion_ids + turn.observation_ids
        labels = {"ale.episode": traj.metadata["proxy_episode"]}
        assert Sandbox.list(client=stack.cluster.client(), labels=labels) == []  # deleted after the episode
    # The agents' calls went through the rollout's generator (the service serves its batcher).
    assert ctl.generator.tokens == sum(len(g.token_ids) for g in engine.scripted.log) > 0
    # Held-out evaluation ran agent episodes too: on the eval task, before training and with the final weights.
    assert summary["start"]["eval/success_untrained"] == 1.0 and summary["final"]["eval/success"] == 1.0
    assert summary["final"]["eval/errors"] == 0.0
    assert any(g.policy_version == 2 for g in engine.scripted.log)  # the final eval ran on the synced weights
    # Everything the controller started is stopped.
    assert ctl.agent_stack is None
    assert not _port_open(seen["inference"]) and not _port_open(seen["proxy"])


def test_evaluate_only_runs_the_held_out_tasks(agent_stack: Any, tmp_path: Path) -> None:
    """`ale-roll eval` in agent-native mode: held-out tasks through the same services (then stopped)."""
    from ale_roll.trainer.controller import Controller

    policy = agent_stack.trainable_policy(tmp_path)
    cfg = build_config(_raw(agent_stack, tmp_path / "run", policy.model_dir, eval_tasks=["dedupe-contacts"]),
                       ["eval.episodes=2"])
    ctl = Controller(cfg, policy=policy)
    result = asyncio.run(ctl.evaluate_only())
    # The scripted policy only solves the sales task: the held-out task was played, twice, without errors.
    assert result["eval/success"] == 0.0 and result["eval/errors"] == 0.0 and result["eval/reward"] < 1.0, result
    assert len(policy.inference.scripted.log) == 4  # two agent calls per episode
    assert ctl.agent_stack is None


def test_agent_native_outside_its_services_fails_loudly(agent_stack: Any, tmp_path: Path) -> None:
    from ale_roll.trainer.controller import Controller

    policy = agent_stack.trainable_policy(tmp_path)
    ctl = Controller(build_config(_raw(agent_stack, tmp_path / "run", policy.model_dir)), policy=policy)
    with pytest.raises(RuntimeError, match="rollout_services"):
        asyncio.run(ctl.evaluate(1))
    bad = build_config(_raw(agent_stack, tmp_path / "run2", policy.model_dir, tasks=["no-such-task"]))
    with pytest.raises(ConfigError, match=r"agent\.tasks: unknown task 'no-such-task'"):
        asyncio.run(Controller(bad, policy=policy).evaluate_only())


@pytest.mark.parametrize(("agent", "match"), [
    ({"tasks": []}, r"agent\.tasks: rollout\.mode=agent_native needs at least one task"),
    ({"sandbox_address": None}, r"agent\.sandbox_address"),
    ({"kind": "command"}, r"agent\.command: agent\.kind=command needs"),
    ({"proxy_adress": "x:1"}, r"unknown key 'agent\.proxy_adress'.*did you mean 'agent\.proxy_address'"),
    ({"max_calls": -1}, r"agent\.max_calls"),
])
def test_agent_config_errors_name_the_key(agent: dict[str, Any], match: str, tmp_path: Path) -> None:
    raw = {"model": {"path": str(tmp_path)}, "rollout": {"mode": "agent_native", "batch_size": 2, "episodes_in_flight": 2},
           "agent": {"tasks": ["csv-sales-rollup"], "sandbox_address": "127.0.0.1:1", **agent}}
    with pytest.raises(ConfigError, match=match):
        build_config(raw)


def test_gem_mode_is_the_default_and_ignores_the_agent_section(tmp_path: Path) -> None:
    cfg = build_config({"model": {"path": str(tmp_path)}})
    assert cfg.rollout.mode == "gem" and cfg.agent.tasks == []
    with pytest.raises(ConfigError, match=r"rollout\.mode"):
        build_config({"model": {"path": str(tmp_path)}, "rollout": {"mode": "agentic"}})
