"""Where a Docker sandbox can write on the host, and how each place is capped.

A sandbox's disk limit must bind on everything it can fill on the host:

* the container's root layer (``/workspace``, ``/tmp``, ``/home``...): ``--storage-opt size=``,
  which only some storage drivers honour (btrfs, zfs, overlay2 on xfs with pquota; see
  ``scripts/docker_engine.sh``). The engine is probed once per backend; where it cannot cap a
  layer the backend refuses to start (``disk_quota="require"``, the default) unless the operator
  opted into the weaker per-file cap (``disk_quota="per_file"``: an ``fsize`` ulimit only, logged).
  On btrfs the size binds through a quota group, in one of two modes (:func:`btrfs_quota_mode`):
  classic qgroups count the image's extents the container shares too, so the size passed is the
  image's size plus the limit (the sandbox gets a little *less* than its limit, never more);
  simple quotas (kernel >= 6.7, what ``scripts/docker_engine.sh`` enables on a new engine) count
  only what the container itself writes, so the size passed is the limit. Simple quotas also make
  a removed container cheap to drop: under classic qgroups the kernel's ``btrfs-cleaner`` walks
  every shared tree block of each deleted snapshot, which kept a core busy for minutes on a
  2-core host under container churn.
* ``/run/ale``: a host-side tmpfs of 1 MiB, ``nosuid,nodev,noexec`` (nothing planted there can
  run setuid on the host), sealed root-owned 0755 once the Rocklet listens (see :func:`seal`).
* a read-only-root sandbox's work dir: a loop-mounted ext4 file of ``disk_bytes`` (sparse) under
  the sandbox's host dir, ``nosuid,nodev``; its ``/tmp`` is a tmpfs (memory, charged to the
  sandbox's memory cgroup, never host disk).
* ``/dev/shm``: ``--shm-size`` (memory), see :func:`shm_size`.
* the container's log: json-file capped at :data:`LOG_MAX_BYTES`.

Stated slack over ``disk_bytes`` on the host: :data:`SLACK_BYTES` (two log files, file-system
metadata) plus, on btrfs with classic qgroups, the image-size estimate's excess
(:data:`IMAGE_OVERHEAD`). The socket
tmpfs and ``/tmp`` of a read-only root are memory, not disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SOCK_TMPFS_BYTES = 2**20
"""Size of the ``/run/ale`` tmpfs: a socket needs no space, so a planted file has almost none."""
LOG_MAX_BYTES = 2**20
"""The container's json-file log is rotated at this size, one file kept."""
SLACK_BYTES = 4 * 2**20
"""What a sandbox can add on the host beyond ``disk_bytes`` besides the btrfs estimate's excess:
two log files and metadata."""
QUOTA_DRIVERS_NEED_IMAGE = frozenset({"btrfs"})
"""Drivers whose size quota counts the image's extents as well as the container's writes (btrfs:
unless its quotas are simple quotas, see :func:`btrfs_quota_mode`)."""
_BTRFS_IOC_FS_INFO = (2 << 30) | (1024 << 16) | (0x94 << 8) | 31
"""``_IOR(BTRFS_IOCTL_MAGIC, 31, struct btrfs_ioctl_fs_info_args)`` (1024 bytes; fsid at 16)."""
IMAGE_OVERHEAD = (1.07, 2 * 2**20)
"""On btrfs the image's extents take more than its reported size (4 KiB blocks, tree blocks:
measured 1.064x for the base image): the quota is ``size * factor + bytes + disk_bytes``, so a
sandbox can start and write about ``disk_bytes``; the excess over the true extents (about
``0.01 * size + 2 MiB``) is slack a sandbox can write beyond its limit."""


class DiskQuotaUnsupported(RuntimeError):
    """The engine's storage driver cannot cap a container's disk (and the backend requires it)."""


