"""What runs in an episode's agent phase: an :class:`Agent` gets the set-up sandbox, the task's
prompt and the proxy episode's OpenAI credentials, runs to its end (or its budget, or ``cancel``)
and says how it ended. It never sees token ids: the ModelProxy records them.

:class:`CommandAgent` runs an unmodified agent as a shell command inside the sandbox. Other agents
(ale-flow's loop in the caller's process, ale-roll's launchers) implement the same Protocol.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ale_rock.episode.outcome import AgentRun


@dataclass(frozen=True)
class AgentContext:
    """Everything an agent needs for one episode."""

    provider: Any
    """The ``SandboxProvider`` that owns the sandbox (its ``exec`` records safety events)."""
    sandbox_id: str
    prompt: str
    """The task's instruction."""
    base_url: str
    """OpenAI base URL of the proxy episode (ends in /v1)."""
    api_key: str
    model: str
    budget_s: float
    """Wall-clock budget of the agent; running out is the agent's failure, not an error."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for agents that take it (sampling settings, ...)."""

    def openai_env(self) -> dict[str, str]:
        """The variables an OpenAI client reads, plus ``ALE_TASK_PROMPT`` and ``env``."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": self.api_key, "OPENAI_MODEL": self.model,
                "ALE_TASK_PROMPT": self.prompt, **self.env}  # fmt: skip


class Agent(Protocol):
    """Runs one agent on one set-up sandbox (blocking; the episode calls it on a thread)."""

    def run(self, ctx: AgentContext, cancel: threading.Event) -> AgentRun:
        """Run to the agent's end, the budget, or ``cancel`` (set when the episode gives up)."""
        ...


@dataclass
class CommandAgent:
    """An unmodified agent: ``command`` runs in the sandbox's work dir with :meth:`AgentContext.openai_env` exported."""

    command: str
    files: Mapping[str, bytes] = field(default_factory=dict)
    """Written into the work dir before the command runs (the agent's code, its config)."""

    def run(self, ctx: AgentContext, cancel: threading.Event) -> AgentRun:
        if self.files:
            ctx.provider.upload(ctx.sandbox_id, dict(self.files))
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in ctx.openai_env().items())
        # The sandbox enforces the budget: the command is killed when it runs out.
        out = ctx.provider.exec(ctx.sandbox_id, f"export {exports}; {self.command}", ctx.budget_s)
        return AgentRun(out.exit_code, out.output, out.timed_out)
