"""The OpenAI-compatible HTTP endpoint (stdlib ``http.server``, one thread per connection).

Routes: ``POST /v1/chat/completions`` and ``POST /e/<episode_id>/v1/chat/completions`` (the base
URL handed to an episode names it, so a key used under another episode's URL is refused);
``GET .../v1/models``. Streaming replies are server-sent events over chunked encoding.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ale_rock.proxy.core import ModelProxy, stream_chunks
from ale_rock.proxy.episodes import AuthError
from ale_rock.proxy.upstreams import UpstreamError

SANDBOX_HEADER = "X-Ale-Sandbox-Id"
"""Stamped by whatever forwards a sandbox's calls (Rocklet / egress gateway), overwriting any the agent sent."""

_ROUTE = re.compile(r"^(?:/e/(?P<ep>[^/]+))?/v1/(?P<what>chat/completions|models)/?$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: Nagle + delayed ACK = +40 ms
    server: ProxyHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        pass

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "code": status}})

    def _auth(self, path_episode: str | None) -> Any:
        auth = self.headers.get("Authorization", "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        sandbox = self.headers.get(SANDBOX_HEADER)
        if sandbox is None and self.server.require_sandbox_header:
            raise AuthError(403, f"calls must come through a Rocklet ({SANDBOX_HEADER} missing)")
        return self.server.proxy.book.authenticate(key, path_episode, sandbox)

    def do_GET(self) -> None:
        m = _ROUTE.match(self.path.split("?")[0])
        if not m or m.group("what") != "models":
            self._error(404, f"no route {self.path}")
            return
        try:
            ep = self._auth(m.group("ep"))
        except AuthError as e:
            self._error(e.status, str(e), "authentication_error")
            return
        self._send_json(
            200, {"object": "list", "data": [{"id": ep.model, "object": "model", "owned_by": "ale"}]}
        )

    def do_POST(self) -> None:
        m = _ROUTE.match(self.path.split("?")[0])
        length = int(self.headers.get("Content-Length") or 0)
        if length > self.server.max_body_bytes:
            self.close_connection = True
            self._error(413, f"request body over {self.server.max_body_bytes} bytes")
            return
        raw = self.rfile.read(length)
        if not m or m.group("what") != "chat/completions":
            self._error(404, f"no route {self.path}")
            return
        try:
            ep = self._auth(m.group("ep"))
        except AuthError as e:
            self._error(e.status, str(e), "authentication_error")
            return
        try:
            request = json.loads(raw)
            if not isinstance(request, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as e:
            self._error(400, f"invalid JSON body: {e}")
            return
        try:
            response = self.server.proxy.chat(ep, request)
        except UpstreamError as e:
            self._error(e.status, e.message, "upstream_error" if e.status >= 500 else "invalid_request_error")
            return
        if request.get("stream"):
            include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            self._stream(stream_chunks(response, include_usage))
        else:
            self._send_json(200, response)

    def _stream(self, chunks: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in [*(f"data: {json.dumps(c)}\n\n" for c in chunks), "data: [DONE]\n\n"]:
            data = event.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class ProxyHTTPServer(ThreadingHTTPServer):
    """The HTTP side of a ModelProxy."""

    daemon_threads = True

    def __init__(
        self, addr: tuple[str, int], proxy: ModelProxy, max_body_bytes: int, require_sandbox_header: bool
    ) -> None:
        super().__init__(addr, _Handler)
        self.proxy = proxy
        self.max_body_bytes = max_body_bytes
        self.require_sandbox_header = require_sandbox_header

    def start(self) -> threading.Thread:
        t = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True, name="proxy-http"
        )
        t.start()
        return t
