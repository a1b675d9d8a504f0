"""Agent-native rollout: an agent works on a task in a sandbox; the ModelProxy's records are the trajectory.

One episode (``AgentNativeRunner.run``, the same shape as GEM mode's ``EpisodeRunner.run``, so the
RolloutScheduler drives either and filtering + resampling apply unchanged) is ale-rock's one agent
episode (``ale_rock.episode.run_episode``, the same code ``ale eval`` runs):

1. **setup** — a fresh sandbox from the ``SandboxProvider``, made as the task's ``[environment]``
   asks (work dir, env, CPUs, memory, egress allow-list, image: ``ale_rock.tasks.environment.sandbox_spec``,
   the same spec ``ale eval`` and ``ale-rock tasks run`` use, within the provider's ``SandboxPolicy``),
   with the task's files and setup script (``ale_rock.tasks.evaluate.setup_task``), labelled
   ``ale.state=<initial_state_id>``;
2. **open** — a ModelProxy episode bound to that sandbox, forwarding to our InferenceService;
3. **agent** — the :class:`~ale_roll.rollout.agents.AgentLauncher` runs the agent with the
   episode's OpenAI base URL and key, within its budget;
4. **close + records** — the key is revoked, then every call is read back with the exact prompt
   ids (the chat template applied once, by the InferenceService), completion ids, behaviour
   logprobs and policy version the engine produced;
5. **verify** — the task's hidden tests run in the same sandbox and give the reward;
6. the sandbox is deleted.

Every phase has a timeout. An episode the infrastructure spoiled ends as an *error* with its kind
(``ale_rock.episode.ErrorKind``: the sandbox lost, a model call the proxy or the InferenceService
failed, a record without token ids, no model call at all, a phase past its timeout, ...), never as
a reward of 0: the runner raises :class:`AgentEpisodeError` (``kind`` set), so the trajectory never
reaches the buffer or a group's statistics, and the scheduler resamples the same initial state on
a fresh sandbox (``max_attempts`` bounds it; every attempt's sandbox is deleted). The runner counts
errors by kind, resamples, and the time per phase (``AgentNativeTimes``: merged into the step's
metrics). An agent that ran out of its budget is not an error: its trajectory is marked
``truncated`` (the default ``TruncatedFilter`` rejects it).

**From records to turns** (:func:`records_to_turns`; token ids are never re-derived from text).
Each call k becomes one ``Turn`` with ``completion_ids``/``logprobs``/``policy_version``/
``stop_reason`` copied from the record. Its prompt is checked against the running context
``C_k = prompt_k + completion_k``:

- if ``prompt_{k+1}`` starts with ``C_k`` (the agent appended the tool results / user messages and
  the template rendered the assistant's reply to the very ids the engine sampled), the rest,
  ``prompt_{k+1}[len(C_k):]``, becomes turn k's ``observation_ids`` and turn k+1's ``prompt_ids``
  stays empty (implied) — the GEM-mode layout, flattened into one sequence for training;
- otherwise (the agent rewrote its context: compression, a changed system prompt, dropped or
  reformatted tool calls, or a chat template that renders the reply as different tokens) turn
  k+1 **starts a new segment**: it keeps its full ``prompt_ids`` and turn k keeps no observation
  ids. The trajectory is then not prefix-consistent and the trainer lays it out one row per turn
  (``types.flatten_turns``); nothing is spliced or guessed. ``metadata["segment_starts"]`` lists
  the turn index of every segment start (always ``[0, ...]``) and ``metadata["segments"]`` their
  count, so a run can monitor how often its agent breaks the prefix.

Interaction chunks (IPA) close at a turn that ends in a tool call (the proxy's ``tool_call`` stop
reason) or that has observation ids, so a segment break after a tool call still closes its chunk.
"""

from __future__ import annotations

import asyncio
import inspect
import statistics
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ale_roll.engines.base import SamplingParams
from ale_roll.rollout.agents import AgentContext, AgentLauncher
from ale_roll.rollout.episode import EpisodeTimes, RewardFn, env_reward
from ale_roll.types import StopReason, Trajectory, Turn

if TYPE_CHECKING:
    from ale_rock.sdk.model_proxy import ModelProxyClient

PHASES = ("setup", "open", "agent", "close", "records", "verify", "delete")


