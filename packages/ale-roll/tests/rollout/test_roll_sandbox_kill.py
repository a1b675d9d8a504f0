"""A sandbox killed mid-episode is resampled: an RL rollout whose episodes run in real sandboxes
(agent-native mode, and GEM mode over a terminal-task env), one sandbox deleted through the SDK
while its agent is working; the RolloutScheduler filters that attempt, rolls the same initial state
out again, keeps going, and the batches come out complete."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from ale_roll.algorithms.filtering import ROLLOUT_EXCEPTION, default_filters
from ale_roll.buffer.sample_buffer import BufferConfig, FrontierEntry, SampleBuffer
from ale_roll.engines.base import SamplingParams
from ale_roll.rollout.scheduler import RolloutScheduler

pytest.importorskip("ale_rock.proxy", reason="ale-rock is not installed")
pytest.importorskip("ale_flow", reason="ale-flow is not installed")
PARAMS = SamplingParams(max_tokens=2048, temperature=0.0)


class Killer:
    """Engine hook: at the first model call whose prompt mentions ``marker``, delete one running
    sandbox labelled ``labels`` through the SDK (once). The call's episode is mid-way: set up, with
    its agent waiting for this reply.

    It runs inside the engine's generate, on a batch other episodes share: it waits for the target
    to be listed running instead of assuming it already is, and it never raises there (that would
    fail every episode of the batch, not one); what went wrong is in ``problems`` for the test."""

    def __init__(self, stack: Any, marker: str, labels: dict[str, str], wait_s: float = 15.0) -> None:
        self.stack, self.marker, self.labels, self.wait_s = stack, marker, labels, wait_s
        self.killed: list[str] = []
        self.problems: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, prompt: str) -> None:
        from ale_rock.sdk import Sandbox

        if self.marker not in prompt:
            return
        with self.lock:
            if self.killed:
                return
            client = self.stack.cluster.client()
            deadline = time.monotonic() + self.wait_s
            try:
                while not (running := Sandbox.list(client=client, labels=self.labels, states=["running"])):
                    if time.monotonic() > deadline:
                        self.problems.append(f"no running sandbox labelled {self.labels} within {self.wait_s:g} s")
                        return
                    time.sleep(0.05)
                Sandbox.connect(running[0].id, client=client).delete()
            except Exception as e:
                self.problems.append(f"{type(e).__name__}: {e}")
                return
            self.killed.append(running[0].id)


async def _train(buffer: SampleBuffer, episode: Any, engine: Any, steps: int, batch_size: int,
                 ) -> tuple[list[list[Any]], Any]:
    sched = RolloutScheduler(buffer, episode, batch_size=batch_size, group_size=1, episodes_in_flight=3,
                             async_ratio=0, max_attempts=3, filters=default_filters(), seed_of=lambda k: k)
    task = asyncio.create_task(sched.run())
    batches = []
    try:
        for _ in range(steps):
            batches.append(await buffer.aget_batch(batch_size, timeout=180))
            # "Trained" and synced: new episodes start at the next version (async ratio 0).
            engine.update_weights({}, engine.policy_version + 1)
            buffer.set_version(engine.policy_version)
            sched.wake()
    finally:
        sched.stop()
        await asyncio.wait_for(task, 60)
    return batches, sched


def _assert_resampled(batches: list[list[Any]], sched: Any, buffer: SampleBuffer, killed_state: str,
                      errors: list[str]) -> None:
    flat = [t for b in batches for t in b]
    # Filtered and resampled: one rollout raised, nothing was given up, every issued state came back.
    assert sched.stats.rejected == {ROLLOUT_EXCEPTION: 1}, f"rollouts that raised: {errors}"
    assert sched.stats.exhausted == 0 and sum(buffer.dropped.values()) == 0
    assert sched.stats.accepted == len(flat) == buffer.consumed
    assert sorted(t.initial_state_id for t in flat) == sorted(f"state-{k}" for k in range(len(flat)))
    attempts = {t.initial_state_id: t.metadata["attempts"] for t in flat}
    assert attempts.pop(killed_state) == 2 and set(attempts.values()) == {1}
    assert all(len(b) == len(batches[0]) for b in batches)


def test_agent_native_sandbox_killed_mid_episode_is_resampled(agent_stack: Any) -> None:
    from ale_rock.envs.terminal import find_task
    from ale_rock.sdk.model_proxy import ModelProxyClient
    from ale_roll.rollout.agent_native import AgentNativeRunner
    from ale_roll.rollout.agents import FlowAgent

    stack = agent_stack
    tasks = [find_task("csv-sales-rollup"), find_task("dedupe-contacts")]  # seed k -> tasks[k % 2]
    # state-1 (the dedupe task) loses its sandbox when its agent makes its first model call.
    killer = Killer(stack, "contacts CSV", {"ale.state": "state-1"})
    stack.engine.on_call = killer
    runner = AgentNativeRunner(tasks=tasks, agent=FlowAgent(), provider=stack.provider(),
                               proxy=ModelProxyClient(stack.host_proxy.grpc_address),
                               inference_target=stack.inference_address, params=PARAMS, agent_budget_s=60,
                               policy_version=lambda: stack.engine.policy_version)
    buffer = SampleBuffer(BufferConfig(async_ratio=0, group_size=1), version=stack.engine.policy_version)

    errors: list[str] = []  # what each failed rollout raised, for the failure message

    async def episode(entry: FrontierEntry) -> Any:
        try:
            return await runner.run(seed=entry.seed, initial_state_id=entry.initial_state_id,
                                    group_id=entry.group_id, episode_id=entry.episode_id)
        except Exception as e:
            errors.append(f"{entry.initial_state_id}: {type(e).__name__}: {e}")
            raise

    start_version = stack.engine.policy_version
    try:
        batches, sched = asyncio.run(_train(buffer, episode, stack.engine, steps=2, batch_size=2))
    finally:
        stack.engine.on_call = None
        stack.engine.version = start_version  # the stack is shared with other tests
    assert killer.problems == [] and len(killer.killed) == 1, killer.problems
    _assert_resampled(batches, sched, buffer, "state-1", errors)
    flat = {t.initial_state_id: t for b in batches for t in b}
    # The kept state-1 trajectory came from a fresh sandbox, not the killed one.
    assert flat["state-1"].metadata["sandbox_id"] != killer.killed[0]
    assert flat["state-0"].reward == 1.0 and flat["state-2"].reward == 1.0  # the sales task, solved
    assert all(t.metadata["segments"] == 1 and len(t.turns) == 2 for t in flat.values())


class TerminalPolicy:
    """GEM-mode actions for the terminal-task env: one bash call, then submit."""

    def __call__(self, prompt: str) -> str:
        if "exit code" in prompt:
            return json.dumps({"name": "submit"})
        return json.dumps({"name": "bash", "arguments": {"command": "ls"}})


def test_gem_terminal_env_sandbox_killed_mid_episode_is_resampled(agent_stack: Any) -> None:
    from ale_rock.envs.terminal import TerminalTaskEnv
    from ale_roll.rollout import BatchingGenerator, ChatFormat, EpisodeRunner

    stack = agent_stack
    provider = stack.provider()
    engine = stack.scripted(TerminalPolicy())
    # The task env labels its sandboxes with the env id; every episode here is the same task, so
    # the first model call of the run kills whichever running sandbox the SDK lists first. A running
    # sandbox always belongs to an episode between its reset and its close: one is killed mid-way.
    killer = Killer(stack, "", {"ale.env": "task:jsonl-user-activity"})
    engine.on_call = killer
    generator = BatchingGenerator(engine, timeout_s=60)
    fmt = ChatFormat(stack.tokenizer, observation_template="{observation}\n")
    runner = EpisodeRunner(lambda: TerminalTaskEnv("jsonl-user-activity", sandbox_provider=provider),
                           generator, fmt, PARAMS, max_turns=4, env_timeout_s=60)
    buffer = SampleBuffer(BufferConfig(async_ratio=0, group_size=1), version=engine.policy_version)
    killed_state: dict[str, str] = {}
    errors: list[str] = []  # what each failed rollout raised, for the failure message

    async def episode(entry: FrontierEntry) -> Any:
        try:
            return await runner.run(seed=entry.seed, initial_state_id=entry.initial_state_id,
                                    group_id=entry.group_id, episode_id=entry.episode_id)
        except Exception as e:
            killed_state.setdefault("state", entry.initial_state_id)
            errors.append(f"{entry.initial_state_id}: {type(e).__name__}: {e}")
            raise

    async def main() -> tuple[list[list[Any]], Any]:
        try:
            return await _train(buffer, episode, engine, steps=2, batch_size=2)
        finally:
            await generator.close()

    batches, sched = asyncio.run(main())
    assert killer.problems == [] and len(killer.killed) == 1 and "state" in killed_state, killer.problems
    _assert_resampled(batches, sched, buffer, killed_state["state"], errors)
    for traj in (t for b in batches for t in b):
        assert len(traj.turns) == 2 and not traj.metadata["truncated"]  # bash, then submit
