"""The container spec of one Docker sandbox: every isolation and limit setting in one place."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ale_rock.backends.base import SandboxConfig
from ale_rock.backends.docker_disk import (
    LOG_MAX_BYTES,
    SOCK_TMPFS_BYTES,
    mount_loop_fs,
    mount_tmpfs,
    shm_size,
)
from ale_rock.backends.docker_runtime import CONF_DIR, SOCKET_DIR, RockletRuntime

EGRESS_DIR = "/run/ale-egress"
"""Inside the container: the worker's egress gateway socket dir (bound read-only)."""


def prepare_host_dir(host_dir: Path, config: SandboxConfig, uid: int, gid: int) -> dict[str, dict[str, str]]:
    """Create the sandbox's host dirs; return their binds (socket dir, settings, work dir).

    A root worker mounts the socket dir as a small ``nosuid,nodev,noexec`` tmpfs and a read-only
    root's work dir as a ``disk_bytes`` loop file system (see ``docker_disk.py``); the caller
    unmounts them (``unmount_under``) when the sandbox goes.
    """
    sock_dir, conf_dir = host_dir / "sock", host_dir / "conf"
    sock_dir.mkdir(parents=True, exist_ok=True)
    conf_dir.mkdir(exist_ok=True)
    os.chmod(host_dir, 0o711)
    root = os.getuid() == 0
    binds = {
        str(sock_dir): {"bind": SOCKET_DIR, "mode": "rw"},
        # Read-only: the sandbox must not rewrite its own env or egress token.
        str(conf_dir): {"bind": CONF_DIR, "mode": "ro"},
    }
    if root:  # owned by the sandbox uid until sealed: the Rocklet must create its socket here
        mount_tmpfs(sock_dir, SOCK_TMPFS_BYTES, uid, gid)
    if config.read_only_root:
        work = host_dir / "work"
        work.mkdir(exist_ok=True)
        binds[str(work)] = {"bind": config.workdir, "mode": "rw"}
        if root:
            mount_loop_fs(host_dir / "work.img", work, config.limits.disk_bytes, uid, gid)
    return binds


def container_kwargs(
    api: Any,
    docker_types: Any,
    runtime: RockletRuntime,
    *,
    name: str,
    image: str,
    command: list[str],
    config: SandboxConfig,
    binds: dict[str, dict[str, str]],
    egress_socket: Path | None,
    labels: dict[str, str],
    uid: int,
    gid: int,
    init: bool,
    tmp_size_bytes: int,
    layer_bytes: int | None,
) -> dict[str, Any]:
    """Arguments of ``APIClient.create_container`` for a locked-down sandbox."""
    binds = dict(binds)
    for host, inside in runtime.mounts:
        binds[host] = {"bind": inside, "mode": "ro"}
    if egress_socket is not None:
        # The directory, not the socket file: a restarted gateway's new socket stays visible.
        binds[str(egress_socket.parent)] = {"bind": EGRESS_DIR, "mode": "ro"}
    limits = config.limits
    ulimits = [docker_types.Ulimit(name="core", soft=0, hard=0)]
    if limits.max_open_files:
        n = limits.max_open_files
        ulimits.append(docker_types.Ulimit(name="nofile", soft=n, hard=n))
    if limits.disk_bytes:
        # Each file too: the layer quota (``layer_bytes``) caps the sum where the engine can.
        n = limits.disk_bytes
        ulimits.append(docker_types.Ulimit(name="fsize", soft=n, hard=n))
    # A read-only root's /tmp is memory (charged to the sandbox's cgroup), never host disk.
    tmpfs = {"/tmp": f"rw,nosuid,nodev,size={tmp_size_bytes},mode=1777"} if config.read_only_root else None
    host_config = api.create_host_config(
        binds=binds,
        tmpfs=tmpfs,
        network_mode="none",
        privileged=False,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges:true"],
        read_only=config.read_only_root,
        init=init,
        ipc_mode="private",
        mem_limit=limits.memory_bytes or None,
        memswap_limit=limits.memory_bytes or None,  # equal to mem_limit: no swap
        nano_cpus=limits.cpu_millis * 1_000_000 or None,
        pids_limit=limits.max_pids or None,
        ulimits=ulimits,
        storage_opt={"size": str(layer_bytes)} if layer_bytes else None,
        shm_size=shm_size(limits.memory_bytes),
        # Anything the sandbox writes to its pid 1's stdout lands in the engine's log file.
        log_config=docker_types.LogConfig(
            type="json-file", config={"max-size": str(LOG_MAX_BYTES), "max-file": "1"}
        ),
    )
    return {
        "image": image,
        "command": command,
        "user": f"{uid}:{gid}",
        "environment": {"HOME": config.workdir},  # commands' env comes from the settings file
        "working_dir": config.workdir,
        "labels": labels,
        "host_config": host_config,
        "name": name,
        "hostname": "sandbox",
    }
