"""A real HTTP server on loopback for the model tests: each POST's JSON body is answered by a function."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable
from typing import Any

Answer = Callable[[str, Any, dict[str, Any]], tuple[int, Any]]
"""(path, headers, JSON body) -> (status, body); a str body is sent as is, anything else as JSON."""


class JsonServer:
    """Serves ``answer`` on ``url`` (``http://127.0.0.1:PORT/v1``) until :meth:`close`."""

    def __init__(self, answer: Answer) -> None:
        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                status, out = answer(self.path, self.headers, body)
                data = out.encode() if isinstance(out, str) else json.dumps(out).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a: Any) -> None:
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_port}/v1"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()
