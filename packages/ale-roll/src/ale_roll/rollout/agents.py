"""Agents for agent-native rollout: what runs against a task once its sandbox is set up.

An :class:`AgentLauncher` gets the sandbox, the task prompt and the proxy episode's OpenAI
credentials, runs an agent to its end (or its budget) and reports how it ended. It never sees
token ids: the ModelProxy records them. Two launchers:

- :class:`CommandAgent` — an unmodified agent as a shell command *inside* the sandbox
  (``ale-flow -p ...``, a stdlib script, any other harness); it reads ``OPENAI_BASE_URL`` /
  ``OPENAI_API_KEY`` / ``OPENAI_MODEL`` and ``ALE_TASK_PROMPT``.
- :class:`FlowAgent` — ale-flow's agent loop in this process, its tools executing in the sandbox
  through ale-flow's ``SandboxWorkspace`` (needs an ale-rock ``SdkProvider``: a real sandbox).

Both run through ale-rock's episode machinery: :class:`AgentRun` *is* ``ale_rock.episode.AgentRun``
and :class:`CommandAgent` hands its command to ale-rock's ``CommandAgent``. ale-flow is imported
lazily; this module needs ale-rock (``pip install 'ale-roll[agent]'``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ale_rock.episode import agents as rock_agents
from ale_rock.episode.outcome import AgentRun

from ale_roll.engines.base import SamplingParams

__all__ = ["AgentContext", "AgentLauncher", "AgentRun", "CommandAgent", "FlowAgent"]


@dataclass(frozen=True)
class AgentContext:
    """Everything a launcher needs for one episode."""

    provider: Any
    """The ``ale_rock.envs.sandbox.SandboxProvider`` that owns the sandbox."""
    sandbox_id: str
    prompt: str
    """The task's prompt."""
    base_url: str
    """OpenAI base URL of the proxy episode (ends in /v1)."""
    api_key: str
    model: str
    budget_s: float
    params: SamplingParams
    """Sampling the trainer asks for (temperature, max_tokens per call); agents that choose their own may ignore it."""
    prefill: tuple[Mapping[str, Any], ...] = ()
    """Assistant messages (OpenAI form: ``content``, ``tool_calls``) the agent takes as its first model
    replies without calling the model — chunk-level resampling's expert prefix: their tool calls run
    in the sandbox as the expert's did, and the policy continues from there. Launchers that cannot
    replay them raise."""


class AgentLauncher(Protocol):
    """Runs one agent on one set-up sandbox (blocking; the runner calls it on a thread)."""

    def run(self, ctx: AgentContext, cancel: threading.Event) -> AgentRun:
        """Run to the agent's end, the budget, or ``cancel`` (set when the runner gives up)."""
        ...


@dataclass
class CommandAgent:
    """An unmodified agent: ``command`` runs in the sandbox's work dir with the OpenAI settings exported."""

    command: str
    files: Mapping[str, bytes] = field(default_factory=dict)
    """Written into the work dir before the command runs (the agent's code, its config)."""

    def run(self, ctx: AgentContext, cancel: threading.Event) -> AgentRun:
        if ctx.prefill:  # the agent is a process we do not drive: its replies cannot be scripted
            raise ValueError("CommandAgent cannot replay an expert prefix (chunk-level resampling needs agent.kind=flow)")
        # ale-rock's CommandAgent runs it; the sampling params go as ALE_TEMPERATURE / ALE_MAX_TOKENS.
        sampling = {"ALE_TEMPERATURE": str(ctx.params.temperature), "ALE_MAX_TOKENS": str(ctx.params.max_tokens)}
        rock_ctx = rock_agents.AgentContext(ctx.provider, ctx.sandbox_id, ctx.prompt, ctx.base_url, ctx.api_key,
                                            ctx.model, ctx.budget_s, sampling)
        return rock_agents.CommandAgent(self.command, self.files).run(rock_ctx, cancel)


_FLOW_LIMIT_STOPS = {"max_steps", "max_tokens", "max_cost", "time_limit"}


