"""A local cluster of real processes: one Admin and N Workers on free loopback ports.

Not part of the SDK (a client of the cluster): it launches one. ``ale eval`` and ``ale-rock tasks
run --backend`` start their stack with it, as do ``bench/rock.py`` and the tests; also handy for
trying the SDK on one machine::

    with LocalCluster(workers=1) as cluster:
        with Sandbox.create(client=cluster.client()) as sb: ...
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ale_proto.config import write_private

from ale_rock.sdk.client import AsyncClient, Client

WorkerArgv = Callable[[str, Path, str, Path], list[str]]
"""(admin address, secrets file, worker id, state dir) → the command line of one worker.

The secrets file (0600, JSON, so also YAML) holds ``{"join_token": ...}``: a secret goes to a
worker in it, never on its command line, which every local user can read in /proc/<pid>/cmdline."""


def real_worker_argv(extra: dict[str, Any] | None = None) -> WorkerArgv:
    """Command line of a real ``ale-rock worker``: ``--config`` the secrets file, ``--set``
    overrides (``extra`` adds more; keep secrets out of it)."""

    def argv(admin: str, secrets_file: Path, worker_id: str, state_dir: Path) -> list[str]:
        settings = {"admin_address": admin, "worker_id": worker_id,
                    "address": "127.0.0.1:0", "state_dir": str(state_dir), **(extra or {})}
        out = [sys.executable, "-m", "ale_rock.cli", "worker", "--config", str(secrets_file)]
        for k, v in settings.items():
            out += ["--set", f"{k}={v}"]
        return out

    return argv


SECRETS_DIR = "secrets"
"""Under the cluster's dir (0700): the admin's and the workers' secret config files, each 0600."""


