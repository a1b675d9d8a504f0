"""The local backend: each sandbox is a bubblewrap container whose main process is the Rocklet.

Isolation: every namespace unshared (the network namespace holds loopback only), uid 1000 inside
and a non-root host uid of its own outside (``local_uids``: bwrap runs unprivileged, so nothing of
the sandbox is root on the host), the host runtime (/usr, a subset of /etc, the Python that runs
the Rocklet) read-only, a private /proc with its global knobs masked and /proc/sys read-only, and
only four writable places, each on a nosuid,nodev size-limited tmpfs of the sandbox's own: the work
dir, /tmp and the home dir (one tmpfs of ``disk_bytes``), and /dev/shm. /run/ale (the Rocklet's
socket) is a 1 MiB noexec tmpfs sealed root:root 0755 once the Rocklet listens. Limits: cgroups
(v1/v2) or rlimits (see ``limits.py``).

Disk bound (disk mode "tmpfs"): everything a sandbox can make the host store is at most
``disk_bytes`` (work dir + /tmp + home) + ``shm_bytes(limits)`` (/dev/shm, at most
min(64 MiB, disk_bytes / 8, memory_bytes / 8), at least 1 MiB) + 3 MiB (the 1 MiB /run/ale,
read-only to the sandbox after start, and the 2 MiB private tmpfs of its Rocklet's log and
config files), all RAM-backed: nothing on the state dir's file system grows but a few metadata
bytes. Mode "dir" bounds only each file's size (RLIMIT_FSIZE), not their sum.

What the sandbox still sees of the host: the host path of the worker's egress socket in
/proc/self/mountinfo (a bind of a file on the host's disk shows its path there), the host uid in
the mount options of bwrap's root tmpfs, and the host runtime's own paths (bound at the same place).

Start-up: bwrap itself takes ~10 ms, but the Rocklet's Python + gRPC import takes ~0.4 s on these
machines, so the backend keeps ``pool_size`` sandboxes started with default settings and hands
one out on ``start`` when the request is compatible (default image and work dir): the claim sets
the cgroup limits, the tmpfs size, the rlimits and the Rocklet's settings in a few ms.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import queue
import resource
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ale_rock.backends.base import Limits, SandboxConfig, SandboxHandle, Usage
from ale_rock.backends.limits import (
    CgroupGroup,
    CgroupMode,
    detect_mode,
    list_groups,
    prlimit_args,
    sandbox_rlimits,
)
from ale_rock.backends.local_bwrap import EGRESS_SOCKET, SANDBOX_UID, BwrapLayout, Launch, launch_argv
from ale_rock.backends.local_host import (
    bind_nosuid,
    compile_rocklet_code,
    descendants,
    mount_tmpfs,
    mounts_under,
    read_json,
    remount_size,
    runtime_paths,
    seal_dir,
    umount_lazy,
    write_json,
)
from ale_rock.backends.local_stage import reachable
from ale_rock.backends.local_uids import UidPool, kill_uid

MiB = 2**20
RUN_TMPFS_BYTES = 1 * MiB
"""/run/ale: the Rocklet's socket only (sealed read-only to the sandbox once it listens)."""
PRIV_TMPFS_BYTES = 2 * MiB
"""The host-only tmpfs of a sandbox's settings, passwd/group/hosts and Rocklet log."""


