"""The command line that starts one local sandbox: cgroup entry, rlimits, OOM score, bubblewrap."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ale_rock.backends.local_host import can_lower_oom_score

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


@dataclass
class BwrapLayout:
    """Where a sandbox's pieces are on the host and inside."""

    root: Path
    """The sandbox's host dir (fs/, run/, conf/, etc/)."""
    workdir: str
    """Work dir inside."""
    python: str
    """Python that runs the Rocklet."""
    ro_binds: list[str]
    """Host paths bound read-only at the same place (the Python runtime)."""
    egress_socket: str
    """Host path of the worker's egress socket; "" = none."""


def launch_argv(
    layout: BwrapLayout, sandbox_limits: list[str], procs_files: list[str], ready_fd: int
) -> list[str]:
    """argv of ``/bin/sh`` that joins the cgroup, then execs choom → prlimit → bwrap → Rocklet."""
    args = [
        "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--new-session",
        "--disable-userns",
    ]
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
        args += ["--ro-bind", str(layout.root / "etc" / name), f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--bind", str(layout.root / "fs" / "work"), layout.workdir]
    args += ["--bind", str(layout.root / "fs" / "tmp"), "/tmp"]
    args += ["--bind", str(layout.root / "fs" / "home"), "/home/sandbox"]
    # After /tmp and the home dir: a checkout (and so the venv) may live under /tmp, and a later
    # bind is mounted on top of an earlier one.
    for path in layout.ro_binds:
        args += ["--ro-bind", path, path]
    args += ["--bind", str(layout.root / "run"), "/run/ale"]
    # Read-only, so the sandbox cannot rewrite its env, command limits or egress token; a
    # directory (not the file), so the atomic rewrite of a pool claim is seen inside.
    args += ["--ro-bind", str(layout.root / "conf"), "/run/ale-conf"]
    if layout.egress_socket:
        args += ["--bind", layout.egress_socket, EGRESS_SOCKET]
    # The root tmpfs bwrap builds is owned by the mapped uid: make it read-only so only the
    # work dir, /tmp and the home dir are writable.
    args += ["--remount-ro", "/", "--chdir", layout.workdir, "--clearenv"]
    for key, value in {
        "HOME": "/home/sandbox",
        "USER": "sandbox",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }.items():
        args += ["--setenv", key, value]
    args += ["--", layout.python, "-s", "-c", ROCKLET_BOOT, "--socket", ROCKLET_SOCKET]
    args += ["--settings", "/run/ale-conf/settings.json", "--ready-fd", str(ready_fd)]
    # The Rocklet must outlive a memory bomb in its own sandbox: lower its OOM score (its
    # commands raise theirs back). A shell moves itself into the cgroup before exec, so no
    # process of the sandbox ever runs outside it.
    choom = ["choom", "-n", "-900", "--"] if can_lower_oom_score() else []
    wrapped = [*choom, "prlimit", *sandbox_limits, "--", *args]
    procs = " ".join(procs_files)
    script = f'for f in {procs}; do echo $$ > "$f" || exit 97; done; exec "$@"' if procs else 'exec "$@"'
    return ["/bin/sh", "-c", script, "ale-sandbox", *wrapped]