@dataclass
class _Proc:
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class LocalCluster:
    """Starts (and always stops) an Admin and Workers as subprocesses."""

    workers: int = 1
    worker_argv: WorkerArgv | None = None
    admin_config: dict[str, Any] = field(default_factory=dict)
    """Extra AdminConfig fields (quotas, ttl, heartbeat timings…)."""
    namespaces: dict[str, str] = field(default_factory=lambda: {"default": "key-" + secrets.token_hex(8)})
    """Namespace → API key."""
    workdir: Path | None = None
    start_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.join_token = "join-" + secrets.token_hex(8)
        self.admin: _Proc | None = None
        self.admin_port = 0
        self.worker_procs: dict[str, _Proc] = {}
        # Workers keep Unix sockets under their state dir: keep it short (sun_path is 108 bytes).
        self._state_root = Path(tempfile.mkdtemp(prefix="alr-"))

    # -- admin --------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        if self.workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="ale-rock-cluster-")
            self.workdir = Path(self._tmp.name)
        return self.workdir

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.admin_port}"

    def api_key(self, namespace: str = "default") -> str:
        return self.namespaces[namespace]

    def start_admin(self) -> None:
        """Start (or restart on the same port and database) the Admin and wait until it serves."""
        cfg = {
            "host": "127.0.0.1", "port": self.admin_port, "db_path": str(self.dir / "admin.db"),
            "api_keys": {k: ns for ns, k in self.namespaces.items()}, "join_token": self.join_token,
            **self.admin_config,
        }
        # API keys and the join token: a 0600 file, never the command line.
        admin_yaml = write_private(self.dir / SECRETS_DIR / "admin.yaml", yaml.safe_dump(cfg))
        ready = self.dir / "admin.port"
        ready.unlink(missing_ok=True)
        log = self.dir / "admin.log"
        self.admin = _Proc(subprocess.Popen(
            [sys.executable, "-m", "ale_rock.cli", "admin", "--config", str(admin_yaml),
             "--ready-file", str(ready)],
            stdout=subprocess.DEVNULL, stderr=log.open("ab"), start_new_session=True,
        ), log)
        deadline = time.monotonic() + self.start_timeout_s
        while not ready.exists():
            if self.admin.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"admin did not start; log:\n{log.read_text()[-3000:]}")
            time.sleep(0.02)
        self.admin_port = int(ready.read_text())

    def kill_admin(self, sig: int = signal.SIGKILL) -> int | None:
        """Signal the Admin and wait for it to exit; returns its exit status."""
        if self.admin is None:
            return None
        self.admin.popen.send_signal(sig)
        code = self.admin.popen.wait(timeout=30)
        self.admin = None
        return code

    # -- workers ------------------------------------------------------------------------------
    def start_worker(self, worker_id: str | None = None, wait: bool = True) -> str:
        """Start a worker and (by default) wait until the Admin schedules onto it."""
        if self.worker_argv is None:
            self.worker_argv = real_worker_argv()
        wid = worker_id or f"w{len(self.worker_procs) + 1}"
        state = self.worker_state_dir(wid)
        state.mkdir(exist_ok=True)
        log = self.dir / f"worker-{wid}.log"
        secrets_file = write_private(self.dir / SECRETS_DIR / "worker.yaml",
                                     json.dumps({"join_token": self.join_token}) + "\n")
        self.worker_procs[wid] = _Proc(subprocess.Popen(
            self.worker_argv(self.address, secrets_file, wid, state),
            stdout=subprocess.DEVNULL, stderr=log.open("ab"), start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        ), log)
        if wait:
            self.wait_for_workers({wid})
        return wid

    def worker_state_dir(self, worker_id: str) -> Path:
        """The state dir of a worker (sandbox dirs and sockets live there)."""
        return self._state_root / worker_id

    def wait_for_workers(self, ids: set[str]) -> None:
        """Wait until the Admin's store lists these workers as alive (read-only look at its DB)."""
        import sqlite3

        deadline = time.monotonic() + self.start_timeout_s
        while True:
            with sqlite3.connect(str(self.dir / "admin.db"), timeout=5) as db:
                alive = {r[0] for r in db.execute("SELECT id FROM workers WHERE alive = 1")} if _has_workers(db) else set()
            if ids <= alive:
                return
            for wid in ids:
                p = self.worker_procs.get(wid)
                if p is not None and p.popen.poll() is not None:
                    raise RuntimeError(f"worker {wid} exited; log:\n{p.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"workers {ids - alive} did not register in time")
            time.sleep(0.05)

    def kill_worker(self, worker_id: str, sig: int = signal.SIGKILL) -> None:
        p = self.worker_procs.pop(worker_id)
        p.popen.send_signal(sig)
        p.popen.wait(timeout=60)

    def worker_pids(self) -> dict[str, int]:
        return {wid: p.popen.pid for wid, p in self.worker_procs.items()}

    # -- clients & lifecycle ------------------------------------------------------------------
    def client(self, namespace: str = "default", timeout: float | None = None) -> Client:
        return Client(self.address, self.api_key(namespace), timeout)

    def async_client(self, namespace: str = "default", timeout: float | None = None) -> AsyncClient:
        return AsyncClient(self.address, self.api_key(namespace), timeout)

    def start(self) -> LocalCluster:
        self.start_admin()
        for _ in range(self.workers):
            self.start_worker()
        return self

    def stop(self) -> None:
        """SIGTERM everything (workers first, so they reap their sandboxes), SIGKILL stragglers."""
        procs = [p for p in self.worker_procs.values()] + ([self.admin] if self.admin else [])
        for p in procs:
            if p.popen.poll() is None:
                p.popen.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.popen.pid, signal.SIGKILL)
                p.popen.wait(timeout=10)
        self.worker_procs.clear()
        self.admin = None
        if self._tmp is not None:
            self._tmp.cleanup()
        shutil.rmtree(self._state_root, ignore_errors=True)

    def logs(self) -> str:
        """Tail of every process log (for failure messages)."""
        return "\n".join(f"== {p.name}\n{p.read_text()[-2000:]}" for p in sorted(self.dir.glob("*.log")))

    def __enter__(self) -> LocalCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _has_workers(db: Any) -> bool:
    return bool(db.execute("SELECT 1 FROM sqlite_master WHERE name = 'workers'").fetchone())
