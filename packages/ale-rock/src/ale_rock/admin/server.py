"""The Admin process: SandboxService + WorkerRegistryService (+ EnvService, EnvHubService, health,
reflection) on one port."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
from ale_proto import serving
from ale_proto.serving import add_standard_services
from ale_proto.v1 import env_pb2, env_pb2_grpc, sandbox_pb2, sandbox_pb2_grpc, worker_pb2, worker_pb2_grpc

from ale_rock.admin.auth import Authenticator
from ale_rock.admin.config import AdminConfig
from ale_rock.admin.envs import AdminEnvServicer, SelfAddress, envhub_db_path, make_env_host
from ale_rock.admin.manager import SandboxManager
from ale_rock.admin.registry_service import WorkerRegistryServicer
from ale_rock.admin.service import SandboxServicer
from ale_rock.admin.store import Store
from ale_rock.admin.worker_client import GrpcWorkerClient
from ale_rock.grpc_options import PENDING_RPC_OPTIONS, server_options

log = logging.getLogger("ale_rock.admin")

SERVICE_NAMES = [
    sandbox_pb2.DESCRIPTOR.services_by_name["SandboxService"].full_name,
    worker_pb2.DESCRIPTOR.services_by_name["WorkerRegistryService"].full_name,
]
ENV_SERVICE_NAME = env_pb2.DESCRIPTOR.services_by_name["EnvService"].full_name
ENVHUB_SERVICE_NAME = env_pb2.DESCRIPTOR.services_by_name["EnvHubService"].full_name




@dataclass
class RunningAdmin:
    """A started Admin (for tests and embedding)."""

    server: grpc.aio.Server
    manager: SandboxManager
    port: int
    health: object
    upkeep: asyncio.Task[None]
    service_names: list[str] = field(default_factory=lambda: list(SERVICE_NAMES))
    env_host: Any = None
    """The hosted EnvService's :class:`~ale_rock.envs.host.EnvHost` (None when off)."""
    envhub: Any = None
    """The hosted :class:`~ale_rock.envhub.hub.EnvHub` (None when off)."""
    executor: ThreadPoolExecutor | None = None

    async def stop(self, grace: float = 5.0) -> None:
        from grpc_health.v1 import health_pb2

        for name in ["", *self.service_names]:
            self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)  # type: ignore[attr-defined]
        if self.env_host is not None:
            # Closing envs deletes their sandboxes through this Admin's port: before it closes.
            # Bounded: sandboxes whose delete does not finish in time are reclaimed by their TTL.
            closing = asyncio.get_running_loop().run_in_executor(None, self.env_host.shutdown)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(closing, timeout=grace + 5.0)
        self.upkeep.cancel()
        await self.server.stop(grace)
        if self.envhub is not None:
            self.envhub.registry.close()
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)
        await self.manager.close()
        self.manager.store.close()


async def start_admin(config: AdminConfig) -> RunningAdmin:
    """Open the store, recover, and start serving. Returns once the port is bound."""
    store = Store(config.db_path)
    manager = SandboxManager(config, store, GrpcWorkerClient)
    manager.recover()
    me = SelfAddress(config)
    keys = dict(config.api_keys)
    if config.envs.enabled:
        keys[me.key] = config.envs.sandbox_namespace
    auth = Authenticator(keys, config.join_token)
    # EnvService/EnvHubService are synchronous servicers: grpc.aio runs them in this pool.
    executor = ThreadPoolExecutor(max_workers=64, thread_name_prefix="admin-sync-rpc")
    server = grpc.aio.server(options=server_options(16 * 2**20, extra=PENDING_RPC_OPTIONS), migration_thread_pool=executor,
                             interceptors=serving.strict_requests_aio())
    names = list(SERVICE_NAMES)
    hub = None
    if config.envhub is not None:
        from ale_rock.envhub.service import EnvHubConfig, add_envhub_service

        hub_cfg = EnvHubConfig(db_path=envhub_db_path(config), docker=config.envhub.docker)
        hub = add_envhub_service(server, hub_cfg, authorize=auth.namespace_of)
        names.append(ENVHUB_SERVICE_NAME)
    env_host = None
    if config.envs.enabled:
        env_host = make_env_host(config, me)
        env_pb2_grpc.add_EnvServiceServicer_to_server(AdminEnvServicer(env_host, auth), server)
        names.append(ENV_SERVICE_NAME)
    sandbox_pb2_grpc.add_SandboxServiceServicer_to_server(SandboxServicer(manager, auth, hub), server)
    worker_pb2_grpc.add_WorkerRegistryServiceServicer_to_server(WorkerRegistryServicer(manager, auth), server)
    health = add_standard_services(server, names)
    address = f"{config.host}:{config.port}"
    if config.tls is not None:
        creds = grpc.ssl_server_credentials(
            [(config.tls.key_file.read_bytes(), config.tls.cert_file.read_bytes())]
        )
        port = serving.bind(server, address, creds)
    else:
        port = serving.bind(server, address)
    me.port = port
    manager.port = port
    await server.start()
    upkeep = asyncio.get_running_loop().create_task(manager.run_upkeep())
    log.info("admin serving", extra={"address": f"{config.host}:{port}", "db": str(config.db_path),
                                     "tls": config.tls is not None})
    return RunningAdmin(server, manager, port, health, upkeep, names, env_host, hub, executor)


async def serve_admin_async(config: AdminConfig, on_ready: Callable[[int], None] | None = None) -> None:
    """Serve until SIGTERM/SIGINT, then drain in-flight calls for ``config.grace_period_s``."""
    admin = await start_admin(config)
    if on_ready is not None:
        on_ready(admin.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("admin shutting down")
    await admin.stop(config.grace_period_s)


def serve_admin(config: AdminConfig, on_ready: Callable[[int], None] | None = None) -> None:
    """Blocking entry point of ``ale-rock admin``."""
    asyncio.run(serve_admin_async(config, on_ready))
