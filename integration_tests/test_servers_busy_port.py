"""A second server on a port already in use fails at once, naming the port (issue 11, finding 11).

gRPC's default SO_REUSEPORT let a second Admin (or ModelProxy) start on a taken port and silently
take half of its connections. Real servers run as real processes here: the first keeps serving
every call, the second exits non-zero with one line that names the port and no traceback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from ale_proto.serving import free_port
from grpc_health.v1 import health_pb2, health_pb2_grpc

ALE_ROCK = [sys.executable, "-c", "from ale_rock.cli import main; main()"]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def _wait_serving(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        while True:
            try:
                stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                return
            except grpc.RpcError:
                assert proc.poll() is None, f"server exited with {proc.returncode}"
                assert time.monotonic() < deadline, f"no server on {port} after {timeout_s} s"
                time.sleep(0.1)


def _second_fails(argv: list[str], port: int) -> None:
    """Run a second server that wants ``port``: it must exit non-zero, naming the port once."""
    out = subprocess.run(argv, capture_output=True, timeout=30, env=ENV)
    stderr = out.stderr.decode(errors="replace")
    assert out.returncode != 0, f"a second server started on the taken port {port}: {stderr}"
    naming = [line for line in stderr.splitlines() if str(port) in line]
    assert len(naming) == 1, f"want one line naming port {port}, got: {stderr!r}"
    assert "in use" in naming[0] and "Traceback" not in stderr, stderr


def _all_answered(port: int, calls: int = 6) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        for _ in range(calls):
            assert stub.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    """A real Admin and a real ModelProxy, each in its own process, on known ports."""
    d: Path = tmp_path_factory.mktemp("busy")
    ports = {"admin": free_port(), "proxy_grpc": free_port(), "proxy_http": free_port()}
    admin = subprocess.Popen(
        [*ALE_ROCK, "admin", "--port", str(ports["admin"]), "--db", str(d / "a.db"), "--api-key", "k=ns"],
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    proxy = subprocess.Popen(
        [*ALE_ROCK, "proxy", "--grpc-port", str(ports["proxy_grpc"]), "--http-port", str(ports["proxy_http"])],
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_serving(ports["admin"], admin)
        _wait_serving(ports["proxy_grpc"], proxy)
        yield ports
        assert admin.poll() is None and proxy.poll() is None, "a first server died"
    finally:
        for p in (admin, proxy):
            p.terminate()
        for p in (admin, proxy):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def test_second_admin_on_a_taken_port_fails_and_the_first_serves(running: dict[str, int], tmp_path: Path) -> None:
    port = running["admin"]
    _second_fails([*ALE_ROCK, "admin", "--port", str(port), "--db", str(tmp_path / "b.db"), "--api-key", "k=ns"], port)
    _all_answered(port)


def test_second_proxy_on_a_taken_grpc_or_http_port_fails(running: dict[str, int]) -> None:
    grpc_port, http_port = running["proxy_grpc"], running["proxy_http"]
    _second_fails([*ALE_ROCK, "proxy", "--grpc-port", str(grpc_port), "--http-port", "0"], grpc_port)
    _second_fails([*ALE_ROCK, "proxy", "--grpc-port", "0", "--http-port", str(http_port)], http_port)
    _all_answered(grpc_port)
    # The first proxy's HTTP endpoint still answers too.
    with socket.create_connection(("127.0.0.1", http_port), timeout=5) as s:
        s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.")
