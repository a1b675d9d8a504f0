"""Harbor and Terminal-Bench task dirs: load, validate and `tasks run` in real local sandboxes
(Admin + Worker + bubblewrap, one cluster for the module); export round trip; SWE-style import."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_rock.tasks import load_suite, load_task, validate_task
from ale_rock.tasks.cli import app
from ale_rock.tasks.loader import TaskFormatError
from ale_rock.tasks.models import NetworkMode, TaskFormat, VerifierKind
from ale_rock.tasks.runner import LocalDirRunner
from typer.testing import CliRunner


def _fixtures() -> Any:
    # Tests run with --import-mode=importlib: load the helper module by path.
    import importlib.util

    spec = importlib.util.spec_from_file_location("ale_rock_tests_harbor_fixtures", Path(__file__).with_name("_harbor_fixtures.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_fx = _fixtures()
harbor_error_tasks, harbor_tasks, swe_repo, timeout_task, write = (
    _fx.harbor_error_tasks, _fx.harbor_tasks, _fx.swe_repo, _fx.timeout_task, _fx.write,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed")
cli = CliRunner()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ale_rock.local_cluster import LocalCluster

    with LocalCluster(workers=1, workdir=tmp_path_factory.mktemp("rock-harbor")) as c:
        yield c


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("harbor-tasks")
    return harbor_tasks(base / "ok") | harbor_error_tasks(base / "bad") | {"timeouts": timeout_task(base / "slow")}


def _run(cluster: Any, *args: str) -> tuple[int, list[dict[str, Any]]]:
    res = cli.invoke(app, ["run", *args, "--json", "-j", "4", "--address", cluster.address, "--api-key", cluster.api_key()])
    rows = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    return res.exit_code, rows


def test_formats_load_into_one_model(tasks: dict[str, Path]) -> None:
    h = load_task(tasks["reward-txt"])
    assert h.format == TaskFormat.HARBOR and h.id == "t.reward-txt" and h.environment.workdir == "/app"
    assert h.verifier.kind == VerifierKind.REWARD_FILE and h.spec.limits.agent_s == 30 and "hello" in h.instruction
    assert h.environment.network_mode == NetworkMode.NO_NETWORK  # the default
    d = load_task(tasks["dockerfile"])
    assert d.environment.workdir == "/app" and d.environment.env == {"GREETING": "hi world"}
    assert d.environment.from_image == "python:3.11-slim-not-here"
    a = load_task(tasks["allowlist"])
    assert a.environment.network_mode == NetworkMode.ALLOWLIST and a.environment.allowed_hosts == ["pypi.org:443", "files.pythonhosted.org"]
    dep = load_task(tasks["deprecated"])
    assert dep.environment.memory_mb == 256 and dep.environment.network_mode == NetworkMode.NO_NETWORK
    assert dep.spec.domain.value == "security" and any("something_new" in n for n in dep.notes)
    m = load_task(tasks["multi-step"])
    assert [s.name for s in m.steps] == ["create", "append"] and m.steps[0].min_reward == 1.0
    assert "check.sh" in m.steps[1].tests and m.steps[1].setup == {"hint.txt": b"two\n"}
    tb = load_task(tasks["terminal-bench"])
    assert tb.format == TaskFormat.TERMINAL_BENCH and tb.spec.limits.agent_s == 60 and tb.environment.workdir == "/app"
    assert any("run-tests.sh needs the network" in n for n in tb.notes) and "solve.sh" in tb.solution
    # Ours still loads as before.
    assert load_suite()[0].format == TaskFormat.ALE


@pytest.mark.parametrize(
    ("files", "where", "field"),
    [
        ({"task.toml": '[environment]\ncpus = "many"\n', "instruction.md": "x", "tests/test.sh": ""}, "task.toml", "environment.cpus"),
        ({"task.toml": 'schema_version = "2.0"\n', "instruction.md": "x", "tests/test.sh": ""}, "task.toml", "schema_version"),
        ({"task.toml": "[[steps]]\nname = \"a\"\n"}, "steps/a", ""),
        ({"task.toml": "[agent]\ntimeout_sec = 5\n", "tests/test.sh": ""}, "instruction.md", ""),
        ({"task.toml": "", "instruction.md": "Do it."}, "tests/test.sh", ""),
        ({"task.toml": "[environment]\nworkdir = \"app\"\n", "instruction.md": "x", "tests/test.sh": ""}, "task.toml", "environment.workdir"),
        ({"task.yaml": "instruction: hi\nmax_agent_timeout_sec: -1\n", "tests/test_x.py": ""}, "task.yaml", "max_agent_timeout_sec"),
        ({"task.toml": "", "instruction.md": "x", "tests/test.sh": "", "environment/Dockerfile": "RUN echo\n"}, "Dockerfile", ""),
    ],
)
def test_validation_errors_name_the_file_and_field(tmp_path: Path, files: dict[str, str], where: str, field: str) -> None:
    write(tmp_path, files)
    with pytest.raises(TaskFormatError) as err:
        load_task(tmp_path)
    assert where in str(err.value) and (not field or f"field '{field}'" in str(err.value)), str(err.value)
    res = cli.invoke(app, ["validate", str(tmp_path)])
    assert res.exit_code == 1 and where in res.output


def test_validate_in_sandboxes(cluster: Any, tasks: dict[str, Path]) -> None:
    """Reference passes, no-op fails, deterministic: every valid Harbor/TB task, inside sandboxes."""
    ok = [str(p) for p in tasks.values() if p.parent.name == "ok"]
    res = cli.invoke(app, ["validate", *ok, "--runs", "1", "-j", "4", "--address", cluster.address,
                           "--api-key", cluster.api_key()])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert f"{len(ok)}/{len(ok)} tasks valid" in res.output


def test_run_solution_rewards(cluster: Any, tasks: dict[str, Path]) -> None:
    ok_dir = tasks["reward-txt"].parent
    code, rows = _run(cluster, str(ok_dir), "--solution")
    assert code == 0, rows
    by = {r["task_id"]: r for r in rows}
    assert len(by) == 8 and all(r["passed"] and r["reward"] == 1.0 and not r["error"] for r in rows), rows
    assert by["t.reward-json"]["metrics"] == {"reward": 1.0, "lines": 3.0, "complete": 1.0}
    assert [s["name"] for s in by["t.multi-step"]["steps"]] == ["create", "append"]
    assert {t["name"] for t in by["t.pytest-style"]["tests"]} == {"test_outputs.py::test_add", "test_outputs.py::test_neg"}
    assert {t["name"] for t in by["tb-hello"]["tests"]} == {"test_outputs.py::test_exists", "test_outputs.py::test_output"}


def test_run_agent_fractional_and_multistep_abort(cluster: Any, tasks: dict[str, Path]) -> None:
    """An agent command: partial work keeps its fractional, multi-metric reward; a step under its
    min_reward stops the trial (the later step never runs)."""
    agent = "case \"$ALE_INSTRUCTION\" in *a,*) printf 'a\\nc\\n' > out.txt;; *log.txt\\ containing*) echo wrong > log.txt;; esac"
    code, rows = _run(cluster, str(tasks["reward-json"]), str(tasks["multi-step"]), "--agent", agent)
    assert code == 0, rows
    by = {r["task_id"]: r for r in rows}
    assert by["t.reward-json"]["reward"] == pytest.approx(2 / 3) and by["t.reward-json"]["metrics"]["lines"] == 2.0
    assert not by["t.reward-json"]["passed"]
    assert [s["name"] for s in by["t.multi-step"]["steps"]] == ["create"] and by["t.multi-step"]["reward"] == 0.0


def test_run_errors_are_errors_not_scores(cluster: Any, tasks: dict[str, Path]) -> None:
    code, rows = _run(cluster, str(tasks["network-step"].parent), "--solution")
    assert code == 1
    by = {r["task_id"]: r for r in rows}
    assert "Dockerfile line 3: RUN apt-get update" in by["t.network-step"]["error"]
    assert "needs the network (apt-get update)" in by["t.network-step"]["error"]
    assert "docker_image 'ghcr.io/example/image:1' needs the docker backend" in by["t.ready-image"]["error"]
    assert "wrote no /logs/verifier/reward.txt" in by["t.no-reward"]["error"] and by["t.no-reward"]["reward"] == 0


def test_timeouts_bound_the_agent_and_the_verifier(cluster: Any, tasks: dict[str, Path]) -> None:
    start = time.monotonic()
    code, rows = _run(cluster, str(tasks["timeouts"]), "--agent", "sleep 30")
    assert code == 0 and rows[0]["reward"] == 0.0 and not rows[0]["passed"]
    assert time.monotonic() - start < 15  # 1 s for the agent, 1 s for the verifier, plus a sandbox


def test_allowlist_becomes_the_sandbox_egress_policy(cluster: Any, tasks: dict[str, Path]) -> None:
    from ale_rock.tasks.sandbox_runner import runner_factory_for

    make = runner_factory_for(cluster.client())
    with make(load_task(tasks["allowlist"])) as r:
        assert sorted(r.sandbox.network_policy()) == [("files.pythonhosted.org", 0), ("pypi.org", 443)]
        assert r.run("pwd", 10).output.strip() == "/app"
    with make(load_task(tasks["reward-txt"])) as r:  # no-network by default: nothing allowed
        assert r.sandbox.network_policy() == []


def test_export_harbor_round_trip(cluster: Any, tmp_path: Path) -> None:
    res = cli.invoke(app, ["export", str(tmp_path / "h"), "--format", "harbor"])
    assert res.exit_code == 0, res.output
    ours = {t.id: t for t in load_suite()}
    exported = {t.id: t for t in load_suite(tmp_path / "h")}
    assert exported.keys() == ours.keys() and all(t.format == TaskFormat.HARBOR for t in exported.values())
    assert all(exported[i].spec.prompt == ours[i].spec.prompt.strip() for i in ours)
    # Every exported task validates on the local runner (fast); three also in sandboxes, through the CLI.
    some = ["csv-sales-rollup", "fix-permissions", "sql-injection-fix"]
    dirs = [str(exported[i].path) for i in some]
    res = cli.invoke(app, ["validate", *dirs, "--runs", "1", "--address", cluster.address, "--api-key", cluster.api_key()])
    assert res.exit_code == 0 and "3/3 tasks valid" in res.output, res.output
    for i in ("dedupe-contacts", "eight-puzzle", "backup-script-quoting"):
        rep = validate_task(exported[i], runs=1)
        assert rep.ok, rep.summary()


def test_import_swe_instances(tmp_path: Path) -> None:
    repo, commit, fix, test_patch = swe_repo(tmp_path)
    inst = {"instance_id": "demo__calc-1", "repo": "demo/calc", "base_commit": commit, "patch": fix, "test_patch": test_patch,
            "problem_statement": "add() subtracts instead of adding.", "FAIL_TO_PASS": json.dumps(["tests/test_add.py::test_add"]),
            "PASS_TO_PASS": ["tests/test_sub.py::test_sub"]}  # fmt: skip
    (tmp_path / "in.jsonl").write_text(json.dumps(inst) + "\n")
    res = cli.invoke(app, ["import-swe", str(tmp_path / "in.jsonl"), "--repo-dir", str(repo), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    task = load_task(tmp_path / "out" / "demo__calc-1")
    with LocalDirRunner() as r:
        rep = validate_task(task, r, runs=1)
    assert rep.ok, rep.summary()
    assert rep.reference[0].metrics == {"reward": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0}
    assert rep.noop is not None and rep.noop.metrics == {"reward": 0.0, "fail_to_pass": 0.0, "pass_to_pass": 1.0}
    bad = dict(inst, FAIL_TO_PASS=5)
    (tmp_path / "bad.jsonl").write_text(json.dumps(bad) + "\n")
    res = cli.invoke(app, ["import-swe", str(tmp_path / "bad.jsonl"), "--repo-dir", str(repo), "--out", str(tmp_path / "o2")])
    assert res.exit_code == 2 and "bad.jsonl:1: field 'FAIL_TO_PASS'" in " ".join(res.output.split())
