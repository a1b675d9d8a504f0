"""Start, health-check and stop the stack's services as separate local processes.

Each service is a child process in its own process group (so `ale down` reaps whatever it
spawned), on a free local port, with its log in the run directory. The run's state is a JSON file
(`stack.json`) written atomically after every change, so `ale status` and `ale down` work from
another shell, and a killed `ale up` leaves enough behind to clean up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class ServiceSpec:
    """How to run one service."""

    name: str
    argv: list[str]
    port: int
    health_service: str = ""
    """gRPC service name to health-check ("" = the server as a whole)."""
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class ServiceState:
    """A started service, as recorded in stack.json."""

    name: str
    pid: int
    port: int
    log: str
    argv: list[str]
    health_service: str = ""
    env: dict[str, str] = field(default_factory=dict)
    """The spec's extra environment (no secrets: those are in 0600 files), so a restart keeps it."""


class HealthTimeout(RuntimeError):
    """A service did not report SERVING in time."""


def grpc_healthy(port: int, service: str = "", timeout_s: float = 1.0) -> bool:
    """True when the gRPC health check on 127.0.0.1:port answers SERVING."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            resp = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
    return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


class Stack:
    """The services of one run directory."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.state_file = run_dir / "stack.json"
        self.services: dict[str, ServiceState] = {}
        if self.state_file.exists():
            raw = json.loads(self.state_file.read_text())
            self.services = {s["name"]: ServiceState(**s) for s in raw.get("services", [])}

    def _save(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"services": [asdict(s) for s in self.services.values()]}, indent=2))
        os.replace(tmp, self.state_file)

    def start(self, spec: ServiceSpec) -> ServiceState:
        """Spawn a service in its own process group, logging to <run_dir>/logs/<name>.log."""
        logs = self.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{spec.name}.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                spec.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **spec.env},
                start_new_session=True,
            )
        state = ServiceState(spec.name, proc.pid, spec.port, str(log_path), spec.argv, spec.health_service,
                             dict(spec.env))
        self.services[spec.name] = state
        self._save()
        return state

    def wait_healthy(self, name: str, timeout_s: float = 60.0) -> None:
        """Block until the service reports SERVING; raise with its log tail if it dies or times out."""
        s = self.services[name]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not pid_alive(s.pid):
                raise HealthTimeout(f"{name} exited during start-up; log tail:\n{self.log_tail(name)}")
            if grpc_healthy(s.port, s.health_service):
                return
            time.sleep(0.1)
        raise HealthTimeout(f"{name} not healthy after {timeout_s:.0f}s; log tail:\n{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 20) -> str:
        """The last lines of a service's log."""
        try:
            return "\n".join(Path(self.services[name].log).read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def status(self) -> list[dict[str, object]]:
        """One row per service: name, pid, port, alive, healthy."""
        rows = []
        for s in self.services.values():
            alive = pid_alive(s.pid)
            rows.append(
                {"name": s.name, "pid": s.pid, "port": s.port, "alive": alive,
                 "healthy": alive and grpc_healthy(s.port, s.health_service)}
            )
        return rows

    def stop_all(self, grace_s: float = 10.0) -> list[str]:
        """SIGTERM every service's process group (reverse start order), SIGKILL after the grace."""
        stopped = []
        for s in reversed(list(self.services.values())):
            _signal_group(s.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for s in reversed(list(self.services.values())):
            while pid_alive(s.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            _signal_group(s.pid, signal.SIGKILL)
            _reap(s.pid, 5.0)
            stopped.append(s.name)
        self.services.clear()
        self._save()
        return stopped


def _reap(pid: int, timeout_s: float) -> None:
    """Wait (bounded) for our own child ``pid`` to end after a SIGKILL, so no zombie of it outlives
    `ale up` (where PID 1 does not reap orphans, a zombie stays in /proc)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child (`ale down` from another process), or reaped
            return
        if done:
            return
        time.sleep(0.02)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    # Reap our own child if it is one (no zombie left behind in a long-lived `ale up`).
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


class Watchdog:
    """Restarts a service of the stack that died (same command line, same port), counting restarts.

    A worker lost mid-run comes back and re-registers; the rollouts it was serving fail, and the
    trainer filters and resamples them — the run goes on (integration_tests check this).
    """

    def __init__(self, stack: Stack, names: list[str], interval_s: float = 0.5, max_restarts: int = 5) -> None:
        import threading

        self.stack = stack
        self.names = names
        self.interval_s = interval_s
        self.max_restarts = max_restarts
        self.restarts: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ale-watchdog", daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for name in self.names:
                s = self.stack.services.get(name)
                if s is None or pid_alive(s.pid) or self._stop.is_set():
                    continue
                if self.restarts.get(name, 0) >= self.max_restarts:
                    continue
                _signal_group(s.pid, signal.SIGKILL)  # reap, and take down anything it left
                self.restarts[name] = self.restarts.get(name, 0) + 1
                self.stack.start(ServiceSpec(name, s.argv, s.port, s.health_service, s.env))
