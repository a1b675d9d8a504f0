"""Bad input to ``ale-rock admin|worker|proxy|sandbox``: one or two lines on stderr naming the file,
key or variable, exit status 2, no traceback (issue 15: these printed 29–157-line tracebacks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ale_proto.testing import assert_bad_input_error
from ale_rock.cli import app
from typer.testing import CliRunner

runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-config")
    (d / "unknown.yaml").write_text("pool_sise: 3\n")
    (d / "bad.yaml").write_text("labels: {zone: a\nbackend: local\n")
    (d / "admin.yaml").write_text("port: 0\njoin_tokn: x\n")
    (d / "proxy.yaml").write_text("grpc_prot: 0\n")
    return d


CASES = [  # argv, environment, what the one line must name
    pytest.param(["worker", "--config", "{d}/unknown.yaml"], {},
                 ["unknown.yaml", "'pool_sise'", "did you mean 'pool_size'"], id="worker-unknown-key"),
    pytest.param(["worker", "--config", "{d}/bad.yaml"], {}, ["bad.yaml:2:8: invalid YAML"], id="worker-bad-yaml"),
    pytest.param(["worker", "--config", "{d}/missing.yaml"], {}, ["missing.yaml", "not found"], id="worker-missing-file"),
    pytest.param(["worker", "--set", "pool_size=abc"], {}, ["pool_size=abc", "pool_size:", "integer", "'abc'"],
                 id="worker-bad-value"),
    pytest.param(["worker", "-c", "backend=kvm"], {}, ["backend=kvm", "'local', 'docker' or 'kubernetes'"], id="worker-bad-choice"),
    pytest.param(["admin", "--config", "{d}/admin.yaml"], {},
                 ["admin.yaml", "'join_tokn'", "did you mean 'join_token'"], id="admin-unknown-key"),
    pytest.param(["admin"], {"ALE_ROCK_API_KEYS": "nonamespace"}, ["ALE_ROCK_API_KEYS", "KEY=NAMESPACE"],
                 id="admin-bad-env"),
    pytest.param(["proxy", "--config", "{d}/proxy.yaml"], {},
                 ["proxy.yaml", "'grpc_prot'", "did you mean 'grpc_port'"], id="proxy-unknown-key"),
    pytest.param(["sandbox", "ls"], {"ALE_ROCK_API_KEY": None}, ["ALE_ROCK_API_KEY"], id="sandbox-missing-api-key"),
]


@pytest.mark.parametrize(("argv", "env", "named"), CASES)
def test_bad_input_is_one_line_naming_it_and_exit_2(files: Path, monkeypatch: pytest.MonkeyPatch,
                                                     argv: list[str], env: dict[str, str | None],
                                                     named: list[str]) -> None:
    monkeypatch.delenv("ALE_ROCK_API_KEYS", raising=False)
    for k, v in env.items():
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    res = runner.invoke(app, [a.format(d=files) for a in argv])
    assert_bad_input_error(res, named, quiet_stdout=True)


def test_python_m_worker_is_the_same_cli(files: Path) -> None:
    # `python -m ale_rock.worker` delegates to `ale-rock worker`: same flags, same one-line error.
    proc = subprocess.run([sys.executable, "-m", "ale_rock.worker", "--config", str(files / "unknown.yaml")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {files / 'unknown.yaml'}: unknown key 'pool_sise' (did you mean 'pool_size'?)"]


def test_bench_forwards_to_the_repository_benchmark_and_its_errors() -> None:
    """``ale-rock bench ARGS`` runs the checkout's bench/rock.py with ARGS: a bad value reaches it
    and comes back as its one-line error, exit 2 (a real subprocess, no benchmark started)."""
    out = subprocess.run([sys.executable, "-m", "ale_rock.cli", "bench", "--iterations", "0", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --iterations:"), out.stderr
    assert out.stdout == ""


def test_bench_without_a_checkout_says_where_the_benchmarks_are(monkeypatch: pytest.MonkeyPatch) -> None:
    import ale_rock.cli as cli

    monkeypatch.setattr(cli, "_repo_bench", lambda name: None)
    result = runner.invoke(app, ["bench", "--json"])
    assert_bad_input_error(result, ["bench/", "python bench/rock.py"])