def replay_response(message: Mapping[str, Any]) -> Any:
    """An ale-flow ``ModelResponse`` from an OpenAI assistant message (a proxy record's reply);
    ValueError when a tool call's arguments are not a JSON object."""
    from ale_flow.types import ModelResponse, ToolCall

    calls = []
    for i, tc in enumerate(message.get("tool_calls") or []):
        fn = tc.get("function") or {}
        args = fn.get("arguments") or {}
        if isinstance(args, str):
            args = json.loads(args or "{}")
        if not isinstance(args, dict):
            raise ValueError(f"tool call {i} of a replayed message: arguments are not a JSON object")
        calls.append(ToolCall(str(tc.get("id") or f"replay_{i}"), str(fn.get("name", "")), args))
    return ModelResponse(str(message.get("content") or ""), calls, finish_reason="tool_calls" if calls else "stop")


class PrefilledModel:
    """An ale-flow ``Model`` whose first replies are given (``replies``, OpenAI assistant messages),
    then ``model``'s: the loop executes the given replies' tool calls as if the model had made them.
    Everything else (``context_window``, ``native_tools``, ``close``) is ``model``'s."""

    def __init__(self, model: Any, replies: Sequence[Mapping[str, Any]]) -> None:
        self.model = model
        self.pending = [replay_response(m) for m in replies]
        self.replayed = 0

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if self.pending:
            self.replayed += 1
            return self.pending.pop(0)
        return self.model.complete(messages, tools)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


@dataclass
class FlowAgent:
    """ale-flow's agent loop (this process) with its tools in the sandbox and its model at the proxy.

    ``settings`` is an ale-flow ``Settings`` (or a dict of its fields); the defaults run in yolo
    mode with only the ``shell`` tool, native tool calls and no retries of model calls (a failing
    proxy must fail the episode, not stall it). The model's temperature and per-call max_tokens
    come from the trainer's sampling params.
    """

    settings: Mapping[str, Any] | Any = field(default_factory=dict)
    workdir: str = ""
    """Sandbox work dir; default: the provider's ``workdir``."""

    def _settings(self, ctx: AgentContext) -> Any:
        from ale_flow.settings import Settings
        from ale_proto.config import deep_merge

        base: dict[str, Any] = {"mode": "yolo", "tools": {"enabled": ["shell"]},
                                "model": {"native_tools": True, "max_retries": 0}}
        given = self.settings if isinstance(self.settings, Mapping) else self.settings.model_dump(exclude_unset=True)
        merged = deep_merge(base, given)
        merged.setdefault("limits", {})["time_limit_s"] = ctx.budget_s
        return Settings.model_validate(merged)

    def _workspace(self, ctx: AgentContext) -> Any:
        from ale_flow.sandbox_workspace import SandboxWorkspace

        client = getattr(ctx.provider, "client", None)
        if client is None:
            raise TypeError("FlowAgent needs sandboxes from the ale-rock Admin (ale_rock.envs.sandbox.SdkProvider); "
                            "use CommandAgent with other providers")
        root = self.workdir or getattr(ctx.provider, "workdir", "/workspace")
        return SandboxWorkspace.connect(ctx.sandbox_id, root=root, client=client)

    def run(self, ctx: AgentContext, cancel: threading.Event) -> AgentRun:
        from ale_flow.agent import Agent
        from ale_flow.models.openai import OpenAIConfig, OpenAIModel

        settings = self._settings(ctx)
        model = OpenAIModel(OpenAIConfig(
            base_url=ctx.base_url, model=ctx.model, api_key=ctx.api_key, native_tools=settings.model.native_tools,
            temperature=ctx.params.temperature, max_tokens=ctx.params.max_tokens, max_retries=settings.model.max_retries,
            timeout_s=ctx.budget_s, context_window=settings.model.context_window))
        # Replayed expert replies (resampling's prefix) come first; the proxy sees only the policy's calls.
        loop_model: Any = PrefilledModel(model, ctx.prefill) if ctx.prefill else model
        agent = Agent(loop_model, self._workspace(ctx), settings, record=False, allow_subagents=False)
        finished = threading.Event()

        def watch() -> None:  # the runner gave up on the episode: stop the loop and kill its command
            cancel.wait()
            if not finished.is_set():
                agent.interrupt()

        threading.Thread(target=watch, daemon=True, name="flow-agent-cancel").start()
        try:
            stopped = agent.run_to_end(ctx.prompt)
        finally:
            finished.set()
            cancel.set()  # releases the watcher
            agent.close()
            model.close()
        reason = stopped.reason.value
        return AgentRun(0, stopped.final_message, reason in _FLOW_LIMIT_STOPS or reason == "interrupted", reason,
                        model_failed=reason == "model_error")
