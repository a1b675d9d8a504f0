"""Chunk-level initialized resampling (Eq. 10) in agent-native mode, on the real stack: ale-flow's
loop replays an expert episode's recorded replies (their tool calls run in the fresh bubblewrap
sandbox), the policy plays on through the real ModelProxy, and a real Controller searches the fork,
plays the group from it and applies the imitation term.

The expert solves the sales task in three chunks: ``ls``, the reference solution, "Done.". The
learner never writes the solution: it calls ``ls`` until it has seen two tool results, then says
"Done." — so it succeeds exactly when the expert's first two chunks were replayed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_roll.config import build_config
from ale_roll.engines.base import SamplingParams
from ale_roll.rollout.agent_native import AgentNativeRunner
from ale_roll.rollout.agents import FlowAgent, PrefilledModel
from ale_roll.rollout.resampler import load_agent_experts
from ale_roll.types import Trajectory

pytest.importorskip("ale_rock.proxy", reason="ale-rock is not installed")
pytest.importorskip("ale_flow", reason="ale-flow is not installed")

TASK = "csv-sales-rollup"


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """A tool call as the stack's chat template renders it back (conftest.TOOL_TEMPLATE)."""
    return f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(arguments)}}}</tool_call>'


def _tool_results(prompt: str) -> int:
    return prompt.count("<|im_start|>tool")


def expert_policy(solve: str) -> Any:
    def policy(prompt: str) -> str:
        n = _tool_results(prompt)
        return tool_call_text("shell", {"command": ["ls", solve][n]}) if n < 2 else "Done."

    return policy


def learner_policy(prompt: str) -> str:
    return tool_call_text("shell", {"command": "ls"}) if _tool_results(prompt) < 2 else "Done."


def _runner(stack: Any) -> AgentNativeRunner:
    from ale_rock.envs.terminal import find_task
    from ale_rock.sdk.model_proxy import ModelProxyClient

    return AgentNativeRunner(tasks=[find_task(TASK)], agent=FlowAgent(), provider=stack.provider(),
                             proxy=ModelProxyClient(stack.host_proxy.grpc_address),
                             inference_target=stack.inference_address,
                             params=SamplingParams(max_tokens=2048, temperature=0.0), agent_budget_s=60,
                             setup_timeout_s=60, verify_timeout_s=60)


@pytest.fixture(scope="module")
def expert(agent_stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """experts.jsonl holding one real agent-native episode of the expert on the sales task."""
    from ale_rock.envs.terminal import find_task

    stack = agent_stack
    saved = stack.engine.policy
    stack.engine.policy = expert_policy(find_task(TASK).solution["solve.sh"].decode())
    try:
        traj = asyncio.run(_runner(stack).run(seed=0, initial_state_id="expert", episode_id="expert"))
    finally:
        stack.engine.policy = saved
    assert traj.metadata["success"] and traj.num_chunks == 3 and traj.metadata["calls"] == 3
    path = tmp_path_factory.mktemp("experts") / "experts.jsonl"
    path.write_text(json.dumps(traj.to_dict()) + "\n")
    yield path


def test_expert_replies_are_recorded_and_load_as_experts(expert: Path) -> None:
    [traj] = load_agent_experts(expert)
    replies = traj.metadata["assistant_messages"]
    commands = [json.loads(m["tool_calls"][0]["function"]["arguments"])["command"] for m in replies[:2]]
    assert commands[0] == "ls" and "summary.csv" in commands[1] and replies[2]["content"] == "Done."
    assert traj.metadata["task_id"] == TASK and len(replies) == len(traj.turns) == 3


def test_an_episode_replays_the_experts_first_chunks_in_its_sandbox(agent_stack: Any, expert: Path) -> None:
    stack = agent_stack
    [exp] = load_agent_experts(expert)
    saved, stack.engine.policy = stack.engine.policy, learner_policy
    try:
        runner = _runner(stack)
        before = len(stack.engine.log)
        two = asyncio.run(runner.run(seed=0, initial_state_id="s", prefix=exp, prefix_chunks=2))
        after_two = len(stack.engine.log)
        one = asyncio.run(runner.run(seed=0, initial_state_id="s", prefix=exp, prefix_chunks=1))
        plain = asyncio.run(runner.run(seed=0, initial_state_id="s", prefix=exp, prefix_chunks=0))
    finally:
        stack.engine.policy = saved
    # Two chunks replayed: the solution ran in this sandbox, so the learner's "Done." passes the tests;
    # only the learner's one call went through the proxy (and the engine).
    assert two.metadata["success"] and two.metadata["prefilled_chunks"] == 2
    assert two.metadata["calls"] == len(two.turns) == 1 and after_two - before == 1
    context = stack.tokenizer.decode(two.turns[0].prompt_ids)
    assert context.count("<|im_start|>tool") == 2 and "summary.csv" in context
    # One chunk (`ls`) replayed: the learner calls `ls` itself, then stops — and fails, like alone.
    assert not one.metadata["success"] and one.metadata["prefilled_chunks"] == 1 and one.metadata["calls"] == 2
    assert not plain.metadata["success"] and "prefilled_chunks" not in plain.metadata and plain.metadata["calls"] == 3
    with pytest.raises(ValueError, match="leaves nothing to resample"):
        asyncio.run(_runner(stack).run(seed=0, initial_state_id="s", prefix=exp, prefix_chunks=3))


def test_prefilled_model_replays_then_asks_the_model() -> None:
    from ale_flow.models.scripted import ScriptedModel

    inner = ScriptedModel(["from the model"])
    reply = {"content": None, "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "shell", "arguments": '{"command": "ls"}'}}]}
    model = PrefilledModel(inner, [reply])
    first = model.complete([{"role": "user", "content": "hi"}], [])
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("shell", {"command": "ls"})] and not inner.seen
    assert model.complete([{"role": "user", "content": "hi"}], []).content == "from the model"
    assert model.context_window == inner.context_window and model.replayed == 1
    bad = {"content": "", "tool_calls": [{"function": {"name": "shell", "arguments": "[1]"}}]}
    with pytest.raises(ValueError, match="not a JSON object"):
        PrefilledModel(inner, [bad])


def test_experts_without_replies_are_refused(tmp_path: Path) -> None:
    from ale_roll.types import Turn

    traj = Trajectory([Turn([1, 2], [3], [-0.1])], metadata={"task_id": TASK})
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(traj.to_dict()) + "\n")
    with pytest.raises(ValueError, match=r"e\.jsonl: expert 1\b.*assistant_messages"):
        load_agent_experts(path)
    traj.metadata = {}
    path.write_text(json.dumps(traj.to_dict()) + "\n")
    with pytest.raises(ValueError, match="no metadata.task_id"):
        load_agent_experts(path)