class AgentEpisodeError(RuntimeError):
    """An agent-native episode failed for infrastructure reasons (the scheduler resamples it).

    ``kind`` is an ``ale_rock.episode.ErrorKind`` value (``sandbox_lost``, ``model_unreachable``, ...).
    """

    def __init__(self, message: str, kind: str = "internal", sandbox_id: str = "") -> None:
        super().__init__(message)
        self.kind, self.sandbox_id = kind, sandbox_id


def records_to_turns(records: Sequence[Any]) -> tuple[list[Turn], list[int]]:
    """Turns from the proxy's call records, and the turn index where each segment starts.

    ``records`` are ``ale_rock.proxy.CallRecord``s (any objects with their fields), in any order.
    See the module docstring for the prefix-consistency rule. Raises :class:`AgentEpisodeError`
    on an error record or a record without token ids.
    """
    turns: list[Turn] = []
    starts: list[int] = []
    context: list[int] | None = None
    previous_messages = 0
    for rec in sorted(records, key=lambda r: r.index):
        if rec.error:
            raise AgentEpisodeError(f"model call {rec.index} failed at the proxy: {rec.error}", "model_error")
        prompt, completion = list(rec.prompt_token_ids), list(rec.completion_token_ids)
        if not prompt:
            raise AgentEpisodeError(f"model call {rec.index} has no token ids (the proxy's upstream must be "
                                    "the InferenceService for training)", "not_token_exact")
        turn = Turn(prompt_ids=[], completion_ids=completion, logprobs=list(rec.completion_logprobs),
                    policy_version=int(rec.policy_version), stop_reason=StopReason(rec.stop_reason or "stop"))
        messages = (rec.request or {}).get("messages") or []
        if context is not None and len(prompt) >= len(context) and prompt[:len(context)] == context:
            turns[-1].observation_ids = prompt[len(context):]
            # What the agent added since its last call (after echoing the assistant reply): for logs only.
            turns[-1].observation_text = "\n".join(str(m.get("content") or "") for m in messages[previous_messages + 1:]
                                                   if isinstance(m, dict))
        else:
            turn.prompt_ids = prompt
            starts.append(len(turns))
        turns.append(turn)
        context = prompt + completion
        previous_messages = len(messages)
    return turns, starts


def _task_of_seed(tasks: Sequence[Any]) -> Callable[[int | None], Any]:
    return lambda seed: tasks[(seed or 0) % len(tasks)]


@dataclass
class AgentNativeTimes(EpisodeTimes):
    """``EpisodeTimes`` plus what agent-native episodes add to the step's metrics: errors by kind,
    resampled attempts, and the median seconds per phase of the recent episodes."""

    errors: Counter[str] = field(default_factory=Counter)
    resampled: int = 0
    tool_calls: int = 0
    """Model calls of the scored episodes that ended in a tool call."""
    phases: dict[str, deque[float]] = field(default_factory=lambda: {p: deque(maxlen=1000) for p in PHASES})
    """Seconds per phase of the last 1000 episodes (errors included), for the p50s."""

    def phase_p50_s(self) -> dict[str, float]:
        """Median seconds per phase over the recent episodes (phases never reached are left out)."""
        return {p: statistics.median(v) for p, v in self.phases.items() if v}

    def take(self) -> dict[str, float]:
        out = super().take()
        out["agent_native/errors"] = float(sum(self.errors.values()))
        out.update({f"agent_native/errors/{k}": float(v) for k, v in sorted(self.errors.items())})
        out["agent_native/resampled"] = float(self.resampled)
        out["agent_native/tool_calls"] = float(self.tool_calls)
        out.update({f"agent_native/phase_p50_s/{k}": v for k, v in self.phase_p50_s().items()})
        self.errors, self.resampled, self.tool_calls = Counter(), 0, 0
        return out


def assistant_messages(records: Sequence[Any]) -> list[dict[str, Any]]:
    """The reply of every call (``content`` and ``tool_calls`` of the proxy's OpenAI response), in
    call order: what an agent replays to restart from this episode's first chunks (resampling)."""
    out = []
    for rec in sorted(records, key=lambda r: r.index):
        choices = (rec.response or {}).get("choices") or [{}]
        msg = choices[0].get("message") or {}
        out.append({"content": msg.get("content"), "tool_calls": list(msg.get("tool_calls") or [])})
    return out


