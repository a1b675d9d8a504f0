"""Agent-native rollout: an agent works on a task in a real sandbox, its model calls go through the
real ModelProxy to our real InferenceService, and the proxy's token records become the trajectory."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from ale_roll.engines.base import SamplingParams
from ale_roll.rollout.agent_native import AgentEpisodeError, AgentNativeRunner, records_to_turns
from ale_roll.rollout.agents import CommandAgent, FlowAgent
from ale_roll.types import StopReason, flatten_trajectory, flatten_turns, is_prefix_consistent

rock = pytest.importorskip("ale_rock.proxy", reason="ale-rock is not installed")
pytest.importorskip("ale_flow", reason="ale-flow is not installed")
CallRecord = rock.CallRecord
ModelProxyClient = pytest.importorskip("ale_rock.sdk.model_proxy").ModelProxyClient
PARAMS = SamplingParams(max_tokens=2048, temperature=0.0)


def _rec(index: int, prompt: list[int], completion: list[int], stop: str = "stop", **kw: Any) -> Any:
    return CallRecord(index=index, episode_id="e", prompt_token_ids=prompt, completion_token_ids=completion,
                      completion_logprobs=[-0.5] * len(completion), policy_version=4, stop_reason=stop, **kw)


# -- records -> turns (pure logic) ------------------------------------------------------------------
def test_prefix_consistent_records_become_one_sequence() -> None:
    records = [_rec(1, [1, 2, 3, 10, 11, 12, 4, 5], [13], "stop"), _rec(0, [1, 2, 3], [10, 11, 12], "tool_call")]
    turns, starts = records_to_turns(records)
    assert starts == [0]
    assert turns[0].prompt_ids == [1, 2, 3] and turns[0].observation_ids == [4, 5]
    assert turns[1].prompt_ids == [] and turns[1].completion_ids == [13]
    assert turns[0].stop_reason == StopReason.TOOL_CALL and turns[1].policy_version == 4


def test_a_rewritten_context_starts_a_new_segment() -> None:
    # Call 2's prompt drops call 1's completion (e.g. compression): it cannot extend the context.
    records = [_rec(0, [1, 2], [7, 8], "tool_call"), _rec(1, [1, 2, 9], [5], "tool_call"),
               _rec(2, [1, 2, 9, 5, 6], [3])]
    turns, starts = records_to_turns(records)
    assert starts == [0, 1]
    assert turns[0].observation_ids == [] and turns[1].prompt_ids == [1, 2, 9]
    assert turns[1].observation_ids == [6] and turns[2].prompt_ids == []
    from ale_roll.types import Trajectory

    traj = Trajectory(turns)
    assert not is_prefix_consistent(traj) and traj.num_chunks == 3
    rows = flatten_turns(traj)  # one row per turn, every id as the engine saw it
    assert rows[1].input_ids == [1, 2, 9, 5] and rows[2].input_ids == [1, 2, 9, 5, 6, 3]


def test_error_records_and_records_without_ids_raise() -> None:
    with pytest.raises(AgentEpisodeError, match="failed at the proxy"):
        records_to_turns([_rec(0, [1], [2]), _rec(1, [], [], "error", error="inference service: boom")])
    with pytest.raises(AgentEpisodeError, match="no token ids"):
        records_to_turns([_rec(0, [], [2])])


# -- the real stack ---------------------------------------------------------------------------------
def _runner(stack: Any, agent: Any, proxy: Any, provider: Any, tasks: list[Any]) -> AgentNativeRunner:
    return AgentNativeRunner(tasks=tasks, agent=agent, provider=provider,
                             proxy=ModelProxyClient(proxy.grpc_address), inference_target=stack.inference_address,
                             params=PARAMS, agent_budget_s=60, setup_timeout_s=60, verify_timeout_s=60)


def _f32(values: list[float]) -> list[float]:
    return [struct.unpack("f", struct.pack("f", v))[0] for v in values]


def _check_against_engine(stack: Any, traj: Any) -> None:
    """Every turn's ids and logprobs are exactly what the engine produced for that prompt."""
    by_prompt = {tuple(g.prompt_token_ids): g for g in stack.engine.log}
    context: list[int] = []
    for turn in traj.turns:
        prompt = turn.prompt_ids or context
        gen = by_prompt[tuple(prompt)]
        # Logprobs cross the wire as float32: equal after that rounding, bit for bit.
        assert turn.completion_ids == gen.token_ids and turn.logprobs == _f32(gen.logprobs)
        assert turn.policy_version == gen.policy_version == 3
        context = list(prompt) + turn.completion_ids + turn.observation_ids


