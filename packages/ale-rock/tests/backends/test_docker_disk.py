"""How the docker backend sizes a container's layer quota: the btrfs quota mode read from the
kernel (on real btrfs file systems made here, one per mode) and the size passed for each mode."""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from ale_rock.backends.docker_disk import IMAGE_OVERHEAD, btrfs_quota_mode, layer_size

MIB = 2**20
_QUOTA_CTL = (3 << 30) | (16 << 16) | (0x94 << 8) | 40  # BTRFS_IOC_QUOTA_CTL


def test_the_layer_size_counts_the_image_only_under_classic_qgroups() -> None:
    image, limit = 100 * MIB, 16 * MIB
    factor, extra = IMAGE_OVERHEAD
    assert layer_size("btrfs", image, limit) == int(image * factor) + extra + limit
    assert layer_size("btrfs-squota", image, limit) == limit
    assert layer_size("zfs", image, limit) == limit


def test_a_path_not_on_btrfs_or_missing_has_no_mode(tmp_path: Path) -> None:
    assert btrfs_quota_mode(tmp_path) is None  # the test host's /tmp is ext4 or tmpfs
    assert btrfs_quota_mode(tmp_path / "missing") is None


def _problem() -> str:
    if os.getuid() != 0:
        return "mounting a btrfs file system needs root"
    if not shutil.which("mkfs.btrfs"):
        return "mkfs.btrfs missing (apt-get install btrfs-progs; scripts/setup.sh installs it)"
    return ""


_PROBLEM = _problem()
needs_btrfs = pytest.mark.skipif(bool(_PROBLEM), reason=_PROBLEM or "has root and mkfs.btrfs")


@pytest.fixture
def btrfs(tmp_path: Path):
    img, mnt = tmp_path / "fs.img", tmp_path / "mnt"
    with open(img, "wb") as f:
        f.truncate(256 * MIB)
    subprocess.run(["mkfs.btrfs", "-q", str(img)], check=True, capture_output=True)
    mnt.mkdir()
    subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@needs_btrfs
def test_btrfs_without_quotas_and_with_classic_qgroups(btrfs: Path) -> None:
    assert btrfs_quota_mode(btrfs) == "qgroup"  # unknown counts the image: the safe reading
    subprocess.run(["btrfs", "quota", "enable", str(btrfs)], check=True)
    assert btrfs_quota_mode(btrfs) == "qgroup"


@needs_btrfs
def test_btrfs_with_simple_quotas(btrfs: Path) -> None:
    fd = os.open(btrfs, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, _QUOTA_CTL, bytearray(struct.pack("QQ", 4, 0)))  # ENABLE_SIMPLE_QUOTA
    except OSError:
        # A kernel before 6.7 has none (what scripts/docker_engine.sh then falls back from):
        # the reader must not claim them, or a sandbox would get no room at all.
        assert btrfs_quota_mode(btrfs) == "qgroup"
        return
    finally:
        os.close(fd)
    assert btrfs_quota_mode(btrfs) == "squota"
    assert btrfs_quota_mode(btrfs / ".") == "squota"
