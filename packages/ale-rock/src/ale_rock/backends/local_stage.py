"""Staging the host paths an unprivileged bubblewrap must bind but cannot reach.

bwrap runs as the sandbox's own non-root host uid, and resolves every bind source as that uid
(even ``--bind-fd``: it ``realpath``s the fd's target), so a source under a directory without
``o+x`` (``/root/.pyenv``, a 0700 state dir) cannot be bound. The launch therefore starts, still
as root, in a private mount namespace of its own (``unshare --mount --propagation private``:
nothing is mounted on the host), mounts a small tmpfs over an empty, reachable host directory
(``mountpoint``) and bind-mounts each unreachable source there under a neutral name, then drops
to the sandbox uid and runs bwrap with the staged paths. Reachable sources are bound directly,
so a launch with nothing to stage pays nothing.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path


def reachable(path: str | Path) -> bool:
    """True when a uid that owns nothing and is in no group can reach ``path`` (search bits)."""
    p = Path(os.path.realpath(path))
    dirs = [*reversed(p.parents)] + ([p] if p.is_dir() else [])
    try:
        return all(os.stat(d).st_mode & stat.S_IXOTH for d in dirs)
    except OSError:
        return False


@dataclass
class Stage:
    """The binds one launch stages (``map``), and the shell lines that make them (``script``)."""

    mountpoint: str
    """Empty host directory, reachable by every uid; a tmpfs goes over it in the private namespace."""
    binds: list[tuple[str, str, bool]] = field(default_factory=list)
    """(host path, staged path, is a directory)."""

    def map(self, path: str | Path) -> str:
        """The path bwrap should bind for host ``path``: itself when reachable, else a staged one."""
        if reachable(path):
            return str(path)
        real = os.path.realpath(path)
        for host, staged, _ in self.binds:
            if host == real:
                return staged
        staged = f"{self.mountpoint}/{len(self.binds)}"
        self.binds.append((real, staged, os.path.isdir(real)))
        return staged

    def script(self) -> str:
        """Shell lines (run as root inside the private mount namespace) that make the binds."""
        if not self.binds:
            return ""
        q = shlex.quote
        lines = [
            f"mount -t tmpfs -o size=64k,mode=0755,nosuid,nodev,noexec ale-stage {q(self.mountpoint)} || exit 96"
        ]
        for host, staged, is_dir in self.binds:
            make = f"mkdir {q(staged)}" if is_dir else f": > {q(staged)}"
            # --rbind: a sandbox dir's own tmpfs mounts (fs, run, shm, priv) come along.
            lines.append(f"{make} && mount --rbind {q(host)} {q(staged)} || exit 96")
        return "\n".join(lines) + "\n"

    def argv_prefix(self) -> list[str]:
        """What runs the launch in a private mount namespace (nothing when there is nothing to stage)."""
        return ["unshare", "--mount", "--propagation", "private", "--"] if self.binds else []
