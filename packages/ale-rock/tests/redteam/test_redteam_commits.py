"""Red team, commit names across namespaces on the local backend (issue 11 finding 5: "commit names
collide on both backends"; the docker side is in test_redteam_docker.py), through the admin and SDK.

Attacks: namespaces A and B commit a sandbox under the same name (and A under names crafted to
reach B's archive); A starts a sandbox from B's snapshot reference. Each one's snapshot must hold
its own data, nothing of A's may overwrite B's, and B's reference gives A nothing.
"""

from __future__ import annotations

import hashlib
import secrets
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from ale_rock.local_cluster import LocalCluster, real_worker_argv
from ale_rock.sdk import Sandbox
from ale_rock.sdk.errors import InvalidArgument, SandboxNotFound, SandboxStartFailed

from . import _cluster_fixtures as fx

NAME = "shared:v1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    fx.need_local_backend()
    keys = {ns: f"key-{ns}-{secrets.token_hex(6)}" for ns in ("team-a", "team-b")}
    c = LocalCluster(workers=0, worker_argv=real_worker_argv({"pool_size": 1, "retry_interval_s": 0.2}),
                     admin_config=dict(fx.FAST_ADMIN), namespaces=keys,
                     workdir=tmp_path_factory.mktemp("redteam-commits"))
    try:
        c.start()
        c.start_worker("w1")
        yield c
    finally:
        c.stop()


def _archive(reference: str) -> dict[str, bytes]:
    """The files of a local snapshot (a tar.gz on the worker's host) by name."""
    with tarfile.open(reference, "r:gz") as tar:
        return {m.name.removeprefix("./"): tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_same_commit_name_in_two_namespaces_does_not_collide(cluster: LocalCluster) -> None:
    token_a, token_b = secrets.token_hex(8), secrets.token_hex(8)
    with Sandbox.create(client=cluster.client("team-b"), ttl=120) as b:
        b.write("/workspace/owner.txt", f"B {token_b}")
        ref_b = b.commit(NAME)
        digest_b = _digest(ref_b)
        with Sandbox.create(client=cluster.client("team-a"), ttl=120) as a:
            a.write("/workspace/owner.txt", f"A {token_a}")
            ref_a = a.commit(NAME)
            # Names crafted to land on B's archive (path separators, dot-dot, B's namespace dir) that
            # the admin's name check lets through to the worker...
            b_dir = Path(ref_b).parent.name
            crafted = [a.commit(n) for n in (f"x/../../{b_dir}/{NAME}", f"{b_dir}/../../{b_dir}/shared_v1",
                                             f"ale-snap/team-b/{NAME}")]
            # ... and the ones it refuses outright.
            for name in (f"../{b_dir}/{NAME}", str(Path(ref_b).with_suffix("").with_suffix(""))):
                with pytest.raises(InvalidArgument):
                    a.commit(name)
    assert ref_a != ref_b and Path(ref_a).parent != Path(ref_b).parent
    assert _archive(ref_a)["owner.txt"] == f"A {token_a}".encode()
    got_b = _archive(ref_b)
    assert got_b["owner.txt"] == f"B {token_b}".encode()
    assert token_a.encode() not in b"".join(got_b.values())
    assert _digest(ref_b) == digest_b  # A's commits (same name, crafted names) never wrote B's archive
    for ref in crafted:
        assert Path(ref).parent == Path(ref_a).parent and ref != ref_b, ref
    # A names B's snapshot as its image: refused (the local backend starts from no image at all:
    # the start fails), and no sandbox of A ever runs, let alone with B's data.
    for image in (ref_b, NAME, f"file://{ref_b}"):
        with pytest.raises((InvalidArgument, SandboxNotFound, SandboxStartFailed)) as e:
            Sandbox.create(image, client=cluster.client("team-a"), ttl=60)
        assert token_b not in str(e.value)
    assert [s.id for s in Sandbox.list(client=cluster.client("team-a"), states=["running"])] == []
