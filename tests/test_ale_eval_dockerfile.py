"""`ale eval --suite DIR --backend docker` against a docker-backend cluster builds a Harbor task's
``environment/Dockerfile`` through EnvHub (its ``FROM`` is ALE's base image, local) and the episode
starts from the built image: what its ``RUN`` made as root at build time (outside the work dir, which
the substitution on the base image could not write) is there, seen from inside the sandbox by a
shell tool call of ale-flow driven by a scripted OpenAI-compatible server, and the Admin says the
sandbox's image is the EnvHub one."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_rock.backends.docker_engine import engine_problem
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
PROBE = "echo BAKED=$(cat /opt/baked/seed.txt); echo OWNER=$(stat -c %U /opt/baked/seed.txt); echo MODE=$MODE; echo ok > done.txt"


_PROBLEM = engine_problem()
pytestmark = [pytest.mark.docker, pytest.mark.skipif(bool(_PROBLEM), reason=_PROBLEM)]


class Scripted:
    """Turn 1: the probe as one shell tool call (and what the Admin says the live sandbox's image
    is); turn 2: keeps the tool result and stops."""

    seen: dict[str, str] = {}
    images: list[str] = []
    cluster: Any = None

    @staticmethod
    def reply(body: dict[str, Any], _auth: str) -> str | list[tuple[str, dict[str, Any]]]:
        from ale_rock.sdk import Sandbox

        tool = [m for m in body["messages"] if m["role"] == "tool"]
        if tool:
            Scripted.seen["out"] = str(tool[-1]["content"])
            return "done"
        c = Scripted.cluster
        live = Sandbox.list(address=c.address, api_key=c.api_key(), states=("running",))
        Scripted.images = [s.image for s in live if s.labels.get("ale.episode")]
        return [("shell", {"command": PROBE})]


@pytest.fixture(scope="module")
def docker_stack(tmp_path_factory: pytest.TempPathFactory, scripted_chat: Any) -> Iterator[dict[str, Any]]:
    """A ModelProxy (agents reach it as http://model-proxy), a docker-backend LocalCluster whose
    worker maps that host to it, and the scripted model server the proxy forwards to."""
    from ale_rock.local_cluster import LocalCluster, real_worker_argv
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy

    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True, timeout=900)
    proxy = serve_model_proxy(ModelProxyConfig(public_base_url="http://model-proxy:80", require_sandbox_header=True,
                                               retries=0))  # fmt: skip
    model_url = scripted_chat(Scripted.reply)
    argv = real_worker_argv({"backend": "docker", "pool_size": 0, "model_proxy_address": proxy.http_url.removeprefix("http://")})
    try:
        with LocalCluster(workers=0, workdir=tmp_path_factory.mktemp("eval-docker"), worker_argv=argv,
                          start_timeout_s=120) as c:  # fmt: skip
            c.start_worker("ed")
            Scripted.cluster = c
            yield {"cluster": c, "proxy": proxy.grpc_address, "model": model_url}
    finally:
        proxy.stop(0)


def test_eval_starts_dockerfile_tasks_from_the_envhub_build(docker_stack: dict[str, Any], tmp_path: Path) -> None:
    from ale_rock.backends.docker_runtime import default_base_image

    from ale.cli import app

    task = tmp_path / "suite" / "baked"
    files = {
        "task.toml": ('schema_version = "1.4"\n[task]\nname = "t/eval-baked"\n[agent]\ntimeout_sec = 60\n'
                      "[verifier]\ntimeout_sec = 30\n"),
        "instruction.md": "Probe the image.\n",
        # /opt is root's: only a build (RUN as root) can write there, never the substitution.
        "environment/Dockerfile": (f"FROM {default_base_image()}\nENV MODE=envhub\nCOPY seed.txt /tmp/seed.txt\n"
                                   "RUN mkdir -p /opt/baked && cp /tmp/seed.txt /opt/baked/seed.txt\n"),
        "environment/seed.txt": "baked-in\n",
        "tests/test.sh": ('[ -f /workspace/done.txt ] && [ "$(cat /opt/baked/seed.txt)" = baked-in ] '
                          "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"),
    }  # fmt: skip
    for rel, text in files.items():
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / rel).write_text(text)
    c, out = docker_stack["cluster"], tmp_path / "eval"
    args = ["eval", "--suite", str(task.parent), "--base-url", docker_stack["model"], "--model", "scripted",
            "--runs", "1", "--concurrency", "1", "--max-turns", "3", "--task-timeout", "60", "--out", str(out),
            "--admin-address", c.address, "--admin-api-key", c.api_key(), "--proxy-address", docker_stack["proxy"],
            "--backend", "docker"]  # fmt: skip
    try:
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 0, r.output
        res = json.loads((out / "results.json").read_text())
        line = json.loads((out / "trajectories" / "run-1.jsonl").read_text().splitlines()[0])
        assert res["errors"] == 0 and res["pass_at_1"] == 1.0 and res["sandboxes_left"] == 0, (res, line.get("error"))
        seen = dict(x.split("=", 1) for x in Scripted.seen["out"].splitlines() if "=" in x and x.split("=", 1)[0].isupper())
        assert seen["BAKED"] == "baked-in" and seen["OWNER"] == "root" and seen["MODE"] == "envhub", seen
        assert len(Scripted.images) == 1 and Scripted.images[0].startswith("ale-env/task-t-eval-baked:"), Scripted.images
        assert "build" in line["phase_s"], line["phase_s"]
    finally:
        listing = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                                 text=True, timeout=60).stdout  # fmt: skip
        built = [x for x in listing.splitlines() if x.startswith("ale-env/task-t-eval-baked:")]
        if built:  # leave no image behind
            subprocess.run(["docker", "rmi", "-f", *built], capture_output=True, timeout=60)
