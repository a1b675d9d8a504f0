"""Prove a task: the reference solution passes, doing nothing fails, the tests are deterministic."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ale_rock.tasks.environment import TaskEnvironmentError
from ale_rock.tasks.evaluate import TaskPhaseError, evaluate_noop, evaluate_reference
from ale_rock.tasks.loader import TaskFormatError, load_task
from ale_rock.tasks.models import Task, TaskFormat, TestReport
from ale_rock.tasks.runner import LocalDirRunner, TaskRunner

MIN_TESTS = 2


@dataclass
class ValidationReport:
    """The verdict on one task, with the reports it was based on."""

    task_id: str
    path: Path | None
    problems: list[str] = field(default_factory=list)
    reference: list[TestReport] = field(default_factory=list)
    noop: TestReport | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        status = "OK  " if self.ok else "FAIL"
        n = len(self.reference[0].tests) if self.reference else 0
        line = f"{status} {self.task_id} ({n} tests, {self.duration_s:.1f}s)"
        return line + "".join(f"\n     - {p}" for p in self.problems)


def validate_task(task: Task | Path | str, runner: TaskRunner | None = None, *, runs: int = 3) -> ValidationReport:
    """Validate one task on ``runner`` (default: a fresh :class:`LocalDirRunner`).

    Runs the reference solution ``runs`` times from a clean work dir and the no-op solution once.
    """
    start = time.monotonic()
    if not isinstance(task, Task):
        path = Path(task)
        try:
            task = load_task(path)
        except TaskFormatError as e:
            return ValidationReport(task_id=path.name, path=path, problems=[str(e)])
    report = ValidationReport(task_id=task.id, path=task.path)
    own = runner is None
    r: TaskRunner = LocalDirRunner() if runner is None else runner
    try:
        _check(task, r, runs, report)
    finally:
        if own:
            r.close()
        report.duration_s = time.monotonic() - start
    return report


def _check(task: Task, runner: TaskRunner, runs: int, report: ValidationReport) -> None:
    try:
        for _ in range(runs):
            report.reference.append(evaluate_reference(task, runner))
        report.noop = evaluate_noop(task, runner)
    except (TaskPhaseError, TaskEnvironmentError) as e:
        report.problems.append(str(e))
        return
    except Exception as e:  # the runner broke (e.g. a lost sandbox): a verdict, not a crash of the batch
        report.problems.append(f"runner error: {type(e).__name__}: {e}")
        return
    first = report.reference[0]
    if not first.passed:
        failed = [f"{t.name}: {t.message}" for t in first.tests if not t.passed]
        detail = "; ".join(failed) or first.output[-800:]
        report.problems.append(f"reference solution does not pass: {detail}")
    if first.error:
        report.problems.append(f"verifier error with the reference solution: {first.error}")
    if task.format == TaskFormat.ALE and len(first.tests) < MIN_TESTS:
        report.problems.append(f"only {len(first.tests)} test(s) reported; a task needs at least {MIN_TESTS}")
    outcomes = {r.outcome() for r in report.reference}
    if len(outcomes) > 1:
        report.problems.append(f"tests are not deterministic across {runs} runs: {sorted(outcomes)}")
    if report.noop.passed:
        report.problems.append("the empty (no-op) solution passes the tests")


def validate_many(
    tasks: Iterable[Task | Path | str],
    runner_factory: Callable[[], TaskRunner] = LocalDirRunner,
    *,
    jobs: int = 4,
    runs: int = 3,
    on_done: Callable[[ValidationReport], None] | None = None,
    runner_for: Callable[[Task], TaskRunner] | None = None,
) -> list[ValidationReport]:
    """Validate tasks in parallel, one runner per task; results in input order. ``runner_for``
    (when given) makes the runner from the loaded task, e.g. a sandbox with the task's work dir,
    env and network policy."""

    def one(t: Task | Path | str) -> ValidationReport:
        if runner_for is not None and not isinstance(t, Task):
            src = Path(t)
            try:
                t = load_task(src)
            except TaskFormatError as e:
                rep = ValidationReport(task_id=src.name, path=src, problems=[str(e)])
                if on_done is not None:
                    on_done(rep)
                return rep
        try:
            runner = runner_for(t) if runner_for is not None and isinstance(t, Task) else runner_factory()
        except Exception as e:  # e.g. no sandbox capacity: a verdict on this task, not a crash of all
            tid, path = (t.id, t.path) if isinstance(t, Task) else (Path(t).name, Path(t))
            rep = ValidationReport(task_id=tid, path=path, problems=[f"could not start a runner: {e}"])
        else:
            try:
                rep = validate_task(t, runner, runs=runs)
            finally:
                runner.close()
        if on_done is not None:
            on_done(rep)
        return rep

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, list(tasks)))
