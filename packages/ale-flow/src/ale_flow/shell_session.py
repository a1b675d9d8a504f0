"""Persistent shell sessions: the `ShellSession` Protocol and the local (pty) implementation.

The shell tool keeps one bash per agent, so `cd` and `export` persist in the shell itself, not
in files. A sandbox workspace backs the Protocol with an ale-rock Rocklet session (one
`RunInSession` RPC per command); this module backs it locally with the same design as the
Rocklet's (ale_rock/rocklet/sessions.py): an interactive bash on a pseudo-terminal, echo off,
and a sentinel line typed after each command whose printed form marks the command's end. Both
sides being a bash on a pty is what makes the tool's text identical in training (sandbox) and
locally: same tty semantics for programs (`ls` columns, line buffering), stderr and stdout
interleaved in the order they were written, the same exit statuses.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pty
import re
import signal
import subprocess
import termios
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

EndKind = Literal["exited", "timeout", "interrupted"]

INTERRUPT_GRACE_S = 2.0
"""How long a Ctrl-C'd command may take to stop before its process group is SIGKILLed (as the Rocklet)."""

_SENTINEL = re.compile(rb"\x1eALE([0-9a-f]{16}):(-?\d+)\x1e\n?")


@dataclass
class SessionRun:
    """Outcome of one command typed into a session."""

    output: bytes
    """Everything the terminal printed (stdout and stderr interleaved), up to `max_output` bytes."""
    exit_code: int
    end: EndKind
    truncated: bool = False
    """More than `max_output` bytes were printed; only the first ones are in `output`."""


@runtime_checkable
class ShellSession(Protocol):
    """A bash that outlives one command."""

    def run(self, script: str, timeout: float, max_output: int, cancel: threading.Event | None = None) -> SessionRun:
        """Type `script` (complete bash lines) and wait for it; on timeout or `cancel` interrupt it."""
        ...

    def close(self) -> None:
        """Kill the shell."""
        ...


@runtime_checkable
class ShellHost(Protocol):
    """A workspace that can open persistent shell sessions."""

    def open_shell(self) -> ShellSession:
        """A new session whose shell starts in the workspace root."""
        ...


def _sentinel_cmd(nonce: str) -> bytes:
    return f"printf '\\036ALE{nonce}:%d\\036\\n' $?\n".encode()


class _Capture:
    """The first `cap` bytes of a stream, and whether more came (the Rocklet keeps the head too)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.truncated = False

    def write(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.truncated = True
        self.data += chunk[: max(room, 0)]


@functools.cache
def _signal_reset_prefix() -> tuple[str, ...]:
    """``env --default-signal=INT,QUIT`` where coreutils has it (8.31+), else nothing.

    A parent started in the background (`cmd &`) passes SIGINT/SIGQUIT on as ignored, and bash
    cannot un-ignore them, so they are reset before bash starts. Not with a Popen
    ``preexec_fn``: that forks and runs Python in the child of a process whose gRPC threads
    hold locks (the Flow service runs agents in one), and gRPC's fork handlers then abort the
    child (``Check failed: next_worker->state == KICKED``) before it reaches exec.
    """
    try:
        ok = subprocess.run(["env", "--default-signal=INT,QUIT", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return ("env", "--default-signal=INT,QUIT") if ok else ()


class _Fd:
    """The pty master, closed exactly once: a stale close could hit a reused fd number."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()

    def close(self) -> None:
        with self.lock:
            if self.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self.fd)
                self.fd = -1