def shm_bytes(limits: Limits) -> int:
    """Size of a sandbox's /dev/shm: min(64 MiB, disk/8, memory/8), at least 1 MiB."""
    caps = [64 * MiB] + [v // 8 for v in (limits.disk_bytes, limits.memory_bytes) if v]
    return max(MiB, min(caps))


class LocalBackendConfig(BaseModel):
    """Settings of the bubblewrap backend."""

    model_config = ConfigDict(extra="forbid")

    state_dir: Path
    """Where sandbox directories live (``<state_dir>/sandboxes/<slot>``) and commits go."""
    egress_socket: str = ""
    """Host path of the worker's EgressService socket, bound into every sandbox; "" = no egress."""
    pool_size: int = Field(default=2, ge=0, le=64)
    """Pre-started sandboxes kept ready for fast creates (0 disables the pool)."""
    cgroup: Literal["auto", "v1", "v2", "none"] = "auto"
    """Limit mechanism; "auto" detects v2, then v1, else rlimits only."""
    disk: Literal["tmpfs", "dir"] = "tmpfs"
    """"tmpfs": a size-limited tmpfs per sandbox (enforces disk_bytes; RAM-backed); "dir": a plain
    directory on the state dir's file system (only the per-file size limit applies)."""
    python: str = sys.executable
    """Python that runs the Rocklet (its prefix and base prefix are bound read-only)."""
    extra_ro_binds: list[str] = Field(default_factory=list)
    """More host paths to bind read-only at the same place."""
    default_limits: Limits = Field(default_factory=Limits)
    """Limits where a request leaves a field at 0."""
    kill_grace_s: float = 2.0
    """Seconds a timed-out command gets between SIGTERM and SIGKILL."""
    rlimit_cpu_seconds: int = 3600
    """CPU-seconds cap per command when no cgroup is available."""
    start_timeout_s: float = 120.0
    """How long to wait for a Rocklet to answer."""
    uid_range_start: int = Field(default=1_000_000_000, ge=65536, lt=2**32 - 2**20)
    """First host uid for sandboxes (one uid per live sandbox; no host account may use the range)."""
    uid_range_size: int = Field(default=65536, ge=1, le=2**20)
    """How many uids the range holds (the most sandboxes all local backends of the machine run)."""
    host_run_dir: Path = Path("/run/ale-local")
    """Machine-wide dir shared by all local backends: ``uids/`` (a lock file per uid in use) and
    ``stage/`` (the empty mount point over which unreachable bind sources are staged)."""


class _Box:
    """One sandbox slot on this machine."""

    def __init__(
        self, slot: str, root: Path, proc: subprocess.Popen[bytes], group: CgroupGroup, token: str, uid: int
    ) -> None:
        self.slot = slot
        self.uid = uid  # host uid of every process of the sandbox
        self.root = root
        self.proc = proc
        self.group = group
        self.token = token
        self.sandbox_id = ""
        self.namespace = ""  # scopes commits: one dir per namespace
        self.workdir = "/workspace"

    @property
    def handle(self) -> SandboxHandle:
        return SandboxHandle(
            sandbox_id=self.sandbox_id,
            rocklet_socket=self.root / "run" / "rocklet.sock",
            host_dir=self.root,
            pid=self.proc.pid,
            extra={"egress_token": self.token, "slot": self.slot},
        )


class LocalBackend:
    """Sandboxes as bubblewrap containers on this machine (see the module docstring)."""

    name = "local"

    def __init__(self, config: LocalBackendConfig) -> None:
        self.config = config
        self.mode: CgroupMode = detect_mode() if config.cgroup == "auto" else config.cgroup
        self.sandboxes_dir = config.state_dir / "sandboxes"
        self.sandboxes_dir.mkdir(parents=True, exist_ok=True)
        # One cgroup parent per state dir, so two workers on one machine never reap each other.
        self.cgroup_parent = (
            "ale-" + hashlib.sha256(str(config.state_dir.resolve()).encode()).hexdigest()[:10]
        )
        # Ours alone: 0755 whatever the umask, so every sandbox uid reaches the stage mount point.
        config.host_run_dir.mkdir(parents=True, exist_ok=True)
        config.host_run_dir.chmod(0o755)
        self.uids = UidPool(config.uid_range_start, config.uid_range_size, config.host_run_dir / "uids")
        self.stage_dir = config.host_run_dir / "stage"
        self.stage_dir.mkdir(exist_ok=True)
        self.stage_dir.chmod(0o755)
        if not reachable(self.stage_dir):
            raise ValueError(f"host_run_dir: {self.stage_dir} must be reachable by every uid (o+x)")
        if config.python == sys.executable:
            # Sandboxes boot the Rocklet from this interpreter's code: give them bytecode to load.
            compile_rocklet_code()
        self._lock = threading.Lock()
        self._boxes: dict[str, _Box] = {}
        self._pool: list[_Box] = []
        self._launching: set[str] = set()
        self._launches: queue.Queue[tuple[Callable[[], Any], Future[Any]] | None] = queue.Queue()
        # bwrap --die-with-parent ties a sandbox to the *thread* that spawned it: spawn from one
        # long-lived thread so a finished request thread never takes sandboxes down with it.
        self._launcher = threading.Thread(target=self._launch_loop, name="bwrap-launcher", daemon=True)
        self._launcher.start()
        self._closed = False
        self._pool_wakeup = threading.Event()
        self._pool_thread: threading.Thread | None = None
        if config.pool_size:
            self._pool_thread = threading.Thread(target=self._pool_loop, name="sandbox-pool", daemon=True)
            self._pool_thread.start()

    # -- Protocol ------------------------------------------------------------------------------

    def start(self, sandbox_id: str, config: SandboxConfig) -> SandboxHandle:
        """Start (or claim from the pool) a sandbox and return once its Rocklet answers."""
        if config.image:
            raise ValueError(
                f"image: the local backend runs the host runtime; unknown image {config.image!r}"
            )
        if not config.workdir.startswith("/") or config.workdir in ("/", "/tmp", "/run", "/proc", "/dev"):
            raise ValueError(f"workdir: {config.workdir!r} must be an absolute path outside system dirs")
        limits = self._limits(config.limits)
        with self._lock:
            if sandbox_id in self._boxes:
                raise FileExistsError(f"sandbox {sandbox_id} exists")
            box = self._pool.pop() if self._pool and config.workdir == "/workspace" else None
        self._pool_wakeup.set()
        if box is not None and box.proc.poll() is None:
            try:
                self._claim(box, sandbox_id, config, limits)
                return box.handle
            except OSError:
                self._destroy(box)
        box = self._launch(config.workdir, limits, config.env)
        box.namespace = config.namespace
        self._assign(box, sandbox_id)
        return box.handle

    def stop(self, sandbox_id: str, grace_s: float = 5.0) -> None:
        """SIGTERM every process, SIGKILL after ``grace_s``; files stay until ``remove``."""
        box = self._get(sandbox_id)
        self._stop_box(box, grace_s)

    def remove(self, sandbox_id: str) -> None:
        """Kill, unmount and delete everything of the sandbox. Idempotent."""
        with self._lock:
            box = self._boxes.pop(sandbox_id, None)
        if box is not None:
            self._destroy(box)

    def list(self) -> list[str]:
        """Ids of the sandboxes this backend holds."""
        with self._lock:
            return sorted(self._boxes)

    def is_running(self, sandbox_id: str) -> bool:
        """True while the sandbox's Rocklet (its main process) is alive."""
        with self._lock:
            box = self._boxes.get(sandbox_id)
        return box is not None and box.proc.poll() is None

    def usage(self, sandbox_id: str) -> Usage:
        """Memory, CPU, pids (cgroup figures when available) and disk use."""
        box = self._get(sandbox_id)
        u = box.group.usage() if self.mode != "none" else Usage(pids=len(descendants(box.proc.pid)))
        with contextlib.suppress(OSError):
            st = os.statvfs(box.root / "fs")
            if self.config.disk == "tmpfs":
                u.disk_bytes = (st.f_blocks - st.f_bfree) * st.f_frsize
            else:
                u.disk_bytes = sum(f.stat().st_size for f in (box.root / "fs").rglob("*") if f.is_file())
        return u

    def commit(self, sandbox_id: str, name: str) -> tuple[str, int, str]:
        """tar.gz the sandbox's work dir into ``<state_dir>/commits``; returns (path, size, sha256)."""
        box = self._get(sandbox_id)
        safe = "".join(c if c.isalnum() or c in "-_.:" else "_" for c in name)[:120] or sandbox_id
        # Per namespace (a hash: injective whatever the namespace's characters), so two
        # namespaces' commits of the same name never overwrite each other.
        out_dir = self.config.state_dir / "commits" / hashlib.sha256(box.namespace.encode()).hexdigest()[:24]
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{safe.replace(':', '_')}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            tar.add(box.root / "fs" / "work", arcname=".")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return str(path), path.stat().st_size, digest

    def reap_orphans(self, keep: set[str]) -> builtins.list[str]:
        """Remove sandbox dirs, mounts and cgroups that no live sandbox of this process owns.

        Local sandboxes die with the worker that started them (--die-with-parent), so after a
        restart nothing on disk can be resumed; ``keep`` is honoured only for sandboxes this
        process itself runs.
        """
        with self._lock:
            live = (
                {b.slot for b in self._boxes.values()} | {b.slot for b in self._pool} | set(self._launching)
            )
        reaped: builtins.list[str] = []
        for slot_dir in sorted(self.sandboxes_dir.iterdir()):
            if slot_dir.name in live:
                continue
            meta = read_json(slot_dir / "meta.json")
            sid = str(meta.get("sandbox_id", ""))
            if sid in keep and sid in self.list():
                continue
            uid = int(meta.get("uid", 0))
            # A dead worker's sandbox: its uid lock died with it. Hold the uid while killing what
            # still runs under it, so no new sandbox gets it before then.
            held = bool(uid) and self.uids.hold(uid)
            if held:
                kill_uid(uid)
            self._reap_dir(slot_dir, meta)
            if held:
                self.uids.release(uid)
            reaped.append(sid or slot_dir.name)
        for name in list_groups(self.mode, self.cgroup_parent):
            if name not in live:
                CgroupGroup(self.mode, self.cgroup_parent, name).destroy()
        return reaped

    def handle(self, sandbox_id: str) -> SandboxHandle:
        """The handle of a running sandbox (KeyError when unknown)."""
        return self._get(sandbox_id).handle

    def close(self) -> None:
        """Remove every sandbox (pool included) and stop the helper threads."""
        self._closed = True
        self._pool_wakeup.set()
        if self._pool_thread is not None:
            self._pool_thread.join(timeout=10)
        with self._lock:
            boxes = list(self._boxes.values()) + self._pool
            self._boxes.clear()
            self._pool.clear()
        for box in boxes:
            self._destroy(box)
        self.uids.close()
        self._launches.put(None)
        for d in CgroupGroup(self.mode, self.cgroup_parent, "x").dirs.values():
            with contextlib.suppress(OSError):
                d.parent.rmdir()  # the per-state-dir parent, once empty

    # -- launching -----------------------------------------------------------------------------

    def _limits(self, requested: Limits) -> Limits:
        d = self.config.default_limits
        return Limits(**{k: (getattr(requested, k) or getattr(d, k)) for k in Limits.model_fields})

    def _launch_loop(self) -> None:
        while (item := self._launches.get()) is not None:
            fn, fut = item
            try:
                fut.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - handed to the waiting caller
                fut.set_exception(e)

    def _launch(self, workdir: str, limits: Limits, env: dict[str, str], pooled: bool = False) -> _Box:
        slot = "s-" + uuid.uuid4().hex[:12]
        with self._lock:
            self._launching.add(slot)  # reap_orphans must not take a slot being set up
        try:
            return self._launch_slot(slot, workdir, limits, env, pooled)
        finally:
            with self._lock:
                self._launching.discard(slot)

    def _launch_slot(
        self, slot: str, workdir: str, limits: Limits, env: dict[str, str], pooled: bool
    ) -> _Box:
        root = self.sandboxes_dir / slot
        token = uuid.uuid4().hex
        group = CgroupGroup(self.mode, self.cgroup_parent, slot)
        uid = self.uids.allocate()
        try:
            self._prepare_dir(root, limits, workdir, env, token, uid)
            group.create(limits)
            read_fd, write_fd = os.pipe()
            args_read, args_write = os.pipe()
            launch = self._argv(root, workdir, limits, group, write_fd, pooled, uid, args_read)
            # bwrap's arguments go through a pipe (--args): a few KiB, well under a pipe's buffer.
            os.write(args_write, b"".join(a.encode() + b"\0" for a in launch.bwrap_args))
            os.close(args_write)
            log = open(root / "priv" / "rocklet.log", "ab")  # noqa: SIM115 - the child keeps it
            fut: Future[subprocess.Popen[bytes]] = Future()

            def spawn() -> subprocess.Popen[bytes]:
                # cwd "/" and a bare env: bwrap is the sandbox's pid 1, whose cwd and environ
                # the sandbox can read; they must not name host paths.
                return subprocess.Popen(
                    launch.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    pass_fds=(write_fd, args_read),
                    cwd="/",
                    env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                )

            self._launches.put((spawn, fut))
            try:
                proc = fut.result(timeout=self.config.start_timeout_s)
            finally:
                os.close(write_fd)
                os.close(args_read)
                log.close()
            box = _Box(slot, root, proc, group, token, uid)
            box.workdir = workdir
            try:
                self._wait_ready(box, read_fd)
            finally:
                os.close(read_fd)
            # The Rocklet listens: from now on the sandbox cannot touch /run/ale's entries.
            seal_dir(root / "run")
            return box
        except BaseException:
            with contextlib.suppress(Exception):
                kill_uid(uid)  # whatever of the failed start still runs
            self._reap_dir(root, {})
            group.destroy()
            self.uids.release(uid)
            raise

    def _prepare_dir(
        self, root: Path, limits: Limits, workdir: str, env: dict[str, str], token: str, uid: int
    ) -> None:
        # 0711: bwrap (as the sandbox uid) passes through to the pieces, but cannot list the dir.
        root.mkdir(mode=0o711)
        root.chmod(0o711)
        write_json(root / "meta.json", {"sandbox_id": "", "created": time.time(), "uid": uid})
        for sub in ("run", "shm", "priv", "fs"):
            (root / sub).mkdir()
        # Each on its own tmpfs (nosuid,nodev): bounded, off the host's disk, and only their
        # in-file paths show in the sandbox's mountinfo. The Rocklet creates its socket in run/,
        # sealed (root:root 0755) once it listens.
        mount_tmpfs(root / "run", RUN_TMPFS_BYTES, "ale-run", owner=uid, noexec=True)
        mount_tmpfs(root / "priv", PRIV_TMPFS_BYTES, "ale-priv", noexec=True)
        mount_tmpfs(root / "shm", shm_bytes(limits), "ale-shm", mode=0o1777, owner=uid)
        fs = root / "fs"
        if self.config.disk == "tmpfs":
            mount_tmpfs(fs, limits.disk_bytes, f"ale-{root.name}")
        else:
            bind_nosuid(fs)
        for sub in ("work", "tmp", "home"):
            (fs / sub).mkdir()
            os.chown(fs / sub, uid, uid)
        (fs / "tmp").chmod(0o1777)
        priv = root / "priv"
        (priv / "conf").mkdir(mode=0o755)
        files = {
            "passwd": f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nsandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/home/sandbox:/bin/bash\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
            "group": f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n",
            "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
        }
        for name, text in files.items():
            (priv / name).write_text(text)
            (priv / name).chmod(0o644)  # whatever the worker's umask: the sandbox uid reads them
        self._write_settings(root, workdir, env, token, limits)

    def _write_settings(
        self, root: Path, workdir: str, env: dict[str, str], token: str, limits: Limits, claimed: bool = False
    ) -> None:
        sandbox_limits, command_limits = prlimit_args(limits, self.mode, self.config.rlimit_cpu_seconds)
        if claimed:
            # A claimed pool sandbox's Rocklet runs without the sandbox rlimits (see _claim): its
            # commands get them instead (a command-specific --nofile, lower, wins).
            names = {opt.split("=", 1)[0] for opt in command_limits}
            command_limits = [o for o in sandbox_limits if o.split("=", 1)[0] not in names] + command_limits
        settings = {
            "workdir": workdir,
            "env": env,
            "egress_socket": EGRESS_SOCKET if self.config.egress_socket else "",
            "egress_token": token,
            "command_rlimits": command_limits,
            "kill_grace_s": self.config.kill_grace_s,
            "spill_dir": "/tmp/.ale",
            "own_sandbox": True,  # bubblewrap's own pid namespace, one host uid per sandbox
        }
        tmp = root / "priv" / "conf" / "settings.json.tmp"
        write_json(tmp, settings)
        tmp.chmod(0o644)
        tmp.replace(root / "priv" / "conf" / "settings.json")

    def _argv(
        self,
        root: Path,
        workdir: str,
        limits: Limits,
        group: CgroupGroup,
        ready_fd: int,
        pooled: bool,
        uid: int,
        args_fd: int,
    ) -> Launch:
        # A pooled sandbox gets its rlimits when claimed (see _claim).
        sandbox_limits = [] if pooled else prlimit_args(limits, self.mode, self.config.rlimit_cpu_seconds)[0]
        return launch_argv(
            BwrapLayout(
                root=root,
                workdir=workdir,
                python=self.config.python,
                ro_binds=[*runtime_paths(self.config.python), *self.config.extra_ro_binds],
                egress_socket=self.config.egress_socket,
                uid=uid,
                stage_dir=str(self.stage_dir),
            ),
            sandbox_limits,
            [str(p) for p in group.procs_files],
            ready_fd,
            args_fd,
        )

    def _wait_ready(self, box: _Box, read_fd: int) -> None:
        deadline = time.monotonic() + self.config.start_timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the Rocklet did not start within {self.config.start_timeout_s}s")
            ready, _, _ = select.select([read_fd], [], [], min(left, 0.5))
            if ready:
                if os.read(read_fd, 16).startswith(b"ok"):
                    return
                box.proc.wait()
                log = (box.root / "priv" / "rocklet.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the sandbox exited during start (code {box.proc.returncode}): {log}")

    def _claim(self, box: _Box, sandbox_id: str, config: SandboxConfig, limits: Limits) -> None:
        box.group.set_limits(limits)
        if self.config.disk == "tmpfs":
            remount_size(box.root / "fs", limits.disk_bytes)
        remount_size(box.root / "shm", shm_bytes(limits))
        # Pool sandboxes start without these rlimits. Their processes run as another uid, so
        # lowering their rlimits needs CAP_SYS_RESOURCE, which container hosts often withhold
        # even from root: best effort here, and every command gets them (_write_settings).
        for pid in box.group.procs() if self.mode != "none" else [box.proc.pid, *descendants(box.proc.pid)]:
            for res, value in sandbox_rlimits(limits).items():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    resource.prlimit(pid, res, (value, value))
        self._write_settings(box.root, box.workdir, dict(config.env), box.token, limits, claimed=True)
        box.namespace = config.namespace
        self._assign(box, sandbox_id)

    def _assign(self, box: _Box, sandbox_id: str) -> None:
        box.sandbox_id = sandbox_id
        write_json(box.root / "meta.json", {"sandbox_id": sandbox_id, "created": time.time(), "uid": box.uid})
        with self._lock:
            self._boxes[sandbox_id] = box

    def _pool_loop(self) -> None:
        while not self._closed:
            with self._lock:
                missing = self.config.pool_size - len(self._pool)
            if missing <= 0:
                self._pool_wakeup.wait(1.0)
                self._pool_wakeup.clear()
                continue
            try:
                box = self._launch("/workspace", self._limits(Limits()), {}, pooled=True)
            except Exception:  # noqa: BLE001 - keep serving cold starts; retry later
                time.sleep(1.0)
                continue
            with self._lock:
                if self._closed:
                    box_to_destroy: _Box | None = box
                else:
                    self._pool.append(box)
                    box_to_destroy = None
            if box_to_destroy is not None:
                self._destroy(box_to_destroy)

    # -- stopping and reaping ------------------------------------------------------------------

    def _get(self, sandbox_id: str) -> _Box:
        with self._lock:
            box = self._boxes.get(sandbox_id)
        if box is None:
            raise KeyError(sandbox_id)
        return box

    def _pids(self, box: _Box) -> builtins.list[int]:
        if self.mode != "none":
            return box.group.procs()
        return [box.proc.pid, *descendants(box.proc.pid)] if box.proc.poll() is None else []

    def _stop_box(self, box: _Box, grace_s: float) -> None:
        if grace_s > 0:
            for pid in self._pids(box):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and self._pids(box):
                time.sleep(0.02)
        if self.mode != "none":
            box.group.kill_all(signal.SIGKILL)
        else:
            for pid in self._pids(box):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            box.proc.kill()  # bwrap's own process; its pid namespace dies with its init
        with contextlib.suppress(subprocess.TimeoutExpired):
            box.proc.wait(timeout=5)

    def _destroy(self, box: _Box) -> None:
        self._stop_box(box, 0)
        self._reap_dir(box.root, {})
        box.group.destroy()
        if self.mode == "none":
            kill_uid(box.uid)  # no cgroup to tell every process of the sandbox: its uid does
        self.uids.release(box.uid)

    def _reap_dir(self, root: Path, meta: dict[str, Any]) -> None:
        group = CgroupGroup(self.mode, self.cgroup_parent, root.name)
        if group.dirs and any(d.exists() for d in group.dirs.values()):
            group.destroy()
        for mount in sorted(mounts_under(root), reverse=True):
            umount_lazy(mount)
        shutil.rmtree(root, ignore_errors=True)


def reap_state_dir(
    state_dir: str | Path, cgroup: Literal["auto", "v1", "v2", "none"] = "auto"
) -> builtins.list[str]:
    """Remove every sandbox a dead worker left under ``state_dir`` (dirs, mounts, cgroups).

    What a restarted worker does at start-up, for tools and tests that will not restart one.
    """
    backend = LocalBackend(LocalBackendConfig(state_dir=Path(state_dir), pool_size=0, cgroup=cgroup))
    try:
        return backend.reap_orphans(set())
    finally:
        backend.close()
