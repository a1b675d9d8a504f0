"""``prepare_task``: the one path by which ``tasks run`` and the episode runner get a Dockerfile
task's EnvHub build — only on docker, once per task and process however many episodes ask at once,
and a FROM that is not local leaves the task to the substitution (nothing remembered)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ale_rock.tasks import envhub_build, load_task
from ale_rock.tasks.environment import sandbox_spec


def _task(root: Path, name: str, dockerfile: str = "FROM some/base:1\nRUN echo hi > /opt/x\n") -> Any:
    files = {
        "task.toml": f'schema_version = "1.4"\n[task]\nname = "t/{name}"\n',
        "instruction.md": "Do it.\n",
        "environment/Dockerfile": dockerfile,
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
    }
    for rel, text in files.items():
        (root / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / name / rel).write_text(text)
    return load_task(root / name)


def _client(address: str) -> Any:
    return SimpleNamespace(settings=SimpleNamespace(address=address))


@pytest.fixture()
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every build_if_local call (a task id); builds take 0.2 s and name the image by the task."""
    calls: list[str] = []
    monkeypatch.setattr(envhub_build, "_built", {})
    monkeypatch.setattr(envhub_build, "_building", {})

    def fake(task: Any, client: Any) -> Any:
        calls.append(task.id)
        time.sleep(0.2)
        from dataclasses import replace

        if "missing" in task.id:
            return task  # FROM not local
        return replace(task, environment=replace(task.environment, built_image=f"ale-env/{task.id}:d"))

    monkeypatch.setattr(envhub_build, "build_if_local", fake)
    return calls


def test_only_docker_builds(builds: list[str], tmp_path: Path) -> None:
    task = _task(tmp_path, "a")
    for backend in ("", "local", "kubernetes"):
        assert envhub_build.prepare_task(task, _client("h:1"), backend) is task
    assert builds == [] and sandbox_spec(task).image == ""  # substituted on the base image


def test_concurrent_episodes_of_a_task_share_one_build(builds: list[str], tmp_path: Path) -> None:
    task = _task(tmp_path, "b")
    out: list[Any] = []
    threads = [threading.Thread(target=lambda: out.append(envhub_build.prepare_task(task, _client("h:1"), "docker")))
               for _ in range(4)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert builds == ["t.b"]
    assert {sandbox_spec(t).image for t in out} == {"ale-env/t.b:d"}
    # Later episodes reuse it; another admin (another EnvHub) builds its own.
    assert sandbox_spec(envhub_build.prepare_task(task, _client("h:1"), "docker")).image == "ale-env/t.b:d"
    envhub_build.prepare_task(task, _client("h:2"), "docker")
    assert builds == ["t.b", "t.b"]


def test_a_changed_dockerfile_is_built_again(builds: list[str], tmp_path: Path) -> None:
    envhub_build.prepare_task(_task(tmp_path / "1", "c"), _client("h:1"), "docker")
    envhub_build.prepare_task(_task(tmp_path / "2", "c", "FROM some/base:1\nRUN echo other\n"), _client("h:1"), "docker")
    assert builds == ["t.c", "t.c"]


def test_a_from_image_that_is_not_local_is_not_remembered(builds: list[str], tmp_path: Path) -> None:
    task = _task(tmp_path, "missing")
    assert not envhub_build.prepare_task(task, _client("h:1"), "docker").environment.built_image
    envhub_build.prepare_task(task, _client("h:1"), "docker")  # loaded since: looked at again
    assert builds == ["t.missing", "t.missing"]


def test_the_real_path_substitutes_when_from_is_not_local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(envhub_build, "_built", {})
    task = _task(tmp_path, "nowhere", "FROM ale-test/not-here-ever:0\nRUN true\n")
    # No EnvHub is asked (the client has no channel): the FROM image is looked up locally only.
    out = envhub_build.prepare_task(task, _client("h:1"), "docker")
    assert out is task and sandbox_spec(out).image == "" and envhub_build._built == {}


def test_the_substitution_is_logged_once_per_from_image(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A generated family (hundreds of tasks, one FROM) says so once, not once per task."""
    from ale_rock.tasks import environment
    from ale_rock.tasks.runner import LocalDirRunner

    monkeypatch.setattr(environment, "_logged", set())
    tasks = [_task(tmp_path, f"fam-{i}", "FROM fam/base:1\nRUN echo hi > x\n") for i in range(3)]
    tasks.append(_task(tmp_path, "other", "FROM other/base:2\nRUN echo hi > x\n"))
    with caplog.at_level("WARNING", logger="ale_rock.tasks"):
        for t in tasks:
            with LocalDirRunner(tmp_path / "work" / t.id.replace("/", "_")) as runner:
                environment.apply_environment(t, runner)
                assert (runner.workdir / "x").read_text() == "hi\n"
    lines = [r.getMessage() for r in caplog.records if "not built" in r.getMessage()]
    assert len(lines) == 2 and "FROM fam/base:1" in lines[0] and "FROM other/base:2" in lines[1], lines
