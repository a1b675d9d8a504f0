"""One agent episode, six phases, each under a timeout:

1. **setup** — a fresh sandbox from the provider with the task's files and setup script (on the
   docker backend, a task's ``environment/Dockerfile`` is first built through EnvHub, once per
   task and process, when its ``FROM`` image is local: phase ``build``);
2. **open** — a ModelProxy episode bound to that sandbox, forwarding to the upstream model;
3. **agent** — the :class:`~ale_rock.episode.agents.Agent` runs with the episode's OpenAI base URL
   and key, within its budget;
4. **close + records** — the key is revoked (nothing in the sandbox can call the model after), then
   every call is read back with its exact token ids;
5. **verify** — the task's hidden tests run in the same sandbox and give the reward;
6. **delete** — the sandbox is deleted (always, whatever happened before; a sandbox created after
   the episode gave up is deleted too).

The outcome (:class:`~ale_rock.episode.outcome.EpisodeOutcome`) is a score — success or failure
with the tests' reward — or an **error** with its :class:`~ale_rock.episode.outcome.ErrorKind`:
a model call the infrastructure failed (unreachable, unauthorized), the sandbox lost, the setup or
the verifier failed, a phase past its timeout. An error is never a reward of 0: when the model
calls failed the tests do not even run. :func:`run_episode` never raises for a failed episode.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from ale_rock.envs.sandbox import CommandOutput, ProviderRunner, SandboxProvider, SandboxSpec
from ale_rock.episode.agents import Agent, AgentContext
from ale_rock.episode.classify import classify_exception, first_call_error
from ale_rock.episode.config import EpisodeTimeouts
from ale_rock.episode.outcome import AgentRun, EpisodeError, EpisodeOutcome, ErrorKind, Status
from ale_rock.sdk.model_proxy import ModelProxyClient, Upstream

T = TypeVar("T")
_POLL_S = 0.1
"""How often a waiting phase looks at ``cancel`` (the phase's own result wakes it at once)."""


class _EventsProvider:
    """The provider as the agent sees it: every command's safety events also go to the episode, and
    ``workdir`` is the episode's sandbox's (the task's ``[environment].workdir`` when it sets one)."""

    def __init__(self, inner: SandboxProvider, sink: list[dict[str, Any]], workdir: str = "") -> None:
        self._inner, self._sink, self._workdir = inner, sink, workdir

    def __getattr__(self, name: str) -> Any:  # client, ... for agents that need them
        return getattr(self._inner, name)

    @property
    def workdir(self) -> str:
        """Where the agent works (agents that open their own workspace on the sandbox read it)."""
        return self._workdir or str(getattr(self._inner, "workdir", "/workspace"))

    def create(self, labels: Mapping[str, str] | None = None, spec: SandboxSpec | None = None) -> str:
        return self._inner.create(labels, spec)

    def exec(self, sandbox_id: str, command: str, timeout_s: float) -> CommandOutput:
        out = self._inner.exec(sandbox_id, command, timeout_s)
        self._sink.extend(out.safety_events)
        return out

    def upload(self, sandbox_id: str, files: Mapping[str, bytes]) -> None:
        self._inner.upload(sandbox_id, files)

    def stop_processes(self, sandbox_id: str) -> None:
        self._inner.stop_processes(sandbox_id)

    def delete(self, sandbox_id: str) -> None:
        self._inner.delete(sandbox_id)


class _Runner(ProviderRunner):
    """The episode's one sandbox. Once closed, a sandbox that a timed-out setup creates late is
    deleted at once: an episode that gave up leaks nothing.

    While every worker is full (RESOURCE_EXHAUSTED with ``quota=cluster_capacity``: some worker
    could run the sandbox, none has room now) the creation waits for room, up to ``room_wait_s``,
    instead of failing the episode: a batch of episodes larger than the cluster queues behind the
    sandboxes that are being deleted. Past it the Admin's error is raised, naming the capacity."""

    def __init__(self, provider: SandboxProvider, labels: Mapping[str, str], spec: SandboxSpec | None,
                 room_wait_s: float = 0.0) -> None:
        super().__init__(provider, labels, spec)
        self._lock = threading.Lock()
        self._closed = False
        self.room_wait_s = room_wait_s

    def _create(self) -> str:
        from ale_rock.sdk.errors import ResourceExhausted

        deadline, delay = time.monotonic() + self.room_wait_s, 0.05
        while True:
            try:
                return self.provider.create(self.labels, self.spec)
            except ResourceExhausted as e:
                with self._lock:
                    closed = self._closed
                if e.quota != "cluster_capacity" or closed or time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(2 * delay, 0.5)

    def reset(self) -> None:
        self.close_sandbox()
        sid = self._create()
        with self._lock:
            if not self._closed:
                self.sandbox_id = sid
                return
        self.provider.delete(sid)
        raise EpisodeError(ErrorKind.CANCELLED, "the episode ended while its sandbox was being created", "setup")

    def close_sandbox(self) -> None:
        with self._lock:
            sid, self.sandbox_id = self.sandbox_id, ""
        if sid:
            self.provider.delete(sid)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.close_sandbox()


def _call(name: str, timeout_s: float, cancel: threading.Event, fn: Callable[[], T]) -> T:
    """``fn()`` on its own thread, within ``timeout_s``; a stuck call is abandoned (the sandbox's
    deletion ends it) and raises a ``timeout`` error; ``cancel`` raises ``cancelled``."""
    if cancel.is_set():
        raise EpisodeError(ErrorKind.CANCELLED, "the episode was cancelled", name)
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised on the caller's thread
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name=f"episode-{name}").start()
    deadline = time.monotonic() + timeout_s
    while not done.wait(min(_POLL_S, max(0.0, deadline - time.monotonic()))):
        if cancel.is_set():
            raise EpisodeError(ErrorKind.CANCELLED, "the episode was cancelled", name)
        if time.monotonic() >= deadline:
            raise EpisodeError(ErrorKind.TIMEOUT, f"{name} ran past its {timeout_s:g}s timeout", name)
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def run_episode(
    task: Any,
    agent: Agent,
    *,
    provider: SandboxProvider,
    proxy: ModelProxyClient,
    upstream: Upstream,
    target: str,
    model: str = "",
    max_calls: int = 0,
    budget_s: float | None = None,
    episode_id: str = "",
    labels: Mapping[str, str] | None = None,
    timeouts: EpisodeTimeouts | None = None,
    env: Mapping[str, str] | None = None,
    require_token_ids: bool = False,
    cancel: threading.Event | None = None,
    spec: SandboxSpec | None = None,
) -> EpisodeOutcome:
    """Run ``agent`` on ``task`` (an ``ale_rock.tasks`` Task) in a fresh sandbox (see the module docstring).

    ``upstream``/``target``/``model``/``max_calls`` open the proxy episode; ``budget_s`` defaults to
    the task's ``limits.agent_s``; ``labels`` go on the sandbox with ``ale.episode=<episode_id>``;
    ``require_token_ids`` makes a call without token ids an error (training). Setting ``cancel``
    ends the episode as ``cancelled`` (its sandbox is deleted before this returns). The sandbox is
    created as the task's ``[environment]`` asks (``spec``, default
    ``ale_rock.tasks.environment.sandbox_spec(task)``), within the provider's policy: a task beyond
    it ends as a ``setup_failed`` error naming the setting.
    """
    from ale_rock.tasks.environment import sandbox_spec
    from ale_rock.tasks.evaluate import run_tests, setup_task

    t_start = time.monotonic()
    timeouts = timeouts or EpisodeTimeouts()
    limits = task.spec.limits
    cancel = cancel or threading.Event()
    stop = threading.Event()  # the agent's cancel: the caller's, or the episode giving up
    episode_id = episode_id or f"ep-{uuid.uuid4().hex[:12]}"
    budget = float(budget_s or limits.agent_s)
    events: list[dict[str, Any]] = []
    if spec is None and getattr(task, "environment", None) is not None:
        spec = sandbox_spec(task)
    sandboxes = _EventsProvider(provider, events, spec.workdir if spec is not None else "")
    setup_s = timeouts.setup_s or limits.setup_s + timeouts.margin_s
    # Waiting for room ends before the setup's own timeout, so the error names the full cluster.
    runner = _Runner(sandboxes, {**(labels or {}), "ale.episode": episode_id}, spec, room_wait_s=0.75 * setup_s)
    out = EpisodeOutcome(episode_id=episode_id, status=Status.ERROR, task_id=str(getattr(task, "id", "")))
    opened = False
    phase = "setup"

    def timed(name: str, timeout_s: float, fn: Callable[[], T]) -> T:
        nonlocal phase
        phase = name
        t0 = time.monotonic()
        try:
            return _call(name, timeout_s, cancel, fn)
        finally:
            out.phase_s[name] = round(time.monotonic() - t0, 4)

    try:
        if _builds(task, provider):  # docker: the task's Dockerfile built through EnvHub, once per task
            task = timed("build", task.environment.build_timeout_s + timeouts.margin_s, lambda: _build(task, provider))
            if runner.spec is not None and not runner.spec.image:
                runner.spec = replace(runner.spec, image=task.environment.built_image)
        timed("setup", setup_s, lambda: setup_task(task, runner))
        out.sandbox_id = sid = runner.sandbox_id
        ep = timed("open", timeouts.open_s, lambda: proxy.open_episode(
            episode_id, sandbox_id=sid, upstream=upstream, target=target, model=model, max_calls=max_calls,
            timeout_s=timeouts.open_s))  # fmt: skip
        opened = True
        ctx = AgentContext(sandboxes, sid, getattr(task, "instruction", task.spec.prompt), ep.base_url, ep.api_key, model, budget, dict(env or {}))
        try:
            out.agent = timed("agent", budget + timeouts.agent_grace_s, lambda: agent.run(ctx, stop))
        finally:
            stop.set()
        timed("close", timeouts.close_s, lambda: proxy.close_episode(episode_id, timeouts.close_s))
        opened = False
        out.records = timed("records", timeouts.records_s, lambda: proxy.records(episode_id, timeouts.records_s))
        _check_calls(out.records, out.agent, require_token_ids)
        report = timed("verify", timeouts.verify_s or limits.test_s + timeouts.margin_s,
                       lambda: run_tests(task, runner))  # fmt: skip
        out.tests = [{"name": t.name, "passed": t.passed, "output": t.message} for t in report.tests]
        out.tests_timed_out = bool(report.timed_out)
        if getattr(report, "error", ""):  # no reward file, an unreadable reward: not a score
            raise EpisodeError(ErrorKind.VERIFIER_FAILED, str(report.error), "verify")
        out.status = Status.SUCCESS if report.passed else Status.FAILURE
        out.reward = float(report.reward)
        out.metrics = dict(getattr(report, "metrics", None) or {})
    except Exception as e:  # every failure is this episode's outcome, never the caller's exception
        err = classify_exception(e, phase)
        if err.kind in _PROBED and _sandbox_gone(provider, runner.sandbox_id, timeouts.cleanup_s):
            # An agent or a verifier that broke on a sandbox that died (ale-flow's workspace says
            # OSError): the sandbox's death is the cause.
            err = EpisodeError(ErrorKind.SANDBOX_LOST, f"the sandbox died ({err.message})", err.phase or phase)
        out.status, out.reward, out.error_kind = Status.ERROR, 0.0, err.kind
        out.error, out.phase = err.message, err.phase or phase
    finally:
        stop.set()
        out.cleanup_error = _cleanup(proxy, runner, episode_id if opened else None, timeouts.cleanup_s, out)
        out.safety_events = events
        out.wall_s = round(time.monotonic() - t_start, 4)
    return out


def _builds(task: Any, provider: SandboxProvider) -> bool:
    """Whether the provider's sandboxes are docker ones that start ``task`` from an EnvHub build."""
    from ale_rock.tasks.envhub_build import needs_build

    env = getattr(task, "environment", None)
    return env is not None and getattr(provider, "client", None) is not None and needs_build(
        task, str(getattr(provider, "backend", "")))


def _build(task: Any, provider: Any) -> Any:
    """``tasks run``'s one path (:func:`ale_rock.tasks.envhub_build.prepare_task`); a failed build is
    the episode's ``setup_failed`` error."""
    from ale_rock.tasks.envhub_build import prepare_task

    try:
        return prepare_task(task, provider.client, str(provider.backend))
    except Exception as e:
        raise EpisodeError(ErrorKind.SETUP_FAILED, f"environment/Dockerfile: {e}", "setup") from e


_PROBED = (ErrorKind.INTERNAL, ErrorKind.VERIFIER_FAILED, ErrorKind.SETUP_FAILED, ErrorKind.AGENT_FAILED,
           ErrorKind.TIMEOUT)
"""Error kinds whose real cause may be a dead sandbox: the sandbox is probed before they are reported."""


def _sandbox_gone(provider: SandboxProvider, sandbox_id: str, timeout_s: float) -> bool:
    """Whether ``sandbox_id`` no longer runs commands (a probe that fails or hangs says it is gone)."""
    if not sandbox_id:
        return False
    try:
        _call("probe", min(timeout_s, 10.0), threading.Event(), lambda: provider.exec(sandbox_id, "true", 5.0))
    except Exception:
        return True
    return False


def _check_calls(records: list[Any], agent: AgentRun | None, require_token_ids: bool) -> None:
    """Raise when the model calls say the episode is the infrastructure's failure."""
    err = first_call_error(records)
    if err is not None:
        raise err
    if agent is not None and agent.model_failed:
        # The agent could not reach the proxy at all (no failed call was recorded).
        raise EpisodeError(ErrorKind.MODEL_UNREACHABLE, f"the agent's model calls failed: {agent.output[-300:]}",
                           "agent")  # fmt: skip
    if not records and agent is not None and not agent.timed_out:
        raise EpisodeError(ErrorKind.AGENT_FAILED, f"the agent made no model call (exit {agent.exit_code}): "
                           f"{agent.output[-300:]}", "agent")  # fmt: skip
    if require_token_ids:
        for rec in records:
            if not rec.prompt_token_ids:
                raise EpisodeError(ErrorKind.NOT_TOKEN_EXACT, f"model call {rec.index} has no token ids (the "
                                   "proxy's upstream must be the InferenceService for training)", "records")


def _cleanup(proxy: ModelProxyClient, runner: _Runner, open_episode: str | None, timeout_s: float,
             out: EpisodeOutcome) -> str:
    """Close the proxy episode if still open, delete the sandbox; returns what failed ("" if nothing)."""
    problems: list[str] = []

    def work() -> None:
        if open_episode is not None:
            try:  # the key must die; a proxy that is down cannot be helped
                proxy.close_episode(open_episode, min(timeout_s, 10.0))
            except Exception as e:
                problems.append(f"close: {e}")
        try:
            runner.close()
        except Exception as e:  # a sandbox that died is already gone
            problems.append(f"delete: {type(e).__name__}: {e}")

    t0 = time.monotonic()
    try:
        _call("delete", timeout_s, threading.Event(), work)
    except EpisodeError as e:
        problems.append(str(e))
    out.phase_s["delete"] = round(time.monotonic() - t0, 4)
    return "; ".join(problems)


async def arun_episode(task: Any, agent: Agent, **kwargs: Any) -> EpisodeOutcome:
    """:func:`run_episode` for asyncio callers. Cancelling the awaiting task cancels the episode and
    waits (bounded) until its sandbox is deleted, then re-raises ``CancelledError``."""
    cancel = threading.Event()
    timeouts: EpisodeTimeouts = kwargs.get("timeouts") or EpisodeTimeouts()
    fut = asyncio.ensure_future(asyncio.to_thread(run_episode, task, agent, cancel=cancel, **kwargs))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        cancel.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(fut), timeouts.cleanup_s + 2 * _POLL_S + 5)
        raise
