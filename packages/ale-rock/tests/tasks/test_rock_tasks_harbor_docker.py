"""Harbor tasks with an environment Dockerfile on the docker backend: built through EnvHub when
the FROM image is local (ALE's base image), or run on the base image with the Dockerfile's steps
applied when it is not (no registry here)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_rock.backends.docker_engine import engine_problem
from ale_rock.tasks.cli import app
from typer.testing import CliRunner

_PROBLEM = engine_problem()
pytestmark = [pytest.mark.docker, pytest.mark.skipif(bool(_PROBLEM), reason=_PROBLEM)]
_spec = importlib.util.spec_from_file_location("ale_rock_tests_harbor_fixtures_d", Path(__file__).with_name("_harbor_fixtures.py"))
assert _spec is not None and _spec.loader is not None
fx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fx)


@pytest.fixture(scope="module")
def docker_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ale_rock.local_cluster import LocalCluster, real_worker_argv

    repo = Path(__file__).resolve().parents[4]
    subprocess.run(["bash", str(repo / "scripts" / "build_base_image.sh")], check=True, timeout=900)
    c = LocalCluster(workers=0, workdir=tmp_path_factory.mktemp("rock-harbor-docker"),
                     worker_argv=real_worker_argv({"backend": "docker", "pool_size": 0}), start_timeout_s=120)  # fmt: skip
    with c:
        c.start_worker("hd")
        yield c


def test_dockerfile_tasks_on_docker(docker_cluster: Any, tmp_path: Path) -> None:
    from ale_rock.backends.docker_runtime import default_base_image

    base = tmp_path / "tasks"
    fx.harbor_tasks(base)  # "dockerfile": FROM an image that is not here → substitution
    sub = base / "dockerfile"
    built = fx.write(base / "built", {
        "task.toml": fx.toml("t/built").replace('workdir = "/app"\n', ""),
        "instruction.md": "Write the value of $MODE into /srv/app/mode.txt.\n",
        "environment/Dockerfile": (f"FROM {default_base_image()}\nENV MODE=envhub\nWORKDIR /srv/app\n"
                                   "COPY seed.txt /srv/app/seed.txt\nRUN cat seed.txt > baked.txt\n"),
        "environment/seed.txt": "baked-in\n",
        "tests/test.sh": ('#!/bin/bash\ncd /srv/app\n[ "$(cat baked.txt)" = baked-in ] && [ "$(cat mode.txt)" = envhub ] '
                          "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"),
        "solution/solve.sh": "echo $MODE > /srv/app/mode.txt\n",
    })  # fmt: skip
    res = CliRunner().invoke(app, ["run", str(sub), str(built), "--solution", "--json", "--backend", "docker",
                                   "--address", docker_cluster.address, "--api-key", docker_cluster.api_key()])  # fmt: skip
    rows = {r["task_id"]: r for r in (json.loads(x) for x in res.output.splitlines() if x.startswith("{"))}
    assert res.exit_code == 0, res.output
    assert rows["t.dockerfile"]["passed"] and rows["t.built"]["passed"], rows
    # The built task ran from an EnvHub image (its RUN step ran at build time, as root).
    out = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True, text=True).stdout
    built_images = [line for line in out.splitlines() if line.startswith("ale-env/task-t-built:")]
    assert built_images, out
    subprocess.run(["docker", "rmi", "-f", *built_images], capture_output=True, timeout=60)  # leave no image behind
