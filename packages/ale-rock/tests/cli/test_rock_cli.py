"""The ``ale-rock`` CLI against a real admin and worker: ``sandbox create → exec → rm`` from the shell
(real subprocesses), and every other command in-process through typer's runner (same wire path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ale_rock.cli import app
from ale_rock.local_cluster import LocalCluster
from typer.testing import CliRunner


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (apt bubblewrap) is not installed")
    with LocalCluster(workers=1, workdir=tmp_path_factory.mktemp("rock-cli")) as c:
        yield c


@pytest.fixture
def run(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ALE_ROCK_ADDRESS", cluster.address)
    monkeypatch.setenv("ALE_ROCK_API_KEY", cluster.api_key())
    runner = CliRunner()

    def invoke(*args: str, stdin: str | None = None):  # type: ignore[no-untyped-def]
        return runner.invoke(app, list(args), input=stdin)

    return invoke


def shell(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ALE_ROCK_ADDRESS": cluster.address, "ALE_ROCK_API_KEY": cluster.api_key()}
    script = Path(sys.executable).with_name("ale-rock")  # the installed console script
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "ale_rock.cli"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, env=env, timeout=120)


def test_create_exec_rm_from_the_shell(cluster: LocalCluster) -> None:
    created = shell(cluster, "sandbox", "create", "--cpu", "0.5", "--memory", "128Mi")
    assert created.returncode == 0, created.stderr
    sid = created.stdout.strip()
    assert sid.startswith("sb-")
    out = shell(cluster, "sandbox", "exec", sid, "echo hello from $(pwd)")
    assert (out.returncode, out.stdout) == (0, "hello from /workspace\n")
    assert shell(cluster, "sandbox", "rm", sid).returncode == 0
    gone = shell(cluster, "sandbox", "exec", sid, "true")
    assert gone.returncode == 1 and "failed_precondition" in gone.stderr and "deleted" in gone.stderr


def test_commands(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    created = run("sandbox", "create", "--label", "who=cli", "--json")
    assert created.exit_code == 0, created.output
    sid = json.loads(created.stdout)["id"]
    failing = run("sandbox", "exec", sid, "--", "sh", "-c", "echo out; exit 5")
    assert failing.exit_code == 5 and "out" in failing.stdout
    local = tmp_path / "in.txt"
    local.write_text("payload")
    assert run("sandbox", "cp", str(local), f"{sid}:/workspace/x/in.txt").exit_code == 0
    assert run("sandbox", "exec", sid, "cat /workspace/x/in.txt").stdout == "payload"
    assert run("sandbox", "cp", f"{sid}:/workspace/x/in.txt", str(tmp_path / "out.txt")).exit_code == 0
    assert (tmp_path / "out.txt").read_text() == "payload"
    sh = run("sandbox", "shell", sid, stdin="cd /tmp\npwd\n")
    assert sh.exit_code == 0 and sh.stdout.strip() == "/tmp"
    listed = [json.loads(line) for line in run("sandbox", "ls", "--json").stdout.splitlines()]
    assert [(i["id"], i["state"], i["labels"]) for i in listed] == [(sid, "running", {"who": "cli"})]
    assert json.loads(run("sandbox", "stats", sid).stdout)["pids"] >= 1
    assert run("sandbox", "stop", sid).stdout.strip() == f"{sid} stopped"
    assert run("sandbox", "rm", sid).exit_code == 0


def test_clear_errors(run) -> None:  # type: ignore[no-untyped-def]
    bad = run("sandbox", "exec", "not-an-id", "true")
    assert bad.exit_code == 1 and "invalid_argument: sandbox_id" in bad.output
    missing = run("sandbox", "rm", "sb-000000000000")
    assert missing.exit_code == 1 and "not_found" in missing.output
    neg = run("sandbox", "create", "--cpu", "-1")
    assert neg.exit_code == 1 and "spec.resources.cpu_millis" in neg.output
    both = run("sandbox", "cp", "a", "b")
    assert both.exit_code == 2 and "SANDBOX_ID:/path" in both.output
    unauth = run("sandbox", "ls", "--api-key", "wrong")
    assert unauth.exit_code == 1 and "unauthenticated" in unauth.output
