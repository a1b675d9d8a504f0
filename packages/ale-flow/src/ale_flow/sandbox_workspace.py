"""`Workspace` over an ale-rock sandbox, through the ale-rock SDK (`pip install 'ale-flow[sandbox]'`).

The same tools run unchanged: `exec` maps to `Sandbox.exec` (killed by exec id on interrupt),
files to `read` / `write` / `ls`. The connection (admin address, API key) comes from the SDK's
environment variables (`ALE_ROCK_ADDRESS`, `ALE_ROCK_API_KEY`) unless a client is passed.
"""

from __future__ import annotations

import errno
import os
import posixpath
import threading
import uuid
from typing import Any

from ale_flow.shell_session import INTERRUPT_GRACE_S, EndKind, SessionRun
from ale_flow.workspace import DirEntry, OutsideWorkspaceError, ShellResult


def _sdk() -> Any:
    try:
        import ale_rock.sdk as sdk
        import ale_rock.sdk.errors  # noqa: F401 - makes sdk.errors available
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("sandbox workspaces need the ale-rock SDK: pip install 'ale-flow[sandbox]'") from e
    return sdk


_ERRNO_BY_NAME = {name: number for number, name in errno.errorcode.items()}


def _os_error(err: Exception, path: str) -> OSError:
    """Map the SDK's typed errors to the OSErrors tools already handle.

    By type and by the ``errno`` the Rocklet names in the error's metadata (``OSError(errno, ...)``
    builds the matching subclass: EISDIR -> IsADirectoryError, ENOTDIR -> NotADirectoryError...).
    """
    errors = _sdk().errors
    message = getattr(err, "message", str(err))
    if isinstance(err, errors.FileNotFound):
        return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    number = _ERRNO_BY_NAME.get(getattr(err, "metadata", {}).get("errno", ""))
    if number is not None:
        return OSError(number, os.strerror(number), path)
    if isinstance(err, errors.PermissionDenied):
        return PermissionError(errno.EACCES, message, path)
    return OSError(str(err))


class SandboxShellSession:
    """A Rocklet session (ale_rock/rocklet/sessions.py) behind the `ShellSession` Protocol."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def _watch(self, cancel: threading.Event, done: threading.Event) -> None:
        # SignalProcess, not a typed Ctrl-C: the terminal would flush the queued sentinel.
        while not done.wait(0.05):
            if cancel.is_set():
                for sig, grace in ((2, INTERRUPT_GRACE_S), (9, 0.0)):
                    try:
                        self.session.interrupt(signal=sig)
                    except Exception:  # noqa: S110 - the command may have just finished
                        pass
                    if done.wait(grace):
                        return
                return

    def run(self, script: str, timeout: float, max_output: int, cancel: threading.Event | None = None) -> SessionRun:
        done = threading.Event()
        if cancel is not None:
            threading.Thread(target=self._watch, args=(cancel, done), daemon=True).start()
        try:
            res = self.session.run(script, timeout=timeout, max_output_bytes=max_output)
        except _sdk().errors.SandboxError as e:
            # Session gone (NOT_FOUND) or the sandbox failing: the tool reopens once, then reports.
            raise OSError(f"sandbox shell session failed: {e}") from None
        finally:
            done.set()
        end: EndKind = {"timeout": "timeout", "idle_timeout": "timeout", "interrupted": "interrupted"}.get(res.end_reason, "exited")  # type: ignore[assignment]
        return SessionRun(res.stdout_bytes + res.stderr_bytes, res.exit_code, end, res.stdout_truncated)

    def close(self) -> None:
        try:
            self.session.close()
        except Exception:  # noqa: S110 - already gone with its sandbox
            pass


class SandboxWorkspace:
    """A directory (default /workspace) inside an ale-rock sandbox."""

    def __init__(self, sandbox: Any, root: str = "/workspace") -> None:
        self.sandbox = sandbox
        self.root = posixpath.normpath(root)

    @classmethod
    def connect(cls, sandbox_id: str, root: str = "/workspace", client: Any = None) -> SandboxWorkspace:
        """Attach to a running sandbox by id (`sandbox://ID` on the CLI)."""
        return cls(_sdk().Sandbox.connect(sandbox_id, client=client), root)

    def _abs(self, path: str) -> str:
        full = posixpath.normpath(path if path.startswith("/") else f"{self.root}/{path}")
        if full != self.root and not full.startswith(self.root + "/"):
            raise OutsideWorkspaceError(f"path {path!r} is outside the workspace {self.root}")
        return full

    def exec(self, command: str, timeout: float, cwd: str = ".", cancel: threading.Event | None = None) -> ShellResult:
        exec_id = f"flow-{uuid.uuid4().hex[:12]}"
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                # stderr joins stdout in the shell, so the two interleave as on a LocalWorkspace.
                box["res"] = self.sandbox.exec(["bash", "-c", "exec 2>&1\n" + command], cwd=self._abs(cwd), timeout=timeout, exec_id=exec_id)
            except Exception as e:
                box["err"] = e

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        interrupted = False
        while worker.is_alive():
            worker.join(0.05)
            if cancel is not None and cancel.is_set() and not interrupted:
                interrupted = True
                try:
                    self.sandbox.signal(exec_id=exec_id, signal=9)
                except Exception:  # noqa: S110 - the command may have just finished
                    pass
        if "err" in box:
            return ShellResult(-1, f"sandbox exec failed: {box['err']}", interrupted=interrupted)
        res = box["res"]
        out = (res.stdout_bytes + res.stderr_bytes).decode("utf-8", errors="replace")
        timed_out = res.end_reason in ("timeout", "idle_timeout")
        return ShellResult(res.exit_code, out, timed_out, interrupted or res.end_reason == "interrupted")

    def open_shell(self) -> SandboxShellSession:
        """A Rocklet session in the root: the shell tool's commands cost one RPC each."""
        try:
            return SandboxShellSession(self.sandbox.session(cwd=self.root))
        except _sdk().errors.SandboxError as e:
            raise OSError(f"cannot open a shell session in the sandbox: {e}") from None

    def read_bytes(self, path: str) -> bytes:
        full = self._abs(path)
        try:
            return bytes(self.sandbox.read(full))
        except _sdk().errors.SandboxError as e:
            raise _os_error(e, path) from None

    def write_bytes(self, path: str, data: bytes) -> None:
        full = self._abs(path)
        try:
            self.sandbox.write(full, data)
        except _sdk().errors.SandboxError as e:
            raise _os_error(e, path) from None

    def list_dir(self, path: str) -> list[DirEntry]:
        full = self._abs(path)
        try:
            entries = self.sandbox.ls(full)
        except _sdk().errors.SandboxError as e:
            raise _os_error(e, path) from None
        return [
            DirEntry(posixpath.basename(e.path.rstrip("/")), e.is_dir, e.size, e.modify_time.timestamp() if e.modify_time else 0.0)
            for e in entries
        ]
