"""An agent-native episode: an unmodified agent runs in a sandbox with its OpenAI settings
pointing at the ModelProxy; when it exits (or its budget runs out) the task's hidden tests give
the reward, and the proxy's records are the trajectory."""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from ale_proto.v1 import model_proxy_pb2, model_proxy_pb2_grpc

from ale_rock.envs.sandbox import ProviderRunner, SandboxProvider
from ale_rock.grpc_options import channel_options
from ale_rock.proxy.records import CallRecord

_UPSTREAMS = {
    "inference": model_proxy_pb2.UPSTREAM_KIND_INFERENCE_SERVICE,
    "openai": model_proxy_pb2.UPSTREAM_KIND_OPENAI,
    "replay": model_proxy_pb2.UPSTREAM_KIND_REPLAY,
}


@dataclass
class AgentEpisodeResult:
    """What an agent-native episode produced."""

    episode_id: str
    sandbox_id: str
    reward: float
    success: bool
    tests: list[dict[str, Any]]
    records: list[CallRecord]
    """Every model call, in order, with exact token ids."""
    agent_exit_code: int
    agent_output: str
    agent_timed_out: bool
    safety_events: list[dict[str, Any]] = field(default_factory=list)


def run_agent_episode(
    task: Any,
    agent_command: str,
    *,
    proxy_address: str,
    provider: SandboxProvider,
    upstream: str,
    upstream_target: str,
    model: str = "",
    agent_files: Mapping[str, bytes] | None = None,
    budget_s: float | None = None,
    max_calls: int = 0,
    episode_id: str = "",
) -> AgentEpisodeResult:
    """Run ``agent_command`` on ``task`` (an ``ale_rock.tasks`` Task) in a fresh sandbox.

    The agent sees ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (and ``OPENAI_MODEL``) for its episode;
    ``agent_files`` (path -> bytes) are written into the work dir first. The budget defaults to the
    task's ``limits.agent_s``.
    """
    from ale_rock.tasks.evaluate import run_tests, setup_task

    episode_id = episode_id or f"ep-{uuid.uuid4().hex[:12]}"
    runner = ProviderRunner(provider, {"ale.episode": episode_id})
    stub = model_proxy_pb2_grpc.ModelProxyServiceStub(channel := grpc.insecure_channel(proxy_address, options=channel_options()))
    opened = False
    try:
        setup_task(task, runner)
        if agent_files:
            runner.upload(agent_files)
        ep = stub.OpenEpisode(
            model_proxy_pb2.OpenEpisodeRequest(
                episode_id=episode_id,
                sandbox_id=runner.sandbox_id,
                upstream=_UPSTREAMS[upstream],
                upstream_target=upstream_target,
                model=model,
                max_calls=max_calls,
            ),
            timeout=30,
        )
        opened = True
        env = {"OPENAI_BASE_URL": ep.base_url, "OPENAI_API_KEY": ep.api_key, "OPENAI_MODEL": model}
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        agent = runner.run(f"export {exports}; {agent_command}", budget_s or task.spec.limits.agent_s)
        # The credential dies before the tests run: nothing in the sandbox can call the model after.
        stub.CloseEpisode(model_proxy_pb2.CloseEpisodeRequest(episode_id=episode_id), timeout=30)
        opened = False
        stream = stub.SubscribeCalls(model_proxy_pb2.SubscribeCallsRequest(episode_id=episode_id), timeout=60)
        records = [CallRecord.from_pb(m.call) for m in stream]
        report = run_tests(task, runner)
        return AgentEpisodeResult(
            episode_id=episode_id,
            sandbox_id=runner.sandbox_id,
            reward=report.reward,
            success=report.passed,
            tests=[{"name": t.name, "passed": t.passed, "output": t.message} for t in report.tests],
            records=records,
            agent_exit_code=agent.exit_code,
            agent_output=agent.output,
            agent_timed_out=agent.timed_out,
            safety_events=list(runner.safety_events),
        )
    finally:
        if opened:
            try:
                stub.CloseEpisode(model_proxy_pb2.CloseEpisodeRequest(episode_id=episode_id), timeout=10)
            except grpc.RpcError:
                pass
        runner.close()
        channel.close()
