"""Fixtures for egress tests: a gateway, a local backend bound to it, and a host HTTP server."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import pytest
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc, sandbox_pb2
from ale_rock.backends.base import SandboxConfig
from ale_rock.backends.local import LocalBackend
from ale_rock.egress.gateway import EgressGateway
from ale_rock.egress.policy import Rule

from ..backends._local import local_backend, running_gateway
from ..redteam import _egress_fixtures as egress_fixtures


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EgressGateway]:
    yield from running_gateway(tmp_path_factory.mktemp("egress"))


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory, gateway: EgressGateway) -> Iterator[LocalBackend]:
    yield from local_backend(tmp_path_factory.mktemp("egress-backend"), gateway)


@pytest.fixture(scope="module")
def remote_server() -> Iterator[tuple[str, int]]:
    """(ip, port) of an HTTP server on "another machine" answering "hello from afar"."""
    fixtures = egress_fixtures
    if fixtures.problem():
        pytest.skip(fixtures.problem())
    with fixtures.remote_http_server() as address:
        yield address


@pytest.fixture(scope="module")
def http_server() -> Iterator[int]:
    """An HTTP server on the host's loopback answering "hello from host"."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b"hello from host"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def sandbox(backend: LocalBackend, gateway: EgressGateway) -> Iterator[Any]:
    made: list[str] = []

    def make(rules: list[Rule]) -> Any:
        sid = f"eg-{uuid.uuid4().hex[:8]}"
        h = backend.start(sid, SandboxConfig())
        made.append(sid)
        gateway.register(sid, h.extra["egress_token"], rules)
        stub = rocklet_pb2_grpc.RockletServiceStub(grpc.insecure_channel(f"unix:{h.rocklet_socket}"))

        def sh(command: str) -> Any:
            spec = sandbox_pb2.ExecSpec(command=command, timeout_ms=30000)
            return stub.Exec(rocklet_pb2.RockletServiceExecRequest(spec=spec), timeout=60).result

        return sid, sh

    yield make
    for sid in made:
        backend.remove(sid)
        gateway.forget(sid)
