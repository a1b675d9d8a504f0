"""LoopServer: a grpc.aio server on its own loop thread, started and stopped from plain code."""

from __future__ import annotations

import threading

import grpc
import pytest
from ale_proto.serving import PortInUse, add_standard_services
from ale_roll.engines.loop_server import LoopServer
from grpc_health.v1 import health_pb2, health_pb2_grpc


def test_it_serves_stops_once_and_leaves_no_thread():
    server = LoopServer(lambda s: add_standard_services(s, ["x.Y"]), "127.0.0.1:0", name="loop-test")
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service="x.Y"), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert not server.wait_for_termination(0)
    assert server.stop(grace=None).is_set() and server.stop(0).is_set()  # a second stop is a no-op
    assert server.wait_for_termination(0) and server.loop.is_closed()
    assert not [t for t in threading.enumerate() if t.name == "loop-test"]
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch, pytest.raises(grpc.RpcError):
        health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=2)


def test_a_taken_port_is_refused_and_nothing_is_left_running():
    first = LoopServer(lambda s: None, "127.0.0.1:0", name="loop-first")
    try:
        with pytest.raises(PortInUse):
            LoopServer(lambda s: None, f"127.0.0.1:{first.port}", name="loop-second")
        assert not [t for t in threading.enumerate() if t.name == "loop-second"]
    finally:
        first.stop(None)
