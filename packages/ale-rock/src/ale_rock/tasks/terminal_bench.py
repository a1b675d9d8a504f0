"""Terminal-Bench (1.x) task directories: ``task.yaml`` with ``instruction``, a root ``Dockerfile``,
``tests/`` (pytest), ``run-tests.sh`` and ``solution.sh``, loaded into the one
:class:`~ale_rock.tasks.models.Task`.

The verifier is ``run-tests.sh`` (with ``TEST_DIR`` pointing at the tests); its pytest ``-rA``
lines are the per-test results and every test must pass. Most ``run-tests.sh`` install uv and
pytest from the internet, which a sandbox cannot reach: such a script is replaced by
``python3 -m pytest`` over the test files (noted in ``Task.notes``), which works wherever pytest
is installed (the host's ``python3-pytest`` on the local backend). Nothing the agent leaves in the
work dir steers it: the work dir is not on ``sys.path`` (``PYTHONSAFEPATH``, as with pytest's own
entry point), and neither a ``pytest.ini`` nor a ``conftest.py`` there is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ale_rock.tasks.dockerfile import needs_network
from ale_rock.tasks.harbor import (
    _format_errors,
    build_environment,
    clean_tags,
    difficulty_from,
    domain_from,
    task_id_from,
)
from ale_rock.tasks.loader import read_tree
from ale_rock.tasks.models import (
    Split,
    Task,
    TaskFormat,
    TaskSpec,
    TimeLimits,
    VerifierKind,
    VerifierSpec,
)

RUN_TESTS = "run-tests.sh"
SOLUTION_SH = "solution.sh"


class TerminalBenchSpec(BaseModel):
    """A Terminal-Bench ``task.yaml`` (unknown keys are kept and listed in ``Task.notes``)."""

    model_config = ConfigDict(extra="allow")

    instruction: str = Field(min_length=1)
    """What the agent is asked to do."""
    author_name: str | None = None
    author_email: str | None = None
    difficulty: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    parser_name: str = "pytest"
    """Only ``pytest`` exists in Terminal-Bench 1."""
    max_agent_timeout_sec: float = Field(default=360.0, gt=0)
    max_test_timeout_sec: float = Field(default=60.0, gt=0)
    run_tests_in_same_shell: bool = False
    keep_agent_processes: bool = False
    """ALE's: the tests need a service the agent started (implied by ``run_tests_in_same_shell``)."""
    disable_asciinema: bool = False
    estimated_duration_sec: float | None = None
    expert_time_estimate_min: float | None = None
    junior_time_estimate_min: float | None = None


def is_terminal_bench(data: Any) -> bool:
    """A ``task.yaml`` mapping in Terminal-Bench's shape (``instruction``, not our ``prompt``)."""
    return isinstance(data, dict) and "instruction" in data and "prompt" not in data


def load_terminal_bench_task(root: Path, data: dict[str, Any], source: Path) -> Task:
    from ale_rock.tasks.loader import TaskFormatError

    try:
        tb = TerminalBenchSpec.model_validate(data)
    except ValidationError as e:
        raise TaskFormatError(source, _format_errors(e)) from None
    problems: list[str] = []
    notes = [f"task.yaml: key '{k}' is not used by ALE (ignored)" for k in (tb.model_extra or {})]
    if tb.parser_name != "pytest":
        problems.append(f"field 'parser_name': {tb.parser_name!r} is not supported (only 'pytest')")
    env = build_environment(root, docker_image=None, workdir=None, source=source, problems=problems)
    if (root / "docker-compose.yaml").is_file() or (root / "docker-compose.yml").is_file():
        notes.append("docker-compose file ignored: the task runs in one sandbox built from its Dockerfile")
    tests = read_tree(root / "tests")
    if not any(k.endswith(".py") for k in tests):
        problems.append(f"{root / 'tests'}: no test files (tests/test_outputs.py is expected)")
    run_tests = root / RUN_TESTS
    # Nothing the agent left in the work dir may steer pytest: PYTHONSAFEPATH keeps the working
    # directory off sys.path, as pytest's own entry point would (a pytest.py there cannot stand in
    # for the real one); -c names the configuration (the task's own, or none: a pytest.ini there is
    # not read) and --confcutdir stops the search for conftest.py files at the tests.
    ini = ".ale_tests/pytest.ini" if "pytest.ini" in tests else "/dev/null"
    command = (f"PYTHONSAFEPATH=1 python3 -m pytest -rA -p no:cacheprovider -c {ini} --rootdir=.ale_tests "
               "--confcutdir=.ale_tests .ale_tests")
    if run_tests.is_file():
        script = run_tests.read_text(encoding="utf-8")
        net = needs_network(script)
        if net:
            notes.append(f"{RUN_TESTS} needs the network ({net}); substituted by: python3 -m pytest -rA over tests/")
        else:
            tests[RUN_TESTS] = script.encode()
            command = f"bash .ale_tests/{RUN_TESTS}"
    solution: dict[str, bytes] = {}
    if (root / SOLUTION_SH).is_file():
        solution["solve.sh"] = (root / SOLUTION_SH).read_bytes()
    elif (root / "solution.yaml").is_file():
        notes.append("solution.yaml (a command list for an interactive session) is not supported; no solution")
    if problems:
        raise TaskFormatError(source, problems)
    instruction = tb.instruction.strip()
    spec = TaskSpec.model_construct(
        format=1, id=task_id_from(root.name), domain=domain_from(tb.category),
        title=(instruction.splitlines()[0][:120] if instruction else root.name).ljust(3, "."), prompt=instruction,
        difficulty=difficulty_from(tb.difficulty), split=Split.TRAIN, tags=clean_tags(tb.tags), env=None, dockerfile=None,
        limits=TimeLimits(setup_s=min(max(env.build_timeout_s, tb.max_agent_timeout_sec), 3600.0),
                          agent_s=min(tb.max_agent_timeout_sec, 86400.0), test_s=min(tb.max_test_timeout_sec, 3600.0)),
        test_command=command,
    )  # fmt: skip
    return Task(
        spec=spec, setup={}, tests=tests, solution=solution, path=root, format=TaskFormat.TERMINAL_BENCH,
        environment=env, verifier=VerifierSpec(kind=VerifierKind.PYTEST, command=command,
                              stop_agent_processes=not (tb.keep_agent_processes or tb.run_tests_in_same_shell)),
        notes=notes,
    )  # fmt: skip