def probe_quota(api: Any, errors: Any, image: str) -> tuple[str, bool]:
    """(storage driver, whether ``--storage-opt size=`` works), by creating (not starting) a
    throwaway container with a size option: the engine's own answer, whatever the driver. The
    driver is ``"btrfs-squota"`` for btrfs under simple quotas (the size then binds on the
    container's own writes only; :func:`layer_size`)."""
    info = api.info()
    driver = str(info.get("Driver", ""))
    if driver == "btrfs" and btrfs_quota_mode(Path(str(info.get("DockerRootDir", "")))) == "squota":
        driver = "btrfs-squota"
    try:
        cid = api.create_container(
            image, command=["true"], labels={"ale.transient": "probe"},
            host_config=api.create_host_config(storage_opt={"size": str(2**30)}),
        )["Id"]
    except errors.ImageNotFound:
        raise  # says nothing about the engine: the caller reports the unknown image
    except errors.APIError as e:
        log.info("storage driver %s cannot cap a container's disk: %s", driver, e)
        return driver, False
    with contextlib.suppress(Exception):
        api.remove_container(cid, force=True, v=True)
    return driver, True


def layer_size(driver: str, image_size: int, disk_bytes: int) -> int:
    """The ``size`` storage option that lets a container write at most ``disk_bytes``."""
    if driver in QUOTA_DRIVERS_NEED_IMAGE:
        factor, extra = IMAGE_OVERHEAD
        return int(image_size * factor) + extra + disk_bytes
    return disk_bytes


def btrfs_quota_mode(path: Path) -> str | None:
    """``"qgroup"`` or ``"squota"``: how the btrfs file system holding ``path`` counts quotas (the
    kernel's own word, ``/sys/fs/btrfs/<fsid>/qgroups/mode``); None when ``path`` is not on btrfs
    or cannot be read here. The docker backend bind-mounts host directories into its containers,
    so its engine shares this host's file systems and the engine's data root is readable here.
    Unknown is read as classic qgroups, which counts the image: a sandbox then gets less than its
    limit on a simple-quota engine, never more."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        buf = bytearray(1024)
        fcntl.ioctl(fd, _BTRFS_IOC_FS_INFO, buf)
    except OSError:
        return None  # not btrfs (ENOTTY) or not allowed
    finally:
        os.close(fd)
    fsid = uuid.UUID(bytes=bytes(buf[16:32]))
    try:
        return Path(f"/sys/fs/btrfs/{fsid}/qgroups/mode").read_text().strip() or None
    except OSError:
        return "qgroup"  # quotas on, and a kernel older than simple quotas (6.7) has no mode file


def shm_size(memory_bytes: int) -> int:
    """``/dev/shm``: memory charged to the sandbox; small, so filling it cannot starve the Rocklet."""
    return max(4 * 2**20, min(64 * 2**20, memory_bytes // 8))


def mount_tmpfs(path: Path, size: int, uid: int, gid: int) -> None:
    """Mount a small ``nosuid,nodev,noexec`` tmpfs at ``path`` owned by ``uid:gid``."""
    opts = f"size={size},mode=0755,uid={uid},gid={gid},nosuid,nodev,noexec"
    _run(["mount", "-t", "tmpfs", "-o", opts, "ale-sock", str(path)])


def mount_loop_fs(image: Path, path: Path, size: int, uid: int, gid: int) -> None:
    """Create a sparse ``size``-byte ext4 file ``image`` and loop-mount it ``nosuid,nodev`` at ``path``."""
    with open(image, "wb") as f:
        f.truncate(size)
    # Root-reserved blocks would be space the sandbox user cannot use: none.
    _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", f"root_owner={uid}:{gid}", str(image)])
    _run(["mount", "-o", "loop,nosuid,nodev", str(image), str(path)])
    with contextlib.suppress(FileNotFoundError):
        (path / "lost+found").rmdir()


def unmount_under(root: Path) -> None:
    """Unmount every mount at or below ``root`` (deepest first); lazily if busy."""
    prefix = str(root.resolve()) if root.exists() else str(root)
    points = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == prefix or point.startswith(prefix + "/"):
                points.append(point)
    for point in sorted(set(points), key=len, reverse=True):
        if subprocess.run(["umount", point], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True)


def seal(sock_dir: Path) -> None:
    """Make the socket dir root-owned 0755 (worker is root): the sandbox's uid can no longer
    create, rename or unlink entries, so it cannot swap its socket for a symlink to another
    sandbox's; the Rocklet keeps serving on the socket it already bound."""
    if os.getuid() == 0:
        os.chown(sock_dir, 0, 0)
    os.chmod(sock_dir, 0o755)


def _run(argv: list[str]) -> None:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise OSError(f"{' '.join(argv[:2])} failed: {out.stderr.strip() or out.stdout.strip()}")