def test_flow_agent_episode_in_a_real_sandbox(agent_stack: Any) -> None:
    from ale_rock.envs.terminal import find_task
    from ale_rock.sdk import Sandbox

    stack = agent_stack
    provider = stack.provider()
    runner = _runner(stack, FlowAgent(), stack.host_proxy, provider, [find_task("csv-sales-rollup")])
    traj = asyncio.run(runner.run(seed=0, initial_state_id="state-0", group_id="g0", episode_id="ep-flow"))

    # The agent ran the reference solution through its shell tool in the sandbox: the hidden tests pass.
    assert traj.reward == 1.0 and traj.metadata["success"] and traj.metadata["task_id"] == "csv-sales-rollup"
    assert traj.episode_id == "ep-flow" and traj.initial_state_id == "state-0" and traj.version == 3
    assert len(traj.turns) == 2 and traj.metadata["calls"] == 2
    assert [t.stop_reason for t in traj.turns] == [StopReason.TOOL_CALL, StopReason.STOP]
    # ale-flow echoes its tool call back and the template renders it as the sampled ids: one segment.
    assert traj.metadata["segments"] == 1 and is_prefix_consistent(traj)
    _check_against_engine(stack, traj)
    obs = stack.tokenizer.decode(traj.turns[0].observation_ids)
    assert obs.startswith("\n<|im_start|>tool\n") and obs.endswith("<|im_start|>assistant\n")
    flat = flatten_trajectory(traj)
    assert sum(flat.loss_mask) == sum(len(t.completion_ids) for t in traj.turns)
    assert traj.num_chunks == 2
    # Cleaned up: the proxy episode is closed and the sandbox deleted.
    proxy_episode = stack.host_proxy.proxy.book.get(traj.metadata["proxy_episode"])
    assert proxy_episode.closed and proxy_episode.episode_id.startswith("ep-flow-")
    assert proxy_episode.sandbox_id == traj.metadata["sandbox_id"]
    labels = {"ale.episode": traj.metadata["proxy_episode"]}
    assert Sandbox.list(client=stack.cluster.client(), labels=labels) == []  # none left alive
    deleted = Sandbox.list(client=stack.cluster.client(), labels=labels, states=["deleted"])
    assert [sb.id for sb in deleted] == [traj.metadata["sandbox_id"]]
    assert runner.times.episodes == 1 and runner.times.tokens == len(flat.input_ids) - len(traj.turns[0].prompt_ids) \
        - len(traj.turns[0].observation_ids)


# An unmodified agent inside the sandbox (stdlib only): it reaches the proxy as http://model-proxy
# through its worker's egress gateway, runs the tool calls it gets, and echoes every reply back.
SANDBOX_AGENT = b"""
import json, os, subprocess, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
tools = [{"type": "function", "function": {"name": "shell", "description": "run bash",
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
msgs = [{"role": "user", "content": os.environ["ALE_TASK_PROMPT"]}]
for _ in range(4):
    body = {"model": os.environ["OPENAI_MODEL"], "messages": msgs, "tools": tools,
            "max_tokens": int(os.environ["ALE_MAX_TOKENS"])}
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    msg = json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["message"]
    msgs.append(msg)
    if not msg.get("tool_calls"):
        break
    for call in msg["tool_calls"]:
        cmd = json.loads(call["function"]["arguments"])["command"]
        out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
        msgs.append({"role": "tool", "tool_call_id": call["id"], "content": out.stdout + out.stderr})
print("agent done after", len(msgs), "messages")
"""


def test_unmodified_agent_inside_the_sandbox(agent_stack: Any) -> None:
    from ale_rock.envs.terminal import find_task

    stack = agent_stack
    provider = stack.provider(allow=("model-proxy",))
    agent = CommandAgent("python3 .agent.py", files={".agent.py": SANDBOX_AGENT})
    tasks = [find_task("csv-sales-rollup"), find_task("dedupe-contacts")]
    runner = _runner(stack, agent, stack.sandbox_proxy, provider, tasks)
    solved = asyncio.run(runner.run(seed=0, initial_state_id="state-0", episode_id="ep-cmd-0"))
    unsolved = asyncio.run(runner.run(seed=1, initial_state_id="state-1", episode_id="ep-cmd-1"))
    assert solved.metadata["agent_exit_code"] == 0 and solved.reward == 1.0
    assert unsolved.metadata["task_id"] == "dedupe-contacts" and unsolved.reward < 1.0 and not unsolved.metadata["success"]
    for traj in (solved, unsolved):
        assert len(traj.turns) == 2 and traj.metadata["segments"] == 1 and is_prefix_consistent(traj)
        _check_against_engine(stack, traj)


