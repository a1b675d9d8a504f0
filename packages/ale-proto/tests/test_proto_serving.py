"""ale_proto.serving: one server per port, and undecodable requests answered INVALID_ARGUMENT."""

from __future__ import annotations

import asyncio
from concurrent import futures

import grpc
import pytest
from ale_proto import serving
from grpc_health.v1 import health, health_pb2_grpc

GARBAGE = b"\xff\xff\xff"


def _health_server(interceptors: list[object] | None = None, options: list[tuple[str, int]] | None = None) -> grpc.Server:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=options, interceptors=interceptors)
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    return server


def test_bind_refuses_a_port_held_by_a_server_with_default_reuseport() -> None:
    first = _health_server()  # gRPC's defaults: SO_REUSEPORT on, as any third-party server
    port = first.add_insecure_port("127.0.0.1:0")
    first.start()
    try:
        second = _health_server(options=[serving.NO_REUSEPORT])
        with pytest.raises(serving.PortInUse) as e:
            serving.bind(second, f"127.0.0.1:{port}")
        assert str(e.value.code) == f"error: cannot listen on 127.0.0.1:{port}: port {port} is already in use"
        assert serving.bind(second, "127.0.0.1:0") > 0  # a free port still binds
    finally:
        first.stop(None)


def test_construct_listener_reports_a_taken_http_port() -> None:
    from http.server import BaseHTTPRequestHandler, HTTPServer

    first = HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = first.server_address[1]
    try:
        with pytest.raises(serving.PortInUse, match=f"port {port} is already in use"):
            serving.construct_listener(f"127.0.0.1:{port}", HTTPServer, ("127.0.0.1", port), BaseHTTPRequestHandler)
    finally:
        first.server_close()


def test_strict_requests_sync() -> None:
    server = _health_server(interceptors=serving.strict_requests())
    port = serving.bind(server, "127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            with pytest.raises(grpc.RpcError) as e:
                ch.unary_unary("/grpc.health.v1.Health/Check")(GARBAGE, timeout=5)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            with pytest.raises(grpc.RpcError) as e:
                next(iter(ch.unary_stream("/grpc.health.v1.Health/Watch")(GARBAGE, timeout=5)))
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            # A well-formed request still works through the interceptor.
            assert ch.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=5) is not None
    finally:
        server.stop(None)


def test_strict_requests_asyncio() -> None:
    from grpc_health.v1 import health_pb2

    class Health(health_pb2_grpc.HealthServicer):
        async def Check(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
            return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    async def run() -> None:
        server = grpc.aio.server(interceptors=serving.strict_requests_aio())
        health_pb2_grpc.add_HealthServicer_to_server(Health(), server)
        port = serving.bind(server, "127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                with pytest.raises(grpc.RpcError) as e:
                    await ch.unary_unary("/grpc.health.v1.Health/Check")(GARBAGE, timeout=5)
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # gRPC alone: UNKNOWN
                assert await ch.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=5) == b"\x08\x01"
        finally:
            await server.stop(None)

    asyncio.run(run())


# -- reflection: v1 (what current grpcurl / grpc-js / C++ clients ask for) and v1alpha ------------

REFLECTION_PATHS = ("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")


def _reflect(ch: grpc.Channel, path: str, *requests: object) -> list[object]:
    # v1 and v1alpha messages are wire-identical, so the v1alpha classes encode a v1 request.
    from grpc_reflection.v1alpha import reflection_pb2 as rpb

    call = ch.stream_stream(path, request_serializer=rpb.ServerReflectionRequest.SerializeToString,
                            response_deserializer=rpb.ServerReflectionResponse.FromString)
    return list(call(iter(requests), timeout=5))


def _check_reflection(port: int) -> None:
    from google.protobuf import descriptor_pb2
    from grpc_reflection.v1alpha import reflection_pb2 as rpb

    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        for path in REFLECTION_PATHS:
            listed, described, v1_self = _reflect(
                ch, path,
                rpb.ServerReflectionRequest(list_services=""),
                rpb.ServerReflectionRequest(file_containing_symbol="ale.v1.SandboxService"),
                rpb.ServerReflectionRequest(file_containing_symbol="grpc.reflection.v1.ServerReflection"),
            )
            names = {s.name for s in listed.list_services_response.service}  # type: ignore[attr-defined]
            assert {"ale.v1.SandboxService", "grpc.reflection.v1.ServerReflection",
                    "grpc.reflection.v1alpha.ServerReflection"} <= names, (path, names)
            files = [descriptor_pb2.FileDescriptorProto.FromString(b)
                     for b in described.file_descriptor_response.file_descriptor_proto]  # type: ignore[attr-defined]
            assert "SandboxService" in {s.name for f in files for s in f.service}, path
            own = [descriptor_pb2.FileDescriptorProto.FromString(b)
                   for b in v1_self.file_descriptor_response.file_descriptor_proto]  # type: ignore[attr-defined]
            assert own and own[0].package == "grpc.reflection.v1", path


def test_reflection_v1_and_v1alpha_sync() -> None:
    import ale_proto.v1.sandbox_pb2  # noqa: F401 - puts ale.v1.SandboxService in the default pool

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    serving.add_standard_services(server, ["ale.v1.SandboxService"])
    port = serving.bind(server, "127.0.0.1:0")
    server.start()
    try:
        _check_reflection(port)
    finally:
        server.stop(None)


def test_reflection_v1_and_v1alpha_asyncio() -> None:
    import ale_proto.v1.sandbox_pb2  # noqa: F401

    async def run() -> None:
        server = grpc.aio.server()
        serving.add_standard_services(server, ["ale.v1.SandboxService"])
        port = serving.bind(server, "127.0.0.1:0")
        await server.start()
        try:
            await asyncio.to_thread(_check_reflection, port)
        finally:
            await server.stop(None)

    asyncio.run(run())
