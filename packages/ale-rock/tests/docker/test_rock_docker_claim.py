"""A warm claim makes no engine call, and its image-id cache never serves an old image's slot.

One pooled backend for the module (its warm slots are reused across the tests).
"""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_rock.backends.base import SandboxConfig

pytestmark = pytest.mark.docker


class _CountingApi:
    """The engine client, recording (thread id, method) of every call."""

    def __init__(self, api: Any) -> None:
        self._inner = api
        self.calls: list[tuple[int, str]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((threading.get_ident(), name))
            return attr(*args, **kwargs)

        return call


_IMAGES: list[str] = []
"""Image ids the tests committed: removed once the pool's slots of them are gone."""


@pytest.fixture(scope="module")
def pooled(base_image: str) -> Iterator[Any]:
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig

    worker = f"c{uuid.uuid4().hex[:8]}"
    b = DockerBackend(
        DockerBackendConfig(worker=worker, base_image=base_image, root_dir=Path("/tmp/ale-dt") / worker, pool_size=1)
    )
    counting = _CountingApi(b._api)
    b._api = b._images._api = counting
    yield b
    b.reap_orphans(set())
    b.close()
    b.root.rmdir()  # fails unless every sandbox dir is gone
    for image in _IMAGES:
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, timeout=60)
    from .conftest import containers_of

    assert containers_of(f"ale.worker={worker}") == []


def _ready(backend: Any, image: str = "") -> int:
    return int(backend._pool.ready(backend._shape(SandboxConfig(image=image or backend.config.base_image,
                                                                limits=backend._pool_shape().limits))))


def test_a_warm_claim_makes_no_engine_call(pooled, rocklet, poll) -> None:
    calls = pooled._api.calls
    # The engine is shared: another session's image event drops the cache (one inspect_image on
    # the next create, correctly). Such a claim does not count; one of a few must be clean.
    for _attempt in range(5):
        assert poll(lambda: _ready(pooled) == 1 and pooled._images.live, 120)
        pooled._shape(pooled._pool_shape())  # the image id is cached from here on
        generation, mark = pooled._images._generation, len(calls)
        h = pooled.start("nocall", SandboxConfig(env={"WHO": "nocall"}))
        mine = [name for tid, name in calls[mark:] if tid == threading.get_ident()]
        if pooled._images._generation == generation:
            break
        pooled.remove("nocall")
    assert pooled._images._generation == generation, "image events on every attempt"
    assert mine == [], f"a warm claim called the engine: {mine}"
    # The slot ran its warm-up command before it was handed out: the Rocklet's spill dir, made by
    # the first command, is there before the claimer's first command.
    warmed = subprocess.run(["docker", "exec", h.extra["container_id"], "test", "-d", "/tmp/.ale"],
                            capture_output=True, timeout=60)
    assert warmed.returncode == 0, warmed.stderr
    assert rocklet(h).sh("echo $WHO") == "nocall\n"
    # ...and the worker's view of it needs no rename: listed, handled, removed by its own id.
    assert pooled.list() == ["nocall"] and pooled.handle("nocall").extra["container_id"] == h.extra["container_id"]
    pooled.remove("nocall")
    assert pooled.list() == [] and not h.host_dir.exists()


def test_an_image_committed_again_under_its_name_is_never_served_from_old_slots(pooled, rocklet, poll) -> None:
    """Red team: a snapshot name that moves to new content must never start a sandbox from a warm
    slot of its old content (which would hand out stale or another tenant's files)."""
    src = pooled.start("src", SandboxConfig())
    images: list[str] = []
    try:
        r = rocklet(src)
        r.sh("echo v1 > /workspace/version")
        ref, _, first_id = pooled.commit("src", "moving")
        images.append(ref)
        a = pooled.start("a", SandboxConfig(image=ref))  # a miss: the demand makes ref a pool
        assert rocklet(a).sh("cat /workspace/version") == "v1\n"
        pooled.remove("a")
        assert poll(lambda: _ready(pooled, ref) == 1, 120)  # a warm slot of the v1 content
        r.sh("echo v2 > /workspace/version")
        _, _, second_id = pooled.commit("src", "moving")  # same name, new content
        assert second_id != first_id
        _IMAGES.extend((first_id, second_id))
        b = pooled.start("b", SandboxConfig(image=ref))  # right after: no time for an event
        assert rocklet(b).sh("cat /workspace/version") == "v2\n"
        assert pooled._api.inspect_container(b.extra["container_id"])["Image"] == second_id
        pooled.remove("b")
        # Someone else moves the name (the CLI, not this backend): the engine's image event
        # drops the cache, so the id the next claim is keyed by is the new one.
        subprocess.run(["docker", "tag", first_id, ref], check=True, capture_output=True, timeout=60)
        assert poll(lambda: pooled._shape(SandboxConfig(image=ref, limits=pooled._pool_shape().limits))[1]
                    == first_id, 10)
        c = pooled.start("c", SandboxConfig(image=ref))
        assert rocklet(c).sh("cat /workspace/version") == "v1\n"
    finally:
        for sid in ("src", "a", "b", "c"):
            pooled.remove(sid)
        for ref in images:
            subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, timeout=60)
