"""Fixtures for the Docker backend tests: a real engine, the real base image, the real Rocklet.

Every test here is marked ``docker``; the whole directory is skipped (with the reason) when the
docker SDK is missing or no engine answers. When the engine answers but the base image is
missing, ``scripts/build_base_image.sh`` builds it once (cached).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2
from ale_rock.backends.docker_engine import engine_problem

from .._wait import wait_until

REPO = Path(__file__).resolve().parents[4]


def _engine_problem() -> str:
    return engine_problem()


_PROBLEM = _engine_problem()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents and _PROBLEM:
            item.add_marker(pytest.mark.skip(reason=_PROBLEM))


@pytest.fixture(scope="session")
def base_image() -> str:
    """The base image tag, built by scripts/build_base_image.sh when missing."""
    from ale_rock.backends.docker_runtime import default_base_image

    tag = default_base_image()
    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True, timeout=900)
    out = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, timeout=60)
    assert out.returncode == 0, f"base image {tag} missing after build_base_image.sh"
    return tag


@pytest.fixture()
def backend(base_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A DockerBackend with a worker name of its own; everything it made is reaped after."""
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig

    worker = f"t{uuid.uuid4().hex[:8]}"
    root = Path("/tmp/ale-dt") / worker  # short: Unix socket paths are limited to 108 bytes
    # No warm pool: these tests count containers (test_rock_docker_pool.py covers the pool).
    b = DockerBackend(DockerBackendConfig(worker=worker, base_image=base_image, root_dir=root, pool_size=0))
    yield b
    b.reap_orphans(set())
    assert containers_of(f"ale.worker={worker}") == []
    b.close()
    assert list(root.iterdir()) == []  # no sandbox dir left behind
    root.rmdir()


@pytest.fixture()
def docker_ps() -> Callable[[str], list[str]]:
    """``docker ps -aq --filter label=...`` as a function (tests cannot import conftest)."""
    return containers_of


@pytest.fixture()
def poll() -> Callable[..., bool]:
    """:func:`wait_until` as a fixture."""
    return wait_until


def containers_of(label: str) -> list[str]:
    """Ids of all containers (any state) carrying ``label`` (``key=value``), via the docker CLI."""
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={label}"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


class Rocklet:
    """A minimal RockletService client over the sandbox's Unix socket (the Worker's path)."""

    def __init__(self, socket_path: Path) -> None:
        self.channel = grpc.insecure_channel(f"unix:{socket_path}")
        self.stub = rocklet_pb2_grpc.RockletServiceStub(self.channel)

    def exec(self, command: str, timeout_ms: int = 30_000, **spec: Any) -> Any:
        """Run ``command`` with /bin/sh -c; returns the ExecResult."""
        req = rocklet_pb2.RockletServiceExecRequest(
            spec=sandbox_pb2.ExecSpec(command=command, timeout_ms=timeout_ms, **spec)
        )
        return self.stub.Exec(req, timeout=timeout_ms / 1000 + 30).result

    def sh(self, command: str, timeout_ms: int = 30_000) -> str:
        """Run ``command``; assert it exits 0; return stdout as text."""
        r = self.exec(command, timeout_ms)
        assert r.exit_code == 0, (command, r.exit_code, r.stdout, r.stderr, r.error)
        return str(r.stdout.decode())

    def info(self) -> Any:
        """GetInfo."""
        return self.stub.GetInfo(rocklet_pb2.GetInfoRequest(), timeout=10)

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()


@pytest.fixture()
def rocklet() -> Iterator[Callable[[Any], Rocklet]]:
    """Open Rocklet clients on handles; all closed after the test."""
    opened: list[Rocklet] = []

    def open_(handle: Any) -> Rocklet:
        r = Rocklet(handle.rocklet_socket)
        opened.append(r)
        return r

    yield open_
    for r in opened:
        r.close()
