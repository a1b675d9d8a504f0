"""Standard services every ALE gRPC server exposes: health checking and reflection.

Needs the ``ale-proto[server]`` extra (grpcio-health-checking, grpcio-reflection); imported
lazily so that plain clients of the contract need only protobuf and grpcio.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def add_standard_services(server: Any, service_full_names: Iterable[str]) -> Any:
    """Add health checking (every named service SERVING) and reflection to ``server``.

    Works for ``grpc.server`` and ``grpc.aio.server``. Returns the health servicer so a server can
    flip services to NOT_SERVING during shutdown.
    """
    try:
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc
        from grpc_reflection.v1alpha import reflection
    except ImportError as e:  # pragma: no cover - depends on installed extras
        raise ImportError("install ale-proto[server] for health checking and reflection") from e

    names = list(service_full_names)
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    for name in ["", *names]:
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection(
        [*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME], server
    )
    return servicer
