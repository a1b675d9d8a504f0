"""Red team: a local (bubblewrap) sandbox against the host (issue 11, findings 1, 2, 4, 6, 8, 12).

Each test performs the attack against a real LocalBackend and asserts it fails: no process of a
sandbox is root on the host (1); /proc/sys writes fail (1); setuid binaries planted where the
sandbox writes give nothing when run on the host as nobody (2); the Rocklet socket cannot be
removed, moved or replaced by a symlink (4); disk=32Mi bounds everything the sandbox can make the
host store (6); filling /dev/shm leaves the Rocklet alive (8); /proc/keys and /proc/timer_list are
unreadable, pid 1 names no host path, the Rocklet cannot be ptraced (12). One backend and a
handful of sandboxes serve the whole module: CI time is the constraint.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2
from ale_rock.backends.base import Limits, SandboxConfig
from ale_rock.backends.local import (
    PRIV_TMPFS_BYTES,
    RUN_TMPFS_BYTES,
    LocalBackend,
    LocalBackendConfig,
    shm_bytes,
)
from ale_rock.backends.local_host import descendants

MiB = 2**20
NOBODY = 65534


class _Box:
    """A sandbox of the module's backend and a stub to its Rocklet."""

    def __init__(self, backend: LocalBackend, sandbox_id: str) -> None:
        self.backend = backend
        self.id = sandbox_id
        self.handle = backend.handle(sandbox_id)
        self.root = self.handle.host_dir
        self.uid = backend._get(sandbox_id).uid
        self.channel = grpc.insecure_channel(f"unix:{self.handle.rocklet_socket}")
        self.stub = rocklet_pb2_grpc.RockletServiceStub(self.channel)

    def sh(self, command: str, timeout_ms: int = 20000) -> Any:
        req = rocklet_pb2.RockletServiceExecRequest(
            spec=sandbox_pb2.ExecSpec(command=command, timeout_ms=timeout_ms)
        )
        return self.stub.Exec(req, timeout=timeout_ms / 1000 + 30).result

    def host_pids(self) -> list[int]:
        """Every process of the sandbox, bwrap included, as the host sees them."""
        box = self.backend._get(self.id)
        pids = {box.proc.pid, *descendants(box.proc.pid)}
        if self.backend.mode != "none":
            pids |= set(box.group.procs())
        return sorted(pids)


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBackend]:
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("needs bubblewrap and root")
    b = LocalBackend(
        LocalBackendConfig(state_dir=tmp_path_factory.mktemp("rt-local"), pool_size=1, kill_grace_s=0.5)
    )
    yield b
    b.close()


@pytest.fixture(scope="module")
def make_box(backend: LocalBackend) -> Iterator[Callable[..., _Box]]:
    made: list[_Box] = []

    def make(limits: Limits | None = None) -> _Box:
        sid = f"rt-{uuid.uuid4().hex[:8]}"
        backend.start(sid, SandboxConfig(limits=limits or Limits()))
        made.append(_Box(backend, sid))
        return made[-1]

    yield make
    for box in made:
        box.channel.close()
        backend.remove(box.id)


@pytest.fixture(scope="module")
def box(make_box: Callable[..., _Box]) -> _Box:
    """The sandbox the read-only attacks share."""
    return make_box()


def _ids(pid: int) -> tuple[list[int], list[int]]:
    """(uids, gids) of a host process: real, effective, saved, fs."""
    lines = {
        k: [int(v) for v in rest.split()]
        for k, _, rest in (ln.partition(":") for ln in Path(f"/proc/{pid}/status").read_text().splitlines())
        if k in ("Uid", "Gid")
    }
    return lines["Uid"], lines["Gid"]


def test_no_sandbox_process_is_root_on_the_host(box: _Box, make_box: Callable[..., _Box]) -> None:
    box.sh("sleep 30 >/dev/null 2>&1 &")  # a background command too
    pids = box.host_pids()
    assert len(pids) >= 3  # bwrap, its pid 1, the Rocklet, ...
    for pid in pids:
        try:
            uids, gids = _ids(pid)
        except OSError:
            continue  # exited meanwhile
        assert 0 not in uids and 0 not in gids, (pid, uids, gids)
        assert set(uids) == {box.uid}, (pid, uids)
    other = make_box()
    assert other.uid != box.uid
    assert all(set(_ids(pid)[0]) == {other.uid} for pid in other.host_pids())
    # Seen from the host, the sandbox's user namespace maps its uid 1000 to the box's uid only.
    host_ns = os.readlink("/proc/self/ns/user")
    for pid in box.host_pids():
        try:
            if os.readlink(f"/proc/{pid}/ns/user") == host_ns:
                continue  # bwrap's outer process: its ids are checked above
            lines = Path(f"/proc/{pid}/uid_map").read_text().split("\n")
        except OSError:
            continue
        assert all(ln.split()[1] == str(box.uid) for ln in lines if ln.strip()), (pid, lines)


