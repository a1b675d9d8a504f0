"""Building contract requests from plain arguments (shared by the sync and async SDK)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ale_proto.v1 import common_pb2, sandbox_pb2

from ale_rock.sdk.errors import InvalidArgument

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_BACKENDS = {
    "": sandbox_pb2.SANDBOX_BACKEND_UNSPECIFIED, "local": sandbox_pb2.SANDBOX_BACKEND_LOCAL,
    "docker": sandbox_pb2.SANDBOX_BACKEND_DOCKER, "kubernetes": sandbox_pb2.SANDBOX_BACKEND_KUBERNETES,
}
U32 = 2**32 - 1


def parse_size(value: int | str | None, field: str) -> int:
    """Bytes from an int or a string such as "512Mi", "2G", "1024" (binary units)."""
    if value is None:
        return 0
    if isinstance(value, int):
        n = value
    else:
        m = _SIZE.match(value)
        if not m:
            raise InvalidArgument(f"cannot parse size {value!r} (e.g. '512Mi', '2G')", field)
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n < 0:
        raise InvalidArgument(f"must not be negative, got {n}", field)
    return n


def _nonneg(value: float | int | None, field: str, scale: float = 1, cap: int = U32) -> int:
    if value is None:
        return 0
    n = int(round(value * scale))
    if n < 0:
        raise InvalidArgument(f"must not be negative, got {value}", field)
    if n > cap:
        raise InvalidArgument(f"too large: {value}", field)
    return n


def egress_rules(allow: Iterable[str | tuple[str, int]]) -> list[sandbox_pb2.EgressRule]:
    """Rules from "host", "host:port" or (host, port)."""
    rules = []
    for item in allow:
        if isinstance(item, tuple):
            host, port = item
        else:
            host, sep, p = item.rpartition(":")
            if not sep or not p.isdigit():
                host, port = item, 0
            else:
                port = int(p)
        rules.append(sandbox_pb2.EgressRule(host=host, port=_nonneg(port, "network.allow.port", cap=65535)))
    return rules


def create_request(
    *, image: str = "", cpu: float | None = None, memory: int | str | None = None, disk: int | str | None = None,
    max_pids: int | None = None, gpus: int | None = None, env: Mapping[str, str] | None = None,
    workdir: str = "", ttl: float | None = None, idle_timeout: float | None = None, backend: str = "",
    allow: Iterable[str | tuple[str, int]] = (), read_only_root: bool = False,
    labels: Mapping[str, str] | None = None, wait: bool = True, request_id: str = "",
) -> sandbox_pb2.CreateSandboxRequest:
    if backend not in _BACKENDS:
        raise InvalidArgument(f"unknown backend {backend!r} (local, docker, kubernetes)", "spec.backend")
    resources = common_pb2.Resources(
        cpu_millis=_nonneg(cpu, "spec.resources.cpu_millis", 1000),
        memory_bytes=parse_size(memory, "spec.resources.memory_bytes"),
        disk_bytes=parse_size(disk, "spec.resources.disk_bytes"),
        max_pids=_nonneg(max_pids, "spec.resources.max_pids"),
        gpus=_nonneg(gpus, "spec.resources.gpus"),
    )
    spec = sandbox_pb2.SandboxSpec(
        image=image, resources=resources, network=sandbox_pb2.NetworkPolicy(allow=egress_rules(allow)),
        env=dict(env or {}), workdir=workdir, ttl_seconds=_nonneg(ttl, "spec.ttl_seconds"),
        idle_timeout_seconds=_nonneg(idle_timeout, "spec.idle_timeout_seconds"), backend=_BACKENDS[backend],
        read_only_root=read_only_root, labels=dict(labels or {}),
    )
    return sandbox_pb2.CreateSandboxRequest(spec=spec, wait=wait, request_id=request_id)


def exec_spec(
    command: str | Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str = "",
    timeout: float | None = None, idle_timeout: float | None = None, stdin: bytes | str | None = None,
    max_output_bytes: int | None = None, background: bool = False,
) -> sandbox_pb2.ExecSpec:
    spec = sandbox_pb2.ExecSpec(
        env=dict(env or {}), cwd=cwd, timeout_ms=_nonneg(timeout, "spec.timeout_ms", 1000),
        idle_timeout_ms=_nonneg(idle_timeout, "spec.idle_timeout_ms", 1000),
        max_output_bytes=_nonneg(max_output_bytes, "spec.max_output_bytes", cap=2**63),
        stdin=stdin.encode() if isinstance(stdin, str) else (stdin or b""), background=background,
    )
    if isinstance(command, str):
        spec.command = command
    else:
        spec.argv.extend(command)
    return spec


def rpc_deadline(command_timeout: float | None, default: float) -> float:
    """The call deadline for a command: its own timeout plus slack, else the client default."""
    return command_timeout + 30.0 if command_timeout else default
