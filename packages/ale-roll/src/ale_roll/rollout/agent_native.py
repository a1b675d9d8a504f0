"""Agent-native rollout: an agent works on a task in a sandbox; the ModelProxy's records are the trajectory.

One episode (``AgentNativeRunner.run``, the same shape as GEM mode's ``EpisodeRunner.run``, so the
RolloutScheduler drives either and filtering + resampling apply unchanged):

1. **setup** — a fresh sandbox from the ``SandboxProvider`` with the task's files and setup script
   (``ale_rock.tasks.evaluate.setup_task``), labelled ``ale.state=<initial_state_id>``;
2. **open** — a ModelProxy episode bound to that sandbox, forwarding to our InferenceService;
3. **agent** — the :class:`~ale_roll.rollout.agents.AgentLauncher` runs the agent with the
   episode's OpenAI base URL and key, within its budget;
4. **close + records** — the key is revoked, then every call is read back with the exact prompt
   ids (the chat template applied once, by the InferenceService), completion ids, behaviour
   logprobs and policy version the engine produced;
5. **verify** — the task's hidden tests run in the same sandbox and give the reward;
6. the sandbox is deleted.

Every phase has a timeout. Infrastructure failures raise :class:`AgentEpisodeError` (or the
``SandboxLost`` / ``ProxyError`` underneath) so the scheduler filters the attempt and resamples the
same initial state: the sandbox died (setup or tests cannot run), a model call failed at the proxy
or the InferenceService (an error record), a record lacks token ids (a non-token-exact upstream),
the agent made no model call, or a phase timed out. An agent that ran out of its budget is not
an error: its trajectory is marked ``truncated`` (the default ``TruncatedFilter`` rejects it).

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
import contextlib
import inspect
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ale_roll.engines.base import SamplingParams
from ale_roll.rollout.agents import AgentContext, AgentLauncher, AgentRun
from ale_roll.rollout.episode import EpisodeTimes, RewardFn, env_reward
from ale_roll.rollout.proxy_client import ModelProxyClient
from ale_roll.types import StopReason, Trajectory, Turn


class AgentEpisodeError(RuntimeError):
    """An agent-native episode failed for infrastructure reasons (the scheduler resamples it)."""


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
            raise AgentEpisodeError(f"model call {rec.index} failed at the proxy: {rec.error}")
        prompt, completion = list(rec.prompt_token_ids), list(rec.completion_token_ids)
        if not prompt:
            raise AgentEpisodeError(f"model call {rec.index} has no token ids (the proxy's upstream must be "
                                    "the InferenceService for training)")
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
class AgentNativeRunner:
    """Runs one agent-native episode per call (see the module docstring); drop-in for ``EpisodeRunner``."""

    tasks: Sequence[Any]
    """``ale_rock.tasks`` Tasks; initial state with seed s is ``tasks[s % len(tasks)]`` unless ``task_of`` is given."""
    agent: AgentLauncher
    provider: Any
    """``ale_rock.envs.sandbox.SandboxProvider`` (``SdkProvider`` for real sandboxes)."""
    proxy: ModelProxyClient
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
    times: EpisodeTimes = field(default_factory=EpisodeTimes)

    async def _phase(self, name: str, timeout_s: float, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn, *args), timeout_s)
        except asyncio.TimeoutError:
            raise AgentEpisodeError(f"agent-native {name} exceeded {timeout_s:g}s") from None

    async def run(self, *, seed: int | None, initial_state_id: str, group_id: str = "",
                  episode_id: str | None = None, params: SamplingParams | None = None) -> Trajectory:
        """Run one episode and return its trajectory (raises on infrastructure failure)."""
        from ale_rock.envs.sandbox import ProviderRunner
        from ale_rock.tasks.evaluate import run_tests, setup_task

        params = params or self.params
        task = (self.task_of or _task_of_seed(self.tasks))(seed)
        start_version = self.policy_version() if self.policy_version is not None else None
        # Resampling reuses the frontier's episode id: every attempt needs its own proxy episode.
        attempt = f"{episode_id or 'ep'}-{uuid.uuid4().hex[:8]}"
        runner = ProviderRunner(self.provider, {"ale.state": initial_state_id, "ale.episode": attempt})
        budget = float(self.agent_budget_s or task.spec.limits.agent_s)
        cancel = threading.Event()
        opened = False
        t0 = time.perf_counter()
        try:
            await self._phase("setup", self.setup_timeout_s, setup_task, task, runner)
            sandbox_id = runner.sandbox_id
            ep = await self._phase("open", self.proxy_timeout_s, lambda: self.proxy.open_episode(
                attempt, sandbox_id=runner.sandbox_id, inference_target=self.inference_target, model=self.model,
                max_calls=self.max_calls))
            opened = True
            ctx = AgentContext(self.provider, runner.sandbox_id, task.spec.prompt, ep.base_url, ep.api_key,
                               self.model, budget, params)
            t_agent = time.perf_counter()
            outcome: AgentRun = await self._phase("agent", budget + self.agent_grace_s, self.agent.run, ctx, cancel)
            agent_s = time.perf_counter() - t_agent
            await self._phase("close", self.proxy_timeout_s, self.proxy.close_episode, attempt)
            opened = False
            records = await self._phase("records", self.proxy_timeout_s, self.proxy.records, attempt)
            if outcome.model_failed:
                raise AgentEpisodeError(f"the agent's model calls failed: {outcome.output[-300:]}")
            turns, starts = records_to_turns(records)
            if not turns:
                raise AgentEpisodeError(f"the agent made no model call (exit {outcome.exit_code}): {outcome.output[-300:]}")
            t_verify = time.perf_counter()
            report = await self._phase("verify", self.verify_timeout_s, run_tests, task, runner)
            verify_s = time.perf_counter() - t_verify
        finally:
            cancel.set()
            await self._cleanup(runner, attempt if opened else None)
        generate_s = sum(float(r.latency_s) for r in records)
        self.times.generate += generate_s
        self.times.env += max(0.0, time.perf_counter() - t0 - verify_s - generate_s)
        self.times.tokens += sum(len(t.completion_ids) for t in turns)
        info = {"tests": [{"name": t.name, "passed": t.passed} for t in report.tests], "success": report.passed}
        traj = Trajectory(
            turns=turns, initial_state_id=initial_state_id, seed=seed, group_id=group_id,
            policy_version=start_version,
            metadata={"env_reward": float(report.reward), "success": bool(report.passed), "task_id": task.id,
                      "sandbox_id": sandbox_id, "proxy_episode": attempt,
                      "truncated": outcome.timed_out, "agent_exit_code": outcome.exit_code,
                      "agent_stop_reason": outcome.stop_reason, "calls": len(records), "segments": len(starts),
                      "segment_starts": starts, "agent_s": agent_s, "tests_timed_out": report.timed_out})
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

    async def _cleanup(self, runner: Any, open_episode: str | None) -> None:
        def close() -> None:
            if open_episode is not None:
                with contextlib.suppress(Exception):  # the key must die, but a dead proxy cannot be helped
                    self.proxy.close_episode(open_episode)
            with contextlib.suppress(Exception):  # a sandbox that died is already gone
                runner.close()

        # Shielded: a cancelled episode (scheduler stop) still frees its sandbox.
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.shield(asyncio.wait_for(asyncio.to_thread(close), self.cleanup_timeout_s))