@pytest.mark.parametrize("knob", ["kernel/core_pattern", "vm/drop_caches", "kernel/printk_ratelimit"])
def test_proc_sys_writes_fail(box: _Box, knob: str) -> None:
    before = Path(f"/proc/sys/{knob}").read_text() if knob != "vm/drop_caches" else ""
    r = box.sh(
        f"echo 3 > /proc/sys/{knob}; echo rc=$?; mount -o remount,rw /proc/sys 2>&1; echo 3 > /proc/sys/{knob}"
    )
    assert b"rc=" in r.stdout and b"rc=0" not in r.stdout and r.exit_code != 0, r
    assert b"Read-only file system" in r.stderr or b"Permission denied" in r.stderr, r.stderr
    if before:
        assert Path(f"/proc/sys/{knob}").read_text() == before


def _exec_as_nobody(path: Path) -> str:
    """Run ``path -u`` (id) as nobody on the host, through an fd (no search permission on the
    state dir needed: only the mount's nosuid and the file's own bits decide)."""
    fd = os.open(path, os.O_PATH)
    try:
        r = subprocess.run(
            [
                "setpriv",
                f"--reuid={NOBODY}",
                f"--regid={NOBODY}",
                "--clear-groups",
                f"/proc/self/fd/{fd}",
                "-u",
            ],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            timeout=10,
        )
    finally:
        os.close(fd)
    return r.stdout.strip() or f"failed: {r.stderr.strip()}"


def test_setuid_planted_in_the_sandbox_gives_nothing_on_the_host(box: _Box) -> None:
    places = {
        "/workspace": "fs/work",
        "/tmp": "fs/tmp",
        "/home/sandbox": "fs/home",
        "/dev/shm": "shm",
        "/run/ale": "run",
    }
    for inside in places:
        box.sh(f"cp /usr/bin/id {inside}/id-suid && chmod 6755 {inside}/id-suid")
    assert not (box.root / "run" / "id-suid").exists()  # sealed: nothing can be created there
    planted = [box.root / host / "id-suid" for inside, host in places.items() if inside != "/run/ale"]
    for path in planted:
        st = path.stat()
        assert st.st_mode & stat.S_ISUID and st.st_uid == box.uid, path  # the plant itself worked
        euid = _exec_as_nobody(path)
        assert euid == str(NOBODY), (path, euid)  # nosuid: not 0, not the sandbox's uid


def test_rocklet_socket_cannot_be_replaced(box: _Box, make_box: Callable[..., _Box]) -> None:
    sock = box.handle.rocklet_socket
    for attack in (
        "rm -f /run/ale/rocklet.sock",
        "mv /run/ale/rocklet.sock /run/ale/moved",
        "ln -sf /tmp/other.sock /run/ale/rocklet.sock",
        "ln -s /tmp/other.sock /run/ale/evil",
        "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('/run/ale/new.sock')\"",
        "chmod 777 /run/ale",
    ):
        r = box.sh(attack + " 2>&1")
        assert r.exit_code != 0, attack
        assert b"ermission denied" in r.stdout or b"not permitted" in r.stdout, (attack, r.stdout)
    st = os.lstat(sock)
    assert stat.S_ISSOCK(st.st_mode)
    parent = os.stat(sock.parent)
    assert (parent.st_uid, parent.st_gid, stat.S_IMODE(parent.st_mode)) == (0, 0, 0o755)
    assert sorted(os.listdir(sock.parent)) == ["rocklet.sock"]
    assert box.sh("echo alive").stdout == b"alive\n"
    # A pool claim hands out a sealed dir too.
    other = make_box()
    parent = os.stat(other.handle.rocklet_socket.parent)
    assert (parent.st_uid, stat.S_IMODE(parent.st_mode)) == (0, 0o755)


def _host_free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _tmpfs_used(root: Path) -> int:
    total = 0
    for sub in ("fs", "shm", "run", "priv"):
        st = os.statvfs(root / sub)
        total += (st.f_blocks - st.f_bfree) * st.f_frsize
    return total


