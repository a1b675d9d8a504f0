"""EnvSpec protobuf <-> plain models (the only place in EnvHub that knows the wire types)."""

from __future__ import annotations

from typing import Any

from ale_proto.v1 import common_pb2, env_pb2, sandbox_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from ale_rock.envhub.registry import BuildStatus, StoredSpec
from ale_rock.envhub.spec import EnvSpecModel, validate_spec

BACKEND_NAMES = {
    sandbox_pb2.SANDBOX_BACKEND_UNSPECIFIED: "docker",  # the only backend with cached builds today
    sandbox_pb2.SANDBOX_BACKEND_LOCAL: "local",
    sandbox_pb2.SANDBOX_BACKEND_DOCKER: "docker",
}
BUILD_STATES = {
    BuildStatus.NONE: env_pb2.BUILD_STATE_UNSPECIFIED,
    BuildStatus.BUILDING: env_pb2.BUILD_STATE_BUILDING,
    BuildStatus.READY: env_pb2.BUILD_STATE_READY,
    BuildStatus.FAILED: env_pb2.BUILD_STATE_FAILED,
}
_RESOURCE_FIELDS = ("cpu_millis", "memory_bytes", "disk_bytes", "max_pids", "max_open_files", "gpus")


def spec_from_pb(pb: env_pb2.EnvSpec) -> EnvSpecModel:
    """Validate a wire spec; errors name the field as in the YAML file, prefixed with ``spec.``."""
    data: dict[str, Any] = {
        "name": pb.name,
        "version": pb.version or "1",
        "description": pb.description,
        "setup": list(pb.setup_commands),
        "env": dict(pb.env),
        "workdir": pb.workdir or "/workspace",
        "resources": {f: getattr(pb.resources, f) for f in _RESOURCE_FIELDS},
        "network": {"allow": [{"host": r.host, "port": r.port} for r in pb.network.allow]},
        "base": {},
    }
    kind = pb.base.WhichOneof("source")
    if kind is not None:
        data["base"] = {kind: getattr(pb.base, kind)}
    return validate_spec(data, "")


def spec_to_pb(stored: StoredSpec) -> env_pb2.EnvSpec:
    """A stored spec on the wire, with its hash."""
    s = stored.spec
    base = env_pb2.EnvBase(**{s.base.kind: getattr(s.base, s.base.kind)})
    return env_pb2.EnvSpec(
        name=s.name,
        version=s.version,
        base=base,
        setup_commands=s.setup,
        resources=common_pb2.Resources(**s.resources.model_dump()),
        network=sandbox_pb2.NetworkPolicy(
            allow=[sandbox_pb2.EgressRule(host=r.host, port=r.port) for r in s.network.allow]
        ),
        env=s.env,
        workdir=s.workdir,
        description=s.description,
        spec_hash=stored.spec_hash,
    )


def timestamp(seconds: float) -> Timestamp:
    """A protobuf Timestamp."""
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts
