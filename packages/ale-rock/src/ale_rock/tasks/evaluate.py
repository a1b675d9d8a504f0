"""The phases of a task episode on a runner: set up, (solve), run the hidden tests, parse results."""

from __future__ import annotations

import re
import secrets
import shlex
from pathlib import Path

from ale_rock.tasks.environment import apply_environment, exports
from ale_rock.tasks.models import (
    SETUP_DIR,
    SOLUTION_DIR,
    TESTS_DIR,
    Files,
    Task,
    TaskFormat,
    TestReport,
    TestResult,
    VerifierKind,
)
from ale_rock.tasks.runner import CommandResult, TaskRunner
from ale_rock.tasks.verify import (
    LOGS_DIR,
    path_map,
    resolve_placeholder,
    reward_command,
    reward_report,
    rewrite,
)

SETUP_SCRIPT = "setup.sh"
SOLVE_SCRIPT = "solve.sh"
TESTLIB_NAME = "ale_testlib.py"

_LINE = re.compile(r"^(PASS|FAIL)\s+([A-Za-z0-9_.:/\[\]-]+)(?::\s*(.*))?$")
# pytest's "-rA" summary ("PASSED tests/t.py::test_a", "FAILED tests/t.py::test_b - why") and
# its verbose lines ("tests/t.py::test_a PASSED [ 50%]").
_PYTEST_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR)\s+(\S+::\S+)(?:\s+-\s+(.*))?$")
_PYTEST_VERBOSE = re.compile(r"^(\S+::\S+)\s+(PASSED|FAILED|ERROR)\b")


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


def _pytest_name(nodeid: str) -> str:
    path, _, name = nodeid.partition("::")
    return f"{path.rsplit('/', 1)[-1]}::{name}"


def parse_test_output(output: str) -> list[TestResult]:
    """Per-test results from ``PASS name`` / ``FAIL name: reason`` lines, or pytest's ``-rA`` /
    verbose lines; the last line per name wins."""
    results: dict[str, TestResult] = {}
    for line in output.splitlines():
        text = line.strip()
        m = _LINE.match(text)
        if m:
            results[m.group(2)] = TestResult(m.group(2), m.group(1) == "PASS", (m.group(3) or "").strip())
            continue
        p = _PYTEST_SUMMARY.match(text)
        if p:
            name = _pytest_name(p.group(2))
            results[name] = TestResult(name, p.group(1) == "PASSED", (p.group(3) or "").strip())
            continue
        v = _PYTEST_VERBOSE.match(text)
        if v and _pytest_name(v.group(1)) not in results:
            name = _pytest_name(v.group(1))
            results[name] = TestResult(name, v.group(2) == "PASSED", "")
    return list(results.values())


def setup_task(task: Task, runner: TaskRunner) -> None:
    """Start an episode: an empty work dir with the task's environment (the Dockerfile's steps when
    its image was not built) and setup files, then ``setup.sh`` if any. A multi-step task's own
    step setups run later, before each step (:func:`ale_rock.tasks.trial.setup_step`)."""
    runner.reset()
    apply_environment(task, runner)
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
    ``.ale_solution/``, or, without a ``solve.sh``, copy the solution files into the work dir.
    A multi-step task's solutions are applied one step after the other."""
    if task.format != TaskFormat.ALE:
        if task.steps:
            for step in task.steps:
                run_solution(task, runner, step.solution, step.agent_timeout_s, f"steps/{step.name}/solution/solve.sh")
        else:
            run_solution(task, runner, task.solution, task.spec.limits.setup_s, "solution/solve.sh")
        return
    if SOLVE_SCRIPT not in task.solution:
        runner.upload(task.solution)
        return
    runner.upload({f"{SOLUTION_DIR}/{k}": v for k, v in task.solution.items()})
    cmd = f"bash {SOLUTION_DIR}/{SOLVE_SCRIPT}; rc=$?; rm -rf {SOLUTION_DIR}; exit $rc"
    res = runner.run(cmd, task.spec.limits.setup_s)
    if res.exit_code != 0 or res.timed_out:
        raise TaskPhaseError("solution/solve.sh", res)


def run_solution(task: Task, runner: TaskRunner, solution: Files, timeout_s: float, what: str) -> None:
    """Harbor / Terminal-Bench: ``solve.sh`` from ``.ale_solution/`` (its absolute paths mapped)."""
    if SOLVE_SCRIPT not in solution:
        raise TaskPhaseError(what, CommandResult(exit_code=127, output=f"{what} does not exist"))
    runner.upload({f"{SOLUTION_DIR}/{k}": v for k, v in rewrite(solution, path_map(task)).items()})
    cmd = f"{resolve_placeholder(SOLUTION_DIR)}{exports(task)}bash {SOLUTION_DIR}/{SOLVE_SCRIPT} < /dev/null; rc=$?; "
    res = runner.run(cmd + f'cd "$W"; rm -rf {SOLUTION_DIR}; exit $rc', timeout_s)
    if res.exit_code != 0 or res.timed_out:
        raise TaskPhaseError(what, res)


VERIFIER_SHELL = "export PYTHONNOUSERSITE=1; "
"""Before every verifier command: Python skips the user site, whose ``usercustomize.py`` and
``.pth`` files the agent could have written to run inside the tests' interpreter."""

