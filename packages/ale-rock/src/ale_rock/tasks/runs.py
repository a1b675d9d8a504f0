"""``ale-rock tasks run``: run tasks end to end (setup → agent / reference solution / nothing →
verifier) on runners made per task, and collect one result each."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ale_rock.tasks.environment import exports
from ale_rock.tasks.loader import TaskFormatError, load_task
from ale_rock.tasks.models import Task, TestReport
from ale_rock.tasks.runner import TaskRunner
from ale_rock.tasks.trial import run_trial


@dataclass
class RunResult:
    """One task's run: the reward (fractional, with every metric) or the error that stopped it."""

    task_id: str
    path: str
    reward: float = 0.0
    passed: bool = False
    metrics: dict[str, float] = field(default_factory=dict)
    tests: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    """Set when the task could not be loaded, set up or verified: an error, not a score."""
    output: str = ""
    duration_s: float = 0.0

    def line(self) -> str:
        if self.error:
            return f"ERROR {self.task_id}: {self.error.splitlines()[0][:300]}"
        extra = " ".join(f"{k}={v:g}" for k, v in sorted(self.metrics.items()) if k != "reward")
        status = "PASS " if self.passed else "FAIL "
        return f"{status}{self.task_id} reward={self.reward:g}{' ' + extra if extra else ''} ({self.duration_s:.1f}s)"


def _from_report(res: RunResult, rep: TestReport) -> None:
    res.reward, res.passed, res.metrics = rep.reward, rep.passed, dict(rep.metrics)
    res.tests = [{"name": t.name, "passed": t.passed, "message": t.message} for t in rep.tests]
    res.steps = [{"name": s.name, "reward": s.report.reward, "metrics": s.report.metrics} for s in rep.steps]
    res.error = rep.error
    res.output = rep.output[-4000:]


def agent_act(task: Task, runner: TaskRunner, command: str) -> Callable[[str, float], None]:
    """``act`` running ``command`` in the work dir with the instruction in ``$ALE_INSTRUCTION``."""

    def act(instruction: str, timeout_s: float) -> None:
        runner.run(f"{exports(task)}export ALE_INSTRUCTION={shlex.quote(instruction)}; {command}", timeout_s)

    return act


def run_one(path: Path | Task, runner_for: Callable[[Task], TaskRunner], *, solution: bool, agent: str | None) -> RunResult:
    start = time.monotonic()
    try:
        task = path if isinstance(path, Task) else load_task(path)
    except TaskFormatError as e:
        return RunResult(task_id=Path(str(path)).name, path=str(path), error=str(e))
    res = RunResult(task_id=task.id, path=str(task.path))
    runner: TaskRunner | None = None
    try:
        runner = runner_for(task)
        task = getattr(runner, "task", None) or task  # a sandbox made from a built image
        act = agent_act(task, runner, agent) if agent else None
        _from_report(res, run_trial(task, runner, act, solution=solution))
    except Exception as e:  # setup, solution or sandbox failure: this task's error, not the batch's
        res.error = f"{type(e).__name__}: {e}"
    finally:
        if runner is not None:
            runner.close()
        res.duration_s = time.monotonic() - start
    return res


def run_many(
    paths: list[Path | Task], runner_for: Callable[[Task], TaskRunner], *, solution: bool = False,
    agent: str | None = None, jobs: int = 2, on_done: Callable[[RunResult], None] | None = None,
) -> list[RunResult]:
    """Run tasks in parallel (one runner each); results in input order."""

    def one(p: Path | Task) -> RunResult:
        r = run_one(p, runner_for, solution=solution, agent=agent)
        if on_done is not None:
            on_done(r)
        return r

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, paths))