def _kill_session(proc: subprocess.Popen[bytes], master: _Fd) -> None:
    # The running job and the shell's own group, while the shell lives (its pid is not reused
    # before we reap it). A hung-up pty may report pgrp 0, and killpg(0) would hit our own group.
    if proc.poll() is None:
        with master.lock, contextlib.suppress(OSError):
            fg = os.tcgetpgrp(master.fd) if master.fd >= 0 else 0
            if fg > 0 and fg != os.getpgrp():
                os.killpg(fg, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    master.close()


class _Output:
    """What the reader thread shares with the session (not the session itself, so a dropped
    session is collected and its finalizer kills the shell)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.cond = threading.Condition()
        self.closed = False


def _read_loop(out: _Output, proc: subprocess.Popen[bytes], master: _Fd) -> None:
    # The only reader and the closer of the master fd (once the shell is gone), so no read
    # ever lands on a closed-and-reused fd number.
    fd = master.fd
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        with out.cond:
            if not data:
                out.closed = True
                out.cond.notify_all()
                break
            out.buf += data
            out.cond.notify_all()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)  # reap now: the finalizer then never signals a reused pid
    master.close()


class LocalShellSession:
    """An interactive bash on a pty on this machine (the local twin of a Rocklet session)."""

    def __init__(self, cwd: str, env: dict[str, str] | None = None) -> None:
        master, slave = pty.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[3] &= ~termios.ECHO  # typed commands are not echoed into the output
        attrs[1] &= ~termios.ONLCR  # "\n" stays "\n"
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.proc = subprocess.Popen(
            [*_signal_reset_prefix(), "setsid", "-c", "bash", "--norc", "--noprofile", "--noediting", "-i"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env={**(os.environ if env is None else env), "PS1": "", "PS2": "", "TERM": "dumb"},
            close_fds=True,  # no preexec_fn: see _signal_reset_prefix
        )
        os.close(slave)
        self.master = master
        self._out = _Output()
        self._buf = self._out.buf
        self._cond = self._out.cond
        self._fd = _Fd(master)
        self._finalizer = weakref.finalize(self, _kill_session, self.proc, self._fd)
        self._reader = threading.Thread(target=_read_loop, args=(self._out, self.proc, self._fd), name="flow-shell", daemon=True)
        self._reader.start()
        self._write(b"unset PROMPT_COMMAND; PS1=''; PS2=''\n")
        start = self.run("", 10.0, 1 << 16)
        if start.end != "exited":
            self.close()
            raise OSError("the local shell session did not start")

    @property
    def closed(self) -> bool:
        return self._out.closed

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.master, view)
            view = view[n:]

    def _foreground(self) -> int:
        """Process group of the running job, 0 when the shell itself is in front."""
        try:
            pgrp = os.tcgetpgrp(self.master)
        except OSError:
            return 0
        return 0 if pgrp in (self.proc.pid, os.getpgrp()) or pgrp <= 0 else pgrp

    def run(self, script: str, timeout: float, max_output: int, cancel: threading.Event | None = None) -> SessionRun:
        if self.closed:
            raise OSError("the shell session has exited")
        out = _Capture(max_output)
        with self._cond:
            self._buf.clear()  # output of background jobs between commands
        nonce = uuid.uuid4().hex[:16]
        self._write((script + "\n" if script else "").encode() + _sentinel_cmd(nonce))
        status = self._wait(nonce, time.monotonic() + timeout, out, cancel)
        if status is not None:
            return SessionRun(bytes(out.data), status, "exited", out.truncated)
        if self.closed:  # the script ended the shell ("exit 3")
            try:
                rc = self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                rc = -1
            return SessionRun(bytes(out.data), rc if rc >= 0 else 128 - rc, "exited", out.truncated)
        end: EndKind = "interrupted" if cancel is not None and cancel.is_set() else "timeout"
        status = self._interrupt(out, via_tty=end == "timeout")
        return SessionRun(bytes(out.data), -1 if status is None else status, end, out.truncated)

    def _interrupt(self, out: _Capture, via_tty: bool) -> int | None:
        """Stop the running job as the Rocklet does: SIGINT, then SIGKILL of its group after a grace."""
        pgrp = self._foreground()
        nonce = uuid.uuid4().hex[:16]
        if via_tty:
            # Ctrl-C on the terminal (what the Rocklet's timeout types); it flushes the typed
            # sentinel, so type a new one.
            self._write(b"\x03")
            self._write(_sentinel_cmd(nonce))
        elif pgrp:
            with contextlib.suppress(OSError):
                os.killpg(pgrp, signal.SIGINT)  # as SignalProcess: the typed sentinel stays queued
        status = self._wait(nonce, time.monotonic() + INTERRUPT_GRACE_S, out, None, any_nonce=not via_tty)
        if status is None and pgrp:
            with contextlib.suppress(OSError):
                os.killpg(pgrp, signal.SIGKILL)
            status = self._wait(nonce, time.monotonic() + INTERRUPT_GRACE_S, out, None, any_nonce=not via_tty)
        return status

    def _wait(self, nonce: str, deadline: float, out: _Capture, cancel: threading.Event | None, any_nonce: bool = False) -> int | None:
        pending = bytearray()
        while True:
            with self._cond:
                if not self._buf and not self.closed:
                    left = deadline - time.monotonic()
                    if left <= 0 or (cancel is not None and cancel.is_set()):
                        out.write(_SENTINEL.sub(b"", bytes(pending)))
                        return None
                    # Short waits while cancellable: `cancel` is an Event, not tied to this condition.
                    self._cond.wait(min(left, 0.05) if cancel is not None else left)
                data = bytes(self._buf)
                self._buf.clear()
                closed = self.closed
            if data:
                pending += data
                for m in _SENTINEL.finditer(pending):
                    if any_nonce or m.group(1).decode() == nonce:
                        out.write(_SENTINEL.sub(b"", bytes(pending[: m.start()])))
                        return int(m.group(2))
                # Keep a possible partial sentinel at the end; hand the rest to the capture.
                cut = pending.rfind(b"\x1e")
                keep = cut if cut >= 0 and len(pending) - cut < 40 else len(pending)
                out.write(_SENTINEL.sub(b"", bytes(pending[:keep])))
                del pending[:keep]
            elif closed:
                out.write(bytes(pending))
                return None

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                fg = self._foreground()
                if fg:
                    os.killpg(fg, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self._reader.join(timeout=5)  # it sees the hang-up, reaps the shell and closes the fd
        self._finalizer()
