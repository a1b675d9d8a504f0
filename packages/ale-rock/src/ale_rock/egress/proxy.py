"""The sandbox side of egress: an HTTP proxy on 127.0.0.1 inside the sandbox's network namespace.

Commands see it as ``HTTP_PROXY``/``HTTPS_PROXY``. ``CONNECT host:port`` (HTTPS and any TCP) and
plain ``GET http://host/...`` requests are tunnelled through the worker's EgressService, which
applies the sandbox's policy. The sandbox has no other route out: its namespace holds loopback only.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import socketserver
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import grpc
from ale_proto.v1 import rocklet_pb2, rocklet_pb2_grpc

from ale_rock.egress.gateway import TOKEN_METADATA_KEY
from ale_rock.grpc_options import channel_options

PROXY_PORT = 3128
_MAX_HEAD = 65536


class EgressProxy:
    """Accepts proxy requests on 127.0.0.1 and tunnels them through EgressService."""

    def __init__(self, egress_socket: str, token: str, port: int = PROXY_PORT) -> None:
        self._channel = grpc.insecure_channel(f"unix:{egress_socket}", options=channel_options())
        self._stub = rocklet_pb2_grpc.EgressServiceStub(self._channel)
        self._token = token
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy.handle(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]

    def start(self) -> None:
        """Serve in a background thread."""
        threading.Thread(target=self._server.serve_forever, name="egress-proxy", daemon=True).start()

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._channel.close()

    def set_token(self, token: str) -> None:
        """Change the sandbox's token (a pooled sandbox gets its identity when claimed)."""
        self._token = token

    def handle(self, conn: socket.socket) -> None:
        """Serve one client connection."""
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(4096)
            if not data:
                return
            head += data
            if len(head) > _MAX_HEAD:
                conn.sendall(b"HTTP/1.1 431 Request Header Fields Too Large\r\n\r\n")
                return
        head, _, rest = head.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
            if method == "CONNECT":
                host, _, port_s = target.rpartition(":")
                port, initial = int(port_s), rest
            else:
                url = urlsplit(target)
                if url.scheme != "http" or not url.hostname:
                    raise ValueError("only absolute http:// URLs or CONNECT")
                host, port = url.hostname, url.port or 80
                path = url.path or "/"
                if url.query:
                    path += "?" + url.query
                kept = [h for h in lines[1:] if not h.lower().startswith(("proxy-", "connection:"))]
                new_head = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"])
                initial = new_head.encode("latin-1") + b"\r\n\r\n" + rest
            host = host.strip("[]")
        except ValueError as e:
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" + str(e).encode())
            return
        command = command_of_peer(conn.getpeername()[1])
        outbound: queue.Queue[bytes | None] = queue.Queue()

        def requests() -> Iterator[Any]:
            yield rocklet_pb2.ConnectRequest(
                target=rocklet_pb2.EgressTarget(host=host, port=port, command=command)
            )
            while (item := outbound.get()) is not None:
                yield rocklet_pb2.ConnectRequest(data=item)

        responses = self._stub.Connect(requests(), metadata=[(TOKEN_METADATA_KEY, self._token)])
        try:
            first = next(responses)
            if first.HasField("error"):
                status = "403 Forbidden" if first.error.code == 5 else "502 Bad Gateway"
                body = f"egress denied: {first.error.message}\n".encode()
                conn.sendall(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
                return
            if method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if initial:
                outbound.put(initial)
            threading.Thread(target=_pump_client, args=(conn, outbound), daemon=True).start()
            for resp in responses:
                if resp.data:
                    conn.sendall(resp.data)
        except (grpc.RpcError, OSError, StopIteration):
            with contextlib.suppress(OSError):
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
        finally:
            outbound.put(None)
            responses.cancel()


def _pump_client(conn: socket.socket, outbound: queue.Queue[bytes | None]) -> None:
    try:
        while data := conn.recv(65536):
            outbound.put(data)
    except OSError:
        pass
    outbound.put(None)


def command_of_peer(peer_port: int) -> str:
    """Best effort: the command line of the sandbox process that owns the client socket."""
    try:
        inode = ""
        want = f":{peer_port:04X}"
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                if parts[1].endswith(want):
                    inode = parts[9]
                    break
        if not inode:
            return ""
        target = f"socket:[{inode}]"
        me = os.getpid()
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == me:
                continue
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        with open(f"/proc/{pid}/cmdline", "rb") as c:
                            return c.read().replace(b"\0", b" ").decode(errors="replace").strip()[:1000]
    except OSError:
        return ""
    return ""
