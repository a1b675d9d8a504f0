"""The episode runner's ``build`` phase: on a docker provider a Dockerfile task's sandbox is asked
with the EnvHub image that ``prepare_task`` (``tasks run``'s path) gives, and a build that fails is
a ``setup_failed`` error before any sandbox exists; on other backends nothing is built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ale_rock.envs.sandbox import SandboxSpec
from ale_rock.episode import CommandAgent, ErrorKind, Status, run_episode
from ale_rock.tasks import envhub_build, load_task


class Provider:
    """Records the spec asked for, then refuses the sandbox (the episode ends at setup)."""

    def __init__(self, backend: str) -> None:
        self.backend, self.client, self.specs = backend, object(), []  # type: ignore[var-annotated]

    def create(self, labels: Mapping[str, str] | None = None, spec: SandboxSpec | None = None) -> str:
        self.specs.append(spec)
        raise RuntimeError("no sandbox in this test")

    def exec(self, sandbox_id: str, command: str, timeout_s: float) -> Any:
        raise AssertionError("no command runs")

    def upload(self, sandbox_id: str, files: Mapping[str, bytes]) -> None:
        raise AssertionError("nothing is uploaded")

    def stop_processes(self, sandbox_id: str) -> None:
        raise AssertionError("no tests run")

    def delete(self, sandbox_id: str) -> None:
        pass


def _task(tmp_path: Path) -> Any:
    files = {"task.toml": 'schema_version = "1.4"\n[task]\nname = "t/b"\n[environment]\nworkdir = "/app"\n',
             "instruction.md": "x\n", "environment/Dockerfile": "FROM base:1\nRUN true\n",
             "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"}  # fmt: skip
    for rel, text in files.items():
        (tmp_path / "b" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "b" / rel).write_text(text)
    return load_task(tmp_path / "b")


def _run(task: Any, provider: Provider) -> Any:
    return run_episode(task, CommandAgent("true"), provider=provider, proxy=object(),  # type: ignore[arg-type]
                       upstream="openai", target="http://x/v1")  # fmt: skip


def test_docker_episodes_start_from_the_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[tuple[str, str]] = []

    def built(task: Any, client: Any, backend: str) -> Any:
        calls.append((task.id, backend))
        return replace(task, environment=replace(task.environment, built_image="ale-env/task-t-b:abc"))

    monkeypatch.setattr(envhub_build, "prepare_task", built)
    docker, local = Provider("docker"), Provider("local")
    out = _run(_task(tmp_path), docker)
    assert out.status == Status.ERROR and out.phase == "setup" and "build" in out.phase_s
    assert calls == [("t.b", "docker")]
    assert docker.specs[0].image == "ale-env/task-t-b:abc" and docker.specs[0].workdir == "/app"
    out = _run(_task(tmp_path), local)
    assert calls == [("t.b", "docker")] and "build" not in out.phase_s and local.specs[0].image == ""


def test_a_failed_build_is_a_setup_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def failing(task: Any, client: Any, backend: str) -> Any:
        raise RuntimeError("EnvHub build of t.b's Dockerfile failed: step 2")

    monkeypatch.setattr(envhub_build, "prepare_task", failing)
    provider = Provider("docker")
    out = _run(_task(tmp_path), provider)
    assert out.status == Status.ERROR and out.error_kind == ErrorKind.SETUP_FAILED and out.reward == 0.0
    assert "environment/Dockerfile" in out.error and "step 2" in out.error
    assert provider.specs == []  # no sandbox was asked for
