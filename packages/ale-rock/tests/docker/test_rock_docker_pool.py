"""The Docker backend's warm pool: claims, refills, fallbacks, and a worker restart."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from ale_rock.backends.base import Limits, SandboxConfig

pytestmark = pytest.mark.docker


def _pooled(base_image: str, worker: str, size: int):
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig

    cfg = DockerBackendConfig(
        worker=worker, base_image=base_image, root_dir=Path("/tmp/ale-dt") / worker, pool_size=size
    )
    return DockerBackend(cfg)


def test_claim_refill_and_fallback(base_image, rocklet, docker_ps, poll) -> None:
    worker = f"p{uuid.uuid4().hex[:8]}"
    backend = _pooled(base_image, worker, 1)
    try:
        assert poll(lambda: backend._pool.ready() == 1, 120)
        warm = docker_ps("ale.pool=1")
        assert len([c for c in warm if c in docker_ps(f"ale.worker={worker}")]) == 1
        assert backend.list() == []  # warm slots are not sandboxes

        h = backend.start("w1", SandboxConfig(env={"MARK": "claimed"}, labels={"a": "b"}))
        r = rocklet(h)
        assert r.sh("echo $MARK") == "claimed\n"  # the new settings apply from the first command
        assert h.extra["egress_token"] and backend.list() == ["w1"]
        assert backend._api.inspect_container(h.extra["container_id"])["Name"] == f"/ale-{worker}-w1"
        assert h.host_dir == backend.root / "w1" and h.rocklet_socket.exists()

        # A shape the pool does not hold starts cold, labelled with its id.
        cold = backend.start("c1", SandboxConfig(limits=Limits(memory_bytes=256 * 2**20)))
        assert docker_ps("ale.sandbox_id=c1") == [cold.extra["container_id"][:12]]
        assert rocklet(cold).sh("echo cold") == "cold\n"

        assert poll(lambda: backend._pool.ready() == 1, 120)  # refilled in the background
        assert len(docker_ps(f"ale.worker={worker}")) == 3
        backend.remove("w1")
        assert not h.host_dir.exists() and backend.list() == ["c1"]
    finally:
        backend.reap_orphans(set())
        backend.close()
        backend.root.rmdir()  # fails unless every sandbox dir is gone
    assert docker_ps(f"ale.worker={worker}") == []


def test_restart_adopts_claimed_sandboxes_and_reaps_old_pool(base_image, rocklet, docker_ps, poll) -> None:
    worker = f"p{uuid.uuid4().hex[:8]}"
    first = _pooled(base_image, worker, 1)
    assert poll(lambda: first._pool.ready() == 1, 120)
    h = first.start("keep", SandboxConfig(env={"K": "v"}))
    assert poll(lambda: first._pool.ready() == 1, 120)
    first._client.close()  # the worker dies: nothing is cleaned up, the containers stay

    second = _pooled(base_image, worker, 0)
    try:
        assert len(docker_ps(f"ale.worker={worker}")) == 2  # "keep" + the dead worker's warm slot
        assert second.list() == ["keep"]
        assert second.reap_orphans({"keep"}) == []  # the old slot goes, and it is not a sandbox
        assert len(docker_ps(f"ale.worker={worker}")) == 1
        adopted = second.handle("keep")
        assert adopted.extra["egress_token"] == h.extra["egress_token"]
        assert rocklet(adopted).sh("echo $K") == "v\n"
    finally:
        second.reap_orphans(set())
        second.close()
        second.root.rmdir()
    assert docker_ps(f"ale.worker={worker}") == []
