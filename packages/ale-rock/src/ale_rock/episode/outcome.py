"""What an agent episode ends as: a score (success or failure, with its reward) or an error.

An **error** is an episode the infrastructure spoiled: its model calls, its sandbox, its task setup,
its verifier or one of its phases failed for reasons that say nothing about the agent. It has no
reward. Evaluation reports errors apart from failures; training never puts one into a group's
statistics (it resamples the same initial state on a fresh sandbox instead).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ale_rock.proxy.records import CallRecord


class Status(str, Enum):
    """How an episode ended."""

    SUCCESS = "success"
    """The hidden tests passed."""
    FAILURE = "failure"
    """The tests ran and did not pass (the agent's doing, including running out of its budget)."""
    ERROR = "error"
    """The infrastructure failed; there is no score (see :class:`ErrorKind`)."""


class ErrorKind(str, Enum):
    """Why an episode is an error (its taxonomy)."""

    MODEL_UNREACHABLE = "model_unreachable"
    """The upstream model could not be reached (connection refused, InferenceService down, 5xx after retries)."""
    MODEL_UNAUTHORIZED = "model_unauthorized"
    """The upstream refused the proxy's credentials (401 / 403)."""
    MODEL_ERROR = "model_error"
    """Any other upstream failure (unknown model, a 4xx the agent did not cause)."""
    PROXY_FAILED = "proxy_failed"
    """The ModelProxy's control service failed (open, close or reading the records)."""
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    """No sandbox could be created (the admin is down, a quota, a start failure)."""
    SANDBOX_LOST = "sandbox_lost"
    """The sandbox died under the episode."""
    SETUP_FAILED = "setup_failed"
    """The task's setup (files, setup script) failed."""
    AGENT_FAILED = "agent_failed"
    """The agent never called the model (it could not start, or crashed first)."""
    VERIFIER_FAILED = "verifier_failed"
    """The hidden tests could not run or give a result."""
    NOT_TOKEN_EXACT = "not_token_exact"
    """A recorded call has no token ids (training needs the InferenceService upstream)."""
    TIMEOUT = "timeout"
    """A phase ran past its timeout (``EpisodeOutcome.phase`` names it)."""
    CANCELLED = "cancelled"
    """The caller gave up on the episode."""
    INTERNAL = "internal"
    """An unexpected exception (a bug)."""


class EpisodeError(RuntimeError):
    """An infrastructure failure of one phase; ``kind`` classifies it."""

    def __init__(self, kind: ErrorKind, message: str, phase: str = "") -> None:
        super().__init__(f"{kind.value}{f' in {phase}' if phase else ''}: {message}")
        self.kind, self.message, self.phase = kind, message, phase


@dataclass(frozen=True)
class AgentRun:
    """How an agent run ended (what an :class:`~ale_rock.episode.agents.Agent` returns)."""

    exit_code: int
    """0 for a normal end; the process exit code for a command agent."""
    output: str = ""
    timed_out: bool = False
    """The budget ran out (a failure of the agent, not an error)."""
    stop_reason: str = ""
    """The agent's own stop reason where it has one (ale-flow: completed, max_steps, model_error, ...)."""
    model_failed: bool = False
    """The agent gave up because its model calls failed (classified from the records, or model_unreachable)."""


@dataclass
class EpisodeOutcome:
    """Everything an agent episode produced; ``status`` says whether ``reward`` means anything."""

    episode_id: str
    status: Status
    reward: float = 0.0
    """The tests' reward; 0.0 and meaningless for an error."""
    error_kind: ErrorKind | None = None
    error: str = ""
    """What failed, for people (set for an error)."""
    phase: str = ""
    """The phase an error happened in (setup, open, agent, close, records, verify)."""
    task_id: str = ""
    sandbox_id: str = ""
    tests: list[dict[str, Any]] = field(default_factory=list)
    """Per test: name, passed, output."""
    tests_timed_out: bool = False
    metrics: dict[str, float] = field(default_factory=dict)
    """Every number a reward file gave (Harbor ``reward.json``), where the task has one."""
    records: list[CallRecord] = field(default_factory=list)
    """Every model call, in order, with exact token ids (empty if the records could not be read)."""
    agent: AgentRun | None = None
    safety_events: list[dict[str, Any]] = field(default_factory=list)
    """Safety events the sandbox reported during the episode (blocked egress, limits hit, ...)."""
    phase_s: dict[str, float] = field(default_factory=dict)
    """Seconds spent per phase: setup, open, agent, close, records, verify, delete."""
    wall_s: float = 0.0
    cleanup_error: str = ""
    """Set when closing the proxy episode or deleting the sandbox failed (the outcome is unchanged)."""

    @property
    def success(self) -> bool:
        return self.status is Status.SUCCESS

    @property
    def is_error(self) -> bool:
        return self.status is Status.ERROR

    @property
    def model_s(self) -> float:
        """Seconds the upstream spent on this episode's calls (the rest of ``wall_s`` is overhead)."""
        return sum(float(r.latency_s) for r in self.records)
