"""Docker backend lifecycle through the real Rocklet: start, exec, usage, stop, remove, commit."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from ale_rock.backends.base import Limits, SandboxBackend, SandboxConfig

pytestmark = pytest.mark.docker


def test_start_exec_stop_remove_leaves_nothing(backend, rocklet, docker_ps) -> None:
    assert isinstance(backend, SandboxBackend)
    h = backend.start("life1", SandboxConfig(env={"GREETING": "hi there"}, labels={"task": "t1"}))
    r = rocklet(h)
    assert r.sh("echo $GREETING; pwd").split("\n")[:2] == ["hi there", "/workspace"]
    assert r.info().workdir == "/workspace"
    assert backend.list() == ["life1"] and backend.is_running("life1")
    assert backend.running_states() == {"life1": True}  # what a heartbeat reads, in one engine call
    container = h.extra["container_id"]
    assert docker_ps("ale.sandbox_id=life1") == [container[:12]]
    assert docker_ps("ale.label.task=t1") == [container[:12]]

    u = backend.usage("life1")
    assert u.memory_bytes > 0 and u.pids >= 1 and u.cpu_seconds > 0

    backend.stop("life1", grace_s=1)
    assert not backend.is_running("life1")
    assert backend.list() == ["life1"]  # stopped sandboxes keep their files until removed
    assert backend.running_states() == {"life1": False}
    backend.remove("life1")
    backend.remove("life1")  # idempotent
    assert backend.list() == []
    assert docker_ps("ale.sandbox_id=life1") == []
    assert not h.host_dir.exists()


def test_background_process_survives_between_calls(backend, rocklet) -> None:
    r = rocklet(backend.start("bg1", SandboxConfig()))
    started = r.exec("sleep 300", background=True)
    assert started.pid > 0
    assert str(started.pid) in r.sh("ps -eo pid= 2>/dev/null || ls /proc")
    backend.remove("bg1")
    assert "bg1" not in backend.list()


def test_commit_then_new_sandbox_sees_the_file(backend, rocklet) -> None:
    r = rocklet(backend.start("c1", SandboxConfig()))
    token = uuid.uuid4().hex
    r.sh(f"echo {token} > /workspace/marker && mkdir -p /workspace/d && echo x > /workspace/d/y")
    name = f"ale-test-commit-{token[:8]}:v1"
    try:
        image, size, digest = backend.commit("c1", name)
        # A commit is its namespace's snapshot (no namespace here: "default"), never a bare tag.
        assert image == f"ale-snap/default/{name}" and size > 0 and digest.startswith("sha256:")
        r2 = rocklet(backend.start("c2", SandboxConfig(image=image)))
        assert r2.sh("cat /workspace/marker; cat /workspace/d/y; id -u") == f"{token}\nx\n1000\n"
        labels = json.loads(
            subprocess.run(
                ["docker", "inspect", "-f", "{{json .Config.Labels}}", image], capture_output=True, text=True
            ).stdout
        )
        # The image does not carry the old sandbox's identity (a commit can only blank labels).
        assert labels["ale.committed_from"] == "c1" and labels["ale.snap.namespace"] == ""
        assert labels.get("ale.sandbox_id", "") == "" and labels.get("ale.worker", "") == ""
    finally:
        backend.remove("c1")
        backend.remove("c2")
        subprocess.run(["docker", "rmi", "-f", f"ale-snap/default/{name}"], capture_output=True)


def test_read_only_root_keeps_workdir_writable_and_commits_it(backend, rocklet) -> None:
    h = backend.start("ro1", SandboxConfig(read_only_root=True, limits=Limits(memory_bytes=0, max_pids=0)))
    r = rocklet(h)
    denied = r.exec("touch /etc/nope /usr/nope /nope")
    assert denied.exit_code != 0 and b"Read-only file system" in denied.stderr
    r.sh("echo kept > /workspace/f && echo scratch > /tmp/s")
    # Zero limits mean the backend's defaults, not "unlimited".
    cg = r.sh("cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max").split()
    assert cg == [str(Limits().memory_bytes), str(Limits().max_pids)]
    name = f"ale-test-ro-{uuid.uuid4().hex[:8]}:v1"
    try:
        image, _, _ = backend.commit("ro1", name)
        r2 = rocklet(backend.start("ro2", SandboxConfig(image=image)))
        assert r2.sh("cat /workspace/f") == "kept\n"
    finally:
        backend.remove("ro1")
        backend.remove("ro2")
        subprocess.run(["docker", "rmi", "-f", f"ale-snap/default/{name}"], capture_output=True)


def test_reap_orphans_removes_only_what_is_not_kept(backend, rocklet, docker_ps) -> None:
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig

    for sid in ("keep1", "drop1", "drop2"):
        backend.start(sid, SandboxConfig())
    backend.stop("drop2", grace_s=0)  # stopped containers are orphans too
    other = DockerBackend(
        DockerBackendConfig(
            worker=backend.config.worker + "x",
            base_image=backend.config.base_image,
            root_dir=backend.root.parent / (backend.config.worker + "x"),
            pool_size=0,
        )
    )
    try:
        other.start("keep1", SandboxConfig())  # same id on another worker sharing the engine
        # A restarted worker is a fresh backend object: the engine's labels are the only state.
        restarted = DockerBackend(backend.config)
        assert restarted.list() == ["drop1", "drop2", "keep1"]
        assert restarted.reap_orphans({"keep1"}) == ["drop1", "drop2"]
        assert restarted.list() == ["keep1"]
        assert rocklet(backend.start("again", SandboxConfig())).sh("echo ok") == "ok\n"
        assert docker_ps(f"ale.worker={backend.config.worker}x") != []  # the other worker's kept
        assert other.is_running("keep1")
        restarted.close()
    finally:
        other.reap_orphans(set())
        other.close()
        other.root.rmdir()
    assert docker_ps(f"ale.worker={backend.config.worker}x") == []


def test_bad_input_is_rejected_clearly(backend) -> None:
    with pytest.raises(ValueError, match="sandbox_id"):
        backend.start("../etc", SandboxConfig())
    with pytest.raises(ValueError, match="sandbox_id"):
        backend.start("x" * 120, SandboxConfig())  # would not fit in a Unix socket path
    with pytest.raises(ValueError, match="unknown image"):
        backend.start("img1", SandboxConfig(image="ale-no-such-image:never"))
    with pytest.raises(ValueError, match="workdir"):
        backend.start("wd1", SandboxConfig(workdir="/proc/x"))
    backend.start("dup", SandboxConfig())
    with pytest.raises(FileExistsError):
        backend.start("dup", SandboxConfig())
    backend.remove("dup")
    assert backend.list() == []
    from ale_rock.backends.docker import SandboxNotFound

    with pytest.raises(SandboxNotFound):
        backend.usage("ghost")
    with pytest.raises(KeyError):  # what the Worker catches, as for the local backend
        backend.stop("ghost")
    backend.remove("ghost")  # removing what does not exist is fine


def test_a_container_the_engine_is_removing_is_not_listed(backend) -> None:
    """A slow removal can return while the engine still lists the container ("removing") for
    seconds: heartbeats must not report it to an Admin that deleted it (it re-removed it every
    heartbeat, and the crash reaper logged it as crashed)."""
    real = backend._api

    class Listing:
        def __getattr__(self, name: str):
            return getattr(real, name)

        def containers(self, **kwargs):
            prefix = "/" + backend._container_name("")
            return [*real.containers(**kwargs),
                    {"Id": "a" * 64, "Names": [prefix + "going"], "State": "removing"},
                    {"Id": "b" * 64, "Names": [prefix + "done"], "State": "exited"}]

    backend._api = Listing()
    try:
        assert backend.running_states() == {"done": False}
        assert backend.list() == ["done"]
    finally:
        backend._api = real
