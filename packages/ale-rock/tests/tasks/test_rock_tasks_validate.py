"""validate_task catches each way a task can be wrong, on real subprocesses."""

from __future__ import annotations

from pathlib import Path

from ale_rock.tasks import CommandResult, Domain, LocalDirRunner, Task, TaskSpec, validate_many, validate_task
from ale_rock.tasks.evaluate import evaluate_noop, evaluate_reference
from ale_rock.tasks.models import TimeLimits

TEST = b"""from ale_testlib import read, run_all, test

@test
def file_written():
    assert read("out.txt").strip() == "hello"

@test
def input_kept():
    assert read("in.txt") == "data\\n"

run_all()
"""


def task(**over: object) -> Task:
    spec = TaskSpec(
        id="unit-task",
        domain=Domain.GAMES,
        title="Unit task",
        prompt="Write hello to out.txt and keep in.txt.",
        test_command="python3 .ale_tests/test_task.py",
        limits=TimeLimits(setup_s=10, test_s=10),
    )
    base = Task(
        spec=spec,
        setup={"in.txt": b"data\n"},
        tests={"test_task.py": TEST},
        solution={"solve.sh": b"echo hello > out.txt\n"},
    )
    for k, v in over.items():
        setattr(base, k, v)
    return base


def test_good_task_validates() -> None:
    rep = validate_task(task())
    assert rep.ok, rep.summary()
    assert len(rep.reference) == 3 and all(r.passed for r in rep.reference)
    assert rep.noop is not None and not rep.noop.passed
    assert [t.name for t in rep.reference[0].tests] == ["file_written", "input_kept"]
    assert rep.noop.reward == 0.5  # input_kept passes without doing anything


def test_failing_reference_is_reported() -> None:
    rep = validate_task(task(solution={"solve.sh": b"echo goodbye > out.txt\n"}))
    assert not rep.ok and "reference solution does not pass" in rep.problems[0]
    assert "file_written" in rep.problems[0]


def test_noop_that_passes_is_reported() -> None:
    rep = validate_task(task(setup={"in.txt": b"data\n", "out.txt": b"hello\n"}))
    assert any("no-op" in p for p in rep.problems), rep.problems


def test_nondeterministic_tests_are_reported(tmp_path: Path) -> None:
    # A counter outside the work dir makes the test alternate between runs, deterministically.
    counter = tmp_path / "count"
    flaky = f"""import os
from ale_testlib import run_all, test

@test
def alternates():
    n = int(open({str(counter)!r}).read()) if os.path.exists({str(counter)!r}) else 0
    open({str(counter)!r}, "w").write(str(n + 1))
    assert n % 2 == 0

@test
def stable():
    pass

run_all()
""".encode()
    rep = validate_task(task(tests={"test_task.py": flaky}))
    assert any("not deterministic across 3 runs" in p for p in rep.problems), rep.problems


def test_setup_failure_is_reported() -> None:
    rep = validate_task(task(setup={"setup.sh": b"echo broken >&2; exit 7\n"}))
    assert not rep.ok and "setup.sh exited 7" in rep.problems[0] and "broken" in rep.problems[0]


def test_too_few_tests_is_reported() -> None:
    one = b"from ale_testlib import read, run_all, test\n\n@test\ndef only():\n    read('out.txt')\n\nrun_all()\n"
    rep = validate_task(task(tests={"test_task.py": one}))
    assert any("at least 2" in p for p in rep.problems), rep.problems


def test_tests_and_solution_hidden_from_work_dir() -> None:
    t = task(setup={"in.txt": b"data\n", "setup.sh": b"echo prepared > ready.txt\n"})
    with LocalDirRunner() as r:
        evaluate_reference(t, r)
        names = sorted(p.name for p in r.workdir.iterdir())
        assert names == [".tmp", "in.txt", "out.txt", "ready.txt"], names
        evaluate_noop(t, r)
        assert not (r.workdir / "out.txt").exists()


def test_test_command_without_parseable_lines() -> None:
    rep = validate_task(task(spec=task().spec.model_copy(update={"test_command": "test -f out.txt"})))
    first = rep.reference[0]
    assert first.passed and [t.name for t in first.tests] == ["test_command"]
    assert any("at least 2" in p for p in rep.problems)


def test_timeout_in_tests_fails_cleanly() -> None:
    slow = task(tests={"test_task.py": b"import time\ntime.sleep(30)\n"})
    slow.spec = slow.spec.model_copy(update={"limits": slow.spec.limits.model_copy(update={"test_s": 0.5})})
    rep = validate_task(slow, runs=1)
    assert not rep.ok and rep.reference[0].timed_out and rep.reference[0].reward == 0.0


class _LostRunner:
    """A runner whose sandbox dies on the first command (a fake: only the error path is tested)."""

    def reset(self) -> None:
        pass

    def upload(self, files: object) -> None:
        pass

    def run(self, command: str, timeout_s: float) -> CommandResult:
        raise RuntimeError("sandbox lost")

    def stop_processes(self) -> None:
        raise RuntimeError("sandbox lost")

    def close(self) -> None:
        pass


def test_runner_failures_become_problems_not_crashes() -> None:
    rep = validate_task(task(), _LostRunner())
    assert rep.problems == ["runner error: RuntimeError: sandbox lost"]

    def no_capacity() -> _LostRunner:
        raise RuntimeError("no live worker has room")

    reps = validate_many([task(), task()], no_capacity, jobs=2)
    assert [r.problems for r in reps] == [["could not start a runner: no live worker has room"]] * 2
