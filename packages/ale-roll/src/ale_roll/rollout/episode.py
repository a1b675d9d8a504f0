"""One GEM-mode episode, pipelined on its own: generate → env step → … → reward.

Environments are any object with gem's API (`reset(seed) -> (obs, info)`,
`step(action) -> (obs, reward, terminated, truncated, info)`, `close()`): an in-process
`ale_rock.envs` game or the EnvService client (`ale_rock.envs.make(id, address=...)`). Env calls
run on threads (a slow step never blocks the other episodes) and each has a timeout; any failure
raises, and the scheduler's filtering resamples the same initial state. An env that also has
`areset` / `astep` / `aclose` (the batched EnvService client) is awaited directly instead, with
the same timeout.

`run_batch(specs)` plays many episodes of in-process envs (``env_threads=False``) in lock-step: one
`generate_many` per turn for every episode still running instead of one request (future, timer,
thread wake-up) per episode, env calls inline, no task per episode. It is the synchronous
(async ratio 0) rollout's path: a 256-episode step then costs a few batched engine calls plus the
envs' own work, which is what a second torch thread can speed up. Other envs (threads, the
EnvService) keep the pipelined per-episode path, which `run_batch` falls back to.

Agent-native mode (an agent in a sandbox; the ModelProxy's token records become the trajectory)
is `ale_roll.rollout.agent_native.AgentNativeRunner`: the same `run(...)` shape, so the scheduler
drives either.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ale_roll.engines.base import Generation, SamplingParams
from ale_roll.rollout.formatting import ChatFormat
from ale_roll.rollout.generation import Generator
from ale_roll.types import Trajectory, Turn


class EnvTimeout(TimeoutError):
    """An environment call exceeded its timeout."""


class GemEnv(Protocol):
    """gem's environment API as the rollout uses it."""

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]: ...

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncGemEnv(Protocol):
    """gem's API with awaitable calls (``areset`` / ``astep`` / ``aclose``); the runner prefers
    these when an env has them, e.g. ``ale_rock.envs.batch_client.BatchedRemoteEnv``."""

    async def areset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]: ...

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]: ...

    async def aclose(self) -> None: ...


_ASYNC_ENV_TYPES: dict[type, bool] = {}


def _is_async_env(env: Any) -> bool:
    """`isinstance(env, AsyncGemEnv)`, remembered per class: a runtime-checkable Protocol's check
    walks the Protocol's attributes on every call (~9 µs on Python 3.11, on the event loop, once per
    episode), 100x the dict lookup."""
    known = _ASYNC_ENV_TYPES.get(type(env))
    if known is None:
        known = _ASYNC_ENV_TYPES[type(env)] = isinstance(env, AsyncGemEnv)
    return known


@runtime_checkable
class BatchGenerator(Protocol):
    """A generator that takes many prompts in one request (they land in one engine call)."""

    async def generate_many(self, prompts: Sequence[list[int]], params: SamplingParams) -> list[Generation]: ...


async def generate_many(generator: Generator, prompts: Sequence[list[int]],
                        params: SamplingParams) -> list[Generation | BaseException]:
    """One completion per prompt: one batched request where the generator has `generate_many`, else
    concurrent `generate` calls; a failed request is its exception in the list (the others stand)."""
    if isinstance(generator, BatchGenerator):
        try:
            return list(await generator.generate_many(prompts, params))
        except Exception as exc:  # the engine call failed: every request of it did
            return [exc] * len(prompts)
    out = await asyncio.gather(*(generator.generate(p, params) for p in prompts), return_exceptions=True)
    for r in out:  # a cancellation is not a failed request: it ends the batch
        if isinstance(r, BaseException) and not isinstance(r, Exception):
            raise r
    return list(out)


@dataclass(frozen=True)
class EpisodeSpec:
    """What `EpisodeRunner.run_batch` needs of one episode (the keywords of `run`)."""

    seed: int | None
    initial_state_id: str
    group_id: str = ""
    episode_id: str | None = None


class RewardFn(Protocol):
    """Final reward of a finished trajectory; may be sync or async (rule, test run, reward model)."""

    def __call__(self, traj: Trajectory, info: dict[str, Any]) -> Any: ...


