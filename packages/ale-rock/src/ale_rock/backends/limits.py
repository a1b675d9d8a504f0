"""Resource limits of a local sandbox: cgroups v1 or v2 when usable (as root), rlimits otherwise.

The mode is detected at run time. Whatever the mode, ``prlimit_args`` gives the per-process
rlimits that always apply (open files, file size), and in "none" mode also address space, CPU
time and process count for every command.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import time
from pathlib import Path
from typing import Literal

from ale_rock.backends.base import Limits, Usage

CgroupMode = Literal["v1", "v2", "none"]
CGROUP_ROOT = Path("/sys/fs/cgroup")
_V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct", "freezer")
_CFS_PERIOD_US = 100_000


def detect_mode(root: Path = CGROUP_ROOT) -> CgroupMode:
    """Which cgroup interface this process can drive."""
    if (root / "cgroup.controllers").exists() and os.access(root, os.W_OK):
        return "v2"
    if (root / "memory" / "memory.limit_in_bytes").exists() and os.access(root / "memory", os.W_OK):
        return "v1"
    return "none"


ROCKLET_MIN_OPEN_FILES = 1024
"""The Rocklet itself (gRPC, sessions, pipes) keeps at least this many open files; a lower
``max_open_files`` is applied to each command instead."""


def sandbox_rlimits(limits: Limits) -> dict[int, int]:
    """RLIMIT_* -> value for every process of the sandbox, the Rocklet included."""
    out = {}
    if limits.max_open_files:
        out[resource.RLIMIT_NOFILE] = max(limits.max_open_files, ROCKLET_MIN_OPEN_FILES)
    if limits.disk_bytes:
        out[resource.RLIMIT_FSIZE] = limits.disk_bytes
    return out


def prlimit_args(limits: Limits, mode: CgroupMode, cpu_seconds: int) -> tuple[list[str], list[str]]:
    """(options for the whole sandbox, extra options for each command) in prlimit(1) syntax."""
    names = {resource.RLIMIT_NOFILE: "nofile", resource.RLIMIT_FSIZE: "fsize"}
    sandbox = [f"--{names[res]}={value}" for res, value in sandbox_rlimits(limits).items()]
    command: list[str] = []
    if limits.max_open_files and limits.max_open_files < ROCKLET_MIN_OPEN_FILES:
        command.append(f"--nofile={limits.max_open_files}")
    if mode == "none":
        if limits.memory_bytes:
            command.append(f"--as={limits.memory_bytes}")
        if limits.max_pids:
            command.append(f"--nproc={limits.max_pids}")
        if cpu_seconds:
            command.append(f"--cpu={cpu_seconds}")
    return sandbox, command


class CgroupGroup:
    """One sandbox's cgroup (in every v1 controller hierarchy, or one v2 directory)."""

    def __init__(self, mode: CgroupMode, parent: str, name: str, root: Path = CGROUP_ROOT) -> None:
        self.mode = mode
        self.root = root
        self.parent = parent
        self.name = name
        if mode == "v1":
            self.dirs = {c: root / c / parent / name for c in _V1_CONTROLLERS if (root / c).is_dir()}
        elif mode == "v2":
            self.dirs = {"unified": root / parent / name}
        else:
            self.dirs = {}

    @property
    def procs_files(self) -> list[Path]:
        """cgroup.procs of every hierarchy (write a pid there to move it in)."""
        return [d / "cgroup.procs" for d in self.dirs.values()]

    def create(self, limits: Limits) -> None:
        """Make the directories and set the limits."""
        if self.mode == "v2":
            parent = self.root / self.parent
            parent.mkdir(exist_ok=True)
            for ctl_file in (self.root / "cgroup.subtree_control", parent / "cgroup.subtree_control"):
                with contextlib.suppress(OSError):
                    ctl_file.write_text("+memory +pids +cpu")
        for d in self.dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        self.set_limits(limits)

    def set_limits(self, limits: Limits) -> None:
        """Apply (or change) the limits."""
        quota = limits.cpu_millis * _CFS_PERIOD_US // 1000 if limits.cpu_millis else -1
        if self.mode == "v1":
            self._write("memory", "memory.limit_in_bytes", limits.memory_bytes or -1)
            with contextlib.suppress(OSError):  # no swap accounting on some kernels
                self._write("memory", "memory.memsw.limit_in_bytes", limits.memory_bytes or -1)
            self._write("pids", "pids.max", limits.max_pids or "max")
            self._write("cpu", "cpu.cfs_period_us", _CFS_PERIOD_US)
            self._write("cpu", "cpu.cfs_quota_us", quota)
        elif self.mode == "v2":
            self._write("unified", "memory.max", limits.memory_bytes or "max")
            with contextlib.suppress(OSError):
                self._write("unified", "memory.swap.max", 0)
            self._write("unified", "pids.max", limits.max_pids or "max")
            self._write("unified", "cpu.max", f"{quota if quota > 0 else 'max'} {_CFS_PERIOD_US}")

    def _write(self, ctl: str, name: str, value: object) -> None:
        d = self.dirs.get(ctl)
        if d is not None:
            (d / name).write_text(str(value))

    def _read(self, ctl: str, name: str) -> str:
        d = self.dirs.get(ctl)
        if d is None:
            return ""
        try:
            return (d / name).read_text()
        except OSError:
            return ""

    def procs(self) -> list[int]:
        """Pids in the group (all hierarchies)."""
        pids: set[int] = set()
        for f in self.procs_files:
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in f.read_text().split())
        return sorted(pids)

    def kill_all(self, sig: int = signal.SIGKILL, timeout_s: float = 5.0) -> bool:
        """Signal every process; for SIGKILL, freeze first (no escaping forks) and wait until empty."""
        if self.mode == "v2" and sig == signal.SIGKILL and (self.dirs["unified"] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                self._write("unified", "cgroup.kill", 1)
        frozen = False
        if sig == signal.SIGKILL and "freezer" in self.dirs:
            with contextlib.suppress(OSError):
                self._write("freezer", "freezer.state", "FROZEN")
                frozen = True
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                pids = self.procs()
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, sig)
                if sig != signal.SIGKILL or not pids:
                    return not pids
                if frozen:  # a frozen task dies only once thawed
                    with contextlib.suppress(OSError):
                        self._write("freezer", "freezer.state", "THAWED")
                    frozen = False
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)
        finally:
            if frozen:
                with contextlib.suppress(OSError):
                    self._write("freezer", "freezer.state", "THAWED")

    def usage(self) -> Usage:
        """Current figures."""
        u = Usage()
        if self.mode == "v1":
            u.memory_bytes = _int(self._read("memory", "memory.usage_in_bytes"))
            u.memory_peak_bytes = _int(self._read("memory", "memory.max_usage_in_bytes"))
            u.pids = _int(self._read("pids", "pids.current"))
            u.cpu_seconds = _int(self._read("cpuacct", "cpuacct.usage")) / 1e9
        elif self.mode == "v2":
            u.memory_bytes = _int(self._read("unified", "memory.current"))
            u.memory_peak_bytes = _int(self._read("unified", "memory.peak")) or u.memory_bytes
            u.pids = _int(self._read("unified", "pids.current"))
            for line in self._read("unified", "cpu.stat").splitlines():
                if line.startswith("usage_usec"):
                    u.cpu_seconds = int(line.split()[1]) / 1e6
        return u

    def throttled(self) -> int:
        """Times the CPU quota throttled the group (v1 nr_throttled / v2 nr_throttled)."""
        text = self._read("cpu", "cpu.stat") if self.mode == "v1" else self._read("unified", "cpu.stat")
        for line in text.splitlines():
            if line.startswith("nr_throttled"):
                return int(line.split()[1])
        return 0

    def destroy(self) -> None:
        """Kill what is left and remove the directories."""
        if not self.dirs:
            return
        self.kill_all(signal.SIGKILL)
        for d in self.dirs.values():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def list_groups(mode: CgroupMode, parent: str, root: Path = CGROUP_ROOT) -> list[str]:
    """Names of the sandbox groups under ``parent`` (for reaping after a restart)."""
    base = root / "memory" / parent if mode == "v1" else root / parent
    if mode == "none" or not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir())


def _int(text: str) -> int:
    try:
        return int(text.split()[0]) if text.strip() else 0
    except ValueError:
        return 0
