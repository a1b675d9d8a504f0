"""The Worker process: WorkerService + RockletService proxy (+ EnvService with ``serve_envs``) on one
TCP port, egress gateway, admin link.

``serve_worker(config)`` starts everything and returns a handle; ``run_worker(config)`` also
blocks until SIGTERM/SIGINT and shuts down gracefully (the CLI entry).
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import socket
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from ale_proto import serving
from ale_proto.serving import add_standard_services
from ale_proto.v1 import common_pb2, worker_pb2, worker_pb2_grpc

from ale_rock.admin.convert import backend_from_name
from ale_rock.backends.base import Limits, SandboxBackend
from ale_rock.egress.gateway import EgressGateway
from ale_rock.envs.host import EnvHost
from ale_rock.envs.server import SERVICE_NAME as ENV_SERVICE
from ale_rock.envs.server import add_env_service
from ale_rock.grpc_options import PENDING_RPC_OPTIONS, server_options
from ale_rock.rocklet.server import MAX_MESSAGE_BYTES
from ale_rock.worker.auth import WorkerSecretInterceptor, new_secret, write_secret
from ale_rock.worker.config import WorkerConfig
from ale_rock.worker.envs import env_interceptors
from ale_rock.worker.proxy import RockletProxy
from ale_rock.worker.registration import Registrar
from ale_rock.worker.servicer import WorkerServicer

log = logging.getLogger("ale_rock.worker")
VERSION = "0.1.0"


def make_backend(config: WorkerConfig, egress_socket: str) -> SandboxBackend:
    """The configured backend (Docker's SDK is imported only when asked for)."""
    if config.backend == "kubernetes":
        from ale_rock.backends.kubernetes import KubernetesBackend
        from ale_rock.backends.kubernetes_config import KubernetesBackendConfig

        kc = config.kubernetes or KubernetesBackendConfig(
            worker="".join(c if c.isalnum() else "-" for c in config.worker_id.lower())[:42].strip("-") or "worker",
            default_limits=config.default_limits,
        )
        return KubernetesBackend(kc)
    if config.backend == "docker":
        from ale_rock.backends.docker import DockerBackend, DockerBackendConfig

        safe_id = "".join(c if c.isalnum() or c in "-_." else "-" for c in config.worker_id)[:60] or "worker"
        return DockerBackend(  # type: ignore[return-value]
            DockerBackendConfig(
                worker=safe_id,
                root_dir=config.state_dir / "docker",
                egress_socket=Path(egress_socket),
                pool_size=min(config.pool_size, 32),
                pool_limits=config.default_limits,
            )
        )
    from ale_rock.backends.local import LocalBackend, LocalBackendConfig

    return LocalBackend(
        LocalBackendConfig(
            state_dir=config.state_dir,
            egress_socket=egress_socket,
            pool_size=config.pool_size,
            cgroup=config.cgroup,
            default_limits=config.default_limits,
            kill_grace_s=config.kill_grace_s,
        )
    )


# Unix socket paths are capped at 108 bytes (sun_path). The deepest socket we bind is
# <state_dir>/sandboxes/<sandbox id>/<name>.sock, so a long state dir is reached through a short
# symlink under /tmp instead: bind() resolves the symlink, and only the path string is capped.
_MAX_STATE_DIR_CHARS = 60


def short_state_dir(state_dir: Path) -> Path:
    """``state_dir`` itself when short enough, else a stable short symlink to it under /tmp."""
    state_dir = state_dir.resolve()
    if len(str(state_dir)) <= _MAX_STATE_DIR_CHARS:
        return state_dir
    link = Path("/tmp") / f"ale-w-{hashlib.sha256(str(state_dir).encode()).hexdigest()[:12]}"
    if not (link.is_symlink() and link.resolve() == state_dir):
        tmp = link.with_name(link.name + f".{os.getpid()}")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(state_dir)
        tmp.replace(link)
    return link


class WorkerHandle:
    """A running worker."""

    def __init__(self, config: WorkerConfig) -> None:
        config.state_dir.mkdir(parents=True, exist_ok=True)
        config = config.model_copy(update={"state_dir": short_state_dir(config.state_dir)})
        self.config = config
        self.gateway = EgressGateway(
            config.model_proxy_address,
            max_streams_per_sandbox=config.egress_max_streams_per_sandbox,
            first_message_timeout_s=config.egress_first_message_timeout_s,
        )
        egress_socket = config.state_dir / "egress" / "egress.sock"
        self.gateway.start(egress_socket)
        self.backend = make_backend(config, str(egress_socket))
        # Sandboxes of a previous run of this worker: local ones died with it; reap their leftovers.
        # (Docker containers may survive; the admin's keep-list decides once we are registered.)
        if config.backend == "local" or not config.admin_address:
            reaped = self.backend.reap_orphans(set())
            if reaped:
                log.info("reaped %d orphaned sandboxes", len(reaped))
        self._adopt_survivors()
        self.capacity = Limits(
            cpu_millis=config.cpu_millis or (os.cpu_count() or 1) * 1000,
            memory_bytes=config.memory_bytes or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        )
        self.proxy = RockletProxy(self._socket_of, on_unsafe=self._socket_unsafe)
        self.servicer = WorkerServicer(
            self.backend,
            self.gateway,
            config.max_sandboxes,
            self.capacity,
            on_started=self.proxy.warm,
            on_removed=self.proxy.forget,
        )
        # The worker credential (in memory only): the admin learns it at RegisterWorker and sends it
        # on every WorkerService/RockletService call; any other caller is refused first of all.
        self.secret = new_secret()
        if config.secret_file is not None:
            write_secret(config.secret_file, self.secret)
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=256, thread_name_prefix="worker"),
            options=server_options(MAX_MESSAGE_BYTES, extra=PENDING_RPC_OPTIONS),
            interceptors=[
                WorkerSecretInterceptor(self.secret),
                *serving.strict_requests(),
                *env_interceptors(config.serve_envs, config.env_api_key),
            ],
        )
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(self.servicer, self.server)
        self.server.add_generic_rpc_handlers((self.proxy.handler(),))
        services = ["ale.v1.WorkerService", "ale.v1.RockletService"]
        self.env_host: EnvHost | None = None
        if config.serve_envs:
            self.env_host = add_env_service(self.server, config.envs)
            services.append(ENV_SERVICE)
        self.health = add_standard_services(self.server, services)
        host, _, _ = config.address.rpartition(":")
        self.port = serving.bind(self.server, config.address)
        if host in ("0.0.0.0", "[::]", ""):  # listening everywhere: tell the admin a dialable name
            host = socket.gethostname()
        self.address = f"{host}:{self.port}"
        protected = self._protected_endpoints()
        self.servicer.egress_protected = protected
        self.gateway.set_protected(protected)
        self.server.start()
        self._stopped = threading.Event()
        self._monitor = threading.Thread(target=self._monitor_loop, name="sandbox-monitor", daemon=True)
        self._monitor.start()
        self.registrar: Registrar | None = None
        if config.admin_address:
            self.registrar = Registrar(
                config.admin_address,
                config.join_token,
                self.secret,
                self._info,
                self._heartbeat,
                self._on_registered,
                config.heartbeat_interval_s,
                config.retry_interval_s,
            )
            self.registrar.start()
        log.info("worker %s serving on %s (backend %s%s)", config.worker_id, self.address, self.backend.name,
                 ", EnvService" if config.serve_envs else "")

    def _adopt_survivors(self) -> None:
        """Sandboxes that outlived a restart (docker) keep their egress identity, deny-all until the
        admin sends their policy again."""
        handle_of = getattr(self.backend, "handle", None)
        if handle_of is None:
            return
        for sid in self.backend.list():
            try:
                token = handle_of(sid).extra.get("egress_token", "")
            except Exception:  # noqa: BLE001 - a half-gone sandbox; the monitor reaps it
                continue
            self.gateway.register(sid, token, [])

    def _protected_endpoints(self) -> list[tuple[str, int]]:
        """ALE's own services, which no sandbox may reach through egress: this worker's port (on
        every address), the admin, the ModelProxy (sandboxes use the reserved host instead)."""
        out: list[tuple[str, int]] = [(self.address.rpartition(":")[0], self.port)]
        for address in (self.config.advertise_address, self.config.admin_address, self.config.model_proxy_address):
            host, _, port = address.rpartition(":")
            if host and port.isdigit():
                out.append((host.strip("[]"), int(port)))
        return out

    def _socket_unsafe(self, sandbox_id: str, why: str) -> None:
        """A sandbox that could redirect its Rocklet socket is failed (the admin hears it on the
        next heartbeat); the worker never talks to it again."""
        with self.servicer.table.lock:
            self.servicer.table.failed[sandbox_id] = f"its Rocklet socket is not trustworthy: {why}"

    def _socket_of(self, sandbox_id: str) -> str | None:
        with self.servicer.table.lock:
            path = self.servicer.table.sockets.get(sandbox_id)
        if path is not None:
            return str(path)
        # Sandboxes adopted after a restart (docker): ask the backend, when it can tell.
        handle_of = getattr(self.backend, "handle", None)
        if handle_of is not None and sandbox_id in self.backend.list():
            return str(handle_of(sandbox_id).rocklet_socket)
        return None

    def _info(self) -> tuple[Any, list[str]]:
        backend = backend_from_name(self.config.backend)
        info = worker_pb2.WorkerInfo(
            worker_id=self.config.worker_id,
            address=self.config.advertise_address or self.address,
            capacity=common_pb2.Resources(
                cpu_millis=self.capacity.cpu_millis, memory_bytes=self.capacity.memory_bytes
            ),
            backends=[backend],
            labels=self.config.labels,
            version=VERSION,
            max_sandboxes=self.config.max_sandboxes,
        )
        running = [sid for sid in self.backend.list() if self.backend.is_running(sid)]
        return info, running

    def _heartbeat(self) -> Any:
        # Reserved, not measured: what the sandboxes were granted (0 = the default limits).
        d = self.config.default_limits
        with self.servicer.table.lock:
            granted = list(self.servicer.table.granted.values())
        used_cpu = sum(g.cpu_millis or d.cpu_millis for g in granted)
        used_mem = sum(g.memory_bytes or d.memory_bytes for g in granted)
        free = common_pb2.Resources(
            cpu_millis=max(0, self.capacity.cpu_millis - used_cpu),
            memory_bytes=max(0, self.capacity.memory_bytes - used_mem),
        )
        return worker_pb2.HeartbeatRequest(
            worker_id=self.config.worker_id, free=free, sandboxes=self.servicer.statuses()
        )

    def _on_registered(self, keep: set[str]) -> None:
        # A sandbox being started is the admin's call in flight, not an orphan: the admin reaps it
        # when that call returns, if it no longer wants it.
        keep = keep | self.servicer.starting()
        for sid in self.backend.list():
            if sid not in keep:
                log.info("admin does not know sandbox %s; removing it", sid)
                self.servicer.remove(sid)
        self.backend.reap_orphans(keep)

    def _monitor_loop(self) -> None:
        while not self._stopped.wait(2.0):
            try:
                for sid in self.servicer.reap_crashed():
                    log.warning("sandbox %s crashed; its processes were reaped", sid)
            except Exception:  # noqa: BLE001 - the monitor must survive anything
                log.exception("sandbox monitor error")

    def stop(self, grace_s: float = 5.0, deregister: bool = True) -> None:
        """Graceful shutdown: stop serving, remove every sandbox, close the gateway."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.health.enter_graceful_shutdown()
        if self.registrar is not None:
            self.registrar.stop(deregister, self.config.worker_id)
        self.server.stop(grace=grace_s).wait(grace_s + 1)
        if self.env_host is not None:
            self.env_host.shutdown()
        for sid in self.backend.list():
            try:
                self.servicer.remove(sid)
            except Exception:  # noqa: BLE001 - keep reaping the others
                log.exception("removing %s failed", sid)
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()
        self.proxy.close()
        self.gateway.stop()

    def wait(self) -> None:
        """Block until ``stop``."""
        self._stopped.wait()


def serve_worker(config: WorkerConfig) -> WorkerHandle:
    """Start a worker and return its handle (``.address``, ``.port``, ``.stop()``, ``.wait()``)."""
    return WorkerHandle(config)


def run_worker(config: WorkerConfig) -> int:
    """Serve until SIGTERM or SIGINT, then shut down gracefully. Returns an exit code."""
    from ale_rock.admin.logs import configure

    configure("INFO")  # the Admin's JSON lines: one log format for both processes
    handle = serve_worker(config)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print(f"ale-rock worker listening on {handle.address}", flush=True)
    done.wait()
    handle.stop()
    return 0
