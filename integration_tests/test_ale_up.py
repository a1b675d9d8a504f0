"""`ale up` brings the stack up and runs the job; `ale down` leaves no process or mount behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ALE = [sys.executable, "-m", "ale.cli"]


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (our run dir), excluding this test."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
        except (OSError, IndexError):
            continue
        if text in cmd and state != "Z" and int(pid) != os.getpid():
            found.append(f"{pid}: {cmd}")
    return found


def mounts_mentioning(text: str) -> list[str]:
    return [line for line in Path("/proc/mounts").read_text().splitlines() if text in line]


def run_ale(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ALE, *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture()
def runs_root(tmp_path: Path) -> Path:
    # Deliberately deep: sandbox sockets live under the run dir, and Unix socket paths are capped
    # at 108 bytes, so this checks that the worker copes with a long state dir.
    root = tmp_path / ("deep-" * 8) / "runs"
    root.mkdir(parents=True)
    return root


@pytest.fixture()
def ale_env(runs_root: Path) -> dict[str, str]:
    return {**os.environ, "ALE_RUNS": str(runs_root)}


def test_up_keep_status_down_leaves_nothing(ale_env: dict[str, str], runs_root: Path) -> None:
    r = run_ale("up", "--keep", "smoke.sandboxes=2", env=ale_env)
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = (runs_root / "latest").resolve()
    report = json.loads((run_dir / "report.json").read_text())
    assert report["smoke"] == {**report["smoke"], "sandboxes": 2, "ok": 2}
    assert set(report["services"]) == {"admin", "worker"}

    st = run_ale("status", env=ale_env, timeout=60)
    assert st.returncode == 0 and st.stdout.count("True") == 4, st.stdout  # 2 services × alive, healthy
    assert processes_mentioning(str(run_dir))

    down = run_ale("down", env=ale_env, timeout=60)
    assert down.returncode == 0 and "stopped 2" in down.stdout, down.stdout + down.stderr
    assert processes_mentioning(str(run_dir)) == []
    assert mounts_mentioning(str(run_dir)) == []


def test_bad_override_is_a_clear_error(ale_env: dict[str, str]) -> None:
    r = run_ale("up", "smoke.sandboxez=2", env=ale_env, timeout=60)
    assert r.returncode == 2
    assert "smoke.sandboxez" in r.stdout


def test_status_without_a_run(ale_env: dict[str, str]) -> None:
    r = run_ale("status", env=ale_env, timeout=60)
    assert r.returncode == 1 and "no run yet" in r.stdout
