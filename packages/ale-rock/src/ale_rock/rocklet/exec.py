"""Run commands inside the sandbox: timeouts with partial output, interrupts, caps, background.

Every command runs in its own process group so a signal or a kill reaches
the whole tree it spawned. A command that ignores SIGTERM gets SIGKILL after ``kill_grace_s``;
when the engine ends a command (timeout, cancel) it also sweeps the processes that left the group
(setsid, double fork: see ``procs.py``), so nothing it started survives the response.
Commands raise their own OOM score to 1000 before exec: the sandbox's OOM killer takes them, not
the Rocklet, and a result says when a command was killed for memory.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import shutil
import signal as _signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ale_rock.rocklet import procs
from ale_rock.rocklet.capture import CappedOutput, SpillBudget
from ale_rock.rocklet.types import (
    DEFAULT_MAX_OUTPUT,
    MAX_COMMAND_BYTES,
    EndReason,
    ExecOutcome,
    ExecRequest,
    RockletError,
    check_id,
)

OutputCallback = Callable[[str, bytes], None]
"""Called with ("stdout" | "stderr", chunk) as output arrives (streaming mode)."""

_READ_SIZE = 65536
# Own process group per command (so killpg reaches its tree). process_group=0 keeps the fast
# vfork path of Python >= 3.11; start_new_session would disable it (≈2x slower spawns).
_NEW_GROUP: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
)
_DRAIN_AFTER_EXIT_S = 0.05


@dataclass
class _Running:
    proc: subprocess.Popen[bytes]
    exec_id: str
    reason: EndReason | None = None
    """Set when the engine (not the command) decided how it ends."""
    tag: str = ""
    """Value of ALE_PROC_TAG in the environment of everything this command starts."""


def validate_request(req: ExecRequest) -> None:
    """Refuse malformed commands with the offending field named."""
    if bool(req.command) == bool(req.argv):
        raise RockletError("invalid", "exactly one of command and argv must be set", "spec.command")
    size = len(req.command.encode()) + sum(len(a.encode()) for a in req.argv)
    if size > MAX_COMMAND_BYTES:
        raise RockletError(
            "invalid", f"command is {size} bytes; the limit is {MAX_COMMAND_BYTES}", "spec.command"
        )
    if "\0" in req.command or any("\0" in a for a in req.argv):
        raise RockletError("invalid", "command contains a NUL byte", "spec.command")
    for key, value in req.env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise RockletError("invalid", f"invalid environment variable name {key!r}", "spec.env")
    if "\0" in req.cwd:
        raise RockletError("invalid", "cwd contains a NUL byte", "spec.cwd")
    check_id(req.exec_id, "exec_id")


class ExecEngine:
    """Starts, tracks and signals the sandbox's commands."""

    def __init__(
        self,
        workdir: str,
        env: Callable[[], dict[str, str]],
        spill_dir: Path,
        kill_grace_s: float = 2.0,
        command_prefix: Callable[[], list[str]] | None = None,
        spill_budget: SpillBudget | None = None,
    ) -> None:
        self.workdir = workdir
        self._env = env
        self.spill_dir = spill_dir
        self.spill_budget = spill_budget or SpillBudget(spill_dir)
        self.kill_grace_s = kill_grace_s
        self._prefix = command_prefix or (lambda: [])
        self._lock = threading.Lock()
        self._running: dict[str, _Running] = {}

    # -- public API ---------------------------------------------------------------------------

    def run(
        self,
        req: ExecRequest,
        on_output: OutputCallback | None = None,
        on_start: Callable[[int, str], None] | None = None,
    ) -> ExecOutcome:
        """Run ``req`` to its end (or start it in the background) and return the outcome."""
        validate_request(req)
        exec_id = req.exec_id or f"ex-{uuid.uuid4().hex[:12]}"
        body = (
            ["/bin/sh", "-c", procs.OOM_SCORE_PREFIX + req.command]
            if req.command
            else ["/bin/sh", "-c", procs.OOM_SCORE_PREFIX + 'exec "$@"', "sh", *req.argv]
        )
        argv = [*self._prefix(), *body]
        tag = procs.new_tag()
        env = {**self._env(), **req.env, procs.TAG_VAR: tag}
        cwd = req.cwd or self.workdir
        if not cwd.startswith("/"):
            cwd = os.path.join(self.workdir, cwd)
        with contextlib.suppress(OSError):  # a full /tmp must not stop commands from running
            self.spill_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            if exec_id in self._running:
                raise RockletError("exists", f"execution {exec_id} is still running", "exec_id")
            self._running[exec_id] = _Running(proc=None, exec_id=exec_id)  # type: ignore[arg-type]
        started = time.monotonic()
        oom_before = procs.oom_kill_count()
        try:
            if req.argv:  # the shell wrapper would turn "no such program" into exit 127
                _check_program(req.argv[0], env.get("PATH", ""), cwd)
            if req.background:
                return self._start_background(exec_id, argv, env, cwd, req, tag)
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if req.stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                **_NEW_GROUP,
            )
        except OSError as e:
            return self._start_failed(exec_id, e, started)
        entry = _Running(proc=proc, exec_id=exec_id, tag=tag)
        with self._lock:
            self._running[exec_id] = entry
        if on_start is not None:
            on_start(proc.pid, exec_id)
        try:
            return self._wait(entry, req, started, on_output, oom_before)
        finally:
            with self._lock:
                self._running.pop(exec_id, None)

    def signal(self, exec_id: str = "", pid: int = 0, sig: int = _signal.SIGINT) -> bool:
        """Send ``sig`` to an execution's process group (or to one pid). False if already gone."""
        if exec_id:
            with self._lock:
                entry = self._running.get(exec_id)
            if entry is None or entry.proc is None:
                raise RockletError("not_found", f"no running execution {exec_id}", "exec_id")
            if entry.proc.poll() is not None:
                return False
            entry.reason = EndReason.INTERRUPTED
            return _killpg(entry.proc.pid, sig)
        if pid <= 1 or pid == os.getpid():
            raise RockletError("invalid", "pid must name a command's process", "pid")
        with self._lock:
            entries = [e for e in self._running.values() if e.proc is not None and e.proc.pid == pid]
        for entry in entries:
            entry.reason = EndReason.INTERRUPTED
        try:
            os.kill(pid, sig)
            return True
        except ProcessLookupError:
            return False
        except PermissionError as e:
            raise RockletError("invalid", f"cannot signal pid {pid}: {e}", "pid") from e

    def kill_all(self) -> int:
        """SIGKILL every process of the sandbox but the Rocklet (:func:`procs.kill_others`); the
        executions in flight end as interrupted. Returns how many processes there were."""
        with self._lock:
            for entry in self._running.values():
                if entry.proc is not None and entry.proc.poll() is None:
                    entry.reason = EndReason.INTERRUPTED
        return procs.kill_others()

    def cancel(self, exec_id: str) -> None:
        """Stop an execution because its caller went away (SIGTERM, SIGKILL after the grace)."""
        with self._lock:
            entry = self._running.get(exec_id)
        if entry is not None and entry.proc is not None and entry.proc.poll() is None:
            entry.reason = EndReason.INTERRUPTED
            _killpg(entry.proc.pid, _signal.SIGTERM)
            procs.signal_tagged(entry.tag, _signal.SIGTERM)
            threading.Timer(self.kill_grace_s, procs.sweep, (entry.tag, entry.proc.pid)).start()

    def running_ids(self) -> list[str]:
        """Ids of executions still running (foreground and background)."""
        with self._lock:
            return [k for k, v in self._running.items() if v.proc is not None and v.proc.poll() is None]

    def shutdown(self) -> None:
        """Kill every command's process group."""
        with self._lock:
            entries = list(self._running.values())
        for entry in entries:
            if entry.proc is not None:
                procs.sweep(entry.tag, entry.proc.pid, deadline_s=0.5)

    # -- internals ----------------------------------------------------------------------------

    def _start_failed(self, exec_id: str, e: OSError, started: float | None = None) -> ExecOutcome:
        """The program could not be started (missing, not executable, no memory): exit 127."""
        with self._lock:
            self._running.pop(exec_id, None)
        return ExecOutcome(
            end_reason=EndReason.START_FAILED,
            exit_code=127,
            exec_id=exec_id,
            error=f"{type(e).__name__}: {e}",
            duration_s=time.monotonic() - started if started is not None else 0.0,
        )

    def _start_background(
        self, exec_id: str, argv: list[str], env: dict[str, str], cwd: str, req: ExecRequest, tag: str
    ) -> ExecOutcome:
        out_path = self.spill_dir / f"{exec_id}.stdout"
        err_path = self.spill_dir / f"{exec_id}.stderr"
        try:
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE if req.stdin else subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    cwd=cwd,
                    env=env,
                    **_NEW_GROUP,
                )
        except OSError as e:
            return self._start_failed(exec_id, e)
        with self._lock:
            self._running[exec_id] = _Running(proc=proc, exec_id=exec_id, tag=tag)
        if req.stdin and proc.stdin is not None:
            _feed_stdin(proc.stdin, req.stdin)

        def reap() -> None:
            proc.wait()
            # Keep the entry a little so a late SignalProcess answers "not delivered", not "not found".
            time.sleep(5.0)
            with self._lock:
                if self._running.get(exec_id) is not None and self._running[exec_id].proc is proc:
                    del self._running[exec_id]

        threading.Thread(target=reap, name=f"reap-{exec_id}", daemon=True).start()
        return ExecOutcome(
            end_reason=EndReason.BACKGROUND,
            pid=proc.pid,
            exec_id=exec_id,
            stdout_spill_path=str(out_path),
            stderr_spill_path=str(err_path),
        )

    def _wait(
        self,
        entry: _Running,
        req: ExecRequest,
        started: float,
        on_output: OutputCallback | None,
        oom_before: int = -1,
    ) -> ExecOutcome:
        proc = entry.proc
        cap = req.max_output_bytes or DEFAULT_MAX_OUTPUT
        budget = self.spill_budget
        outs = {
            "stdout": CappedOutput(cap, self.spill_dir / f"{entry.exec_id}.stdout", budget),
            "stderr": CappedOutput(cap, self.spill_dir / f"{entry.exec_id}.stderr", budget),
        }
        if req.stdin and proc.stdin is not None:
            _feed_stdin(proc.stdin, req.stdin)
        sel = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None
        for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe, selectors.EVENT_READ, name)
        hard = started + req.timeout_ms / 1000 if req.timeout_ms else None
        idle_s = req.idle_timeout_ms / 1000 if req.idle_timeout_ms else None
        last_output = started
        kill_at: float | None = None
        term_sent = 0.0
        exited_at: float | None = None
        try:
            while True:
                now = time.monotonic()
                if entry.reason is None and hard is not None and now >= hard:
                    entry.reason = EndReason.TIMEOUT
                if entry.reason is None and idle_s is not None and now - last_output >= idle_s:
                    entry.reason = EndReason.IDLE_TIMEOUT
                if entry.reason in (EndReason.TIMEOUT, EndReason.IDLE_TIMEOUT) and kill_at is None:
                    _killpg(proc.pid, _signal.SIGTERM)
                    procs.signal_tagged(entry.tag, _signal.SIGTERM)
                    kill_at = now + self.kill_grace_s
                    term_sent = now
                if kill_at is not None and now >= kill_at:
                    procs.sweep(entry.tag, proc.pid)
                    kill_at = float("inf")
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and (not sel.get_map() or now - exited_at >= _DRAIN_AFTER_EXIT_S):
                    break  # done, or something the command left behind holds the pipes open
                waits = [0.1]
                if hard is not None and entry.reason is None:
                    waits.append(hard - now)
                if idle_s is not None and entry.reason is None:
                    waits.append(last_output + idle_s - now)
                if kill_at is not None and kill_at != float("inf"):
                    waits.append(kill_at - now)
                if exited_at is not None:
                    waits.append(_DRAIN_AFTER_EXIT_S)
                timeout = max(0.0, min(waits))
                if not sel.get_map():
                    time.sleep(min(timeout, 0.02))
                    continue
                for key, _ in sel.select(timeout):
                    try:
                        data = os.read(key.fd, _READ_SIZE)
                    except BlockingIOError:
                        continue
                    if not data:
                        sel.unregister(key.fileobj)
                        continue
                    last_output = time.monotonic()
                    if on_output is not None:
                        on_output(key.data, data)
                    else:
                        outs[key.data].write(data)
        finally:
            sel.close()
            for stream in (proc.stdout, proc.stderr):
                with contextlib.suppress(OSError):
                    stream.close()
            for out in outs.values():
                out.close()
        rc = _wait_exit(proc, kill_at is not None, self.kill_grace_s)
        if kill_at is not None:
            # The main process may have died on SIGTERM while what it started ignores it: give
            # them what is left of the grace, then SIGKILL the group and every tagged process.
            procs.wait_gone(entry.tag, term_sent + self.kill_grace_s)
            procs.sweep(entry.tag, proc.pid)
        return self._outcome(entry, rc, outs, started, oom_before)

    def _outcome(
        self, entry: _Running, rc: int, outs: dict[str, CappedOutput], started: float, oom_before: int = -1
    ) -> ExecOutcome:
        sig = -rc if rc < 0 else 0
        if entry.reason is not None:
            reason = entry.reason
        elif sig:
            reason = EndReason.SIGNALED
        else:
            reason = EndReason.EXITED
        # SIGKILL we did not send, while the sandbox's OOM count rose: the OOM killer took it.
        oom = (
            sig == _signal.SIGKILL
            and entry.reason is None
            and oom_before >= 0
            and procs.oom_kill_count() > oom_before
        )
        return ExecOutcome(
            end_reason=reason,
            exit_code=128 + sig if sig else rc,
            signal=sig,
            stdout=outs["stdout"].value(),
            stderr=outs["stderr"].value(),
            stdout_truncated=outs["stdout"].truncated,
            stderr_truncated=outs["stderr"].truncated,
            stdout_spill_path=str(outs["stdout"].spill_path) if outs["stdout"].truncated else "",
            stderr_spill_path=str(outs["stderr"].spill_path) if outs["stderr"].truncated else "",
            stdout_total_bytes=outs["stdout"].total,
            stderr_total_bytes=outs["stderr"].total,
            spill_truncated=outs["stdout"].spill_truncated or outs["stderr"].spill_truncated,
            oom_killed=oom,
            duration_s=time.monotonic() - started,
            pid=entry.proc.pid,
            exec_id=entry.exec_id,
        )