INSTALL_FAILED = 97
"""Exit status of a verifier command whose tests could not be put in place (something the agent
left in ``.ale_tests/`` would not go): a failure, never a verdict of the agent's making."""


def stop_agent_processes(task: Task, runner: TaskRunner) -> None:
    """Kill what the agent left running before the tests go in, unless the task's tests need it
    (``stop_agent_processes``): a program it left could rewrite them or the reward files."""
    if task.verifier.stop_agent_processes:
        runner.stop_processes()


def upload_tests(runner: TaskRunner, files: Files) -> str:
    """Upload the tests (paths under ``.ale_tests/``) into a fresh directory of an unguessable name,
    and return the shell that, run first in the verifier command, removes whatever sits at
    ``.ale_tests``/``.ale_logs`` (a module the agent left there would run inside the tests: the
    test script's directory comes first on ``sys.path``; pytest reads a ``conftest.py`` there) and
    moves the fresh directory into place. Staging, instead of clearing first, saves a command per
    verification; nothing can have been planted in the staging directory (its name is new, and the
    agent's processes are gone)."""
    stage = f"{TESTS_DIR}.{secrets.token_hex(8)}"
    runner.upload({stage + rel[len(TESTS_DIR):]: data for rel, data in files.items()})
    dirs = f"{TESTS_DIR} {LOGS_DIR}"
    fail = f"{{ echo 'ale: could not put the tests in place'; exit {INSTALL_FAILED}; }}"
    # No `mv -T` (busybox's mv lacks it): a .ale_tests still there after the rm fails the check
    # instead of receiving the staging dir inside it.
    return (f"if [ -e {TESTS_DIR} ] || [ -L {TESTS_DIR} ] || [ -e {LOGS_DIR} ] || [ -L {LOGS_DIR} ]; then "
            f"chmod -R u+rwx {dirs} 2>/dev/null; rm -rf {dirs}; fi; "
            f"if [ -e {TESTS_DIR} ] || [ -L {TESTS_DIR} ]; then {fail}; fi; mv {stage} {TESTS_DIR} || {fail}; ")


def run_tests(task: Task, runner: TaskRunner) -> TestReport:
    """Copy the hidden tests in, run the test command, parse per-test results, remove the tests.

    Harbor tasks: ``tests/test.sh``, the reward from the reward files (a multi-step task's steps
    are verified in order and their rewards combined); Terminal-Bench: pytest lines. First, unless
    the task keeps them, every process earlier commands left running is killed (the agent's), and
    anything left where the tests go is removed (:func:`upload_tests`)."""
    stop_agent_processes(task, runner)
    if task.verifier.kind == VerifierKind.REWARD_FILE:
        if task.steps:
            from ale_rock.tasks.trial import aggregate, run_step_tests

            return aggregate(task, [(s, run_step_tests(task, s, runner)) for s in task.steps])
        return run_reward_tests(task, runner, task.tests, task.spec.limits.test_s, task.verifier.env)
    if task.format != TaskFormat.ALE:
        files = {f"{TESTS_DIR}/{k}": v for k, v in rewrite(task.tests, path_map(task)).items()}
        prefix = resolve_placeholder(TESTS_DIR) + exports(task, task.verifier.env)
        tail = f'; rc=$?; cd "$W"; rm -rf {shlex.quote(TESTS_DIR)}; exit $rc'
    else:
        files = {f"{TESTS_DIR}/{k}": v for k, v in task.tests.items()}
        files[f"{TESTS_DIR}/{TESTLIB_NAME}"] = _testlib_source()
        prefix, tail = "", f"; rc=$?; rm -rf {shlex.quote(TESTS_DIR)}; exit $rc"
    install = upload_tests(runner, files)
    cmd = f"{VERIFIER_SHELL}{install}{prefix}{task.spec.test_command}{tail}"
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


def run_reward_tests(task: Task, runner: TaskRunner, tests: Files, timeout_s: float, env: dict[str, str]) -> TestReport:
    """Harbor's verifier: ``tests/`` in (paths mapped), ``test.sh``, the reward files read."""
    install = upload_tests(runner, {f"{TESTS_DIR}/{k}": v for k, v in rewrite(tests, path_map(task)).items()})
    res = runner.run(VERIFIER_SHELL + install + reward_command(f"bash {TESTS_DIR}/test.sh", exports(task, env)), timeout_s)
    return reward_report(res, parse_test_output(res.output.rsplit("@@ALE_REWARD_TXT@@", 1)[0]))


def evaluate_reference(task: Task, runner: TaskRunner) -> TestReport:
    """Setup, apply the reference solution, run the tests (multi-step: step by step)."""
    if task.steps:
        from ale_rock.tasks.trial import run_trial

        return run_trial(task, runner, solution=True)
    setup_task(task, runner)
    apply_solution(task, runner)
    return run_tests(task, runner)


def evaluate_noop(task: Task, runner: TaskRunner) -> TestReport:
    """Setup, do nothing, run the tests: what an agent that gives up gets."""
    if task.steps:
        from ale_rock.tasks.trial import run_trial

        return run_trial(task, runner)
    setup_task(task, runner)
    return run_tests(task, runner)
