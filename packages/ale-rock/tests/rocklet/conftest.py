"""Fixtures for the Rocklet's engines (run on the host, in a temp dir) and a real Rocklet process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc
from ale_rock.rocklet.exec import ExecEngine
from ale_rock.rocklet.files import FileOps
from ale_rock.rocklet.sessions import SessionManager

BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d


@pytest.fixture
def engine(workdir: Path, tmp_path: Path) -> Iterator[ExecEngine]:
    e = ExecEngine(str(workdir), lambda: dict(BASE_ENV), tmp_path / "spill", kill_grace_s=0.5)
    yield e
    e.shutdown()


@pytest.fixture
def sessions(workdir: Path, tmp_path: Path) -> Iterator[SessionManager]:
    m = SessionManager(str(workdir), lambda: dict(BASE_ENV), tmp_path / "spill")
    yield m
    m.close_all()


@pytest.fixture
def files(workdir: Path) -> FileOps:
    return FileOps(str(workdir))


@pytest.fixture(scope="module")
def rocklet_stub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rocklet_pb2_grpc.RockletServiceStub]:
    """A real Rocklet process serving on a Unix socket (outside any sandbox)."""
    d = tmp_path_factory.mktemp("rocklet")
    (d / "work").mkdir()
    settings = d / "settings.json"
    settings.write_text(f'{{"workdir": "{d / "work"}", "spill_dir": "{d / "spill"}", "kill_grace_s": 0.5}}')
    sock = d / "rocklet.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ale_rock.rocklet", "--socket", str(sock), "--settings", str(settings)],
        env={**os.environ},
    )
    channel = grpc.insecure_channel(f"unix:{sock}")
    stub = rocklet_pb2_grpc.RockletServiceStub(channel)
    deadline = time.monotonic() + 60
    while True:
        try:
            stub.GetInfo(rocklet_pb2.GetInfoRequest(), timeout=1)
            break
        except grpc.RpcError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise
            time.sleep(0.1)
    yield stub
    channel.close()
    proc.terminate()
    proc.wait(timeout=10)
