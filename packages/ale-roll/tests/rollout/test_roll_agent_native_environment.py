"""Training's agent-native episodes get the same sandbox as `ale eval` and `tasks run`: the Harbor
task's ``[environment]`` (work dir, env, CPUs, memory), seen by ale-flow's shell tool in the real
sandbox and reported by the Admin for the deleted sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from ale_roll.engines.base import SamplingParams
from ale_roll.rollout.agent_native import AgentNativeRunner
from ale_roll.rollout.agents import FlowAgent

pytest.importorskip("ale_rock.proxy", reason="ale-rock is not installed")
pytest.importorskip("ale_flow", reason="ale-flow is not installed")

MARKER = "probe-train-env"
PROBE = "echo PWD=$(pwd); echo VAR=$ALE_PROBE_VAR; echo ok > done.txt"


def _tool_call(command: str) -> str:
    import json

    return f'<tool_call>{{"name": "shell", "arguments": {json.dumps({"command": command})}}}</tool_call>'


def _task(root: Path) -> Any:
    from ale_rock.tasks import load_task

    files = {
        "task.toml": ('schema_version = "1.4"\n[task]\nname = "t/train-env"\n[agent]\ntimeout_sec = 60\n'
                      '[verifier]\ntimeout_sec = 30\n[environment]\nworkdir = "/app"\ncpus = 0.5\nmemory_mb = 256\n'
                      '[environment.env]\nALE_PROBE_VAR = "from-task-toml"\n'),
        "instruction.md": f"{MARKER}: run the probe.\n",
        "tests/test.sh": '[ -f /app/done.txt ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
    }  # fmt: skip
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return load_task(root)


def test_training_sandboxes_are_the_tasks_environment(agent_stack: Any, tmp_path: Path) -> None:
    from ale_rock.sdk import Sandbox
    from ale_rock.sdk.model_proxy import ModelProxyClient

    stack = agent_stack
    before = stack.engine.policy

    def policy(prompt: str) -> str:
        if MARKER not in prompt:
            return before(prompt)
        return "Done." if "<|im_start|>tool" in prompt else _tool_call(PROBE)

    stack.engine.policy = policy
    proxy = ModelProxyClient(stack.host_proxy.grpc_address)
    try:
        runner = AgentNativeRunner(tasks=[_task(tmp_path / "task")], agent=FlowAgent(), provider=stack.provider(),
                                   proxy=proxy, inference_target=stack.inference_address,
                                   params=SamplingParams(max_tokens=2048, temperature=0.0), agent_budget_s=60,
                                   setup_timeout_s=60, verify_timeout_s=60)  # fmt: skip
        traj = asyncio.run(runner.run(seed=0, initial_state_id="state-env", episode_id="ep-env"))
    finally:
        stack.engine.policy = before
        proxy.close()
    assert traj.reward == 1.0 and traj.metadata["success"]  # done.txt landed in /app, where the tests look
    seen = stack.tokenizer.decode(traj.turns[0].observation_ids)
    assert "PWD=/app" in seen and "VAR=from-task-toml" in seen, seen
    labels = {"ale.episode": traj.metadata["proxy_episode"]}
    (info,) = Sandbox.list(client=stack.cluster.client(), labels=labels, states=["deleted"])
    assert info.cpu_millis == 500 and info.memory_bytes == 256 * 2**20
