"""Where tools act: the `Workspace` Protocol and the local-machine implementation.

The Protocol is deliberately small so a sandbox (ale-rock) can implement it over its SDK:
run a command with a timeout, and read / write / list files. Every tool is written against
these five methods only, so tool code is identical locally and in a sandbox.
Paths are workspace-relative POSIX strings (absolute paths must lie inside `root`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ale_flow.shell_session import ShellSession


@dataclass
class ShellResult:
    """Outcome of `Workspace.exec`: the agent's shell command, output interleaved as text
    (not the ale-rock SDK's ``ExecResult``, which keeps stdout and stderr apart as bytes)."""

    exit_code: int
    output: str
    """stdout and stderr interleaved."""
    timed_out: bool = False
    interrupted: bool = False


@dataclass
class DirEntry:
    """One entry of `Workspace.list_dir`."""

    name: str
    is_dir: bool
    size: int
    mtime: float


@runtime_checkable
class Workspace(Protocol):
    """The surface tools need from the machine they act on."""

    root: str
    """Absolute path of the workspace root on the machine the workspace lives on."""

    def exec(self, command: str, timeout: float, cwd: str = ".", cancel: threading.Event | None = None) -> ShellResult:
        """Run `command` with bash in `cwd`; kill it (and its children) on timeout or when `cancel` is set."""
        ...

    def read_bytes(self, path: str) -> bytes:
        """File contents; raises FileNotFoundError / IsADirectoryError."""
        ...

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace a file, creating parent directories."""
        ...

    def list_dir(self, path: str) -> list[DirEntry]:
        """Entries of a directory (not recursive); raises FileNotFoundError / NotADirectoryError."""
        ...


class OutsideWorkspaceError(PermissionError):
    """A path resolved outside the workspace root."""


def resolve_inside(root: str, path: str) -> Path:
    """Resolve `path` against `root`, refusing anything that escapes it (incl. via symlinks)."""
    base = Path(root).resolve()
    p = Path(path)
    full = (p if p.is_absolute() else base / p).resolve()
    if full != base and base not in full.parents:
        raise OutsideWorkspaceError(f"path {path!r} is outside the workspace {root}")
    return full


class LocalWorkspace:
    """A directory on this machine."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = str(Path(root).resolve())
        Path(self.root).mkdir(parents=True, exist_ok=True)

    def _p(self, path: str) -> Path:
        return resolve_inside(self.root, path)

    def exec(self, command: str, timeout: float, cwd: str = ".", cancel: threading.Event | None = None) -> ShellResult:
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self._p(cwd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: timeout/interrupt kill the whole tree
        )
        chunks: list[bytes] = []
        reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read() if proc.stdout else b""), daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        timed_out = interrupted = False
        while proc.poll() is None:
            if cancel is not None and cancel.is_set():
                interrupted = True
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
            try:
                proc.wait(timeout=0.02)
            except subprocess.TimeoutExpired:
                pass
        if timed_out or interrupted:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        # A backgrounded grandchild may keep the pipe open; do not wait for it forever.
        reader.join(timeout=2.0)
        out = b"".join(chunks).decode("utf-8", errors="replace")
        return ShellResult(proc.returncode if proc.returncode is not None else -1, out, timed_out, interrupted)

    def open_shell(self) -> ShellSession:
        """A persistent pty bash in the root (the shell tool's session)."""
        from ale_flow.shell_session import LocalShellSession

        return LocalShellSession(self.root)

    def read_bytes(self, path: str) -> bytes:
        return self._p(path).read_bytes()

    def write_bytes(self, path: str, data: bytes) -> None:
        p = self._p(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def list_dir(self, path: str) -> list[DirEntry]:
        p = self._p(path)
        out = []
        for child in sorted(p.iterdir(), key=lambda c: c.name):
            try:
                st = child.stat()
            except OSError:
                continue
            out.append(DirEntry(child.name, child.is_dir(), st.st_size, st.st_mtime))
        return out


SANDBOX_SCHEME = "sandbox://"


def open_workspace(spec: str | os.PathLike[str]) -> Workspace:
    """A local directory, or `sandbox://ID` for an ale-rock sandbox (needs ale-flow[sandbox])."""
    text = str(spec)
    if text.startswith(SANDBOX_SCHEME):
        from ale_flow.sandbox_workspace import SandboxWorkspace

        return SandboxWorkspace.connect(text[len(SANDBOX_SCHEME):])
    return LocalWorkspace(text)
