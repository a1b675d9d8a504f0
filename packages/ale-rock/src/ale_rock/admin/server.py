"""The Admin process: SandboxService + WorkerRegistryService (+ health, reflection) on one port."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass

import grpc
from ale_proto.serving import add_standard_services
from ale_proto.v1 import sandbox_pb2, sandbox_pb2_grpc, worker_pb2, worker_pb2_grpc

from ale_rock.admin.auth import Authenticator
from ale_rock.admin.config import AdminConfig
from ale_rock.admin.manager import SandboxManager
from ale_rock.admin.registry_service import WorkerRegistryServicer
from ale_rock.admin.service import SandboxServicer
from ale_rock.admin.store import Store
from ale_rock.admin.worker_client import CHANNEL_OPTIONS, GrpcWorkerClient

log = logging.getLogger("ale_rock.admin")

SERVICE_NAMES = [
    sandbox_pb2.DESCRIPTOR.services_by_name["SandboxService"].full_name,
    worker_pb2.DESCRIPTOR.services_by_name["WorkerRegistryService"].full_name,
]


@dataclass
class RunningAdmin:
    """A started Admin (for tests and embedding)."""

    server: grpc.aio.Server
    manager: SandboxManager
    port: int
    health: object
    upkeep: asyncio.Task[None]

    async def stop(self, grace: float = 5.0) -> None:
        from grpc_health.v1 import health_pb2

        for name in ["", *SERVICE_NAMES]:
            self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)  # type: ignore[attr-defined]
        self.upkeep.cancel()
        await self.server.stop(grace)
        await self.manager.close()
        self.manager.store.close()


async def start_admin(config: AdminConfig) -> RunningAdmin:
    """Open the store, recover, and start serving. Returns once the port is bound."""
    store = Store(config.db_path)
    manager = SandboxManager(config, store, GrpcWorkerClient)
    manager.recover()
    auth = Authenticator(config.api_keys, config.join_token)
    server = grpc.aio.server(options=CHANNEL_OPTIONS)
    sandbox_pb2_grpc.add_SandboxServiceServicer_to_server(SandboxServicer(manager, auth), server)
    worker_pb2_grpc.add_WorkerRegistryServiceServicer_to_server(WorkerRegistryServicer(manager, auth), server)
    health = add_standard_services(server, SERVICE_NAMES)
    address = f"{config.host}:{config.port}"
    if config.tls is not None:
        creds = grpc.ssl_server_credentials(
            [(config.tls.key_file.read_bytes(), config.tls.cert_file.read_bytes())]
        )
        port = server.add_secure_port(address, creds)
    else:
        port = server.add_insecure_port(address)
    await server.start()
    upkeep = asyncio.get_running_loop().create_task(manager.run_upkeep())
    log.info("admin serving", extra={"address": f"{config.host}:{port}", "db": str(config.db_path),
                                     "tls": config.tls is not None})
    return RunningAdmin(server, manager, port, health, upkeep)


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
