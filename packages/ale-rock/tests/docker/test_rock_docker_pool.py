"""The Docker backend's warm pool: claims, refills, fallbacks, and a worker restart."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from ale_rock.backends.base import Limits, SandboxConfig

pytestmark = pytest.mark.docker


def _pooled(base_image: str, worker: str, size: int, **extra):
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig

    cfg = DockerBackendConfig(
        worker=worker, base_image=base_image, root_dir=Path("/tmp/ale-dt") / worker, pool_size=size, **extra
    )
    return DockerBackend(cfg)


def _ready(backend, limits: Limits | None = None) -> int:
    """Warm slots of one shape (the default shape when ``limits`` is None)."""
    from ale_rock.backends.docker import _with_defaults

    config = backend._pool_shape() if limits is None else SandboxConfig(limits=_with_defaults(limits))
    return backend._pool.ready(backend._shape(config))


def test_claim_refill_and_fallback(base_image, rocklet, docker_ps, poll) -> None:
    worker = f"p{uuid.uuid4().hex[:8]}"
    backend = _pooled(base_image, worker, 1)
    try:
        assert poll(lambda: _ready(backend) == 1, 120)
        warm = docker_ps("ale.pool=1")
        assert len([c for c in warm if c in docker_ps(f"ale.worker={worker}")]) == 1
        assert backend.list() == []  # warm slots are not sandboxes

        h = backend.start("w1", SandboxConfig(env={"MARK": "claimed"}, labels={"a": "b"}))
        r = rocklet(h)
        assert r.sh("echo $MARK") == "claimed\n"  # the new settings apply from the first command
        assert h.extra["egress_token"] and backend.list() == ["w1"]
        # The claim did not rename the container (the engine's slowest step): it is the worker's
        # slot, and the map persisted in the host dir says it is w1's, also for a fresh process.
        info = backend._api.inspect_container(h.extra["container_id"])
        assert info["Name"].startswith(f"/ale-{worker}-_pool-") and info["Config"]["Labels"]["ale.worker"] == worker
        assert h.host_dir == backend.root / "w1" and h.rocklet_socket.exists()
        from ale_rock.backends.docker_index import SandboxIndex

        assert SandboxIndex(backend.root).get("w1").container_id == h.extra["container_id"]

        # A shape the pool does not hold starts cold, labelled with its id.
        cold = backend.start("c1", SandboxConfig(limits=Limits(memory_bytes=256 * 2**20)))
        assert docker_ps("ale.sandbox_id=c1") == [cold.extra["container_id"][:12]]
        assert rocklet(cold).sh("echo cold") == "cold\n"

        assert poll(lambda: _ready(backend) == 1, 120)  # refilled in the background
        # The cold shape now has demand, so it gets a warm slot of its own: once the refills
        # settle, every container besides the two sandboxes is a slot the pools know.
        assert poll(lambda: _ready(backend, Limits(memory_bytes=256 * 2**20)) == 1, 120)
        assert len(docker_ps(f"ale.worker={worker}")) == 2 + len(backend._pool.keys()) == 4
        assert backend.list() == ["c1", "w1"]
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


def test_demand_pool_per_shape_never_reuses_a_used_container(base_image, rocklet, docker_ps, poll) -> None:
    """Red team: a tenant leaves files, a process and env behind; the next tenant of the same
    shape, served from the pool, sees none of it and never gets the same container."""
    worker = f"p{uuid.uuid4().hex[:8]}"
    backend = _pooled(base_image, worker, 1, pool_window_s=30)
    shape = Limits(memory_bytes=256 * 2**20)
    seen: set[str] = set()
    try:
        first = backend.start("a1", SandboxConfig(limits=shape))  # no pool of this shape yet: cold
        assert docker_ps("ale.sandbox_id=a1") == [first.extra["container_id"][:12]]
        seen.add(first.extra["container_id"])
        assert poll(lambda: _ready(backend, shape) == 1, 120)  # the demand made a pool for it
        backend.remove("a1")

        prev = None
        for sid in ("b1", "c1"):
            assert poll(lambda: _ready(backend, shape) >= 1, 120)
            h = backend.start(sid, SandboxConfig(limits=shape, env={"SECRET": sid}))
            assert docker_ps(f"ale.sandbox_id={sid}") == []  # served warm (labels are the slot's)
            cid = h.extra["container_id"]
            assert cid not in seen, "a used container was handed out again"
            seen.add(cid)
            r = rocklet(h)
            # Nothing of the previous tenant: no files in the work dir or /tmp, no processes,
            # not its env; and this sandbox's limits are the shape's.
            assert r.sh("ls -A /workspace; ls -A /tmp/loot 2>/dev/null; echo $SECRET") == f"{sid}\n"
            assert "4242" not in r.sh("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo")
            mem = backend._api.inspect_container(cid)["HostConfig"]["Memory"]
            assert mem == 256 * 2**20
            if prev is not None:
                assert r.exec("test -e /workspace/loot").exit_code != 0
            # Leave loot behind for the next tenant.
            r.sh("echo loot > /workspace/loot; mkdir -p /tmp/loot; (sleep 4242 >/dev/null 2>&1 &)")
            assert r.sh("cat /workspace/loot") == "loot\n"  # the loot is real in its own sandbox
            assert "4242" in r.sh("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo")
            prev = sid
            backend.remove(sid)
        assert backend._pool.keys().isdisjoint(seen)
    finally:
        backend.reap_orphans(set())
        backend.close()
        backend.root.rmdir()
    assert docker_ps(f"ale.worker={worker}") == []
