"""Reaching a sandbox's Rocklet over a path the sandbox cannot redirect.

The Rocklet's socket lives in a host directory that is also the sandbox's ``/run/ale``. While the
sandbox could write there it could swap ``rocklet.sock`` for a symlink to another sandbox's socket,
and the worker (root) would follow it. The backends seal the directory (root-owned, no group or
other write) once the Rocklet listens; the worker refuses any socket whose directory is not sealed
or which is not a plain socket, and connects through the directory it checked
(``/proc/self/fd/<dirfd>/rocklet.sock``): the path cannot be swapped between check and connect.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass


class UnsafeRockletSocket(Exception):
    """The socket or its directory could be controlled by the sandbox."""


@dataclass
class PinnedSocket:
    """A checked Rocklet socket, reached through an open descriptor of its directory."""

    path: str
    """The path the backend named."""
    dir_fd: int
    name: str

    @property
    def target(self) -> str:
        """What to connect to (the checked directory, whatever happens to the path)."""
        return f"/proc/self/fd/{self.dir_fd}/{self.name}"

    def check(self) -> None:
        """Re-check the directory and the socket (cheap: two stat calls on the pinned dir)."""
        _check(self.dir_fd, self.name, self.path)

    def close(self) -> None:
        """Close the directory descriptor."""
        try:
            os.close(self.dir_fd)
        except OSError:
            pass


def _check(dir_fd: int, name: str, path: str) -> None:
    st = os.fstat(dir_fd)
    if st.st_uid not in (0, os.geteuid()):
        raise UnsafeRockletSocket(f"{path}: its directory is owned by uid {st.st_uid}, not root")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeRockletSocket(f"{path}: its directory is writable by others ({stat.filemode(st.st_mode)})")
    try:
        sock = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError as e:
        raise UnsafeRockletSocket(f"{path}: no such socket") from e
    if stat.S_ISLNK(sock.st_mode):
        raise UnsafeRockletSocket(f"{path} is a symlink")
    if not stat.S_ISSOCK(sock.st_mode):
        raise UnsafeRockletSocket(f"{path} is not a socket")


def pin(path: str) -> PinnedSocket:
    """Open and check the socket's directory (not following a symlink); raise
    :class:`UnsafeRockletSocket` when the sandbox could redirect it."""
    parent, _, name = path.rpartition("/")
    try:
        dir_fd = os.open(parent or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise UnsafeRockletSocket(f"{path}: its directory cannot be opened without following links: {e}") from e
    pinned = PinnedSocket(path, dir_fd, name)
    try:
        pinned.check()
    except BaseException:
        pinned.close()
        raise
    return pinned
