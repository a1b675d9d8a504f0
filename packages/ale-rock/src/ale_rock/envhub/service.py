"""EnvHubService over gRPC: ``add_envhub_service`` (into an existing server, e.g. the Admin's) and
``serve_envhub`` (standalone, with health checking and reflection).

The servicer is synchronous (builds block on the engine); on a ``grpc.aio`` server its handlers
run in the loop's executor, so it can be hosted by the asyncio Admin unchanged.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from ale_proto import serving
from ale_proto.errors import AleError, abort, make_error
from ale_proto.serving import add_standard_services
from ale_proto.v1 import common_pb2, env_pb2, env_pb2_grpc
from pydantic import BaseModel, ConfigDict, Field

from ale_rock.envhub.convert import BACKEND_NAMES, BUILD_STATES, spec_from_pb, spec_to_pb, timestamp
from ale_rock.envhub.docker_build import DockerBuildConfig, DockerBuilder
from ale_rock.envhub.hub import Builder, EnvHub, HubError
from ale_rock.envhub.registry import Registry
from ale_rock.envhub.spec import EnvSpecError
from ale_rock.grpc_options import server_options

SERVICE_NAME = env_pb2.DESCRIPTOR.services_by_name["EnvHubService"].full_name
MAX_PAGE = 1000


def _default_db() -> Path:
    return Path.home() / ".local" / "share" / "ale" / "envhub.db"


class EnvHubConfig(BaseModel):
    """Settings of the EnvHub service."""

    model_config = ConfigDict(extra="forbid")

    db_path: Path = Field(default_factory=_default_db)
    """The registry's SQLite file (durable across restarts)."""
    host: str = "127.0.0.1"
    """Bind address of the standalone server."""
    port: int = Field(default=50072, ge=0, le=65535)
    """Port of the standalone server (0 = any free port)."""
    max_workers: int = Field(default=8, ge=1)
    """RPC threads of the standalone server (a build holds one for its duration)."""
    docker: DockerBuildConfig = Field(default_factory=DockerBuildConfig)
    """The docker builder."""


def make_hub(config: EnvHubConfig, builders: dict[str, Callable[[], Builder]] | None = None) -> EnvHub:
    """An :class:`EnvHub` over the config's registry (the docker builder unless ``builders``)."""
    return EnvHub(
        Registry(config.db_path),
        builders if builders is not None else {"docker": lambda: DockerBuilder(config.docker)},
    )