def prefix_replies(expert: Trajectory, chunks: int) -> list[dict[str, Any]]:
    """The assistant messages of ``expert``'s first ``chunks`` interaction chunks (ValueError when the
    trajectory has no ``assistant_messages`` for its turns, or the prefix would be all of it)."""
    messages = expert.metadata.get("assistant_messages")
    if not isinstance(messages, list) or len(messages) != len(expert.turns):
        raise ValueError(f"expert {expert.metadata.get('task_id', expert.seed)!r}: agent-native resampling needs "
                         "metadata.assistant_messages, one per turn (trajectories of an agent-native runner)")
    if not 0 <= chunks < expert.num_chunks:
        raise ValueError(f"an expert prefix of {chunks} chunks leaves nothing to resample (K={expert.num_chunks})")
    chunk_of = expert.chunk_of_turn()
    return [m for m, c in zip(messages, chunk_of, strict=True) if c < chunks]


@dataclass
class _Launcher:
    """An ale-roll :class:`AgentLauncher` as ale-rock's episode ``Agent`` (the sampling params and
    any replayed prefix added)."""

    launcher: AgentLauncher
    params: SamplingParams
    prefill: tuple[dict[str, Any], ...] = ()

    def run(self, ctx: Any, cancel: Any) -> Any:
        return self.launcher.run(AgentContext(ctx.provider, ctx.sandbox_id, ctx.prompt, ctx.base_url, ctx.api_key,
                                              ctx.model, ctx.budget_s, self.params, self.prefill),
                                 cancel)  # an ale-rock AgentRun


