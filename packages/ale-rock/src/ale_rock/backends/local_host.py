"""Host-side helpers of the local backend: mounts via libc, process trees, the Python runtime."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

# mount(2)/umount2(2) straight from libc: creates and claims must not pay for spawning mount(8).
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND, _MNT_DETACH = 2, 4, 8, 32, 4096, 2
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: Path, fstype: str | None, flags: int, data: str | None) -> None:
    if (
        _libc.mount(
            source.encode(),
            str(target).encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        )
        != 0
    ):
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype or 'bind'} on {target}: {os.strerror(err)}")


def mount_tmpfs(
    target: Path,
    size: int,
    source: str,
    remount: bool = False,
    *,
    mode: int = 0o755,
    owner: int | None = None,
    noexec: bool = False,
) -> None:
    """A size-limited tmpfs, always nosuid,nodev (a sandbox writes there: no setuid file or
    device node it plants works on the host); ``owner`` owns its root dir."""
    flags = _MS_NOSUID | _MS_NODEV | (_MS_NOEXEC if noexec else 0) | (_MS_REMOUNT if remount else 0)
    data = f"size={size}" if remount else f"size={size},mode={mode:o}"
    if owner is not None and not remount:
        data += f",uid={owner},gid={owner}"
    _mount(source, target, "tmpfs", flags, data)


def remount_size(target: Path, size: int) -> None:
    """Resize a sandbox's tmpfs (a pool claim); keeps nosuid,nodev (exec stays allowed)."""
    mount_tmpfs(target, size, "tmpfs", remount=True)


def bind_nosuid(target: Path) -> None:
    """Bind a host dir onto itself nosuid,nodev: a plain dir a sandbox writes (disk mode "dir")
    gets the same protection as its tmpfs."""
    _mount(str(target), target, None, _MS_BIND, None)
    _mount("none", target, None, _MS_BIND | _MS_REMOUNT | _MS_NOSUID | _MS_NODEV, None)


def seal_dir(path: Path) -> None:
    """root:root 0755: the sandbox can still read it, but no longer create, rename or remove
    anything in it (its Rocklet socket can then not be swapped for a symlink or another socket)."""
    os.chown(path, 0, 0)
    os.chmod(path, 0o755)


def umount_lazy(target: str) -> None:
    if _libc.umount2(target.encode(), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOENT):  # not mounted (any more)
            raise OSError(err, f"umount {target}: {os.strerror(err)}")


@functools.lru_cache(maxsize=1)
def can_lower_oom_score() -> bool:
    # Needs CAP_SYS_RESOURCE, which some container hosts withhold even from root.
    try:
        return subprocess.run(["choom", "-n", "-900", "--", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


@functools.lru_cache(maxsize=8)
def runtime_paths(python: str) -> list[str]:
    """Host paths the Rocklet's Python needs, bound read-only at the same place."""
    import ale_proto

    import ale_rock

    out = subprocess.run(
        [python, "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    paths = {
        *out,
        str(Path(ale_rock.__file__).resolve().parents[1]),
        str(Path(ale_proto.__file__).resolve().parents[1]),
    }
    if Path(python).is_symlink():
        paths.add(str(Path(python).resolve().parent.parent))
    return sorted(p for p in paths if not p.startswith("/usr/") and p != "/usr")


def compile_rocklet_code() -> None:
    """Write the bytecode of what the Rocklet imports from ALE (``ale_rock.rocklet``, the gRPC options,
    ``ale_proto``) next to its source, where that is writable and the bytecode is missing or stale.

    A sandbox sees this code read-only and can never cache it, so without the ``.pyc`` files every
    sandbox's Rocklet compiles these modules from source as it boots (~20 ms of CPU, an eighth of a
    bare sandbox's). Installs from wheels already carry them; an editable install does not when its
    processes run with ``PYTHONDONTWRITEBYTECODE``, and even without it nothing on the host imports
    the Rocklet's own modules. Bytecode that is up to date costs a header read per file; it is
    timestamp-checked (the default), so an edited source makes its ``.pyc`` ignored, never wrong."""
    import compileall

    import ale_proto

    import ale_rock

    rock = Path(ale_rock.__file__).resolve().parent
    for target in (rock / "rocklet", rock / "grpc_options.py", Path(ale_proto.__file__).resolve().parent):
        if not os.access(target if target.is_dir() else target.parent, os.W_OK):
            continue  # a read-only install: whoever installed it compiled it (pip does), or nobody can
        with contextlib.suppress(OSError):
            if target.is_dir():
                compileall.compile_dir(str(target), quiet=2, workers=1)
            else:
                compileall.compile_file(str(target), quiet=2)


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def mounts_under(root: Path) -> list[str]:
    prefix = str(root.resolve()) if root.exists() else str(root)
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            mount = line.split()[1].replace("\\040", " ")
            if mount == prefix or mount.startswith(prefix + "/"):
                found.append(mount)
    return found


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data))


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}