def test_a_proxy_failure_raises(agent_stack: Any) -> None:
    """The proxy answers 503 (the InferenceService is unreachable): the episode raises, not trains."""
    from ale_rock.envs.terminal import find_task

    stack = agent_stack
    runner = _runner(stack, FlowAgent(), stack.host_proxy, stack.provider(), [find_task("csv-sales-rollup")])
    runner.inference_target = "127.0.0.1:9"  # nothing listens on the discard port
    runner.proxy.timeout_s = 10
    with pytest.raises(AgentEpisodeError, match="model call 0 failed") as raised:
        asyncio.run(runner.run(seed=0, initial_state_id="state-x", episode_id="ep-bad"))
    # An error of its kind, counted; its sandbox is gone; a retry of the same state counts as resampled.
    assert raised.value.kind == "model_unreachable" and raised.value.sandbox_id
    from ale_rock.sdk import Sandbox

    assert Sandbox.list(client=stack.cluster.client(), labels={"ale.state": "state-x"}) == []
    with pytest.raises(AgentEpisodeError):
        asyncio.run(runner.run(seed=0, initial_state_id="state-x", episode_id="ep-bad"))
    metrics = runner.times.take()
    assert metrics["agent_native/errors/model_unreachable"] == 2 and metrics["agent_native/resampled"] == 1
    assert metrics["rollout/episodes"] == 0 and metrics["agent_native/phase_p50_s/agent"] > 0


def test_agent_calls_go_through_the_rollout_generator(agent_stack: Any) -> None:
    """Served over the rollout's own batcher, the agent's calls are held while the generator is
    paused (a weight sync) and a weight update through the service reaches the next episode's turns."""
    from ale_rock.envs.terminal import find_task
    from ale_roll.engines.inference_client import InferenceClient
    from ale_roll.engines.inference_server import InferenceServicer, serve
    from ale_roll.rollout import BatchingGenerator

    stack = agent_stack
    engine = stack.scripted(stack.engine.policy)

    async def main() -> list[Any]:
        generator = BatchingGenerator(engine, timeout_s=60)
        servicer = InferenceServicer(generator.batcher, stack.tokenizer, default_max_tokens=4096)
        server, port = serve(servicer)
        runner = _runner(stack, FlowAgent(), stack.host_proxy, stack.provider(), [find_task("csv-sales-rollup")])
        runner.inference_target = f"127.0.0.1:{port}"
        book = stack.host_proxy.proxy.book
        try:
            async with generator.paused():
                first = asyncio.create_task(runner.run(seed=0, initial_state_id="state-g", episode_id="ep-gen"))
                for _ in range(600):  # until the agent's first call is in flight at the proxy
                    eps = [e for e in list(book._episodes.values()) if e.episode_id.startswith("ep-gen-")]
                    if eps and eps[0].reserved >= 1:
                        break
                    await asyncio.sleep(0.05)
                else:
                    raise AssertionError("the agent's first model call never reached the proxy")
                await asyncio.sleep(0.5)
                assert engine.log == []  # held by the pause
            trajs = [await first]
            client = InferenceClient(f"127.0.0.1:{port}", timeout_s=60)
            try:  # through the service: Pause, UpdateWeights (loaded inside the batcher's pause), Resume
                update = await asyncio.to_thread(client.update_weights, {}, 9)
            finally:
                client.close()
            trajs.append(await runner.run(seed=0, initial_state_id="state-g", episode_id="ep-gen2"))
        finally:
            server.stop(grace=None)
            await generator.close()
        assert update.version == 9 and engine.policy_version == 9
        return trajs

    first, second = asyncio.run(main())
    assert first.reward == 1.0 == second.reward
    assert {t.policy_version for t in first.turns} == {3} and {t.policy_version for t in second.turns} == {9}
    assert len(engine.log) == 4


def test_an_agent_over_its_budget_is_marked_truncated(agent_stack: Any) -> None:
    """Running out of budget is the policy's doing, not an infrastructure failure: the episode
    returns, marked truncated (the default TruncatedFilter then resamples it)."""
    from ale_rock.envs.terminal import find_task
    from ale_roll.algorithms.filtering import TruncatedFilter
    from ale_roll.engines.inference_server import InferenceServicer, serve

    engine = agent_stack.scripted(lambda prompt: "Done." if "<|im_start|>tool" in prompt
                                         else '<tool_call>{"name": "shell", "arguments": {"command": "sleep 3"}}</tool_call>')
    server, port = serve(InferenceServicer(engine, agent_stack.tokenizer, default_max_tokens=4096))
    try:
        runner = _runner(agent_stack, FlowAgent(), agent_stack.host_proxy, agent_stack.provider(),
                         [find_task("csv-sales-rollup")])
        runner.inference_target, runner.agent_budget_s = f"127.0.0.1:{port}", 1.5
        traj = asyncio.run(runner.run(seed=0, initial_state_id="state-t", episode_id="ep-slow"))
    finally:
        server.stop(grace=None)
    assert traj.metadata["agent_stop_reason"] == "time_limit" and traj.metadata["truncated"]
    assert len(traj.turns) == 1 and traj.reward == 0.0
    assert TruncatedFilter()(traj) == "truncated"
