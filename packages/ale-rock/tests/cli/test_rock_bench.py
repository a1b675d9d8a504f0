"""``ale-rock bench --json`` end to end at a tiny size: it prints every field and leaks nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

FIELDS = {"create_p50_ms", "create_p99_ms", "exec_rtt_p50_ms", "exec_rtt_p99_ms", "subprocess_p50_ms",
          "docker_run_p50_ms", "concurrent", "failures", "leaked"}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed")
def test_bench_json_small() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ale_rock.cli", "bench", "--json", "--concurrent", "3", "--iterations", "3",
         "--docker-runs", "0"], capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert set(result) >= FIELDS
    assert result["failures"] == 0, result["failure_samples"]
    assert result["leaked"] == 0 and result["concurrent"] == 3
    assert result["create_p50_ms"] > 0 and result["exec_rtt_p50_ms"] > 0 and result["subprocess_p50_ms"] > 0
    assert result["docker_run_p50_ms"] is None
