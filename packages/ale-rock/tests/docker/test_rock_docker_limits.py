"""Resource limits of Docker sandboxes: memory, fork and disk bombs and a CPU spin stay inside
their sandbox; the sandbox's Rocklet and a neighbour keep answering."""

from __future__ import annotations

import pytest
from ale_rock.backends.base import Limits, SandboxConfig

pytestmark = pytest.mark.docker

MIB = 2**20


def test_memory_bomb_is_killed_inside(backend, rocklet) -> None:
    r = rocklet(backend.start("mem1", SandboxConfig(limits=Limits(memory_bytes=128 * MIB))))
    neighbour = rocklet(backend.start("mem2", SandboxConfig()))
    # Read the limit before the bomb: right after an OOM kill the cgroup can still be at its limit
    # for a moment, and even `cat` may then be chosen by the OOM killer.
    assert int(r.sh("cat /sys/fs/cgroup/memory/memory.limit_in_bytes")) == 128 * MIB
    bomb = r.exec(
        "python3 -c \"b=[]\nfor _ in range(2048): b.append(bytearray(1 << 20))\nprint('survived')\"",
        timeout_ms=60_000,
    )
    assert b"survived" not in bomb.stdout
    assert bomb.exit_code != 0 and (bomb.signal == 9 or bomb.exit_code == 137), bomb
    assert r.sh("echo alive") == "alive\n" and neighbour.sh("echo ok") == "ok\n"


FORK = (
    "import os, time\n"
    "n = 0\n"
    "try:\n"
    "    while n < 2000:\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(2); os._exit(0)\n"
    "        n += 1\n"
    "except OSError as e:\n"
    "    print('stopped', n, e.errno)\n"
)


def test_fork_bomb_hits_the_pids_limit(backend, rocklet) -> None:
    r = rocklet(backend.start("pid1", SandboxConfig(limits=Limits(max_pids=64))))
    out = r.exec(f'python3 -c "{FORK}"', timeout_ms=60_000)
    words = out.stdout.decode().split()
    assert words[:1] == ["stopped"], out
    assert int(words[1]) < 64 and words[2] == "11"  # EAGAIN well before 2000 processes
    assert r.sh("echo alive") == "alive\n"


def test_cpu_spin_is_throttled_to_its_quota(backend, rocklet) -> None:
    r = rocklet(backend.start("cpu1", SandboxConfig(limits=Limits(cpu_millis=100))))
    spin = (
        "import time\n"
        "t0, c0 = time.monotonic(), time.process_time()\n"
        "while time.monotonic() - t0 < 1.5: pass\n"
        "print((time.process_time() - c0) / (time.monotonic() - t0))\n"
    )
    share = float(r.sh(f'python3 -c "{spin}"', timeout_ms=60_000))
    assert share < 0.35  # a tenth of a core, with slack for accounting granularity
    quota = r.sh("cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us").split()
    assert int(quota[0]) * 10 == int(quota[1])
    stat = dict(line.split() for line in r.sh("cat /sys/fs/cgroup/cpu/cpu.stat").splitlines())
    assert int(stat["nr_throttled"]) > 0


def test_disk_fill_and_open_files_are_capped(backend, rocklet) -> None:
    r = rocklet(backend.start("disk1", SandboxConfig(limits=Limits(disk_bytes=16 * MIB, max_open_files=256))))
    fill = r.exec("dd if=/dev/zero of=/workspace/big bs=1M count=64", timeout_ms=60_000)
    assert fill.exit_code != 0
    assert int(r.sh("stat -c %s /workspace/big")) <= 16 * MIB
    assert r.sh("ulimit -n") == "256\n"
    assert r.sh("echo alive") == "alive\n"


def test_a_sandbox_can_write_about_its_disk_limit_and_not_more(backend, rocklet) -> None:
    """Both sides of the layer quota, whichever way the engine's file system counts it (btrfs
    classic qgroups count the image's shared extents, simple quotas only the container's writes):
    sized for the wrong mode, a sandbox gets either its image's size more than its limit or no
    room at all. A writable root: a read-only root's work dir is an ext4 file of its own size."""
    config = SandboxConfig(read_only_root=False, limits=Limits(disk_bytes=32 * MIB))
    r = rocklet(backend.start("disk2", config))
    fits = r.exec("dd if=/dev/urandom of=/workspace/a bs=1M count=24 && sync", timeout_ms=60_000)
    assert fits.exit_code == 0, fits
    more = r.exec("dd if=/dev/urandom of=/workspace/b bs=1M count=48; sync", timeout_ms=60_000)
    written = int(r.sh("stat -c %s /workspace/b"))
    assert written < 12 * MIB, (written, more)  # 24 + 12 MiB would be past the 32 MiB limit
    assert r.sh("echo alive") == "alive\n"