def _check_program(program: str, path: str, cwd: str) -> None:
    """Raise the OSError exec would for a program that cannot run (missing, not executable)."""
    if "/" in program:
        full = program if program.startswith("/") else os.path.join(cwd, program)
        if not os.path.exists(full):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if os.path.isdir(full) or not os.access(full, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    elif shutil.which(program, path=path) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def _wait_exit(proc: subprocess.Popen[bytes], killing: bool, grace_s: float) -> int:
    """Wait for the main process; if it outlives its pipes' drain, keep waiting (it was asked to end)."""
    try:
        return proc.wait(timeout=grace_s if killing else None)
    except subprocess.TimeoutExpired:
        _killpg(proc.pid, _signal.SIGKILL)
        return proc.wait()


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def raise_oom_score(pid: int) -> None:
    """Make ``pid`` the OOM killer's first choice (for processes not started through a shell)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/oom_score_adj").write_text("1000")


def _feed_stdin(pipe: object, data: bytes) -> None:
    def feed() -> None:
        with contextlib.suppress(OSError, ValueError):
            pipe.write(data)  # type: ignore[attr-defined]
        with contextlib.suppress(OSError, ValueError):
            pipe.close()  # type: ignore[attr-defined]

    threading.Thread(target=feed, daemon=True).start()