@dataclass
class AgentNativeRunner:
    """Runs one agent-native episode per call (see the module docstring); drop-in for ``EpisodeRunner``."""

    tasks: Sequence[Any]
    """``ale_rock.tasks`` Tasks; initial state with seed s is ``tasks[s % len(tasks)]`` unless ``task_of`` is given."""
    agent: AgentLauncher
    provider: Any
    """``ale_rock.envs.sandbox.SandboxProvider`` (``SdkProvider`` for real sandboxes)."""
    proxy: ModelProxyClient
    """ale-rock's ``ModelProxyClient`` (``ale_rock.sdk.model_proxy``)."""
    inference_target: str
    """Address of the InferenceService the proxy forwards to (as the proxy reaches it)."""
    params: SamplingParams = field(default_factory=SamplingParams)
    model: str = "policy"
    """Model name the agent sees."""
    max_calls: int = 0
    """Model calls allowed per episode (0: unlimited); the proxy answers 429 beyond."""
    agent_budget_s: float | None = None
    """The agent's wall-clock budget; default: the task's ``limits.agent_s``."""
    setup_timeout_s: float = 120.0
    verify_timeout_s: float = 120.0
    agent_grace_s: float = 30.0
    """How long past its budget an agent may take to stop before the episode fails."""
    proxy_timeout_s: float = 30.0
    cleanup_timeout_s: float = 30.0
    reward_timeout_s: float = 60.0
    reward_fn: RewardFn = env_reward
    """Default: the task's test reward (``metadata["env_reward"]``)."""
    policy_version: Callable[[], int] | None = None
    """Version of the weights at the episode's start (e.g. ``lambda: engine.policy_version``); default: the first call's."""
    task_of: Callable[[int | None], Any] | None = None
    times: AgentNativeTimes = field(default_factory=AgentNativeTimes)
    _errored_states: set[str] = field(default_factory=set, repr=False)

    def _timeouts(self) -> Any:
        from ale_rock.episode import EpisodeTimeouts

        return EpisodeTimeouts(setup_s=self.setup_timeout_s, open_s=self.proxy_timeout_s,
                               agent_grace_s=self.agent_grace_s, close_s=self.proxy_timeout_s,
                               records_s=self.proxy_timeout_s, verify_s=self.verify_timeout_s,
                               cleanup_s=self.cleanup_timeout_s)

    def task_for(self, seed: int | None) -> Any:
        """The task initial state ``seed`` plays."""
        return (self.task_of or _task_of_seed(self.tasks))(seed)

    async def run(self, *, seed: int | None, initial_state_id: str, group_id: str = "",
                  episode_id: str | None = None, params: SamplingParams | None = None,
                  prefix: Trajectory | None = None, prefix_chunks: int = 0) -> Trajectory:
        """Run one episode and return its trajectory; raises :class:`AgentEpisodeError` on an error.

        With ``prefix`` (an expert episode on the same task, from an agent-native runner) the agent
        first replays the replies of its first ``prefix_chunks`` chunks — their tool calls run in
        this episode's fresh sandbox, so a deterministic task is where the expert left it — and the
        policy plays on from there (chunk-level resampling). The replayed replies never reach the
        proxy: they are context in the first recorded prompt, not trained on."""
        from ale_rock.episode import arun_episode

        params = params or self.params
        task = self.task_for(seed)
        prefill = tuple(prefix_replies(prefix, prefix_chunks)) if prefix is not None and prefix_chunks > 0 else ()
        start_version = self.policy_version() if self.policy_version is not None else None
        if initial_state_id in self._errored_states:
            self.times.resampled += 1
        # Resampling reuses the frontier's episode id: every attempt needs its own proxy episode.
        attempt = f"{episode_id or 'ep'}-{uuid.uuid4().hex[:8]}"
        out = await arun_episode(
            task, _Launcher(self.agent, params, prefill), provider=self.provider, proxy=self.proxy, upstream="inference",
            target=self.inference_target, model=self.model, max_calls=self.max_calls, budget_s=self.agent_budget_s,
            episode_id=attempt, labels={"ale.state": initial_state_id}, timeouts=self._timeouts(),
            require_token_ids=True)
        for phase, seconds in out.phase_s.items():
            self.times.phases.setdefault(phase, deque(maxlen=1000)).append(seconds)
        try:
            if out.is_error:
                raise AgentEpisodeError(f"agent-native {out.error_kind.value if out.error_kind else 'error'} in "
                                        f"{out.phase}: {out.error}", out.error_kind.value if out.error_kind else
                                        "internal", out.sandbox_id)
            turns, starts = records_to_turns(out.records)
            if not turns:
                raise AgentEpisodeError(f"the agent made no model call: {out.agent.output[-300:] if out.agent else ''}",
                                        "agent_failed", out.sandbox_id)
        except AgentEpisodeError as e:
            self.times.errors[e.kind] += 1
            self._errored_states.add(initial_state_id)
            raise
        self._errored_states.discard(initial_state_id)
        agent = out.agent
        assert agent is not None  # a scored episode ran its agent
        verify_s = out.phase_s.get("verify", 0.0)
        self.times.generate += out.model_s
        self.times.env += max(0.0, out.wall_s - verify_s - out.model_s)
        self.times.tokens += sum(len(t.completion_ids) for t in turns)
        self.times.tool_calls += sum(t.stop_reason == StopReason.TOOL_CALL for t in turns)
        info = {"tests": [{"name": t["name"], "passed": t["passed"]} for t in out.tests], "success": out.success,
                "metrics": dict(out.metrics)}
        traj = Trajectory(
            turns=turns, initial_state_id=initial_state_id, seed=seed, group_id=group_id,
            policy_version=start_version,
            metadata={"env_reward": float(out.reward), "success": out.success, "task_id": task.id,
                      "sandbox_id": out.sandbox_id, "proxy_episode": attempt,
                      "truncated": agent.timed_out, "agent_exit_code": agent.exit_code,
                      "agent_stop_reason": agent.stop_reason, "calls": len(out.records), "segments": len(starts),
                      "segment_starts": starts, "agent_s": out.phase_s.get("agent", 0.0),
                      "tests_timed_out": out.tests_timed_out, "phase_s": dict(out.phase_s),
                      "reward_metrics": dict(out.metrics), "assistant_messages": assistant_messages(out.records),
                      "safety_events": len(out.safety_events)})
        if prefill:
            traj.metadata["prefilled_chunks"] = prefix_chunks
        if episode_id is not None:
            traj.episode_id = episode_id
        t_reward = time.perf_counter()
        value = self.reward_fn(traj, info)
        if inspect.isawaitable(value):
            value = await asyncio.wait_for(value, self.reward_timeout_s)
        traj.reward = float(value)
        self.times.reward += verify_s + time.perf_counter() - t_reward
        self.times.episodes += 1
        return traj
