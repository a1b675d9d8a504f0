"""`ale up`'s plan of the stack, without starting it: every service of the quickstart, and no secret
on a command line (they are in 0600 files that `ale env` reads)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ale.cli import app
from ale.config import UpConfig
from ale.supervisor import ServiceSpec, Stack, Watchdog
from ale.up import client_env, plan_services


def test_the_stack_is_five_services_with_no_secret_on_a_command_line(tmp_path: Path) -> None:
    specs, endpoints = plan_services(tmp_path, UpConfig(), model_dir=tmp_path / "model")
    assert [s.name for s in specs] == ["admin", "worker", "inference", "model-proxy", "trainer"]
    argv = " ".join(a for s in specs for a in s.argv)
    secrets = [endpoints["api_key"], endpoints["env_api_key"]]
    private = tmp_path / "secrets"
    join_token = json.loads((private / "admin.yaml").read_text())["join_token"]
    assert all(len(x) >= 32 and x not in argv for x in [*secrets, join_token])
    assert all(x not in json.dumps([s.env for s in specs]) for x in [*secrets, join_token])
    # Only this user reads them, whatever the umask.
    assert private.stat().st_mode & 0o777 == 0o700
    assert {f.name: f.stat().st_mode & 0o777 for f in private.iterdir()} == {
        "admin.yaml": 0o600, "worker.yaml": 0o600, "client.env": 0o600}
    assert json.loads((private / "worker.yaml").read_text()) == {"join_token": join_token,
                                                                 "env_api_key": endpoints["env_api_key"]}
    assert client_env(tmp_path) == {"ALE_ROCK_ADDRESS": endpoints["admin_address"],
                                    "ALE_ROCK_API_KEY": endpoints["api_key"],
                                    "ALE_PROXY_ADDRESS": f"127.0.0.1:{specs[3].port}"}


def test_ale_env_prints_exports_for_the_latest_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (tmp_path / "runs" / "latest").symlink_to("r1")
    _, endpoints = plan_services(run_dir, UpConfig())
    monkeypatch.setenv("ALE_RUNS", str(tmp_path / "runs"))
    out = CliRunner().invoke(app, ["env"])
    assert out.exit_code == 0, out.output
    exported = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in out.output.splitlines())
    assert exported == {"ALE_ROCK_ADDRESS": endpoints["admin_address"], "ALE_ROCK_API_KEY": endpoints["api_key"]}
    monkeypatch.setenv("ALE_RUNS", str(tmp_path / "none"))
    missing = CliRunner().invoke(app, ["env"])
    assert missing.exit_code == 1 and "no run yet" in missing.output


def test_a_restarted_service_keeps_its_environment(tmp_path: Path) -> None:
    import time

    out = tmp_path / "out"
    stack = Stack(tmp_path)
    # A service that dies at once: the watchdog restarts it once, with the spec's environment.
    stack.start(ServiceSpec("svc", ["sh", "-c", f'echo "$ALE_TEST_VAR" >> {out}'], 0, env={"ALE_TEST_VAR": "kept"}))
    watchdog = Watchdog(stack, ["svc"], interval_s=0.05, max_restarts=1).start()
    try:
        deadline = time.monotonic() + 30
        while not (out.exists() and len(out.read_text().splitlines()) == 2):
            assert time.monotonic() < deadline, "the service was not restarted"
            time.sleep(0.02)
    finally:
        watchdog.stop()
        stack.stop_all()
    assert out.read_text().splitlines() == ["kept", "kept"] and watchdog.restarts == {"svc": 1}
