"""`pip install ./packages/ale-proto` in a fresh venv pulls only protobuf + grpcio."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_installs_alone_without_torch_or_other_packages(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(PKG)],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(
        [str(py), "-c", "import ale_proto.v1, ale_proto.v1.sandbox_pb2_grpc, ale_proto.errors; print('ok')"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, timeout=120)
    names = {line.split("==")[0].lower() for line in listed.stdout.splitlines() if "==" in line}
    assert {"ale-proto", "protobuf", "grpcio"} <= names
    assert not names & {"torch", "ale-rock", "ale-flow", "ale-roll", "transformers"}, names
    assert sys.version_info >= (3, 10)
