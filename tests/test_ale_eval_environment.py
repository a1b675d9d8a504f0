"""`ale eval --suite DIR` runs each Harbor task in a sandbox made as its ``[environment]`` asks:
ale-flow, driven by a scripted OpenAI-compatible server, runs one shell command in the real
bubblewrap sandbox, and what it saw (work dir, env, memory limit, egress to the allow-listed
"remote" server and not to another) comes back in the tool result of the next model call. A task
without an allow-list stays without network (the model proxy aside)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed")

PROBE = (
    "echo PWD=$(pwd); echo VAR=$ALE_PROBE_VAR; echo ALLOWED=$(curl -s -m 5 http://{allowed}/); "
    "echo OTHER=$(curl -s -m 5 http://{other}/); python3 -c 'bytearray(320 * 2**20)'; echo HOG=$?; "
    "echo ok > done.txt"
)


def _egress_fixtures() -> Any:
    # Tests run with --import-mode=importlib: the netns "remote server" helper, loaded by path.
    path = Path(__file__).parents[1] / "packages/ale-rock/tests/redteam/_egress_fixtures.py"
    spec = importlib.util.spec_from_file_location("ale_eval_tests_egress_fixtures", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Scripted:
    """Turn 1: one shell tool call (the probe of the task named in the prompt); turn 2: keeps the
    tool result and stops."""

    probes: dict[str, str] = {}
    seen: dict[str, str] = {}

    @staticmethod
    def reply(body: dict[str, Any], _auth: str) -> str | list[tuple[str, dict[str, Any]]]:
        text = json.dumps(body["messages"])
        name = next(n for n in Scripted.probes if f"probe-{n}" in text)
        tool = [m for m in body["messages"] if m["role"] == "tool"]
        if tool:
            Scripted.seen[name] = str(tool[-1]["content"])
            return "done"
        return [("shell", {"command": Scripted.probes[name]})]


def _task(root: Path, name: str, allowed: str, network: bool) -> None:
    net = f'network_mode = "allowlist"\nallowed_hosts = ["{allowed}"]\n' if network else ""
    files = {
        "task.toml": ('schema_version = "1.4"\n[task]\nname = "t/' + name + '"\n[agent]\ntimeout_sec = 90\n'
                      '[verifier]\ntimeout_sec = 30\n[environment]\nworkdir = "/app"\ncpus = 0.5\nmemory_mb = 256\n'
                      f'{net}[environment.env]\nALE_PROBE_VAR = "from-task-toml"\n'),
        "instruction.md": f"probe-{name}: run the probe.\n",
        "tests/test.sh": '[ -f /app/done.txt ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
    }  # fmt: skip
    for rel, text in files.items():
        (root / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / name / rel).write_text(text)


@pytest.fixture(scope="module")
def far() -> Iterator[tuple[str, str]]:
    """Two HTTP servers on "other machines": the allow-listed one and another."""
    fx = _egress_fixtures()
    if fx.problem():
        pytest.skip(fx.problem())
    with fx.remote_http_server() as (ip1, p1), fx.remote_http_server() as (ip2, p2):
        yield f"{ip1}:{p1}", f"{ip2}:{p2}"


@pytest.fixture()
def scripted(far: tuple[str, str], scripted_chat: Any) -> str:
    allowed, other = far
    Scripted.probes = {n: PROBE.format(allowed=allowed, other=other) for n in ("open", "closed")}
    Scripted.seen = {}
    return str(scripted_chat(Scripted.reply))


def _lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and line.split("=", 1)[0].isupper())


def test_eval_sandboxes_are_the_tasks_environment(scripted: str, far: tuple[str, str], tmp_path: Path) -> None:
    from ale.cli import app

    allowed, other = far
    suite = tmp_path / "suite"
    _task(suite, "open", allowed, network=True)
    _task(suite, "closed", allowed, network=False)
    out = tmp_path / "eval"
    args = ["eval", "--suite", str(suite), "--base-url", scripted, "--model", "scripted", "--runs", "1",
            "--concurrency", "2", "--max-turns", "3", "--task-timeout", "90", "--out", str(out)]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert res["errors"] == 0 and res["pass_at_1"] == 1.0 and res["sandboxes_left"] == 0, res

    opened, closed = _lines(Scripted.seen["open"]), _lines(Scripted.seen["closed"])
    for seen in (opened, closed):
        assert seen["PWD"] == "/app" and seen["VAR"] == "from-task-toml", seen
        assert seen["HOG"] == "137"  # 320 MiB in a 256 MiB sandbox: the cgroup kills it
        assert "hello from afar" not in seen["OTHER"]
    assert opened["ALLOWED"] == "hello from afar"  # the task's allow-list, through the egress gateway
    assert "hello from afar" not in closed["ALLOWED"]  # no-network stays no-network
    events = [e for line in (out / "trajectories" / "run-1.jsonl").read_text().splitlines()
              for e in json.loads(line)["safety_events"] if e["kind"] == "egress_blocked"]  # fmt: skip
    assert any(other in e["detail"] for e in events) and any(allowed in e["detail"] for e in events)
