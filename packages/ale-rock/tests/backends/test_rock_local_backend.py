"""The bubblewrap backend: lifecycle, isolation basics, pool, usage, commit and reaping."""

from __future__ import annotations

import os
import signal
import tarfile
import time
from pathlib import Path

import pytest
from ale_proto.v1 import sandbox_pb2
from ale_rock.backends.base import Limits, SandboxBackend, SandboxConfig
from ale_rock.backends.limits import detect_mode, prlimit_args
from ale_rock.backends.local import LocalBackend, LocalBackendConfig


def test_backend_satisfies_protocol(backend: LocalBackend) -> None:
    assert isinstance(backend, SandboxBackend)


def test_lifecycle_exec_stop_remove(backend: LocalBackend, make_box) -> None:
    box = make_box(env={"GREETING": "hi"})
    assert box.id in backend.list() and backend.is_running(box.id)
    r = box.sh("id -u; echo $GREETING; pwd; echo data > f.txt")
    assert r.stdout == b"1000\nhi\n/workspace\n"
    assert (backend.handle(box.id).host_dir / "fs" / "work" / "f.txt").read_text() == "data\n"
    backend.stop(box.id, grace_s=1)
    assert not backend.is_running(box.id)
    # Stopped: files are kept until removal.
    assert (backend.handle(box.id).host_dir / "fs" / "work" / "f.txt").exists()
    root = backend.handle(box.id).host_dir
    backend.remove(box.id)
    backend.remove(box.id)  # idempotent
    assert box.id not in backend.list() and not root.exists()


def test_background_process_survives_between_calls(make_box) -> None:
    box = make_box()
    r = box.sh("sleep 60", background=True)
    assert r.end_reason == sandbox_pb2.EXEC_END_REASON_BACKGROUND
    assert box.sh(f"kill -0 {r.pid} && echo alive").stdout == b"alive\n"


def test_usage_reports_memory_and_pids(backend: LocalBackend, make_box) -> None:
    box = make_box()
    box.sh("sleep 30", background=True)
    u = backend.usage(box.id)
    assert u.pids >= 2
    if backend.mode != "none":
        assert u.memory_bytes > 0


def test_commit_archives_the_work_dir(backend: LocalBackend, make_box, tmp_path: Path) -> None:
    box = make_box()
    box.sh("mkdir -p d && echo snap > d/x")
    path, size, digest = backend.commit(box.id, "my-env:step-1")
    assert size == os.path.getsize(path) and len(digest) == 64
    with tarfile.open(path) as tar:
        assert tar.extractfile("./d/x").read() == b"snap\n"  # type: ignore[union-attr]


def test_unknown_image_and_bad_workdir_are_refused(backend: LocalBackend) -> None:
    with pytest.raises(ValueError, match="^image:"):
        backend.start("bad-1", SandboxConfig(image="nope:1"))
    with pytest.raises(ValueError, match="^workdir:"):
        backend.start("bad-2", SandboxConfig(workdir="relative"))


def test_custom_workdir_cold_start(make_box) -> None:
    box = make_box(workdir="/srv/app")
    assert box.sh("pwd; touch x && echo ok").stdout == b"/srv/app\nok\n"


def test_crashed_sandbox_is_detected_and_reaped(backend: LocalBackend, make_box) -> None:
    box = make_box()
    box.sh("sleep 60", background=True)
    # Kill the sandbox's main process (the bwrap monitor) from the host: everything inside dies.
    os.kill(backend.handle(box.id).pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while backend.is_running(box.id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not backend.is_running(box.id)
    backend.stop(box.id, 0)
    if backend.mode != "none":
        assert backend._get(box.id).group.procs() == []


def test_restart_reaps_orphans(tmp_path: Path, backend: LocalBackend, find_leaks) -> None:
    """A backend that dies without cleaning up leaves dirs/mounts/cgroups; the next one reaps them."""
    first = LocalBackend(LocalBackendConfig(state_dir=tmp_path, pool_size=0))
    first.start("orphan-1", SandboxConfig())
    # Simulate a crash of the worker: kill the sandbox, forget it without cleanup.
    box = first._boxes.pop("orphan-1")
    box.proc.kill()
    box.proc.wait()
    assert find_leaks(first)
    second = LocalBackend(LocalBackendConfig(state_dir=tmp_path, pool_size=0))
    assert second.reap_orphans(set()) == ["orphan-1"]
    assert find_leaks(second) == []
    second.close()
    first.close()


def test_limits_helpers() -> None:
    assert detect_mode() in ("v1", "v2", "none")
    limits = Limits(memory_bytes=10, max_pids=5, max_open_files=7, disk_bytes=9)
    sandbox, command = prlimit_args(limits, "none", 60)
    assert sandbox == ["--nofile=1024", "--fsize=9"]  # the Rocklet keeps enough files to serve
    assert command == ["--nofile=7", "--as=10", "--nproc=5", "--cpu=60"]
    assert prlimit_args(Limits(max_open_files=4096), "v1", 60) == (
        ["--nofile=4096", "--fsize=1073741824"],
        [],
    )


def test_pool_claim_applies_the_requested_limits(backend: LocalBackend, make_box) -> None:
    import time as _time

    deadline = _time.monotonic() + 120
    while not backend._pool and _time.monotonic() < deadline:
        _time.sleep(0.1)
    assert backend._pool, "the pool never filled"
    pooled_slot = backend._pool[-1].slot
    box = make_box(limits=Limits(memory_bytes=200 * 2**20, max_open_files=2000, disk_bytes=50 * 2**20))
    assert backend.handle(box.id).extra["slot"] == pooled_slot
    assert (
        box.sh("ulimit -n; ulimit -f").stdout == f"2000\n{50 * 2**20 // 512}\n".encode()
    )  # dash: 512-byte blocks
    assert box.sh("df -k /workspace | tail -1").stdout.split()[1] == str(50 * 1024).encode()
    if backend.mode == "v1":
        group = backend._get(box.id).group
        assert (group.dirs["memory"] / "memory.limit_in_bytes").read_text().strip() == str(200 * 2**20)


def test_rlimit_mode_without_cgroups(tmp_path: Path, backend: LocalBackend, find_leaks, box_for) -> None:
    b = LocalBackend(LocalBackendConfig(state_dir=tmp_path, pool_size=0, cgroup="none"))
    try:
        h = b.start("nocg-1", SandboxConfig(limits=Limits(memory_bytes=256 * 2**20, max_open_files=100)))
        box = box_for(b, "nocg-1", h.rocklet_socket)
        r = box.sh("ulimit -n; ulimit -v")
        assert r.stdout == f"100\n{256 * 1024}\n".encode()
    finally:
        b.close()
    assert find_leaks(b) == []
