"""The task.yaml format: good files load, bad files give errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ale_rock.tasks import TaskFormatError, load_suite, load_task, write_task
from ale_rock.tasks.loader import parse_spec
from ale_rock.tasks.models import Domain, Split

GOOD = {
    "id": "demo-task",
    "domain": "games",
    "title": "A demo task",
    "prompt": "Write the word hello into out.txt please.",
    "split": "held_out",
    "tags": ["demo"],
    "limits": {"agent_s": 120},
}


def make_task(root: Path, spec: dict | str, *, tests: bool = True, solution: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    text = spec if isinstance(spec, str) else yaml.safe_dump(spec)
    (root / "task.yaml").write_text(text)
    if tests:
        (root / "tests").mkdir(exist_ok=True)
        (root / "tests" / "test_task.py").write_text("print('PASS a')\n")
    if solution:
        (root / "solution").mkdir(exist_ok=True)
        (root / "solution" / "solve.sh").write_text("echo hello > out.txt\n")
    return root


def test_good_task_loads_with_defaults(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "t", GOOD))
    assert task.id == "demo-task"
    assert task.spec.domain is Domain.GAMES and task.spec.split is Split.HELD_OUT
    assert task.spec.limits.agent_s == 120 and task.spec.limits.test_s == 60
    assert task.tests == {"test_task.py": b"print('PASS a')\n"}
    assert task.spec.env is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"colour": "blue"}, "colour"),
        ({"domain": "cooking"}, "domain"),
        ({"id": "Bad ID!"}, "id"),
        ({"split": "test"}, "split"),
        ({"limits": {"test_s": -1}}, "limits.test_s"),
        ({"limits": {"agent_sec": 5}}, "limits.agent_sec"),
        ({"prompt": "short"}, "prompt"),
        ({"tags": ["has space"]}, "tags"),
        ({"format": 2}, "format"),
        ({"difficulty": "extreme"}, "difficulty"),
    ],
)
def test_bad_field_is_named(tmp_path: Path, change: dict, field: str) -> None:
    with pytest.raises(TaskFormatError) as err:
        load_task(make_task(tmp_path / "t", {**GOOD, **change}))
    assert f"field '{field}'" in str(err.value)
    assert "task.yaml" in str(err.value)


def test_missing_required_field_is_named(tmp_path: Path) -> None:
    spec = {k: v for k, v in GOOD.items() if k != "title"}
    with pytest.raises(TaskFormatError, match="field 'title': Field required"):
        load_task(make_task(tmp_path / "t", spec))


def test_env_and_dockerfile_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="at most one of 'env' and 'dockerfile'"):
        load_task(make_task(tmp_path / "t", {**GOOD, "env": "py311", "dockerfile": "Dockerfile"}))


def test_dockerfile_must_exist(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="field 'dockerfile'"):
        load_task(make_task(tmp_path / "t", {**GOOD, "dockerfile": "Dockerfile"}))


def test_invalid_yaml_and_non_mapping(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="invalid YAML"):
        load_task(make_task(tmp_path / "a", "id: [unclosed\n"))
    with pytest.raises(TaskFormatError, match="mapping"):
        parse_spec("- just\n- a list\n")


def test_missing_tests_and_solution(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError) as err:
        load_task(make_task(tmp_path / "t", GOOD, tests=False, solution=False))
    assert "tests/" in str(err.value) and "solution/" in str(err.value)


def test_no_task_yaml(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="no task.yaml"):
        load_task(tmp_path)


def test_duplicate_ids_in_a_suite(tmp_path: Path) -> None:
    make_task(tmp_path / "a", GOOD)
    make_task(tmp_path / "b", GOOD)
    with pytest.raises(TaskFormatError, match="duplicate id 'demo-task'"):
        load_suite(tmp_path)


def test_write_then_load_round_trip(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "src", GOOD))
    task.setup["data/in.txt"] = b"1 2 3\n"
    back = load_task(write_task(task, tmp_path / "copy"))
    assert back.spec == task.spec
    assert (back.setup, back.tests, back.solution) == (task.setup, task.tests, task.solution)
