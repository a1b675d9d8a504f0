"""Where a task runs: a tiny Protocol, and a local implementation over a temp dir + subprocess."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol, runtime_checkable

from ale_rock.rocklet.procs import TAG_VAR, new_tag, sweep

MAX_OUTPUT_CHARS = 256 * 1024


@dataclass(frozen=True)
class CommandResult:
    """Outcome of :meth:`TaskRunner.run`: stdout and stderr merged."""

    exit_code: int
    output: str
    timed_out: bool = False
    duration_s: float = 0.0


@runtime_checkable
class TaskRunner(Protocol):
    """A work dir a task runs in. All paths are relative to it; commands run with it as cwd."""

    def reset(self) -> None:
        """Empty the work dir so the next episode starts clean."""

    def upload(self, files: Mapping[str, bytes]) -> None:
        """Write files (relative path -> content) into the work dir, creating parent dirs."""

    def run(self, command: str, timeout_s: float) -> CommandResult:
        """Run ``bash -c command`` in the work dir; kill it and everything it started at the timeout."""

    def stop_processes(self) -> None:
        """End every process earlier commands left running (detached, daemonized), so nothing the
        agent left can touch the hidden tests while they run (:func:`~ale_rock.tasks.evaluate.run_tests`)."""

    def close(self) -> None:
        """Release the work dir."""


def check_relative(path: str) -> str:
    """Reject absolute paths and ``..`` so uploads stay inside the work dir."""
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"path {path!r} must be relative and stay inside the work dir")
    return p.as_posix()


# Tasks may use only what the base environment has, so the local runner hides the developer's
# virtualenv and user site: python3 is the system interpreter with its stdlib.
_SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _make_deletable(path: Path) -> None:
    """Give every directory rwx back (a task may chmod its own dirs; root ignores that, others do not).

    Each directory is chmod-ed before it is listed, so even a mode-000 directory can be removed."""
    os.chmod(path, 0o755)
    with os.scandir(path) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                _make_deletable(Path(entry.path))


class LocalDirRunner:
    """Runs a task in a fresh temporary directory with plain subprocesses (no isolation).

    For authoring and fast tests. Use the sandbox runner for untrusted agents.
    """

    def __init__(self, root: Path | str | None = None, *, path_env: str = _SAFE_PATH,
                 env: Mapping[str, str] | None = None) -> None:
        self._own = root is None
        self.workdir = Path(tempfile.mkdtemp(prefix="ale-task-")) if root is None else Path(root)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._env = {
            "PATH": path_env,
            "HOME": str(self.workdir),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "TMPDIR": str(self.workdir / ".tmp"),
            **(env or {}),  # the task's own variables (a sandbox would be created with them)
            # Every process of this work dir carries it (inherited), so stop_processes finds them.
            TAG_VAR: new_tag(),
        }

    def reset(self) -> None:
        if self.workdir.exists():
            _make_deletable(self.workdir)
            shutil.rmtree(self.workdir)
        self.workdir.mkdir(parents=True)

    def upload(self, files: Mapping[str, bytes]) -> None:
        for rel, data in files.items():
            target = self.workdir / check_relative(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    def run(self, command: str, timeout_s: float) -> CommandResult:
        (self.workdir / ".tmp").mkdir(exist_ok=True)
        start = time.monotonic()
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.workdir,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a timeout kills the whole tree
        )
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, _ = proc.communicate()
        text = out.decode(errors="replace")
        if len(text) > MAX_OUTPUT_CHARS:
            text = text[:MAX_OUTPUT_CHARS] + "\n[output truncated]"
        return CommandResult(
            exit_code=proc.returncode if not timed_out else 124,
            output=text,
            timed_out=timed_out,
            duration_s=time.monotonic() - start,
        )

    def stop_processes(self) -> None:
        """Kill every process carrying this runner's tag (no isolation here: one that scrubbed its
        environment escapes; the sandbox runner kills every process of the sandbox)."""
        sweep(self._env[TAG_VAR], 0)

    def close(self) -> None:
        if self._own and self.workdir.exists():
            self.reset()
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalDirRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
