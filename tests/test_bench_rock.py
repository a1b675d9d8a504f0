"""bench/rock*.py end to end at a tiny size: each prints every field and leaks nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
FIELDS = {"create_p50_ms", "create_p99_ms", "exec_rtt_p50_ms", "exec_rtt_p99_ms", "subprocess_p50_ms",
          "docker_run_p50_ms", "concurrent", "failures", "leaked"}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed")
def test_rock_bench_json_small() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "rock.py"), "--json", "--concurrent", "3", "--iterations", "3",
         "--docker-runs", "0"], capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert set(result) >= FIELDS
    assert result["failures"] == 0, result["failure_samples"]
    assert result["leaked"] == 0 and result["concurrent"] == 3
    assert result["create_p50_ms"] > 0 and result["exec_rtt_p50_ms"] > 0 and result["subprocess_p50_ms"] > 0
    assert result["docker_run_p50_ms"] is None


def _docker_ps(label: str) -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={label}"], capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.split()


@pytest.mark.docker
def test_docker_backend_bench_measures_pooled_cold_and_docker_run_without_leaks(bench_module: Any) -> None:
    from ale_rock.backends.docker_engine import engine_problem

    if problem := engine_problem():
        pytest.skip(problem)
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig
    from ale_rock.backends.docker_runtime import default_base_image

    image = default_base_image()
    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True, timeout=900)  # cached
    worker = f"b{uuid.uuid4().hex[:8]}"

    def pooled(name: str, size: int) -> Any:
        return DockerBackend(DockerBackendConfig(worker=name, base_image=image, root_dir=Path("/tmp/ale-dt") / name,
                                                 pool_size=size))

    pooled_b, cold = pooled(worker, 1), pooled(worker + "c", 0)
    try:
        out = bench_module("rock_docker_backend").measure(pooled_b, n=1, cold=cold)
    finally:
        for b in (pooled_b, cold):
            b.reap_orphans(set())
            b.close()
            b.root.rmdir()
    assert out["n"] == 1
    for key in ("docker_run_p50_ms", "docker_create_p50_ms", "docker_create_cold_p50_ms"):
        assert out[key] > 0, out
    assert _docker_ps(f"ale.worker={worker}") == [] and _docker_ps(f"ale.worker={worker}c") == []
