"""One trial of any task on a runner: setup → (agent or reference solution) → verify, step by step
for Harbor multi-step tasks, with their rewards combined as Harbor does.

``act(instruction, timeout_s)`` is whatever works on the task (an agent command, a model loop);
``None`` does nothing (the no-op baseline). A runner-agnostic building block: ``ale-rock tasks
run`` uses it, and so can an episode that wants per-step instructions.
"""

from __future__ import annotations

from collections.abc import Callable

from ale_rock.tasks.environment import exports
from ale_rock.tasks.evaluate import (
    SETUP_SCRIPT,
    TaskPhaseError,
    apply_solution,
    run_reward_tests,
    run_solution,
    run_tests,
    setup_task,
    stop_agent_processes,
)
from ale_rock.tasks.models import SETUP_DIR, StepReport, Task, TaskStep, TestReport, TestResult
from ale_rock.tasks.runner import TaskRunner
from ale_rock.tasks.verify import path_map, resolve_placeholder, rewrite

Act = Callable[[str, float], None]
"""``act(instruction, timeout_s)``: work on the task in the runner's work dir."""


def setup_step(task: Task, step: TaskStep, runner: TaskRunner) -> None:
    """Copy ``steps/<name>/environment/`` into the work dir and run its ``setup.sh`` hook."""
    files = rewrite({k: v for k, v in step.setup.items() if k != SETUP_SCRIPT}, path_map(task))
    if files:
        runner.upload(files)
    if SETUP_SCRIPT in step.setup:
        runner.upload({f"{SETUP_DIR}/{SETUP_SCRIPT}": rewrite({"s": step.setup[SETUP_SCRIPT]}, path_map(task))["s"]})
        cmd = f"{resolve_placeholder(SETUP_DIR)}{exports(task)}bash {SETUP_DIR}/{SETUP_SCRIPT}; rc=$?; cd \"$W\"; rm -rf {SETUP_DIR}; exit $rc"
        res = runner.run(cmd, task.spec.limits.setup_s)
        if res.exit_code != 0 or res.timed_out:
            raise TaskPhaseError(f"steps/{step.name}/setup.sh", res)


def run_step_tests(task: Task, step: TaskStep, runner: TaskRunner) -> TestReport:
    """Verify one step (what the agent left running killed first, unless the task keeps it): the
    task's shared tests with the step's own over them."""
    stop_agent_processes(task, runner)
    return run_reward_tests(task, runner, step.tests, step.verifier_timeout_s, {**task.verifier.env, **step.verifier_env})


def below_minimum(step: TaskStep, report: TestReport) -> bool:
    """The step's reward (or one of its metrics) is under its ``min_reward``: stop the trial."""
    if step.min_reward is None:
        return False
    if isinstance(step.min_reward, dict):
        return any(report.metrics.get(k, 0.0) < v for k, v in step.min_reward.items())
    return report.reward < step.min_reward


def aggregate(task: Task, results: list[tuple[TaskStep, TestReport]]) -> TestReport:
    """One report for a multi-step trial: ``mean`` over the contributing steps that ran (per metric;
    a metric a step lacks counts 0) or the ``final`` contributing step's result."""
    steps = [StepReport(s.name, r, s.contributes_to_reward) for s, r in results]
    counted = [sr for sr in steps if sr.contributes_to_reward] or steps
    tests = [TestResult(f"{sr.name}/{t.name}", t.passed, t.message) for sr in steps for t in sr.report.tests]
    error = next((f"step {sr.name}: {sr.report.error}" for sr in steps if sr.report.error), "")
    if not counted:
        return TestReport(tests=tests, exit_code=1, output="", timed_out=False, duration_s=0.0, reward_value=0.0,
                          error=error or "no step ran")  # fmt: skip
    if task.step_reward_strategy == "final":
        metrics = dict(counted[-1].report.metrics)
        reward = counted[-1].report.reward
    else:
        keys = sorted({k for sr in counted for k in sr.report.metrics})
        metrics = {k: sum(sr.report.metrics.get(k, 0.0) for sr in counted) / len(counted) for k in keys}
        reward = sum(sr.report.reward for sr in counted) / len(counted)
    return TestReport(
        tests=tests,
        exit_code=max(sr.report.exit_code for sr in steps),
        output="\n".join(f"--- step {sr.name}: reward {sr.report.reward}\n{sr.report.output[-4000:]}" for sr in steps),
        timed_out=False,
        duration_s=sum(sr.report.duration_s for sr in steps),
        reward_value=reward,
        metrics=metrics,
        error=error,
        steps=steps,
    )


def run_trial(task: Task, runner: TaskRunner, act: Act | None = None, *, solution: bool = False) -> TestReport:
    """Setup, then the agent (``act``) or the reference solution (``solution=True``) or nothing,
    then the verifier; for multi-step tasks, each step in order, stopping below a ``min_reward``."""
    setup_task(task, runner)
    if not task.steps:
        if solution:
            apply_solution(task, runner)
        elif act is not None:
            act(task.instruction, task.spec.limits.agent_s)
        return run_tests(task, runner)
    results: list[tuple[TaskStep, TestReport]] = []
    for step in task.steps:
        setup_step(task, step, runner)
        if solution:
            run_solution(task, runner, step.solution, step.agent_timeout_s, f"steps/{step.name}/solution/solve.sh")
        elif act is not None:
            act(step.instruction, step.agent_timeout_s)
        report = run_step_tests(task, step, runner)
        results.append((step, report))
        if report.error or below_minimum(step, report):
            break
    return aggregate(task, results)