def env_reward(traj: Trajectory, info: dict[str, Any]) -> float:
    """The default reward: the sum of the environment's step rewards."""
    return float(traj.metadata.get("env_reward", 0.0))


def load_reward_fn(spec: str) -> RewardFn:
    """`env` or `package.module:function`."""
    if spec == "env":
        return env_reward
    module, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"reward_fn {spec!r} must be 'env' or 'module:function'")
    fn: RewardFn = getattr(importlib.import_module(module), name)
    return fn


@dataclass
class EpisodeTimes:
    """Seconds spent per phase, summed over episodes (the time split in the metrics)."""

    generate: float = 0.0
    env: float = 0.0
    reward: float = 0.0
    episodes: int = 0
    tokens: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    def take(self) -> dict[str, float]:
        """Return and reset the counters."""
        out = {"time/generate_s": self.generate, "time/env_s": self.env, "time/reward_s": self.reward,
               "rollout/episodes": float(self.episodes), "rollout/tokens": float(self.tokens)}
        self.generate = self.env = self.reward = 0.0
        self.episodes = self.tokens = 0
        return out


@dataclass
class EpisodeRunner:
    """Runs one episode for a (seed, ids) spec with a fresh environment; see the module docstring."""

    env_factory: Callable[[], GemEnv]
    generator: Generator
    fmt: ChatFormat
    params: SamplingParams
    max_turns: int
    env_timeout_s: float = 60.0
    reward_timeout_s: float = 60.0
    reward_fn: RewardFn = env_reward
    times: EpisodeTimes = field(default_factory=EpisodeTimes)
    env_threads: bool = True
    """False calls the env inline on the event loop: no thread hop and no timeout, for cheap in-process
    games where the hop costs more than the step (hundreds of episodes per training step)."""

    async def _env_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter()
        if not self.env_threads:
            try:
                return fn(*args)
            finally:
                self.times.env += time.perf_counter() - t0
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn, *args), self.env_timeout_s)
        except asyncio.TimeoutError:
            raise EnvTimeout(f"{getattr(fn, '__name__', 'env call')} exceeded {self.env_timeout_s}s") from None
        finally:
            self.times.env += time.perf_counter() - t0

    async def _env_acall(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        # An async env (e.g. the batched EnvService client) is awaited on the loop: no thread hop.
        t0 = time.perf_counter()
        try:
            return await asyncio.wait_for(fn(*args), self.env_timeout_s)
        except asyncio.TimeoutError:
            raise EnvTimeout(f"{getattr(fn, '__name__', 'env call')} exceeded {self.env_timeout_s}s") from None
        finally:
            self.times.env += time.perf_counter() - t0

    async def run(self, *, seed: int | None, initial_state_id: str, group_id: str = "",
                  episode_id: str | None = None, params: SamplingParams | None = None,
                  prefix: Trajectory | None = None, prefix_chunks: int = 0) -> Trajectory:
        """Play one episode to the end and return its trajectory (raises on infrastructure failure).

        With `prefix` (an expert trajectory on the same seed) its first `prefix_chunks` chunks are
        replayed into the environment first (chunk-level resampling, Eq. 10): their tokens become the
        first generated turn's prompt (context, no loss) and the policy plays the rest."""
        params = params or self.params
        version = self.generator.policy_version
        env = await self._env_call(self.env_factory)
        is_async = _is_async_env(env)
        try:
            if is_async:
                obs, info = await self._env_acall(env.areset, seed)
            else:
                obs, info = await self._env_call(env.reset, seed)
            context = self.fmt.initial(obs)
            turns: list[Turn] = []
            total, done, truncated_by_env = 0.0, False, False
            replayed = 0
            if prefix is not None and prefix_chunks > 0:
                chunk_of = prefix.chunk_of_turn()
                for turn_k, expert in enumerate(prefix.turns):
                    if chunk_of[turn_k] >= prefix_chunks:
                        break
                    action = self.fmt.action_text(expert.completion_ids)
                    obs, reward, terminated, truncated, info = await (
                        self._env_acall(env.astep, action) if is_async else self._env_call(env.step, action))
                    total += float(reward)
                    replayed += 1
                    if terminated or truncated:  # the prefix must leave something to resample
                        raise ValueError(f"expert prefix of {prefix_chunks} chunks ends the episode (seed {seed})")
                    context = context + list(expert.completion_ids) + self.fmt.observation(obs)
            for k in range(self.max_turns - replayed):
                t0 = time.perf_counter()
                gen = await self.generator.generate(context, params)
                self.times.generate += time.perf_counter() - t0
                self.times.tokens += len(gen.token_ids)
                turn = Turn(prompt_ids=list(context) if k == 0 else [], completion_ids=list(gen.token_ids),
                            logprobs=list(gen.logprobs), policy_version=gen.policy_version,
                            stop_reason=gen.stop_reason)
                turns.append(turn)
                action = self.fmt.action_text(gen.token_ids)
                obs, reward, terminated, truncated, info = await (
                    self._env_acall(env.astep, action) if is_async else self._env_call(env.step, action))
                total += float(reward)
                turn.error = bool(info.get("invalid_action") or info.get("tool_error"))
                if terminated or truncated:
                    done, truncated_by_env = True, bool(truncated)
                    break
                turn.observation_text = obs
                turn.observation_ids = self.fmt.observation(obs)
                context = context + turn.completion_ids + turn.observation_ids
        finally:
            try:
                await (self._env_acall(env.aclose) if is_async else self._env_call(env.close))
            except Exception:  # a dead sandbox cannot be closed; the episode result stands
                pass
        return await self._finish(turns, total, done, truncated_by_env, info, seed, initial_state_id, group_id, version,
                                  episode_id, {"prefilled_chunks": prefix_chunks} if replayed else None)

    # -- many episodes in lock-step ---------------------------------------------------------------
    @property
    def batchable(self) -> bool:
        """Whether `run_batch` plays in lock-step (in-process envs called inline), not per episode."""
        return not self.env_threads

    async def run_batch(self, specs: Sequence[EpisodeSpec],
                        params: SamplingParams | None = None) -> list[Trajectory | BaseException]:
        """Play every spec's episode to the end; the result per spec is its trajectory, or the exception
        that ended it (what `run` would have raised: the caller's filtering resamples it).

        In lock-step with one `generate_many` per turn for the episodes still running (see the module
        docstring); envs that are async or run on threads fall back to concurrent `run` calls."""
        params = params or self.params
        if not self.batchable or not specs:
            out = await asyncio.gather(*(self.run(seed=s.seed, initial_state_id=s.initial_state_id, group_id=s.group_id,
                                                  episode_id=s.episode_id, params=params) for s in specs),
                                       return_exceptions=True)
            return list(out)
        version = self.generator.policy_version
        t_env = time.perf_counter()
        results: list[Trajectory | BaseException | None] = [None] * len(specs)
        games: list[_Game] = []
        for i, spec in enumerate(specs):
            env: Any = None
            try:
                env = self.env_factory()
                if _is_async_env(env):  # an awaitable env: the per-episode path awaits it
                    games.append(_Game(i, env, [], is_async=True))
                    continue
                obs, info = env.reset(spec.seed)
                games.append(_Game(i, env, self.fmt.initial(obs), info=info))
            except Exception as exc:
                results[i] = exc
                _close_quietly(env)
        self.times.env += time.perf_counter() - t_env
        pending = [g for g in games if g.is_async]
        active = [g for g in games if not g.is_async]
        for _ in range(self.max_turns):
            if not active:
                break
            t0 = time.perf_counter()
            gens = await generate_many(self.generator, [g.context for g in active], params)
            # Summed over episodes like `run`'s (each episode waited this long for its completion).
            self.times.generate += (time.perf_counter() - t0) * len(active)
            t_env = time.perf_counter()
            still: list[_Game] = []
            for g, gen in zip(active, gens, strict=True):
                if isinstance(gen, BaseException):
                    results[g.index] = gen
                    _close_quietly(g.env)
                    continue
                try:
                    if not self._play_turn(g, gen):
                        still.append(g)
                except Exception as exc:
                    results[g.index] = exc
                    _close_quietly(g.env)
            self.times.env += time.perf_counter() - t_env
            active = still
        for g in games:
            if g.is_async or results[g.index] is not None:
                continue
            _close_quietly(g.env)
            spec = specs[g.index]
            try:
                results[g.index] = await self._finish(g.turns, g.total, g.done, g.truncated_by_env, g.info, spec.seed,
                                                      spec.initial_state_id, spec.group_id, version, spec.episode_id)
            except Exception as exc:
                results[g.index] = exc
        if pending:  # awaitable envs: one `run` each (these env objects were only constructed, never reset)
            for g in pending:
                with contextlib.suppress(Exception):
                    await g.env.aclose()
            runs = await asyncio.gather(*(self.run(seed=specs[g.index].seed, initial_state_id=specs[g.index].initial_state_id,
                                                   group_id=specs[g.index].group_id, episode_id=specs[g.index].episode_id,
                                                   params=params) for g in pending), return_exceptions=True)  # fmt: skip
            for g, r in zip(pending, runs, strict=True):
                results[g.index] = r
        return [r if r is not None else RuntimeError("episode produced no result") for r in results]

    def _play_turn(self, g: _Game, gen: Generation) -> bool:
        """Append `gen` as the next turn of `g` and step its env; True when the episode ended."""
        self.times.tokens += len(gen.token_ids)
        turn = Turn(prompt_ids=list(g.context) if not g.turns else [], completion_ids=list(gen.token_ids),
                    logprobs=list(gen.logprobs), policy_version=gen.policy_version, stop_reason=gen.stop_reason)
        g.turns.append(turn)
        obs, reward, terminated, truncated, info = g.env.step(self.fmt.action_text(gen.token_ids))
        g.info = info
        g.total += float(reward)
        turn.error = bool(info.get("invalid_action") or info.get("tool_error"))
        if terminated or truncated:
            g.done, g.truncated_by_env = True, bool(truncated)
            return True
        turn.observation_text = obs
        turn.observation_ids = self.fmt.observation(obs)
        g.context = g.context + turn.completion_ids + turn.observation_ids
        return False

    async def _finish(self, turns: list[Turn], total: float, done: bool, truncated_by_env: bool, info: dict[str, Any],
                      seed: int | None, initial_state_id: str, group_id: str, version: int,
                      episode_id: str | None, extra: dict[str, Any] | None = None) -> Trajectory:
        """The trajectory of a played episode, its reward computed (how `run` and `run_batch` end)."""
        metadata = {"env_reward": total, "success": bool(info.get("success", total > 0)), "truncated": not done,
                    "env_truncated": truncated_by_env}
        if episode_id is None:
            traj = Trajectory(turns=turns, initial_state_id=initial_state_id, seed=seed, group_id=group_id,
                              policy_version=version, metadata=metadata)
        else:  # the scheduler's id, passed in: the default would draw a uuid per episode only to be replaced
            traj = Trajectory(turns=turns, initial_state_id=initial_state_id, seed=seed, group_id=group_id,
                              policy_version=version, metadata=metadata, episode_id=episode_id)
        if extra:
            traj.metadata.update(extra)
        t0 = time.perf_counter()
        value = self.reward_fn(traj, info)
        if inspect.isawaitable(value):
            value = await asyncio.wait_for(value, self.reward_timeout_s)
        traj.reward = float(value)
        self.times.reward += time.perf_counter() - t0
        self.times.episodes += 1
        return traj


@dataclass
class _Game:
    """One episode's state inside `EpisodeRunner.run_batch`."""

    index: int
    env: Any
    context: list[int]
    info: dict[str, Any] = field(default_factory=dict)
    turns: list[Turn] = field(default_factory=list)
    total: float = 0.0
    done: bool = False
    truncated_by_env: bool = False
    is_async: bool = False


def _close_quietly(env: Any) -> None:
    # A dead env cannot be closed; the episode's result stands either way.
    if env is None:
        return
    try:
        env.close()
    except Exception:
        pass
