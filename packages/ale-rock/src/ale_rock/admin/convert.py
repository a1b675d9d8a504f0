"""Protobuf ↔ plain-record conversion (the Admin's only place that knows both)."""

from __future__ import annotations

import functools
import json
from typing import Any

from ale_proto.v1 import common_pb2, sandbox_pb2
from google.protobuf import json_format, timestamp_pb2
from grpc import StatusCode

from ale_rock.admin.errors import AdminError, Code
from ale_rock.admin.state import State
from ale_rock.admin.store import SandboxRecord

_STATE_TO_PB = {s: sandbox_pb2.SandboxState.Value(f"SANDBOX_STATE_{s.value}") for s in State}
_PB_TO_STATE = {v: k for k, v in _STATE_TO_PB.items()}


def state_to_pb(state: State | None) -> int:
    return _STATE_TO_PB[state] if state is not None else sandbox_pb2.SANDBOX_STATE_UNSPECIFIED


def state_from_pb(value: int) -> State | None:
    return _PB_TO_STATE.get(value)


_BACKEND_VALUES: dict[str, sandbox_pb2.SandboxBackend] = {
    "local": sandbox_pb2.SANDBOX_BACKEND_LOCAL,
    "docker": sandbox_pb2.SANDBOX_BACKEND_DOCKER,
    "kubernetes": sandbox_pb2.SANDBOX_BACKEND_KUBERNETES,
}
_BACKEND_NAMES: dict[int, str] = {int(v): k for k, v in _BACKEND_VALUES.items()}


def backend_name(value: int) -> str:
    return _BACKEND_NAMES.get(value, "")


def backend_from_name(name: str) -> sandbox_pb2.SandboxBackend:
    return _BACKEND_VALUES.get(name, sandbox_pb2.SANDBOX_BACKEND_UNSPECIFIED)


# json_format walks messages in pure Python (~0.1 ms a spec); a create converted its spec three
# times, about a tenth of the Admin's CPU per create. Specs repeat (a rollout creates thousands
# alike): each direction is memoised on an immutable key, and every call returns a fresh object.
_CACHED_SPEC_BYTES = 16 * 1024
"""Larger specs (big env or file lists) are converted every time rather than held in the caches."""


@functools.lru_cache(maxsize=1024)
def _spec_json(serialized: bytes) -> str:
    spec = sandbox_pb2.SandboxSpec.FromString(serialized)
    return json.dumps(json_format.MessageToDict(spec, preserving_proto_field_name=True))


@functools.lru_cache(maxsize=1024)
def _spec_bytes(data_json: str) -> bytes:
    spec = json_format.ParseDict(json.loads(data_json), sandbox_pb2.SandboxSpec(), ignore_unknown_fields=True)
    return spec.SerializeToString(deterministic=True)


def spec_to_dict(spec: sandbox_pb2.SandboxSpec) -> dict[str, Any]:
    serialized = spec.SerializeToString(deterministic=True)
    if len(serialized) > _CACHED_SPEC_BYTES:
        return json_format.MessageToDict(spec, preserving_proto_field_name=True)
    loaded: dict[str, Any] = json.loads(_spec_json(serialized))
    return loaded


def spec_from_dict(data: dict[str, Any]) -> sandbox_pb2.SandboxSpec:
    data_json = json.dumps(data, separators=(",", ":"))
    if len(data_json) > 2 * _CACHED_SPEC_BYTES:
        return json_format.ParseDict(data, sandbox_pb2.SandboxSpec(), ignore_unknown_fields=True)
    return sandbox_pb2.SandboxSpec.FromString(_spec_bytes(data_json))


def _ts(seconds: float) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def sandbox_to_pb(r: SandboxRecord) -> sandbox_pb2.Sandbox:
    return sandbox_pb2.Sandbox(
        id=r.id, namespace=r.namespace, spec=spec_from_dict(r.spec), state=state_to_pb(r.state),  # type: ignore[arg-type]
        worker_id=r.worker_id, message=r.message, create_time=_ts(r.create_time),
        update_time=_ts(r.update_time), expire_time=_ts(r.expire_time),
    )


def error_to_pb(e: AdminError) -> common_pb2.ErrorDetail:
    return e.detail


_STATUS_TO_CODE = {
    StatusCode.INVALID_ARGUMENT: Code.INVALID_ARGUMENT, StatusCode.NOT_FOUND: Code.NOT_FOUND,
    StatusCode.ALREADY_EXISTS: Code.ALREADY_EXISTS, StatusCode.PERMISSION_DENIED: Code.PERMISSION_DENIED,
    StatusCode.RESOURCE_EXHAUSTED: Code.RESOURCE_EXHAUSTED, StatusCode.FAILED_PRECONDITION: Code.FAILED_PRECONDITION,
    StatusCode.DEADLINE_EXCEEDED: Code.DEADLINE_EXCEEDED, StatusCode.UNAVAILABLE: Code.UNAVAILABLE,
}


def code_of_status(status: StatusCode) -> Code:
    return _STATUS_TO_CODE.get(status, Code.INTERNAL)
