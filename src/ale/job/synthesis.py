"""Synthesis: the teacher plays DigitLock in real sandboxes through ale-flow's agent loop.

Each episode: a fresh sandbox (admin → worker → rocklet), the lock installed for the code of a
*training* seed, an ale-flow `Agent` whose only tool is the shell (commands run in the sandbox
through `SandboxWorkspace`), and the teacher as its model. The episode record is built from the
agent's own events (tool calls, tool results, malformed replies, stop reason) — what the filter
sees is what the agent did, not what the teacher meant to do.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ale.job.lock_task import PROMPT, setup_commands

_GUESS = re.compile(r"python3 /workspace/lock\.py\s+(.*)$")


@dataclass
class Episode:
    """One teacher episode, as the agent's events recorded it."""

    seed: int
    code: list[int]
    actions: list[str] = field(default_factory=list)
    """The guess text of every lock command, in order."""
    outputs: list[str] = field(default_factory=list)
    """The lock's answer to each of them."""
    commands: list[str] = field(default_factory=list)
    """Every shell command (a guess or anything else)."""
    malformed: int = 0
    """Tool calls the agent could not parse."""
    stop_reason: str = ""
    """ale-flow's stop reason (completed, max_steps, ...)."""
    final_message: str = ""
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def lock_code(seed: int) -> list[int]:
    """The code DigitLock draws for `seed` (the same function the environment uses)."""
    from ale_rock.envs.games.digit_lock import DigitLock

    env = DigitLock()
    _, info = env.reset(seed)
    from ale_rock.envs.games.digit_lock import code_digits

    return code_digits(int(info["code"]), env.digits, env.base)


def run_episode(sandbox: Any, seed: int, max_turns: int, trajectory_dir: Path, teacher_factory: Callable[[int], Any],
                exec_timeout_s: float = 30.0) -> Episode:
    """One teacher episode in `sandbox` (the lock is installed afresh for it)."""
    from ale_flow import events as ev
    from ale_flow.agent import Agent
    from ale_flow.sandbox_workspace import SandboxWorkspace
    from ale_flow.settings import LimitsConfig, Settings, ToolsConfig

    code = lock_code(seed)
    episode = Episode(seed=seed, code=code)
    res = sandbox.exec(setup_commands(code, max_turns), timeout=exec_timeout_s)
    if res.exit_code != 0:
        episode.error = f"setup failed: {res.stderr[-200:]}"
        return episode
    settings = Settings(mode="yolo", tools=ToolsConfig(enabled=["shell"], shell_timeout_s=exec_timeout_s),
                        limits=LimitsConfig(max_steps=max_turns + 4, max_malformed=3))
    agent = Agent(teacher_factory(seed), SandboxWorkspace(sandbox), settings=settings, allow_subagents=False,
                  trajectory_path=trajectory_dir / f"teacher-{seed}.jsonl")
    try:
        for event in agent.run(PROMPT.format(max_turns=max_turns)):
            if isinstance(event, ev.MalformedToolCall):
                episode.malformed += 1
            elif isinstance(event, ev.ToolFinished) and event.call is not None:
                command = str(event.call.arguments.get("command", ""))
                episode.commands.append(command)
                m = _GUESS.match(command.strip())
                if m:
                    episode.actions.append(m.group(1).strip())
                    out = event.result.content if event.result is not None else ""
                    episode.outputs.append(out.strip().splitlines()[0] if out.strip() else "")
            elif isinstance(event, ev.Stopped):
                episode.stop_reason = str(getattr(event.reason, "value", event.reason))
                episode.final_message = event.final_message
    finally:
        agent.close()
    return episode


def new_sandbox(client: Any, label: str) -> Any:
    """A small sandbox for the lock task (a quarter of a core is plenty for it)."""
    from ale_rock import Sandbox

    return Sandbox.create(client=client, ttl=900, cpu=0.25, memory="256Mi", labels={"ale-up": label})


def in_sandboxes(client: Any, items: list[Any], fn: Callable[[Any, Any], Any], on_error: Callable[[Any, Exception], Any],
                 concurrency: int, label: str) -> list[Any]:
    """`fn(sandbox, item)` for every item, `concurrency` lanes each reusing one sandbox (a new one
    after a failure); a failed item becomes `on_error(item, exc)`, never an exception."""

    lanes = [items[i::concurrency] for i in range(concurrency)]
    results: dict[int, Any] = {}

    def lane(k: int) -> None:
        sandbox = None
        try:
            for j, item in enumerate(lanes[k]):
                try:
                    if sandbox is None:
                        sandbox = new_sandbox(client, label)
                    results[k + j * concurrency] = fn(sandbox, item)
                except Exception as e:  # a lost sandbox is a lost item, not a lost run
                    results[k + j * concurrency] = on_error(item, e)
                    if sandbox is not None:
                        try:
                            sandbox.delete()
                        except Exception:
                            pass
                    sandbox = None
        finally:
            if sandbox is not None:
                try:
                    sandbox.delete()
                except Exception:
                    pass

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=label) as pool:
        list(pool.map(lane, range(concurrency)))
    return [results[i] for i in range(len(items))]


def synthesize(client: Any, seeds: list[int], max_turns: int, out_dir: Path, teacher_factory: Callable[[int], Any],
               concurrency: int = 4, on_episode: Callable[[Episode], None] | None = None) -> list[Episode]:
    """Teacher episodes for `seeds` in `concurrency` sandboxes; an infrastructure failure is recorded
    on its episode (and filtered), never raised."""
    traj_dir = out_dir / "teacher_trajectories"
    traj_dir.mkdir(parents=True, exist_ok=True)

    def one(sandbox: Any, seed: int) -> Episode:
        episode = run_episode(sandbox, seed, max_turns, traj_dir, teacher_factory)
        if on_episode is not None:
            on_episode(episode)
        return episode

    def failed(seed: int, e: Exception) -> Episode:
        episode = Episode(seed=seed, code=[], error=f"{type(e).__name__}: {e}")
        if on_episode is not None:
            on_episode(episode)
        return episode

    return in_sandboxes(client, seeds, one, failed, concurrency, "synthesis")