def test_disk_limit_binds_every_writable_place(backend: LocalBackend, make_box: Callable[..., _Box]) -> None:
    limits = Limits(disk_bytes=32 * MiB, memory_bytes=256 * MiB)
    slack = shm_bytes(limits) + RUN_TMPFS_BYTES + PRIV_TMPFS_BYTES
    free_before = _host_free(backend.config.state_dir)
    box = make_box(limits)
    targets = [
        "/workspace",
        "/tmp",
        "/home/sandbox",
        "/dev/shm",
        "/run/ale",
        "/run/ale-conf",
        "/var/tmp",
        "/",
    ]
    fill = "; ".join(f"dd if=/dev/zero of={t}/fill bs=1M count=48 2>/dev/null" for t in targets)
    box.sh(fill + "; python3 -c \"open('/tmp/big','wb').truncate(1 << 30)\"; true", timeout_ms=60000)
    used = _tmpfs_used(box.root)
    assert used <= limits.disk_bytes + slack, [
        (sub, os.statvfs(box.root / sub)) for sub in ("fs", "shm", "run", "priv")
    ]
    assert used >= 32 * MiB  # the fill did happen, and landed in the bounded tmpfs
    drop = free_before - _host_free(backend.config.state_dir)
    assert drop <= limits.disk_bytes + slack, drop
    assert box.sh("rm -f /workspace/fill /tmp/fill /tmp/big; echo ok").stdout == b"ok\n"


def test_filling_dev_shm_leaves_the_rocklet_alive(make_box: Callable[..., _Box]) -> None:
    box = make_box(Limits(memory_bytes=256 * MiB))
    r = box.sh("dd if=/dev/zero of=/dev/shm/fill bs=1M count=512 2>&1; df -B1 /dev/shm | tail -1")
    assert b"No space left" in r.stdout
    assert int(r.stdout.split()[-5]) <= 64 * MiB  # /dev/shm's size
    assert box.sh("echo still alive").stdout == b"still alive\n"


def test_global_proc_knobs_are_unreadable(box: _Box) -> None:
    for knob in ("/proc/keys", "/proc/timer_list", "/proc/key-users", "/proc/sched_debug"):
        if not Path(knob).exists():
            continue
        r = box.sh(f"cat {knob}")
        assert r.exit_code != 0 and r.stdout == b"", (knob, r.stdout[:200])
    assert box.sh("echo b > /proc/sysrq-trigger").exit_code != 0


def test_pid1_and_mountinfo_name_no_host_path(backend: LocalBackend, box: _Box) -> None:
    state_paths = [str(backend.config.state_dir.resolve()), str(backend.config.state_dir), "/run/ale-local"]
    # pid 1 is bwrap: its environ and cwd are what the worker spawned it with.
    r = box.sh("cat /proc/1/environ; echo; readlink /proc/1/cwd; cat /proc/self/environ")
    for path in [*state_paths, os.getcwd()]:
        assert path not in r.stdout.decode(errors="replace"), (path, r.stdout)
    # Its command line and the mount table: the runtime's paths are bound at the same place
    # (they may share the worker's cwd), but no path of the state dir shows.
    r = box.sh("cat /proc/1/cmdline; echo; cat /proc/self/mountinfo")
    assert b"/proc/keys" in r.stdout  # the dump did happen
    for path in state_paths:
        assert path not in r.stdout.decode(errors="replace"), (path, r.stdout)


def test_the_rocklet_cannot_be_ptraced(box: _Box) -> None:
    script = (
        "import ctypes, os\n"
        "args = lambda p: open(f'/proc/{p}/cmdline', 'rb').read().split(bytes(1))\n"
        "pid = next(int(p) for p in os.listdir('/proc') if p.isdigit()"
        " and b'--ready-fd' in args(p) and not args(p)[0].endswith(b'bwrap'))\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "rc = libc.ptrace(16, pid, 0, 0)\n"  # PTRACE_ATTACH
        "print(pid, rc, ctypes.get_errno())\n"
        "try:\n open(f'/proc/{pid}/mem', 'rb').read(1); print('MEM')\n"
        "except OSError as e: print('memfail', e.errno)\n"
    )
    r = box.sh(f'python3 -c "{script}"')
    pid, rc, err, *rest = r.stdout.decode().split()
    assert rc == "-1" and int(err) in (1, 13), r.stdout  # EPERM / EACCES
    assert "MEM" not in rest
