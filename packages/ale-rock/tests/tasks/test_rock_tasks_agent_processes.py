"""What the agent leaves running is killed before the hidden tests go in (a program it left could
rewrite them or the reward files: the red-team test on real sandboxes is
``redteam/test_redteam_verifier.py``), unless the task says its tests need it. Every task format
can say so."""

from __future__ import annotations

from pathlib import Path

import yaml
from ale_rock.tasks import load_task
from ale_rock.tasks.evaluate import run_tests, setup_task
from ale_rock.tasks.models import Domain, Task, TaskSpec, TimeLimits, VerifierSpec
from ale_rock.tasks.runner import LocalDirRunner

from ._harbor_fixtures import HELLO_TEST, toml, write

# The tests need a service the agent started: its pid file names a live process (a killed one may
# linger as a zombie where nothing reaps orphans).
SERVICE_TEST = b"""
try:
    stat = open(f"/proc/{int(open('.svc.pid').read())}/stat").read()
    alive = stat.rpartition(")")[2].split()[0] not in ("Z", "X")
    print("PASS service_running" if alive else "FAIL service_running: a zombie")
except (OSError, ValueError) as e:
    print(f"FAIL service_running: {e}")
"""


def _service_task(stop: bool) -> Task:
    spec = TaskSpec(id="svc-task", domain=Domain.GAMES, title="Start a service", prompt="Start a service and leave it running.",
                    test_command="python3 .ale_tests/test_task.py", limits=TimeLimits(setup_s=10, test_s=10))  # fmt: skip
    return Task(spec=spec, setup={}, tests={"test_task.py": SERVICE_TEST}, solution={},
                verifier=VerifierSpec(stop_agent_processes=stop))


def test_the_agents_processes_are_gone_before_the_tests_unless_the_task_keeps_them(tmp_path: Path) -> None:
    for stop, passed in ((True, False), (False, True)):
        runner = LocalDirRunner(tmp_path / f"w-{stop}")
        try:
            task = _service_task(stop)
            setup_task(task, runner)
            # What an agent does to leave a service: its own session, its output nowhere.
            started = runner.run("setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $! > .svc.pid; echo ok", 10)
            assert started.output.strip() == "ok"
            report = run_tests(task, runner)
            assert [t.name for t in report.tests] == ["service_running"] and report.passed is passed, report
        finally:
            runner.stop_processes()
            runner.close()


def test_every_format_says_whether_the_tests_need_the_agents_processes(tmp_path: Path) -> None:
    ale = {"id": "keep-task", "domain": "games", "title": "A kept task", "prompt": "Start the server and leave it running."}
    for keep in (False, True):
        root = tmp_path / f"ale-{keep}"
        (root / "tests").mkdir(parents=True)
        (root / "tests" / "test_task.py").write_text("print('PASS a')\n")
        (root / "solution").mkdir()
        (root / "solution" / "solve.sh").write_text("true\n")
        (root / "task.yaml").write_text(yaml.safe_dump({**ale, **({"keep_agent_processes": True} if keep else {})}))
        assert load_task(root).verifier.stop_agent_processes is not keep

        extra = "keep_agent_processes = true\n" if keep else ""
        harbor = write(tmp_path / f"harbor-{keep}", {
            "task.toml": toml("t/keep").replace("[verifier]\n", f"[verifier]\n{extra}"),
            "instruction.md": "Start the server.\n", "tests/test.sh": HELLO_TEST})  # fmt: skip
        assert load_task(harbor).verifier.stop_agent_processes is not keep

    for line, stop in (("", True), ("keep_agent_processes: true\n", False), ("run_tests_in_same_shell: true\n", False)):
        tb = write(tmp_path / f"tb-{len(line)}", {
            "task.yaml": f"instruction: Start the server.\ndifficulty: easy\ncategory: web\n{line}",
            "Dockerfile": "FROM python:3.13\n", "run-tests.sh": "#!/bin/bash\npytest -rA $TEST_DIR\n",
            "tests/test_outputs.py": "def test_a():\n    pass\n"})  # fmt: skip
        assert load_task(tb).verifier.stop_agent_processes is stop, line
