"""The command line that starts one local sandbox: cgroup entry, path staging, rlimits, OOM score,
the drop to the sandbox's own host uid, bubblewrap."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ale_rock.backends.local_host import can_lower_oom_score
from ale_rock.backends.local_stage import Stage

SANDBOX_UID = 1000
ROCKLET_SOCKET = "/run/ale/rocklet.sock"
EGRESS_SOCKET = "/run/ale-egress.sock"
# Start the Rocklet without running ale_rock/__init__.py (it re-exports the SDK, ~1 s of imports
# on these machines): register the package with its search path only, then run the server.
ROCKLET_BOOT = (
    "import importlib.util, sys, types\n"
    "spec = importlib.util.find_spec('ale_rock')\n"
    "pkg = types.ModuleType('ale_rock'); pkg.__path__ = list(spec.submodule_search_locations)\n"
    "sys.modules['ale_rock'] = pkg\n"
    "from ale_rock.rocklet.server import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
ETC_FILES = [
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates", "localtime",
    "nsswitch.conf", "bash.bashrc", "inputrc", "profile", "mime.types", "protocols", "services",
    "os-release", "debian_version", "terminfo", "timezone", "gai.conf", "host.conf",
]  # fmt: skip


# Global /proc knobs a sandbox has no business reading (host keys, timers, kernel symbols...):
# each is covered by a read-only /dev/null (unopenable: the bind is nodev).
PROC_MASKED_FILES = [
    "keys", "key-users", "timer_list", "timer_stats", "sched_debug", "latency_stats", "kcore",
    "sysrq-trigger", "kmsg", "kallsyms", "kpagecgroup", "kpagecount", "kpageflags",
]  # fmt: skip
PROC_MASKED_DIRS = ["acpi", "scsi", "asound"]
"""Covered by an empty read-only tmpfs."""
PROC_READ_ONLY = ["sys", "bus", "fs", "irq"]
"""Bound read-only: writes to /proc/sys fail even where the sandbox's uid could make them."""


@dataclass
class BwrapLayout:
    """Where a sandbox's pieces are on the host and inside."""

    root: Path
    """The sandbox's host dir (fs/, run/, shm/, priv/: each its own tmpfs)."""
    workdir: str
    """Work dir inside."""
    python: str
    """Python that runs the Rocklet."""
    ro_binds: list[str]
    """Host paths bound read-only at the same place (the Python runtime)."""
    egress_socket: str
    """Host path of the worker's egress socket; "" = none."""
    uid: int
    """Non-root host uid the whole sandbox runs as (bwrap included)."""
    stage_dir: str
    """Empty host dir over which unreachable bind sources are staged (see ``local_stage``)."""


@dataclass
class Launch:
    """What to spawn: ``argv`` (run as root, from "/"), and bwrap's own arguments, which go to
    bwrap through a pipe on fd ``args_fd`` (``--args``) so that no host path shows in the command
    line of the sandbox's pid 1 (bwrap itself)."""

    argv: list[str]
    bwrap_args: list[str]


def bwrap_args(layout: BwrapLayout, stage: Stage) -> list[str]:
    """bubblewrap's options (sources mapped through ``stage``)."""
    root = stage.map(layout.root)
    args = ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--disable-userns"]
    args += [
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--hostname",
        "sandbox",
        "--cap-drop",
        "ALL",
    ]
    args += ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "lib", "lib64", "lib32", "sbin"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), f"/{top}"]
        elif p.is_dir():
            args += ["--ro-bind", str(p), f"/{top}"]
    for name in ETC_FILES:
        if (Path("/etc") / name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    for name in ("passwd", "group", "hosts"):
        args += ["--ro-bind", f"{root}/priv/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc"]
    for name in PROC_READ_ONLY:
        if (Path("/proc") / name).exists():
            args += ["--ro-bind", f"/proc/{name}", f"/proc/{name}"]
    for name in PROC_MASKED_FILES:
        if (Path("/proc") / name).exists():
            args += ["--ro-bind", "/dev/null", f"/proc/{name}"]
    for name in PROC_MASKED_DIRS:
        if (Path("/proc") / name).is_dir():
            args += ["--tmpfs", f"/proc/{name}", "--remount-ro", f"/proc/{name}"]
    # /dev/shm: the sandbox's own size-limited tmpfs (host-mounted, so a pool claim can resize it).
    args += ["--dev", "/dev", "--bind", f"{root}/shm", "/dev/shm"]
    args += ["--bind", f"{root}/fs/work", layout.workdir]
    args += ["--bind", f"{root}/fs/tmp", "/tmp"]
    args += ["--bind", f"{root}/fs/home", "/home/sandbox"]
    # After /tmp and the home dir: a checkout (and so the venv) may live under /tmp, and a later
    # bind is mounted on top of an earlier one.
    for path in layout.ro_binds:
        args += ["--ro-bind", stage.map(path), path]
    args += ["--bind", f"{root}/run", "/run/ale"]
    # Read-only, so the sandbox cannot rewrite its env, command limits or egress token; a
    # directory (not the file), so the atomic rewrite of a pool claim is seen inside.
    args += ["--ro-bind", f"{root}/priv/conf", "/run/ale-conf"]
    if layout.egress_socket:
        args += ["--bind", stage.map(layout.egress_socket), EGRESS_SOCKET]
    # The root tmpfs bwrap builds is owned by the sandbox uid: make it read-only so only the
    # work dir, /tmp, the home dir and /dev/shm are writable.
    args += ["--remount-ro", "/", "--chdir", layout.workdir, "--clearenv"]
    for key, value in {
        "HOME": "/home/sandbox",
        "USER": "sandbox",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }.items():
        args += ["--setenv", key, value]
    return args


def rocklet_command(layout: BwrapLayout, ready_fd: int) -> list[str]:
    """What bwrap runs (on its command line: ``--args`` takes options only; no host path here)."""
    return [
        layout.python, "-s", "-c", ROCKLET_BOOT, "--socket", ROCKLET_SOCKET,
        "--settings", "/run/ale-conf/settings.json", "--ready-fd", str(ready_fd),
    ]  # fmt: skip


def launch_argv(
    layout: BwrapLayout, sandbox_limits: list[str], procs_files: list[str], ready_fd: int, args_fd: int
) -> Launch:
    """The chain, as root: [unshare -m →] sh (joins the cgroup, stages paths) → choom → prlimit →
    setpriv (drops to the sandbox uid, no groups) → bwrap → Rocklet."""
    stage = Stage(layout.stage_dir)
    args = bwrap_args(layout, stage)
    # The Rocklet must outlive a memory bomb in its own sandbox: lower its OOM score (its
    # commands raise theirs back). A shell moves itself into the cgroup before exec, so no
    # process of the sandbox ever runs outside it.
    choom = ["choom", "-n", "-900", "--"] if can_lower_oom_score() else []
    uid = str(layout.uid)
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    bwrap = ["bwrap", "--args", str(args_fd), "--", *rocklet_command(layout, ready_fd)]
    wrapped = [*choom, "prlimit", *sandbox_limits, "--", *drop, *bwrap]
    procs = " ".join(procs_files)
    join = f'for f in {procs}; do echo $$ > "$f" || exit 97; done\n' if procs else ""
    script = join + stage.script() + 'exec "$@"'
    return Launch([*stage.argv_prefix(), "/bin/sh", "-c", script, "ale-sandbox", *wrapped], args)
