"""The Rocklet process: serves RockletService on a Unix socket and runs the egress proxy.

Its settings come from a JSON file the backend writes into the sandbox (``RockletSettings``); a
pooled sandbox gets its final env and egress token by a rewrite of that file, which the Rocklet
picks up on the next call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from ale_proto.serving import add_standard_services, strict_requests
from ale_proto.v1 import rocklet_pb2_grpc

from ale_rock.grpc_options import server_options
from ale_rock.rocklet.capture import SpillBudget
from ale_rock.rocklet.exec import ExecEngine
from ale_rock.rocklet.files import FileOps
from ale_rock.rocklet.servicer import RockletServicer
from ale_rock.rocklet.sessions import SessionManager

MAX_MESSAGE_BYTES = 64 << 20
GRPC_OPTIONS = server_options(MAX_MESSAGE_BYTES)
SERVICE_NAME = "ale.v1.RockletService"


@dataclass
class RockletSettings:
    """What the backend tells the Rocklet about its sandbox.

    A dataclass, not pydantic: the Rocklet's start-up time is the sandbox's start-up time.
    """

    workdir: str = "/workspace"
    """Default working directory of commands and relative paths."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables of every command (over the Rocklet's base env)."""
    egress_socket: str = ""
    """Unix socket of the worker's EgressService inside the sandbox; empty = no egress proxy."""
    egress_token: str = ""
    """This sandbox's token for EgressService."""
    proxy_port: int = 3128
    """Port of the egress proxy on 127.0.0.1 (0 = any free port)."""
    command_rlimits: list[str] = field(default_factory=list)
    """prlimit(1) options applied to every command (used where cgroups are missing)."""
    kill_grace_s: float = 2.0
    """Seconds between SIGTERM and SIGKILL when a command times out or is cancelled."""
    spill_dir: str = "/tmp/.ale"
    """Where truncated output and background logs go."""
    own_sandbox: bool = False
    """The Rocklet runs in a sandbox of its own — its own pid namespace, where every other process
    is the sandbox's — as every backend starts it. Only then does ``SignalProcess(all_processes)``
    kill every process it can see; a Rocklet run on a host (tests, development) refuses it."""

    @classmethod
    def from_json(cls, text: str) -> RockletSettings:
        """Parse the settings file, refusing unknown keys."""
        data = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown Rocklet settings: {sorted(unknown)}")
        return cls(**data)


class _LiveSettings:
    """Re-reads the settings file when it changes."""

    def __init__(self, path: Path | None, initial: RockletSettings) -> None:
        self.path = path
        self.value = initial
        self._mtime = path.stat().st_mtime_ns if path is not None and path.exists() else 0
        self._lock = threading.Lock()
        self.on_change: list = []

    def get(self) -> RockletSettings:
        if self.path is not None:
            with contextlib.suppress(OSError, ValueError):
                mtime = self.path.stat().st_mtime_ns
                if mtime != self._mtime:
                    with self._lock:
                        self.value = RockletSettings.from_json(self.path.read_text())
                        self._mtime = mtime
                    for cb in self.on_change:
                        cb(self.value)
        return self.value


