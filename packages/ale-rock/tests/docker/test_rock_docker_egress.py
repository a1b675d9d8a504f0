"""The only door out of a Docker sandbox: the Rocklet's proxy -> the worker's EgressService over
the bound-in Unix socket, allowed hosts only."""

from __future__ import annotations

import http.server
import shutil
import threading
import uuid
from pathlib import Path

import pytest
from ale_rock.backends.base import SandboxConfig

from ..redteam import _egress_fixtures as egress_fixtures

pytestmark = pytest.mark.docker

# Speak HTTP to the in-sandbox proxy by hand: urllib would bypass it for 127.0.0.1 (NO_PROXY).
VIA_PROXY = (
    "import os, socket, sys\n"
    "port = os.environ['HTTP_PROXY'].rsplit(':', 1)[1]\n"
    "s = socket.create_connection(('127.0.0.1', int(port)), timeout=20)\n"
    "s.sendall(('GET http://%s:%s/ HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n' % (sys.argv[1], sys.argv[2])).encode())\n"
    "data = b''\n"
    "while chunk := s.recv(65536): data += chunk\n"
    "print(data.decode(errors='replace'))\n"
)


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = b"hello-from-the-host"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_allowed_host_through_the_gateway_and_denied_otherwise(base_image, rocklet) -> None:
    from ale_rock.backends.docker import DockerBackend, DockerBackendConfig
    from ale_rock.egress.gateway import EgressGateway
    from ale_rock.egress.policy import Rule

    worker = f"e{uuid.uuid4().hex[:8]}"
    root = Path("/tmp/ale-dt") / worker
    gateway = EgressGateway()
    gateway.start(root / "egress" / "egress.sock")
    # The allowed destination is "another machine" (a network namespace): the host's own loopback
    # is never a destination, whatever the policy says.
    fixtures = egress_fixtures
    if fixtures.problem():
        pytest.skip(fixtures.problem())
    remote = fixtures.remote_http_server()
    far_ip, far_port = remote.__enter__()
    denied = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=denied.serve_forever, daemon=True).start()
    backend = DockerBackend(
        DockerBackendConfig(
            worker=worker,
            base_image=base_image,
            root_dir=root / "sb",
            egress_socket=root / "egress" / "egress.sock",
            pool_size=0,
        )
    )
    try:
        h = backend.start("eg1", SandboxConfig())
        gateway.register("eg1", h.extra["egress_token"],
                         [Rule(far_ip, far_port), Rule("127.0.0.1", denied.server_address[1])])
        r = rocklet(h)
        ok = r.sh(f'python3 -c "{VIA_PROXY}" {far_ip} {far_port}', timeout_ms=60_000)
        assert "200" in ok.splitlines()[0] and "hello from afar" in ok
        no = r.exec(f'python3 -c "{VIA_PROXY}" 127.0.0.1 {denied.server_address[1]}', timeout_ms=60_000)
        assert b"hello-from-the-host" not in no.stdout
        assert any(e.kind == "egress_blocked" for e in gateway.safety.get("eg1")[1])
        # The gateway's socket dir is bound read-only: the sandbox cannot replace the door.
        assert r.exec("rm -f /run/ale-egress/egress.sock").exit_code != 0
    finally:
        backend.reap_orphans(set())
        backend.close()
        gateway.stop()
        remote.__exit__(None, None, None)
        denied.shutdown()
        (root / "sb").rmdir()  # fails unless every sandbox dir is gone
        shutil.rmtree(root)
