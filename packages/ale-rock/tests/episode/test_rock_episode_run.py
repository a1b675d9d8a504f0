"""One agent episode (ale_rock.episode.run_episode) end to end on real servers: a stdlib agent in a
local sandbox calls the real ModelProxy, which forwards to a real InferenceService (scripted bytes)
or to a real HTTP server; the outcome is a score, or an error of the right kind, never a 0 reward
for an infrastructure failure; and nothing is left behind."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from ale_proto.serving import free_port
from ale_rock.envs.sandbox import LocalDirProvider, SandboxSpec
from ale_rock.envs.terminal import find_task
from ale_rock.episode import (
    AgentRun,
    CommandAgent,
    EpisodeTimeouts,
    ErrorKind,
    Status,
    arun_episode,
    run_episode,
)
from ale_rock.sdk.model_proxy import ModelProxyClient
from ale_rock.testing.openai import RefusingOpenAI

TASK = "csv-sales-rollup"
PHASES = ["setup", "open", "agent", "close", "records", "verify", "delete"]

# A stdlib-only agent: two model calls (replies saved), then, if asked, the reference solution.
AGENT = b"""
import json, os, sys, urllib.error, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
def chat(messages):
    body = json.dumps({"model": os.environ["OPENAI_MODEL"], "messages": messages, "max_tokens": 16}).encode()
    req = urllib.request.Request(base + "/chat/completions", data=body,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        return json.load(urllib.request.urlopen(req, timeout=30))["choices"][0]["message"]["content"]
    except urllib.error.HTTPError as e:
        print("model call failed: HTTP", e.code, e.read()[:300])
        sys.exit(2)
msgs = [{"role": "user", "content": os.environ["ALE_TASK_PROMPT"][:40]}]
first = chat(msgs)
msgs += [{"role": "assistant", "content": first}, {"role": "user", "content": "Now do it."}]
second = chat(msgs)
print(json.dumps([first, second]))
"""


def _agent(solve: bool) -> CommandAgent:
    task = find_task(TASK)
    files = {"agent.py": AGENT, ".sol/solve.sh": task.solution["solve.sh"]}
    return CommandAgent("python3 agent.py" + (" && bash .sol/solve.sh" if solve else ""), files)


class CountingProvider(LocalDirProvider):
    """Local sandboxes, counted: ``live`` must be empty after every episode."""

    def __init__(self, create_delay_s: float = 0.0) -> None:
        super().__init__()
        self.create_delay_s = create_delay_s
        self.created: list[str] = []

    def create(self, labels: Mapping[str, str] | None = None, spec: SandboxSpec | None = None) -> str:
        time.sleep(self.create_delay_s)
        sid = super().create(labels, spec)
        self.created.append(sid)
        return sid

    @property
    def live(self) -> list[str]:
        return list(self._runners)


def _run(proxy_server: Any, target: str, agent: Any, provider: Any, upstream: str = "inference",
         **kw: Any) -> Any:
    with ModelProxyClient(proxy_server.grpc_address, timeout_s=10) as client:
        return run_episode(find_task(TASK), agent, provider=provider, proxy=client, upstream=upstream,  # type: ignore[arg-type]
                           target=target, model="m", **kw)


def test_a_solved_task_scores_with_exact_records_and_timed_phases(byte_model: Any, proxy: Any) -> None:
    addr, model = byte_model
    model.policy = lambda prompt: f"reply {prompt.count('<user>')}"
    provider = CountingProvider()
    out = _run(proxy, addr, _agent(solve=True), provider, budget_s=60, episode_id="ep-solved")
    assert out.status is Status.SUCCESS and out.success and out.reward == 1.0 and out.error_kind is None, out
    assert out.agent is not None and out.agent.exit_code == 0 and len(out.tests) >= 2
    assert json.loads(out.agent.output.strip().splitlines()[0]) == ["reply 1", "reply 2"]
    assert [r.index for r in out.records] == [0, 1]
    for rec in out.records:  # the ids the model saw and produced, byte for byte
        assert bytes(rec.prompt_token_ids).decode() == model.render(rec.request["messages"])
        assert bytes(rec.completion_token_ids).decode() == f"reply {rec.index + 1}"
        assert rec.policy_version == model.version and not rec.error
    assert list(out.phase_s) == PHASES and out.wall_s >= sum(out.phase_s.values()) * 0.9
    assert 0 < out.model_s < out.phase_s["agent"]
    assert proxy.proxy.book.get("ep-solved").closed  # the key died before the tests ran
    assert provider.live == [] and provider.created == [out.sandbox_id]


def test_an_unsolved_task_is_a_failure_and_a_timed_out_agent_too(byte_model: Any, proxy: Any) -> None:
    addr, _ = byte_model
    provider = CountingProvider()
    failed = _run(proxy, addr, _agent(solve=False), provider, budget_s=60)
    assert failed.status is Status.FAILURE and failed.reward == 0.0 and failed.tests and len(failed.records) == 2
    slow = _run(proxy, addr, CommandAgent("sleep 30"), provider, budget_s=0.5)
    # Running out of budget is the agent's failure, not the infrastructure's: the tests still ran.
    assert slow.status is Status.FAILURE and slow.agent.timed_out and slow.tests and slow.records == []
    assert [e["kind"] for e in slow.safety_events] == ["limit_hit"]  # the agent's command, recorded
    assert provider.live == []


def test_an_unreachable_model_is_an_error_not_a_zero(proxy: Any) -> None:
    closed = f"127.0.0.1:{free_port()}"  # a port nothing listens on
    provider = CountingProvider()
    out = _run(proxy, closed, _agent(solve=True), provider, budget_s=60)
    assert out.status is Status.ERROR and out.error_kind is ErrorKind.MODEL_UNREACHABLE, out
    assert out.phase == "agent" and "model call 0" in out.error and out.records[0].error
    assert "verify" not in out.phase_s and out.tests == []  # a broken model is not scored at all
    assert provider.live == []


@pytest.fixture(scope="module")
def refusing() -> Iterator[str]:
    with RefusingOpenAI() as fake:
        yield fake.url


def test_an_unauthorized_model_is_an_error(proxy: Any, refusing: str) -> None:
    provider = CountingProvider()
    out = _run(proxy, refusing, _agent(solve=True), provider, upstream="openai", budget_s=60)
    assert out.status is Status.ERROR and out.error_kind is ErrorKind.MODEL_UNAUTHORIZED, out
    assert out.reward == 0.0 and not out.success and "verify" not in out.phase_s
    assert provider.live == []


def test_a_sandbox_killed_mid_episode_is_sandbox_lost(byte_model: Any, proxy: Any) -> None:
    addr, model = byte_model
    provider = CountingProvider()
    model.on_call = lambda prompt: [provider.kill(sid) for sid in provider.live]
    try:
        out = _run(proxy, addr, _agent(solve=False), provider, budget_s=60)
    finally:
        model.on_call = None
    assert out.status is Status.ERROR and out.error_kind is ErrorKind.SANDBOX_LOST, out
    assert provider.live == []


def test_a_stuck_phase_times_out_and_a_late_sandbox_is_deleted(byte_model: Any, proxy: Any) -> None:
    addr, _ = byte_model
    provider = CountingProvider(create_delay_s=0.6)
    out = _run(proxy, addr, _agent(solve=True), provider, timeouts=EpisodeTimeouts(setup_s=0.2))
    assert out.status is Status.ERROR and out.error_kind is ErrorKind.TIMEOUT and out.phase == "setup", out
    for _ in range(40):  # the sandbox the timed-out setup created after the episode gave up
        if provider.created:
            break
        time.sleep(0.05)
    time.sleep(0.1)
    assert len(provider.created) == 1 and provider.live == []

    class Stuck:
        def run(self, ctx: Any, cancel: threading.Event) -> AgentRun:
            cancel.wait(30)  # ignores its budget, stops only when the episode gives up
            return AgentRun(1)

    provider = CountingProvider()
    out = _run(proxy, addr, Stuck(), provider, budget_s=0.2, timeouts=EpisodeTimeouts(agent_grace_s=0.2),
               episode_id="ep-stuck")
    assert out.status is Status.ERROR and out.error_kind is ErrorKind.TIMEOUT and out.phase == "agent", out
    assert proxy.proxy.book.get("ep-stuck").closed and provider.live == []


def test_setup_failure_no_model_call_and_a_dead_proxy_are_errors(byte_model: Any, proxy: Any) -> None:
    import dataclasses

    addr, _ = byte_model
    provider = CountingProvider()
    task = find_task(TASK)
    broken = dataclasses.replace(task, setup={**task.setup, "setup.sh": b"echo no disk >&2; exit 1\n"})
    with ModelProxyClient(proxy.grpc_address) as client:
        out = run_episode(broken, _agent(solve=True), provider=provider, proxy=client, upstream="inference",
                          target=addr)
    assert out.error_kind is ErrorKind.SETUP_FAILED and "no disk" in out.error and out.phase == "setup", out
    crashed = _run(proxy, addr, CommandAgent("exit 7"), provider, budget_s=10)
    assert crashed.error_kind is ErrorKind.AGENT_FAILED and "exit 7" in crashed.error, crashed
    dead = f"127.0.0.1:{free_port()}"
    with ModelProxyClient(dead, timeout_s=1) as client:
        out = run_episode(task, _agent(solve=True), provider=provider, proxy=client, upstream="inference",
                          target=addr)
    assert out.error_kind is ErrorKind.PROXY_FAILED and out.phase == "open", out
    assert provider.live == []


def test_cancelling_an_async_episode_deletes_its_sandbox(byte_model: Any, proxy: Any) -> None:
    addr, _ = byte_model
    provider = CountingProvider()

    async def main() -> None:
        with ModelProxyClient(proxy.grpc_address) as client:
            ep = asyncio.ensure_future(arun_episode(find_task(TASK), CommandAgent("touch .agent-up; sleep 20"),
                                                    provider=provider, proxy=client, upstream="inference",
                                                    target=addr))
            deadline = time.monotonic() + 30
            # Inside the agent phase: the agent's command has started (its mark is in the work dir).
            while not any((r.workdir / ".agent-up").exists() for r in list(provider._runners.values())):
                assert time.monotonic() < deadline and not ep.done(), "the agent never started"
                await asyncio.sleep(0.02)
            ep.cancel()
            with pytest.raises(asyncio.CancelledError):
                await ep

    t0 = time.monotonic()
    asyncio.run(main())
    assert provider.created and provider.live == [] and time.monotonic() - t0 < 10


class HostAgent:
    """The agent on the host (as ale-flow's loop runs in training): one model call through the proxy,
    then the reference solution in the sandbox. A sandbox has no route to the host's proxy."""

    def run(self, ctx: Any, cancel: threading.Event) -> AgentRun:
        import urllib.request

        body = json.dumps({"model": ctx.model, "messages": [{"role": "user", "content": "go"}]}).encode()
        req = urllib.request.Request(ctx.base_url + "/chat/completions", data=body, headers={
            "Authorization": f"Bearer {ctx.api_key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            reply = json.load(r)["choices"][0]["message"]["content"]
        ctx.provider.upload(ctx.sandbox_id, {".sol/solve.sh": find_task(TASK).solution["solve.sh"]})
        out = ctx.provider.exec(ctx.sandbox_id, "bash .sol/solve.sh", ctx.budget_s)
        return AgentRun(out.exit_code, reply + out.output, out.timed_out)


def test_episodes_beyond_the_clusters_room_wait_for_it(byte_model: Any, proxy: Any, tmp_path: Any) -> None:
    """A worker that holds 2 sandboxes, 5 episodes at once: the Admin answers RESOURCE_EXHAUSTED
    (``quota=cluster_capacity``) for the 3 that do not fit; each waits for a sandbox to go instead of
    failing (they were ``sandbox_unavailable`` errors at once: an evaluation larger than the cluster
    lost most of its episodes). A full cluster past the wait is still a clear error."""
    from ale_rock.envs.sandbox import SdkProvider
    from ale_rock.local_cluster import LocalCluster, real_worker_argv

    addr, model = byte_model
    model.policy = lambda prompt: "ok"
    argv = real_worker_argv({"max_sandboxes": 2, "pool_size": 0})
    with LocalCluster(workers=1, workdir=tmp_path, worker_argv=argv) as cluster, \
            ModelProxyClient(proxy.grpc_address, timeout_s=10) as client:
        provider = SdkProvider(cluster.address, cluster.api_key())
        task = find_task(TASK)

        async def five() -> list[Any]:
            return list(await asyncio.gather(*(
                arun_episode(task, HostAgent(), provider=provider, proxy=client, upstream="inference",
                             target=addr, model="m", budget_s=60, episode_id=f"ep-room-{k}")
                for k in range(5))))

        outs = asyncio.run(five())
        assert [o.status for o in outs] == [Status.SUCCESS] * 5, [(o.error_kind, o.error) for o in outs]
        assert len({o.sandbox_id for o in outs}) == 5
        from ale_rock import Sandbox

        assert Sandbox.list(client=cluster.client(), states=["running"]) == []  # every sandbox deleted

        held = [provider.create({"t": "hold"}) for _ in range(2)]  # the worker is full, and stays full
        try:
            t0 = time.monotonic()
            out = _run(proxy, addr, HostAgent(), provider, budget_s=60, timeouts=EpisodeTimeouts(setup_s=4.0))
            # It waited 3/4 of the setup's 4 s, then said why (a 1 s margin before the setup's own timeout).
            assert out.status is Status.ERROR and out.error_kind is ErrorKind.SANDBOX_UNAVAILABLE, out
            assert "no live worker has room" in out.error and 2.5 <= time.monotonic() - t0 < 20
        finally:
            for sid in held:
                provider.delete(sid)
