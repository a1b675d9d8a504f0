"""The SDK through the Admin onto a Worker with the docker backend (needs a running Docker engine
and the base image built by scripts/build_base_image.sh)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ale_rock import Sandbox
from ale_rock.backends.docker_engine import engine_problem
from ale_rock.local_cluster import LocalCluster, real_worker_argv

_PROBLEM = engine_problem()
pytestmark = [pytest.mark.docker, pytest.mark.skipif(bool(_PROBLEM), reason=_PROBLEM)]


@pytest.fixture(scope="module")
def docker_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(workers=0, workdir=tmp_path_factory.mktemp("rock-docker"),
                     worker_argv=real_worker_argv({"backend": "docker", "pool_size": 0}), start_timeout_s=120)
    with c:
        c.start_worker("dw")
        yield c


def test_docker_sandbox_lifecycle(docker_cluster: LocalCluster) -> None:
    client = docker_cluster.client(timeout=120)
    with Sandbox.create(client=client, backend="docker", cpu=0.5, memory="256Mi") as sb:
        assert sb.info.state == "running"
        r = sb.exec("echo hi; id -u")
        assert r.ok and r.stdout.splitlines()[0] == "hi" and r.stdout.splitlines()[1] != "0"
        sb.write("/workspace/f.txt", "x")
        assert sb.read("/workspace/f.txt") == b"x"
    assert [i.state for i in Sandbox.list(client=client, states=["running"])] == []
