"""Persistent shell sessions: a bash on a pty whose state (cwd, variables, jobs) lives across calls.

A command's end is found by a sentinel line: after the command we type
``printf '\\036ALE<nonce>:%d\\036\\n' $?`` with a fresh random nonce, and read until it comes back.
Echo is switched off, so the sentinel text itself never shows up except as the printed marker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pty
import re
import signal as _signal
import subprocess
import termios
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ale_rock.rocklet.capture import CappedOutput, SpillBudget
from ale_rock.rocklet.exec import raise_oom_score
from ale_rock.rocklet.types import (
    DEFAULT_MAX_OUTPUT,
    MAX_COMMAND_BYTES,
    EndReason,
    ExecOutcome,
    RockletError,
    check_id,
)

MAX_SESSIONS = 64
log = logging.getLogger(__name__)
_SENTINEL = re.compile(rb"\x1eALE([0-9a-f]{16}):(-?\d+)\x1e\n?")
_INTERRUPT_GRACE_S = 2.0


class Session:
    """One bash on a pty, with a reader thread filling an output buffer."""

    def __init__(self, session_id: str, shell: str, env: dict[str, str], cwd: str) -> None:
        self.session_id = session_id
        master, slave = pty.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[3] &= ~termios.ECHO  # lflag: no echo, so typed commands are not in the output
        attrs[1] &= ~termios.ONLCR  # oflag: keep "\n" as is
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        argv = ["setsid", "-c", shell]
        if os.path.basename(shell) == "bash":
            argv += ["--norc", "--noprofile", "--noediting", "-i"]
        else:
            argv += ["-i"]
        self.proc = subprocess.Popen(
            argv,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env={**env, "PS1": "", "PS2": "", "TERM": "dumb"},
            close_fds=True,
        )
        raise_oom_score(self.proc.pid)  # the OOM killer takes the shell before the Rocklet
        os.close(slave)
        self.master = master
        self._buf = bytearray()
        self._cond = threading.Condition()
        self.closed = False
        self.run_lock = threading.Lock()
        self.interrupted = False
        """Set when a client signals the foreground job of the running command."""
        threading.Thread(target=self._read_loop, name=f"session-{session_id}", daemon=True).start()
        self._write(b"unset PROMPT_COMMAND; PS1=''; PS2=''\n")
        nonce = uuid.uuid4().hex[:16]
        self._write(_sentinel_cmd(nonce))
        said = CappedOutput(1 << 10, Path("/dev/null"))
        found = self._wait_sentinel(nonce, time.monotonic() + 10.0, None, said)
        if found is None:
            self.close()
            how = f"exited with {self.proc.returncode}" if self.proc.returncode is not None else "gave no answer in 10 s"
            raise RockletError(
                "internal", f"the shell did not start: it {how}; it printed {said.value()[-200:]!r}", "spec.shell"
            )

    def _read_loop(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                data = b""
            with self._cond:
                if not data:
                    self.closed = True
                    self._cond.notify_all()
                    return
                self._buf += data
                self._cond.notify_all()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.master, view)
            view = view[n:]

    def send(self, data: bytes, interrupt: bool = False) -> None:
        """Write input to the terminal, after a Ctrl-C when asked."""
        if self.closed:
            raise RockletError("not_found", f"session {self.session_id} has exited", "session_id")
        if interrupt:
            self._write(b"\x03")
        if data:
            self._write(data)

    def read(self, wait_ms: int) -> tuple[bytes, bool]:
        """Take the output produced since the last read, waiting up to ``wait_ms`` for some."""
        deadline = time.monotonic() + wait_ms / 1000
        with self._cond:
            while not self._buf and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            data = bytes(self._buf)
            self._buf.clear()
            return data, self.closed

    def foreground_pgrp(self) -> int:
        """Process group of the foreground job, or 0 when the shell itself is in front."""
        try:
            pgrp = os.tcgetpgrp(self.master)
        except OSError:
            return 0
        return 0 if pgrp == self.proc.pid else pgrp

    def run(
        self,
        command: str,
        timeout_ms: int,
        idle_timeout_ms: int,
        max_output: int,
        spill_path: Path,
        budget: SpillBudget | None = None,
    ) -> ExecOutcome:
        """Type ``command``, wait for its sentinel; interrupt it on a timeout, keeping the output."""
        if not self.run_lock.acquire(blocking=False):
            raise RockletError("busy", f"session {self.session_id} is running another command", "session_id")
        try:
            if self.closed:
                raise RockletError("not_found", f"session {self.session_id} has exited", "session_id")
            started = time.monotonic()
            out = CappedOutput(max_output or DEFAULT_MAX_OUTPUT, spill_path, budget)
            self.read(0)  # drop stale output of earlier interactive use
            nonce = uuid.uuid4().hex[:16]
            self._write(command.encode() + b"\n" + _sentinel_cmd(nonce))
            hard = started + timeout_ms / 1000 if timeout_ms else None
            idle = idle_timeout_ms / 1000 if idle_timeout_ms else None
            self.interrupted = False
            status = self._wait_sentinel(nonce, hard, idle, out)
            reason = EndReason.INTERRUPTED if self.interrupted else EndReason.EXITED
            if status is None and not self.closed:
                reason = (
                    EndReason.TIMEOUT
                    if (hard is not None and time.monotonic() >= hard)
                    else EndReason.IDLE_TIMEOUT
                )
                status = self._interrupt(out)
            out.close()
            if status is None and self.closed:  # the command ended the shell (e.g. "exit 3")
                try:
                    rc = self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    rc = -1
                return self._outcome(
                    EndReason.EXITED if rc >= 0 else EndReason.SIGNALED,
                    rc if rc >= 0 else 128 - rc,
                    out,
                    started,
                )
            if status is None:
                return self._outcome(reason, -1, out, started)
            return self._outcome(reason, status, out, started)
        finally:
            self.run_lock.release()

    def _interrupt(self, out: CappedOutput) -> int | None:
        self._write(b"\x03")
        pgrp = self.foreground_pgrp()
        deadline = time.monotonic() + _INTERRUPT_GRACE_S
        # The tty flushes pending input on ^C, so the first sentinel may be gone: type a new one.
        nonce = uuid.uuid4().hex[:16]
        self._write(_sentinel_cmd(nonce))
        status = self._wait_sentinel(nonce, deadline, None, out)
        if status is None and pgrp:
            with contextlib.suppress(OSError):
                os.killpg(pgrp, _signal.SIGKILL)
            status = self._wait_sentinel(nonce, time.monotonic() + _INTERRUPT_GRACE_S, None, out)
        return status

    def _wait_sentinel(
        self, nonce: str, hard: float | None, idle: float | None, out: CappedOutput
    ) -> int | None:
        pending = bytearray()
        last = time.monotonic()
        while True:
            with self._cond:
                if not self._buf and not self.closed:
                    now = time.monotonic()
                    waits = [1.0]
                    if hard is not None:
                        waits.append(hard - now)
                    if idle is not None:
                        waits.append(last + idle - now)
                    if min(waits) <= 0:
                        out.write(_strip_sentinels(bytes(pending)))
                        return None
                    self._cond.wait(min(waits))
                data = bytes(self._buf)
                self._buf.clear()
                closed = self.closed
            if data:
                last = time.monotonic()
                pending += data
                for m in _SENTINEL.finditer(pending):
                    if m.group(1).decode() == nonce:
                        out.write(_strip_sentinels(bytes(pending[: m.start()])))
                        rest = bytes(pending[m.end() :])
                        if rest:
                            with self._cond:
                                self._buf[:0] = rest
                        return int(m.group(2))
                # Keep a possible partial sentinel at the end; hand the rest to the capture.
                cut = pending.rfind(b"\x1e")
                keep_from = cut if cut >= 0 and len(pending) - cut < 40 else len(pending)
                out.write(_strip_sentinels(bytes(pending[:keep_from])))
                del pending[:keep_from]
            elif closed:
                out.write(bytes(pending))
                return None

    def _outcome(self, reason: EndReason, status: int, out: CappedOutput, started: float) -> ExecOutcome:
        return ExecOutcome(
            end_reason=reason,
            exit_code=status,
            stdout=out.value(),
            stdout_truncated=out.truncated,
            stdout_spill_path=str(out.spill_path) if out.truncated else "",
            duration_s=time.monotonic() - started,
            pid=self.proc.pid,
        )

    def close(self) -> None:
        """Kill the shell and everything it started."""
        for pgrp in {self.foreground_pgrp(), self.proc.pid}:
            if pgrp:
                with contextlib.suppress(OSError):
                    os.killpg(pgrp, _signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)
        with contextlib.suppress(OSError):
            os.close(self.master)


def _sentinel_cmd(nonce: str) -> bytes:
    return f"printf '\\036ALE{nonce}:%d\\036\\n' $?\n".encode()


def _strip_sentinels(data: bytes) -> bytes:
    return _SENTINEL.sub(b"", data)


class SessionManager:
    """The sandbox's open sessions, by id."""

    def __init__(
        self,
        workdir: str,
        env: Callable[[], dict[str, str]],
        spill_dir: Path,
        spill_budget: SpillBudget | None = None,
    ) -> None:
        self.workdir = workdir
        self._env = env
        self.spill_dir = spill_dir
        self.spill_budget = spill_budget or SpillBudget(spill_dir)
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    def create(
        self, session_id: str = "", shell: str = "", env: dict[str, str] | None = None, cwd: str = ""
    ) -> str:
        """Open a session and return its id."""
        check_id(session_id, "spec.session_id")
        session_id = session_id or f"se-{uuid.uuid4().hex[:12]}"
        shell = shell or ("/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh")
        if not shell.startswith("/") or not os.access(shell, os.X_OK):
            raise RockletError("invalid", f"shell {shell!r} is not an executable absolute path", "spec.shell")
        cwd = cwd or self.workdir
        if not os.path.isdir(cwd):
            raise RockletError("invalid", f"{cwd!r} is not a directory", "spec.cwd")
        with self._lock:
            if session_id in self._sessions:
                raise RockletError("exists", f"session {session_id} exists", "spec.session_id")
            if len(self._sessions) >= MAX_SESSIONS:
                raise RockletError("busy", f"at most {MAX_SESSIONS} sessions per sandbox", "spec")
            self._sessions[session_id] = None  # type: ignore[assignment]  # reserve the id
        try:
            session = self._start(session_id, shell, {**self._env(), **(env or {})}, cwd)
        except BaseException:
            with self._lock:
                self._sessions.pop(session_id, None)
            raise
        with self._lock:
            self._sessions[session_id] = session
        return session_id

    @staticmethod
    def _start(session_id: str, shell: str, env: dict[str, str], cwd: str) -> Session:
        """A started session; a shell that fails to come up is started once more (seen once, in a
        full test run on a loaded machine, cause not found; the error now says whether the shell
        exited or went silent, and what it printed)."""
        try:
            return Session(session_id, shell, env, cwd)
        except RockletError as e:
            log.warning("session %s: %s; starting it again", session_id, e.message)
        return Session(session_id, shell, env, cwd)

    def get(self, session_id: str) -> Session:
        """The open session ``session_id``."""
        check_id(session_id, "session_id")
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise RockletError("not_found", f"no session {session_id!r}", "session_id")
        return session

    def run(
        self,
        session_id: str,
        command: str,
        timeout_ms: int = 0,
        idle_timeout_ms: int = 0,
        max_output: int = 0,
    ) -> ExecOutcome:
        """Run a command in a session."""
        if len(command.encode()) > MAX_COMMAND_BYTES:
            raise RockletError(
                "invalid", f"command is longer than {MAX_COMMAND_BYTES} bytes", "command.command"
            )
        if "\0" in command:
            raise RockletError("invalid", "command contains a NUL byte", "command.command")
        session = self.get(session_id)
        spill = self.spill_dir / f"{session_id}-{uuid.uuid4().hex[:8]}.out"
        return session.run(command, timeout_ms, idle_timeout_ms, max_output, spill, self.spill_budget)

    def signal(self, session_id: str, sig: int) -> bool:
        """Signal a session's foreground job; False when nothing runs in front."""
        session = self.get(session_id)
        pgrp = session.foreground_pgrp()
        if not pgrp:
            return False
        try:
            os.killpg(pgrp, sig)
        except ProcessLookupError:
            return False
        session.interrupted = True
        return True

    def close(self, session_id: str) -> None:
        """Close a session."""
        session = self.get(session_id)
        with self._lock:
            self._sessions.pop(session_id, None)
        session.close()

    def close_all(self) -> None:
        """Close every session."""
        with self._lock:
            sessions = [s for s in self._sessions.values() if s is not None]
            self._sessions.clear()
        for s in sessions:
            s.close()