class Rocklet:
    """A running Rocklet (gRPC server + egress proxy)."""

    def __init__(
        self, socket_path: str, settings: RockletSettings, settings_path: Path | None = None
    ) -> None:
        self.live = _LiveSettings(settings_path, settings)
        self.proxy = None
        if settings.egress_socket:
            from ale_rock.egress.proxy import EgressProxy

            self.proxy = EgressProxy(settings.egress_socket, settings.egress_token, settings.proxy_port)
            proxy = self.proxy
            self.live.on_change.append(lambda s: proxy.set_token(s.egress_token))
        spill = Path(settings.spill_dir)
        budget = SpillBudget(spill)  # one budget for the directory, shared by execs and sessions
        self.execs = ExecEngine(
            settings.workdir,
            self._env,
            spill,
            kill_grace_s=settings.kill_grace_s,
            command_prefix=self._prefix,
            spill_budget=budget,
        )
        self.sessions = SessionManager(settings.workdir, self._env, spill, budget)
        self.files = FileOps(settings.workdir)
        self.servicer = RockletServicer(self.execs, self.sessions, self.files,
                                        own_sandbox=lambda: self.live.get().own_sandbox)
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="rocklet"),
            options=GRPC_OPTIONS,
            interceptors=strict_requests(),
        )
        rocklet_pb2_grpc.add_RockletServiceServicer_to_server(self.servicer, self.server)
        add_standard_services(self.server, [SERVICE_NAME])
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
        self.server.add_insecure_port(f"unix:{socket_path}")

    def _env(self) -> dict[str, str]:
        s = self.live.get()
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", s.workdir),
            "USER": os.environ.get("USER", "sandbox"),
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
        }
        if self.proxy is not None:
            url = f"http://127.0.0.1:{self.proxy.port}"
            for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
                env[key] = url
            env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1"
        env.update(s.env)
        return env

    def _prefix(self) -> list[str]:
        limits = self.live.get().command_rlimits
        return ["prlimit", *limits, "--"] if limits else []

    def start(self) -> None:
        """Start serving."""
        if self.proxy is not None:
            self.proxy.start()
        self.server.start()

    def stop(self) -> None:
        """Stop serving and kill what runs."""
        self.server.stop(grace=0.5)
        self.sessions.close_all()
        self.execs.shutdown()
        if self.proxy is not None:
            self.proxy.stop()


def make_undumpable() -> bool:
    """prctl(PR_SET_DUMPABLE, 0): commands run as our uid, and a dumpable Rocklet would let them
    ptrace it or read its /proc/<pid>/environ, mem and fds (the egress token, other callers'
    data). Commands are unaffected: exec makes a (non-setuid) program dumpable again."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(4, 0, 0, 0, 0)) == 0  # 4 = PR_SET_DUMPABLE
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False


@dataclass
class _Args:
    socket: str = ""
    settings: str = ""
    ready_fd: int = -1


def _parse_args(argv: list[str] | None) -> _Args:
    """The backends' own argv (``--opt value`` pairs) without argparse: its import is a sizeable
    share of the Rocklet's start-up, which is the sandbox's. Anything else (``--help``, a typo, a
    missing value) goes to argparse for the usual messages."""
    import sys

    items = list(sys.argv[1:] if argv is None else argv)
    out = _Args()
    names = {"--socket": "socket", "--settings": "settings", "--ready-fd": "ready_fd"}
    ok = len(items) % 2 == 0
    for opt, value in zip(items[::2], items[1::2], strict=False):
        name = names.get(opt)
        if name is None or (name == "ready_fd" and not value.lstrip("-").isdigit()):
            ok = False
            break
        setattr(out, name, int(value) if name == "ready_fd" else value)
    if ok and out.socket:
        return out
    import argparse

    parser = argparse.ArgumentParser(prog="ale-rocklet")
    parser.add_argument("--socket", required=True, help="Unix socket to serve RockletService on")
    parser.add_argument("--settings", default="", help="JSON file with RockletSettings")
    parser.add_argument("--ready-fd", type=int, default=-1, help="fd to write 'ok' to once serving")
    args = parser.parse_args(items)
    return _Args(args.socket, args.settings, args.ready_fd)


def main(argv: list[str] | None = None) -> int:
    """``python -m ale_rock.rocklet --socket PATH [--settings FILE] [--ready-fd N]``."""
    args = _parse_args(argv)
    make_undumpable()
    path = Path(args.settings) if args.settings else None
    settings = RockletSettings.from_json(path.read_text()) if path else RockletSettings()
    os.makedirs(settings.workdir, exist_ok=True)
    rocklet = Rocklet(args.socket, settings, path)
    rocklet.start()
    if args.ready_fd >= 0:
        os.write(args.ready_fd, b"ok\n")
        os.close(args.ready_fd)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    # Handled (not ignored) SIGINT also means the commands we spawn start with the default one,
    # even when we were started with it ignored (exec resets handled signals, keeps ignored ones).
    signal.signal(signal.SIGINT, lambda *_: done.set())
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    done.wait()
    rocklet.stop()
    return 0
