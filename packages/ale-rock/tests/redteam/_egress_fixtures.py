"""A destination egress may reach on a machine without a network: an HTTP server in its own network
namespace, behind a veth pair. Its address is not one of the host's (those are refused, as are
loopback and link-local), so it stands for "some other machine". Needs root and iproute2.

Other test directories import it relatively (``from ..redteam import _egress_fixtures``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator

SERVER = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from afar"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
srv = ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H)
print("ready", flush=True)
srv.serve_forever()
"""


def problem() -> str:
    """Why the fixture cannot run here ("" when it can)."""
    if os.geteuid() != 0:
        return "needs root"
    if shutil.which("ip") is None:
        return "needs iproute2 (ip)"
    return ""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


@contextlib.contextmanager
def remote_http_server(port: int = 8080) -> Iterator[tuple[str, int]]:
    """(ip, port) of an HTTP server answering "hello from afar", in a network namespace of its own."""
    tag = uuid.uuid4().hex[:6]
    ns, host_if, ns_if = f"alert-{tag}", f"alh{tag}", f"aln{tag}"
    octet = int(tag[:2], 16) % 250 + 1
    host_ip, far_ip = f"10.213.{octet}.1", f"10.213.{octet}.2"
    proc: subprocess.Popen[str] | None = None
    _ip("netns", "add", ns)
    try:
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", ns)
        _ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", ns, "addr", "add", f"{far_ip}/30", "dev", ns_if)
        _ip("-n", ns, "link", "set", ns_if, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", SERVER, far_ip, str(port)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield far_ip, port
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(timeout=10)
        with contextlib.suppress(subprocess.SubprocessError):
            _ip("link", "del", host_if)
        with contextlib.suppress(subprocess.SubprocessError):
            _ip("netns", "del", ns)
