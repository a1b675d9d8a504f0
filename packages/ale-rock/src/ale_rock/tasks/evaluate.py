"""The phases of a task episode on a runner: set up, (solve), run the hidden tests, parse results."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ale_rock.tasks.models import SETUP_DIR, SOLUTION_DIR, TESTS_DIR, Task, TestReport, TestResult
from ale_rock.tasks.runner import CommandResult, TaskRunner

SETUP_SCRIPT = "setup.sh"
SOLVE_SCRIPT = "solve.sh"
TESTLIB_NAME = "ale_testlib.py"

_LINE = re.compile(r"^(PASS|FAIL)\s+([A-Za-z0-9_.:/\[\]-]+)(?::\s*(.*))?$")


class TaskPhaseError(RuntimeError):
    """Setup or the reference solution failed; carries the command result."""

    def __init__(self, phase: str, result: CommandResult) -> None:
        self.phase = phase
        self.result = result
        tail = result.output[-1500:]
        why = "timed out" if result.timed_out else f"exited {result.exit_code}"
        super().__init__(f"{phase} {why}:\n{tail}")


def _testlib_source() -> bytes:
    return (Path(__file__).parent / "testlib.py").read_bytes()


def parse_test_output(output: str) -> list[TestResult]:
    """Per-test results from ``PASS name`` / ``FAIL name: reason`` lines; the last line per name wins."""
    results: dict[str, TestResult] = {}
    for line in output.splitlines():
        m = _LINE.match(line.strip())
        if m:
            results[m.group(2)] = TestResult(m.group(2), m.group(1) == "PASS", (m.group(3) or "").strip())
    return list(results.values())


def setup_task(task: Task, runner: TaskRunner) -> None:
    """Start an episode: an empty work dir with the task's setup files, then ``setup.sh`` if any."""
    runner.reset()
    files = {k: v for k, v in task.setup.items() if k != SETUP_SCRIPT}
    if files:
        runner.upload(files)
    if SETUP_SCRIPT in task.setup:
        runner.upload({f"{SETUP_DIR}/{SETUP_SCRIPT}": task.setup[SETUP_SCRIPT]})
        res = runner.run(f"bash {SETUP_DIR}/{SETUP_SCRIPT}; rc=$?; rm -rf {SETUP_DIR}; exit $rc", task.spec.limits.setup_s)
        if res.exit_code != 0 or res.timed_out:
            raise TaskPhaseError("setup.sh", res)


def apply_solution(task: Task, runner: TaskRunner) -> None:
    """Apply the reference solution: run ``solve.sh`` with the other solution files beside it in
    ``.ale_solution/``, or, without a ``solve.sh``, copy the solution files into the work dir."""
    if SOLVE_SCRIPT not in task.solution:
        runner.upload(task.solution)
        return
    runner.upload({f"{SOLUTION_DIR}/{k}": v for k, v in task.solution.items()})
    cmd = f"bash {SOLUTION_DIR}/{SOLVE_SCRIPT}; rc=$?; rm -rf {SOLUTION_DIR}; exit $rc"
    res = runner.run(cmd, task.spec.limits.setup_s)
    if res.exit_code != 0 or res.timed_out:
        raise TaskPhaseError("solution/solve.sh", res)


def run_tests(task: Task, runner: TaskRunner) -> TestReport:
    """Copy the hidden tests in, run the test command, parse per-test results, remove the tests."""
    files = {f"{TESTS_DIR}/{k}": v for k, v in task.tests.items()}
    files[f"{TESTS_DIR}/{TESTLIB_NAME}"] = _testlib_source()
    runner.upload(files)
    cmd = f"{task.spec.test_command}; rc=$?; rm -rf {shlex.quote(TESTS_DIR)}; exit $rc"
    res = runner.run(cmd, task.spec.limits.test_s)
    tests = parse_test_output(res.output)
    if not tests and not res.timed_out:
        # A test command that prints nothing parseable still yields a record to train and debug on.
        tests = [TestResult("test_command", res.exit_code == 0, f"exit code {res.exit_code}, no PASS/FAIL lines")]
    return TestReport(
        tests=tests,
        exit_code=res.exit_code,
        output=res.output,
        timed_out=res.timed_out,
        duration_s=res.duration_s,
    )


def evaluate_reference(task: Task, runner: TaskRunner) -> TestReport:
    """Setup, apply the reference solution, run the tests."""
    setup_task(task, runner)
    apply_solution(task, runner)
    return run_tests(task, runner)


def evaluate_noop(task: Task, runner: TaskRunner) -> TestReport:
    """Setup, do nothing, run the tests: what an agent that gives up gets."""
    setup_task(task, runner)
    return run_tests(task, runner)
