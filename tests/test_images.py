"""`make images`: the admin and worker images, built from the project's base image, run a sandbox.

deploy/images/build.sh builds ale-services (the base image + the wheels `make dist` makes) and the
thin ale-admin / ale-worker layers; it skips an image whose `ale.inputs` label already matches the
hash of its inputs, so only the first run (or one after a source change) pays the build. Then an
Admin container (non-root) and a Worker container (root with CAP_SYS_ADMIN: the local bubblewrap backend mounts
each sandbox's tmpfs and gives it a host uid of its own; unconfined seccomp/AppArmor/system paths
so bubblewrap can make namespaces) start from the images on the host's
network, the Worker registers with the join token, and the SDK on the host creates a sandbox
through the Admin and runs a command in it.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ale_proto.serving import free_port
from ale_rock.backends.docker_engine import engine_problem

REPO = Path(__file__).resolve().parents[1]
_PROBLEM = engine_problem()

pytestmark = [pytest.mark.docker, pytest.mark.skipif(bool(_PROBLEM), reason=_PROBLEM or "")]


#: What the worker container needs for the local (bubblewrap) backend; docs/deploy.md says the same.
WORKER_RUN_OPTIONS = ("--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined",
                      "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined")


def _docker(*args: str, timeout: float = 120) -> str:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out.stdout.strip()


def _logs(name: str) -> str:
    out = subprocess.run(["docker", "logs", "--tail", "40", name], capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    """Role -> tag, built (or found up to date) by deploy/images/build.sh."""
    t0 = time.monotonic()
    out = subprocess.run(["bash", str(REPO / "deploy" / "images" / "build.sh"), "admin", "worker"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    print(f"deploy/images/build.sh admin worker: {time.monotonic() - t0:.1f} s\n{out.stderr}")
    tags = out.stdout.split()
    assert [t.split(":")[0] for t in tags] == ["ale-admin", "ale-worker"], tags
    return {"admin": tags[0], "worker": tags[1]}


@pytest.fixture(scope="module")
def stack(images: dict[str, str]) -> Iterator[dict[str, str]]:
    """Admin + Worker containers from the images; yields their addresses, names and the API key."""
    run = uuid.uuid4().hex[:8]
    key, token = f"key-{uuid.uuid4().hex}", f"join-{uuid.uuid4().hex}"
    admin_port, worker_port = free_port(), free_port()
    admin, worker = f"ale-t-admin-{run}", f"ale-t-worker-{run}"
    try:
        _docker("run", "-d", "--name", admin, "--network", "host", images["admin"],
                "--host", "127.0.0.1", "--port", str(admin_port), "--db", "/var/lib/ale/admin.db",
                "--api-key", f"{key}=default", "--join-token", token)
        # Not --privileged (this machine's own container lacks CAP_SYS_RESOURCE, so the engine cannot
        # grant every cap): the worker mounts each sandbox's tmpfs (CAP_SYS_ADMIN), and bubblewrap runs
        # unprivileged in user namespaces, which needs seccomp and AppArmor to allow unshare/mount and
        # a /proc without docker's masked paths over it.
        _docker("run", "-d", "--name", worker, "--network", "host", *WORKER_RUN_OPTIONS, images["worker"],
                "--set", f"admin_address=127.0.0.1:{admin_port}", "--set", f"join_token={token}",
                "--set", f"address=127.0.0.1:{worker_port}", "--set", f"worker_id=img-{run}",
                "--set", f"state_dir=/tmp/ale-worker-{run}", "--set", "pool_size=0")
        yield {"address": f"127.0.0.1:{admin_port}", "key": key, "admin": admin, "worker": worker}
    finally:
        subprocess.run(["docker", "rm", "-f", admin, worker], capture_output=True, timeout=120)


def test_admin_runs_non_root_and_worker_as_root(stack: dict[str, str], images: dict[str, str]) -> None:
    assert _docker("image", "inspect", "-f", "{{.Config.User}}", images["admin"]) == "10001:10001"
    assert _docker("image", "inspect", "-f", "{{.Config.User}}", images["worker"]) == "0:0"
    # The label the cache compares with: a hash of the inputs, on every image.
    for tag in images.values():
        assert len(_docker("image", "inspect", "-f", '{{index .Config.Labels "ale.inputs"}}', tag)) == 20


def test_sdk_on_the_host_runs_a_sandbox_through_the_containers(stack: dict[str, str]) -> None:
    from ale_rock import Sandbox
    from ale_rock.sdk.client import Client

    client = Client(stack["address"], stack["key"], timeout=30)
    deadline = time.monotonic() + 90  # containers start, the worker registers (slow on a loaded engine)
    last: Exception | None = None
    sb = None
    while sb is None and time.monotonic() < deadline:
        try:
            sb = Sandbox.create(client=client, cpu=0.5, memory="256Mi")
        except Exception as e:  # no worker yet: UNAVAILABLE / RESOURCE_EXHAUSTED until it registers
            last = e
            time.sleep(0.5)
    assert sb is not None, f"{last}\nadmin:\n{_logs(stack['admin'])}\nworker:\n{_logs(stack['worker'])}"
    with sb:
        r = sb.exec("echo hello from $(id -u) in $(pwd)")
        assert r.ok, (r.exit_code, r.stdout, r.stderr)
        assert r.stdout == "hello from 1000 in /workspace\n"
        sb.write("/workspace/f.txt", "through the images")
        assert sb.read("/workspace/f.txt") == b"through the images"
    # The admin's process in its container is not root.
    assert _docker("exec", stack["admin"], "id", "-u") == "10001"
    client.close()
