"""A FAKE OpenAI-compatible endpoint that refuses every key, over real HTTP on loopback: what a
model server with a wrong API key answers (401, OpenAI's error body). For tests that a refused
model is an error of its own kind, not a failed or a scored episode."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class RefusingOpenAI:
    """A FAKE: every POST gets ``401 invalid_api_key``; ``calls`` counts them. ``url`` is the base
    URL (``http://127.0.0.1:PORT/v1``). A context manager; :meth:`close` stops it."""

    def __init__(self) -> None:
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.calls += 1
                data = json.dumps({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                             "param": None, "code": "invalid_api_key"}}).encode()  # fmt: skip
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}/v1"
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()

    def __enter__(self) -> RefusingOpenAI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
