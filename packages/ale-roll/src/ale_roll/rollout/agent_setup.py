"""Agent-native mode from a RunConfig: serve the rollout's generator, reach a ModelProxy, build the runners.

    stack = build_agent_stack(cfg, generator, tokenizer, asyncio.get_running_loop(), params, reward_fn)
    try:
        traj = await stack.runner.run(seed=0, initial_state_id="state-0")
    finally:
        stack.close()

What runs where (``rollout.mode=agent_native``):

- the **InferenceService** is served by the trainer's process over the rollout's own batcher
  (``generator.batcher``), so the agents' model calls share its queue and are held during a weight sync;
- the **ModelProxy** is ``agent.proxy_address``, or one started in this process;
- **sandboxes** come from the ale-rock Admin at ``agent.sandbox_address``, each as its task's
  ``[environment]`` asks (work dir, env, CPUs, memory; egress: ``agent.allow`` plus the task's
  allow-list), bounded by the Admin's own limits;
- the **agent** is ale-flow's loop in this process (``kind: flow``) or a command inside the sandbox
  (``kind: command``);
- ``runner`` plays the training tasks (seed s → ``tasks[s % len]``), ``eval_runner`` the held-out
  ones (eval episode i → ``eval_tasks[i % len]``).

ale-rock (tasks, proxy, SDK) and ale-flow are imported here, lazily, only in agent-native mode.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ale_roll.config import AgentConfig, ConfigError, RunConfig
from ale_roll.engines.base import SamplingParams
from ale_roll.rollout.agent_native import AgentNativeRunner
from ale_roll.rollout.agents import AgentLauncher, CommandAgent, FlowAgent
from ale_roll.rollout.episode import RewardFn
from ale_roll.rollout.generation import BatchingGenerator


def load_tasks(cfg: RunConfig, names: Sequence[str], key: str) -> list[Any]:
    """``ale_rock.tasks`` Tasks from built-in ids or task directories; a ConfigError names ``key``."""
    from ale_rock.envs.errors import EnvNotFound
    from ale_rock.envs.terminal import find_task
    from ale_rock.tasks.loader import load_suite

    tasks: list[Any] = []
    for name in names:
        path = cfg.resolve(name)
        if path.is_dir():
            found = load_suite(path)
            if not found:
                raise ConfigError(f"{key}: no task.yaml under {str(path)!r}")
            tasks.extend(found)
            continue
        try:
            tasks.append(find_task(name))
        except EnvNotFound:
            raise ConfigError(f"{key}: unknown task {name!r} (neither a built-in task id nor a directory)") from None
    return tasks


def build_agent(cfg: RunConfig) -> AgentLauncher:
    """The agent launcher of ``agent.kind``."""
    a = cfg.agent
    if a.kind == "command":
        files = {}
        for dest, src in a.files.items():
            try:
                files[dest] = cfg.resolve(src).read_bytes()
            except OSError as e:
                raise ConfigError(f"agent.files.{dest}: cannot read {src!r}: {e}") from None
        return CommandAgent(a.command, files)
    return FlowAgent(settings=dict(a.flow_settings))


@dataclass
class AgentNativeStack:
    """The running pieces of agent-native mode; ``close()`` stops what this process started."""

    runner: AgentNativeRunner
    """Training episodes."""
    eval_runner: AgentNativeRunner
    """Held-out evaluation episodes."""
    inference_address: str
    """Where the served InferenceService listens (as the proxy reaches it)."""
    proxy_address: str
    """gRPC address of the ModelProxy in use."""
    own_proxy: Any
    """The in-process ``ModelProxyServer`` (None with ``agent.proxy_address``)."""
    _server: Any
    _servicer: Any
    _proxy_client: Any

    def close(self) -> None:
        """Stop the in-process proxy, the InferenceService and the proxy client (idempotent, best effort)."""
        # The proxy first: no agent call can arrive at a server that is going away.
        if self.own_proxy is not None:
            with contextlib.suppress(Exception):
                self.own_proxy.stop(0)
            self.own_proxy = None
        with contextlib.suppress(Exception):
            self._server.stop(grace=None)
        with contextlib.suppress(Exception):
            self._servicer.close()
        with contextlib.suppress(Exception):
            self._proxy_client.close()


def _runner(a: AgentConfig, tasks: Sequence[Any], agent: AgentLauncher, provider: Any, proxy: Any, target: str,
            params: SamplingParams, reward_fn: RewardFn, reward_timeout_s: float, generator: BatchingGenerator,
            task_of: Callable[[int | None], Any] | None = None) -> AgentNativeRunner:
    return AgentNativeRunner(
        tasks=tasks, agent=agent, provider=provider, proxy=proxy, inference_target=target, params=params,
        model=a.model_name, max_calls=a.max_calls, agent_budget_s=a.budget_s, setup_timeout_s=a.setup_timeout_s,
        verify_timeout_s=a.verify_timeout_s, proxy_timeout_s=a.proxy_timeout_s, reward_timeout_s=reward_timeout_s,
        reward_fn=reward_fn, policy_version=lambda: generator.policy_version, task_of=task_of)


def build_agent_stack(cfg: RunConfig, generator: BatchingGenerator, tokenizer: Any, loop: asyncio.AbstractEventLoop,
                      params: SamplingParams, reward_fn: RewardFn) -> AgentNativeStack:
    """Serve ``generator`` as the InferenceService, start or join the ModelProxy, build both runners.

    The service feeds ``generator.batcher`` directly (a thread-safe queue), so ``loop`` is not used
    any more; it stays in the signature for callers.
    """
    from ale_rock.envs.sandbox import SdkProvider
    from ale_rock.sdk.model_proxy import ModelProxyClient

    from ale_roll.engines.inference_server import InferenceServicer, serve

    a = cfg.agent
    tasks = load_tasks(cfg, a.tasks, "agent.tasks")
    eval_tasks = load_tasks(cfg, a.eval_tasks, "agent.eval_tasks") if a.eval_tasks else tasks
    agent = build_agent(cfg)
    assert a.sandbox_address is not None  # RunConfig checks it in agent-native mode
    provider = SdkProvider(a.sandbox_address, a.sandbox_api_key or None, image=a.sandbox_image, allow=tuple(a.allow))

    servicer = InferenceServicer(generator.batcher, tokenizer, model_name=a.model_name,
                                 backend="rollout", default_max_tokens=cfg.rollout.max_new_tokens)
    server, port = serve(servicer, f"{a.serve_host}:0")
    own_proxy = proxy_client = None
    try:
        if a.proxy_address is None:
            from ale_rock.proxy import ModelProxyConfig, serve_model_proxy

            own_proxy = serve_model_proxy(ModelProxyConfig(public_base_url=a.proxy_public_url,
                                                           upstream_timeout_s=cfg.rollout.generate_timeout_s + 10))
            proxy_address = own_proxy.grpc_address
        else:
            proxy_address = a.proxy_address
        proxy_client = ModelProxyClient(proxy_address, timeout_s=a.proxy_timeout_s)
    except BaseException:
        if own_proxy is not None:
            own_proxy.stop(0)
        server.stop(grace=None)
        servicer.close()
        raise
    target = f"{a.serve_host}:{port}"
    common: dict[str, Any] = {"agent": agent, "provider": provider, "proxy": proxy_client, "target": target,
                              "params": params, "reward_fn": reward_fn,
                              "reward_timeout_s": cfg.rollout.reward_timeout_s, "generator": generator}
    eval_seed, n_eval = cfg.env.eval_seed, len(eval_tasks)
    runner = _runner(a, tasks, **common)
    eval_runner = _runner(a, eval_tasks, task_of=lambda seed: eval_tasks[((seed or eval_seed) - eval_seed) % n_eval],
                          **common)
    return AgentNativeStack(runner, eval_runner, target, proxy_address, own_proxy, server, servicer, proxy_client)