class EnvHubServicer(env_pb2_grpc.EnvHubServiceServicer):
    """The gRPC edge of an :class:`EnvHub`."""

    def __init__(self, hub: EnvHub, authorize: Callable[[Any], object] | None = None) -> None:
        self.hub = hub
        self._authorize = authorize

    def _auth(self, context: Any) -> None:
        if self._authorize is not None:
            self._authorize(context.invocation_metadata())

    @staticmethod
    def _fail(context: Any, e: Exception) -> None:
        if isinstance(e, AleError):  # the hub's refusals, the host's (e.g. the Admin's) authentication errors
            abort(context, e.detail)
        if isinstance(e, EnvSpecError):
            field = f"spec.{e.field}" if e.field else "spec"
            abort(context, make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, str(e), field))  # type: ignore[arg-type]
        abort(context, make_error(common_pb2.ERROR_CODE_INTERNAL, f"{type(e).__name__}: {e}"))  # type: ignore[arg-type]

    def RegisterEnvSpec(self, request: env_pb2.RegisterEnvSpecRequest, context: Any) -> env_pb2.RegisterEnvSpecResponse:
        try:
            self._auth(context)
            if not request.HasField("spec"):
                raise HubError("INVALID_ARGUMENT", "spec is required", field="spec")
            stored = self.hub.register(spec_from_pb(request.spec))
            return env_pb2.RegisterEnvSpecResponse(spec=spec_to_pb(stored))
        except Exception as e:  # noqa: BLE001 - every failure becomes a typed abort
            self._fail(context, e)
            raise

    def GetEnvSpec(self, request: env_pb2.GetEnvSpecRequest, context: Any) -> env_pb2.GetEnvSpecResponse:
        try:
            self._auth(context)
            stored = self.hub.get(request.name, request.version)
            builds = {k: BUILD_STATES[v] for k, v in self.hub.builds(stored).items()}
            return env_pb2.GetEnvSpecResponse(
                spec=spec_to_pb(stored), builds=builds, register_time=timestamp(stored.register_time)
            )
        except Exception as e:  # noqa: BLE001
            self._fail(context, e)
            raise

    def ListEnvSpecs(self, request: env_pb2.ListEnvSpecsRequest, context: Any) -> env_pb2.ListEnvSpecsResponse:
        try:
            self._auth(context)
            size = request.page.page_size or 100
            if size > MAX_PAGE:
                raise HubError("INVALID_ARGUMENT", f"page_size is at most {MAX_PAGE}", field="page.page_size")
            token = request.page.page_token
            if token and not token.isdigit():
                raise HubError("INVALID_ARGUMENT", "page_token is not one this server issued", field="page.page_token")
            offset = int(token or 0)
            specs, total = self.hub.list(offset, size)
            nxt = str(offset + size) if offset + size < total else ""
            return env_pb2.ListEnvSpecsResponse(
                specs=[spec_to_pb(s) for s in specs],
                page=common_pb2.PageResponse(next_page_token=nxt, total_size=total),
            )
        except Exception as e:  # noqa: BLE001
            self._fail(context, e)
            raise

    def DeleteEnvSpec(self, request: env_pb2.DeleteEnvSpecRequest, context: Any) -> env_pb2.DeleteEnvSpecResponse:
        try:
            self._auth(context)
            self.hub.delete(request.name, request.version)
            return env_pb2.DeleteEnvSpecResponse()
        except Exception as e:  # noqa: BLE001
            self._fail(context, e)
            raise

    def BuildEnvSpec(self, request: env_pb2.BuildEnvSpecRequest, context: Any) -> Iterator[env_pb2.BuildEnvSpecResponse]:
        try:
            self._auth(context)
            backend = BACKEND_NAMES.get(request.backend)
            if backend is None:
                raise HubError("INVALID_ARGUMENT", f"unknown backend {request.backend}", field="backend")
            events = self.hub.build(request.name, request.version, backend, request.force)
            first = next(events)  # raises the request's errors before anything is streamed
        except Exception as e:  # noqa: BLE001
            self._fail(context, e)
            raise
        for event in (first, *events):
            yield env_pb2.BuildEnvSpecResponse(log_line=event.line, state=BUILD_STATES[event.state], cached=event.cached)


def add_envhub_service(
    grpc_server: Any,
    config: EnvHubConfig | None = None,
    hub: EnvHub | None = None,
    authorize: Callable[[Any], object] | None = None,
) -> EnvHub:
    """Add the EnvHubService to an existing (sync or asyncio) server; returns its hub.

    ``authorize(metadata)`` runs before every call (e.g. the Admin's ``Authenticator.namespace_of``);
    an exception with ``code``/``message``/``field`` (``AdminError``) becomes that typed error.
    Call ``hub.registry.close()`` when the server stops.
    """
    hub = hub or make_hub(config or EnvHubConfig())
    env_pb2_grpc.add_EnvHubServiceServicer_to_server(EnvHubServicer(hub, authorize), grpc_server)
    return hub


class EnvHubServer(serving.RunningServer):
    """A running standalone EnvHub: ``address``, ``hub``, ``stop()`` (which closes the registry)."""

    def __init__(self, server: grpc.Server, hub: EnvHub, port: int, bind: str) -> None:
        super().__init__(server, port, bind)
        self.hub = hub

    def close(self) -> None:
        self.hub.registry.close()


def serve_envhub(config: EnvHubConfig | None = None, hub: EnvHub | None = None) -> EnvHubServer:
    """Start a standalone EnvHubService (health checking, reflection) and return it running."""
    cfg = config or EnvHubConfig()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=cfg.max_workers, thread_name_prefix="envhub-rpc"), options=server_options(), interceptors=serving.strict_requests())
    hub = add_envhub_service(server, cfg, hub)
    add_standard_services(server, [SERVICE_NAME])
    port = serving.bind(server, f"{cfg.host}:{cfg.port}")
    server.start()
    return EnvHubServer(server, hub, port, cfg.host)


def main(argv: list[str] | None = None) -> None:
    """``python -m ale_rock.envhub.service``."""
    p = argparse.ArgumentParser(description="Serve ALE's EnvHubService.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=50072)
    p.add_argument("--db", type=Path, default=_default_db())
    args = p.parse_args(argv)
    srv = serve_envhub(EnvHubConfig(host=args.host, port=args.port, db_path=args.db))
    print(f"EnvHubService listening on {srv.address}", flush=True)
    try:
        srv.wait()
    except KeyboardInterrupt:
        srv.stop()


if __name__ == "__main__":
    main()
