"""Safety tasks: each validates like any task, and its unsafe solution does the job yet fails —
on the safety tests only — so the reward penalizes exactly the unsafe action."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from ale_rock.tasks import LocalDirRunner, Split, validate_many, validate_task
from ale_rock.tasks import models as task_models
from ale_rock.tasks.safety import (
    SAFETY_TEST_PREFIX,
    UNSAFE_DIR,
    evaluate_unsafe,
    safety_score,
    safety_tasks,
    unsafe_variant,
)

PITFALLS = {"prompt-injection", "malicious-file", "tool-side-effect", "credentials", "integrity"}


def test_family_shape() -> None:
    tasks = safety_tasks()
    assert len(tasks) >= 5
    tags = set().union(*(t.spec.tags for t in tasks))
    assert tags >= PITFALLS, PITFALLS - tags
    assert {t.spec.split for t in tasks} == {Split.TRAIN, Split.HELD_OUT}
    for t in tasks:
        assert t.path is not None and (t.path / UNSAFE_DIR / "solve.sh").is_file(), t.id
        names = [ln for ln in t.tests["test_task.py"].decode().splitlines() if ln.startswith("def ")]
        assert sum(n.startswith(f"def {SAFETY_TEST_PREFIX}") for n in names) >= 1, t.id
        assert sum(not n.startswith(f"def {SAFETY_TEST_PREFIX}") for n in names) >= 2, t.id
        # the unsafe solution is never handed to the agent or mixed into the hidden tests
        assert not set(unsafe_variant(t).solution) & set(t.setup), t.id


def test_safety_tasks_validate() -> None:
    reports = validate_many(safety_tasks(), jobs=2 * (os.cpu_count() or 1))
    bad = [r.summary() for r in reports if not r.ok]
    assert not bad, "\n".join(bad)
    for r in reports:
        assert safety_score(r.reference[0]).safe and safety_score(r.reference[0]).task_done


@pytest.mark.parametrize("task", safety_tasks(), ids=lambda t: t.id)
def test_unsafe_solution_is_penalized(task) -> None:  # type: ignore[no-untyped-def]
    with LocalDirRunner() as runner:
        report = evaluate_unsafe(task, runner)
    score = safety_score(report)
    failed = [t.name for t in report.tests if not t.passed]
    assert score.task_done, f"the unsafe solution should do the job; failed: {failed}"
    assert not score.safe and not report.passed and report.reward < 1.0, report.output
    assert all(name.startswith(SAFETY_TEST_PREFIX) for name in failed), failed


def test_safety_score_counts() -> None:
    r = task_models.TestResult
    rep = task_models.TestReport(
        tests=[r("works", True), r("safe_a", False, "x"), r("safe_b", True)],
        exit_code=1, output="", timed_out=False, duration_s=0.1,
    )
    s = safety_score(rep)
    assert (s.outcome_passed, s.outcome_total, s.safety_passed, s.safety_total) == (1, 1, 1, 2)
    assert s.task_done and not s.safe


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed")
def test_safety_tasks_in_real_sandboxes(tmp_path: Path) -> None:
    """The same proof inside bubblewrap sandboxes (Admin + Worker through the SDK)."""
    from ale_rock.local_cluster import LocalCluster
    from ale_rock.tasks.sandbox_runner import SandboxRunner

    with LocalCluster(workers=1, workdir=tmp_path) as cluster:
        for task in safety_tasks():
            with SandboxRunner.create(cluster.client()) as runner:
                report = validate_task(task, runner)
                unsafe = evaluate_unsafe(task, runner)
            assert report.ok, report.summary()
            score = safety_score(unsafe)
            assert score.task_done and not score.safe, (task.id, unsafe.output[-800:])
