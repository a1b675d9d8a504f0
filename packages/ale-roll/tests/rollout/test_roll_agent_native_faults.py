"""Fault injection during agent-native RL: sandboxes are deleted at random (seeded) while their
agents work — ale-flow's loop with its shell tool in real bubblewrap sandboxes, model calls through
the real ModelProxy to a real InferenceService. The rollout completes; every killed episode is an
error of kind ``sandbox_lost`` that never reaches the buffer or a group's statistics (every group is
complete, every reward is a real test result: the task is always solved, so one fake zero would
show); each killed state is resampled on a fresh sandbox; and no sandbox is left."""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

import pytest
from ale_roll.algorithms.filtering import ROLLOUT_EXCEPTION, default_filters
from ale_roll.buffer.sample_buffer import BufferConfig, FrontierEntry, SampleBuffer
from ale_roll.engines.base import SamplingParams
from ale_roll.rollout.scheduler import RolloutScheduler

pytest.importorskip("ale_rock.episode", reason="ale-rock is not installed")
pytest.importorskip("ale_flow", reason="ale-flow is not installed")
PARAMS = SamplingParams(max_tokens=2048, temperature=0.0)


class RandomKiller:
    """Engine hook: at a model call, with probability ``p`` (seeded; the first call always), delete
    the sandbox of one episode that is inside its agent phase (its proxy episode open), through the
    SDK. At most ``limit`` kills, so no state runs out of attempts."""

    def __init__(self, stack: Any, p: float, limit: int, seed: int = 0) -> None:
        self.stack, self.p, self.limit = stack, p, limit
        self.rng = random.Random(seed)
        self.killed: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, prompt: str) -> None:
        from ale_rock.sdk import Sandbox

        with self.lock:
            if len(self.killed) >= self.limit or (self.killed and self.rng.random() >= self.p):
                return
            book = self.stack.host_proxy.proxy.book
            working = sorted(e.sandbox_id for e in list(book._episodes.values())
                             if not e.closed and e.sandbox_id and e.sandbox_id not in self.killed)
            if not working:
                return
            victim = self.rng.choice(working)
            try:
                Sandbox.connect(victim, client=self.stack.cluster.client()).delete()
            except Exception:  # its episode ended and deleted it first: no kill (and never raise in
                return  # the engine's generate: that would fail every episode of the batch)
            self.killed.append(victim)


def test_sandboxes_killed_at_random_never_enter_group_statistics(agent_stack: Any) -> None:
    from ale_rock.envs.terminal import find_task
    from ale_rock.sdk import Sandbox
    from ale_rock.sdk.model_proxy import ModelProxyClient
    from ale_roll.rollout.agent_native import AgentNativeRunner
    from ale_roll.rollout.agents import FlowAgent

    stack = agent_stack
    killer = RandomKiller(stack, p=0.25, limit=3, seed=7)
    runner = AgentNativeRunner(tasks=[find_task("csv-sales-rollup")], agent=FlowAgent(), provider=stack.provider(),
                               proxy=ModelProxyClient(stack.host_proxy.grpc_address),
                               inference_target=stack.inference_address, params=PARAMS, agent_budget_s=60,
                               policy_version=lambda: stack.engine.policy_version)
    buffer = SampleBuffer(BufferConfig(async_ratio=0, group_size=2), version=stack.engine.policy_version)

    async def episode(entry: FrontierEntry) -> Any:
        return await runner.run(seed=entry.seed, initial_state_id=entry.initial_state_id,
                                group_id=entry.group_id, episode_id=entry.episode_id)

    async def train(steps: int, batch_size: int) -> tuple[list[list[Any]], Any]:
        sched = RolloutScheduler(buffer, episode, batch_size=batch_size, group_size=2, episodes_in_flight=2,
                                 async_ratio=0, max_attempts=4, filters=default_filters(), seed_of=lambda k: k,
                                 retry_backoff_s=0.05)
        task = asyncio.create_task(sched.run())
        batches = []
        try:
            for _ in range(steps):
                batches.append(await buffer.aget_batch(batch_size, timeout=60))
                stack.engine.update_weights({}, stack.engine.policy_version + 1)
                buffer.set_version(stack.engine.policy_version)
                sched.wake()
        finally:
            sched.stop()
            await asyncio.wait_for(task, 60)
        return batches, sched

    stack.engine.on_call = killer
    start_version = stack.engine.policy_version
    try:
        batches, sched = asyncio.run(train(steps=2, batch_size=4))
    finally:
        stack.engine.on_call = None
        stack.engine.version = start_version  # the stack is shared with other tests
        runner.proxy.close()
    metrics = runner.times.take()

    killed = set(killer.killed)
    assert killed, "the fault injector killed nothing"
    flat = [t for b in batches for t in b]
    # Every kill became an error of its kind, was filtered and resampled; nothing was given up.
    assert metrics["agent_native/errors/sandbox_lost"] == metrics["agent_native/errors"] == len(killed)
    assert sched.stats.rejected[ROLLOUT_EXCEPTION] == len(killed) and sched.stats.exhausted == 0
    assert metrics["agent_native/resampled"] >= 1 and sum(buffer.dropped.values()) == 0
    # No killed episode is in a batch: groups are whole, made of real scores from live sandboxes.
    assert not killed & {t.metadata["sandbox_id"] for t in flat}
    for batch in batches:
        groups: dict[str, list[Any]] = {}
        for t in batch:
            groups.setdefault(t.group_id, []).append(t)
        assert sorted(len(g) for g in groups.values()) == [2, 2]
        for g in groups.values():
            assert len({t.initial_state_id for t in g}) == 1
            assert [t.reward for t in g] == [1.0, 1.0]  # solved: a spoiled episode would be a fake 0
    assert sorted({t.initial_state_id for t in flat}) == [f"state-{k}" for k in range(4)]
    # Nothing leaks: every sandbox of the run is deleted, the killed ones included.
    client = stack.cluster.client()
    assert Sandbox.list(client=client, states=["pending", "running"]) == []
    assert {sb.id for sb in Sandbox.list(client=client, states=["deleted"])} >= killed
    assert set(metrics) >= {f"agent_native/phase_p50_s/{p}" for p in ("setup", "open", "agent", "verify", "delete")}
