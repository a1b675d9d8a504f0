"""A small EnvHubService client (used by the CLI); plain Python types in and out."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
from ale_proto.errors import AleError, error_from_rpc
from ale_proto.v1 import common_pb2, env_pb2, env_pb2_grpc, sandbox_pb2

from ale_rock.envhub.convert import spec_to_pb
from ale_rock.envhub.registry import StoredSpec
from ale_rock.envhub.spec import EnvSpecModel, validate_spec
from ale_rock.grpc_options import channel_options

DEFAULT_ADDRESS = "127.0.0.1:50072"
_BACKENDS = {"docker": sandbox_pb2.SANDBOX_BACKEND_DOCKER, "local": sandbox_pb2.SANDBOX_BACKEND_LOCAL}


EnvHubClientError = AleError
"""A failed call: the one hierarchy's class the server raised (``code``, ``field``, ``message``)."""


@dataclass(frozen=True)
class SpecInfo:
    """A spec as the server has it."""

    spec: EnvSpecModel
    spec_hash: str
    builds: dict[str, str]
    """Backend -> ``READY`` / ``BUILDING`` / ``FAILED`` / ``UNSPECIFIED``."""


def _spec(pb: env_pb2.EnvSpec) -> EnvSpecModel:
    kind = pb.base.WhichOneof("source")
    return validate_spec({
        "name": pb.name, "version": pb.version, "description": pb.description,
        "base": {kind: getattr(pb.base, kind)} if kind else {}, "setup": list(pb.setup_commands),
        "resources": {k: getattr(pb.resources, k) for k in
                      ("cpu_millis", "memory_bytes", "disk_bytes", "max_pids", "max_open_files", "gpus")},
        "network": {"allow": [{"host": r.host, "port": r.port} for r in pb.network.allow]},
        "env": dict(pb.env), "workdir": pb.workdir,
    }, "server")


class EnvHubClient:
    """Talks to an EnvHubService (standalone or hosted by the Admin)."""

    def __init__(self, address: str | None = None, api_key: str | None = None, timeout_s: float = 30.0) -> None:
        self.address = address or os.environ.get("ALE_ENVHUB_ADDRESS") or DEFAULT_ADDRESS
        key = api_key if api_key is not None else os.environ.get("ALE_ROCK_API_KEY", "")
        self._metadata = (("authorization", f"Bearer {key}"),) if key else ()
        self._channel = grpc.insecure_channel(self.address, options=channel_options())
        self._stub = env_pb2_grpc.EnvHubServiceStub(self._channel)
        self.timeout_s = timeout_s

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def _call(self, method: str, request: object) -> object:
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as e:
            raise _error(e) from None

    def register(self, spec: EnvSpecModel) -> str:
        """Register; returns the spec hash."""
        pb = spec_to_pb(StoredSpec(spec, "", 0.0))
        resp = self._call("RegisterEnvSpec", env_pb2.RegisterEnvSpecRequest(spec=pb))
        return str(resp.spec.spec_hash)  # type: ignore[attr-defined]

    def get(self, name: str, version: str = "") -> SpecInfo:
        """One spec with its build states."""
        resp = self._call("GetEnvSpec", env_pb2.GetEnvSpecRequest(name=name, version=version))
        builds = {k: env_pb2.BuildState.Name(v).removeprefix("BUILD_STATE_") for k, v in resp.builds.items()}  # type: ignore[attr-defined]
        return SpecInfo(_spec(resp.spec), resp.spec.spec_hash, builds)  # type: ignore[attr-defined]

    def list(self) -> list[tuple[EnvSpecModel, str]]:
        """Every spec (all pages) with its hash."""
        out: list[tuple[EnvSpecModel, str]] = []
        token = ""
        while True:
            req = env_pb2.ListEnvSpecsRequest(page=common_pb2.PageRequest(page_size=500, page_token=token))
            resp = self._call("ListEnvSpecs", req)
            out += [(_spec(s), s.spec_hash) for s in resp.specs]  # type: ignore[attr-defined]
            token = resp.page.next_page_token  # type: ignore[attr-defined]
            if not token:
                return out

    def delete(self, name: str, version: str = "") -> None:
        """Delete one version, or all with ``version=""``."""
        self._call("DeleteEnvSpec", env_pb2.DeleteEnvSpecRequest(name=name, version=version))

    def build(self, name: str, version: str = "", backend: str = "docker", force: bool = False,
              timeout_s: float = 3600.0) -> Iterator[tuple[str, str, bool]]:
        """Yield (log line, state name, cached) as the build goes."""
        if backend not in _BACKENDS:
            raise EnvHubClientError("INVALID_ARGUMENT", f"unknown backend {backend!r}", "backend")
        req = env_pb2.BuildEnvSpecRequest(name=name, version=version, backend=_BACKENDS[backend], force=force)
        try:
            for msg in self._stub.BuildEnvSpec(req, timeout=timeout_s, metadata=self._metadata):
                yield msg.log_line, env_pb2.BuildState.Name(msg.state).removeprefix("BUILD_STATE_"), msg.cached
        except grpc.RpcError as e:
            raise _error(e) from None


def _error(e: grpc.RpcError) -> AleError:
    return error_from_rpc(e)