@pytest.mark.slow
def test_controller_resamples_agent_native_groups_from_the_fork(agent_stack: Any, expert: Path, tmp_path: Path,
                                                               trained_batches: list[list[Any]]) -> None:
    from ale_rock.sdk import Sandbox
    from ale_roll.metrics import read_jsonl
    from ale_roll.trainer.controller import Controller

    stack = agent_stack
    policy = stack.trainable_policy(tmp_path, learner_policy)
    raw = {
        "name": "agent-native-resampling", "output_dir": str(tmp_path / "run"), "iterations": 1, "seed": 0,
        "model": {"path": str(policy.model_dir)},
        "rollout": {"mode": "agent_native", "batch_size": 2, "group_size": 2, "episodes_in_flight": 2,
                    "async_ratio": 0, "max_new_tokens": 2048, "temperature": 0.0, "filters": ["env_noise"],
                    "generate_timeout_s": 60, "retry_backoff_s": 0},
        "agent": {"tasks": [TASK], "sandbox_address": stack.cluster.address,
                  "sandbox_api_key": stack.cluster.api_key(), "budget_s": 60, "setup_timeout_s": 60,
                  "verify_timeout_s": 60},
        "checkpoint": {"every": 0, "resume": False},
        "eval": {"episodes": 0},
        "metrics": {"tensorboard": False, "plot": False, "progress": False},
    }
    raw["algorithm"] = {"loss": "ipa", "config": {"advantage": {"group_norm": True}},
                        "resampling": {"enabled": True, "expert_data": str(expert), "rollouts_per_anchor": 2}}
    batches = trained_batches
    ctl = Controller(build_config(raw), policy=policy)
    before = {k: v.clone() for k, v in policy.train.export_weights().items()}
    ctl.run()

    [m] = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "resampling/fired" in r]
    # The search probed j = 2 (the learner succeeds: p = 1) and j = 1 (it fails: p = 0), 2 rollouts
    # each: the fork is chunk 2, so the group replays chunk 1 (`ls`) and re-initializes from there.
    assert m["resampling/searches"] == 1 and m["resampling/rollbacks"] == 4 and m["resampling/fired"] == 1
    assert m["resampling/fork_mean"] == 2 and m["resampling/start_mean"] == 1 and m["resampling/episodes"] == 2
    [batch] = batches
    assert [t.metadata["prefilled_chunks"] for t in batch] == [1, 1]
    assert all(not t.metadata["success"] and t.metadata["calls"] == 2 for t in batch)
    # No rollout of the group succeeded: the imitation term on the expert's chunks 1-2 was applied.
    assert m["resampling/imitation"] == 1 and m["resampling/imitation_loss"] > 0
    after = policy.train.export_weights()
    assert any(not before[k].equal(after[k]) for k in before)
    # Every sandbox (4 search episodes, 2 trained ones) is gone.
    deadline = time.monotonic() + 10
    while Sandbox.list(client=stack.cluster.client(), states=["pending", "running"]):
        assert time.monotonic() < deadline, "sandboxes left after the run"
        time.sleep(0.1)
