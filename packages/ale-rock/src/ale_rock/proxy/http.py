"""The OpenAI-compatible HTTP endpoint (stdlib ``http.server``, one thread per connection).

Routes: ``POST /v1/chat/completions`` and ``POST /e/<episode_id>/v1/chat/completions`` (the base
URL handed to an episode names it, so a key used under another episode's URL is refused);
``GET .../v1/models``. Streaming replies are server-sent events over chunked encoding, sent as the
upstream produces text. Errors are OpenAI's JSON (``{"error": {"message", "type", "param",
"code"}}``), never a dropped connection. Admin routes (bearer ``admin_token``):
``POST /admin/v1/episodes`` (JSON: episode_id, sandbox_id, upstream, upstream_target, model,
max_calls; all optional) -> ``{episode_id, api_key, base_url, model}``;
``POST /admin/v1/episodes/<id>/close`` -> ``{calls}``; ``GET /admin/v1/episodes/<id>/records``.
"""

from __future__ import annotations

import hmac
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from ale_rock.proxy.core import ModelProxy
from ale_rock.proxy.episode_book import AuthError
from ale_rock.proxy.errors import ProxyError

if TYPE_CHECKING:
    from ale_rock.proxy.admin import EpisodeAdmin

SANDBOX_HEADER = "X-Ale-Sandbox-Id"
"""Stamped by whatever forwards a sandbox's calls (Rocklet / egress gateway), overwriting any the agent sent."""

_ROUTE = re.compile(r"^(?:/e/(?P<ep>[^/]+))?/v1/(?P<what>chat/completions|models)/?$")
_ADMIN = re.compile(r"^/admin/v1/episodes(?:/(?P<ep>[^/]+)/(?P<action>close|records))?/?$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: Nagle + delayed ACK = +40 ms
    server: ProxyHTTPServer
    _streaming = False
    _gone = False

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        pass

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, e: ProxyError) -> None:
        """The error as OpenAI sends it: a JSON status, or, once a stream has started, an event."""
        if not self._streaming:
            self._send_json(e.status, e.body())
            return
        self._event(json.dumps(e.body()))
        self._end_stream()

    def _auth(self, path_episode: str | None) -> Any:
        auth = self.headers.get("Authorization", "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        sandbox = self.headers.get(SANDBOX_HEADER)
        try:
            if sandbox is None and self.server.require_sandbox_header:
                raise AuthError(403, f"calls must come through a Rocklet ({SANDBOX_HEADER} missing)")
            return self.server.proxy.book.authenticate(key, path_episode, sandbox)
        except AuthError as e:
            code = "invalid_api_key" if e.status == 401 else "forbidden"
            raise ProxyError(e.status, str(e), None, code) from None

    def _guarded(self, handler: Any) -> None:
        """Run a route; every failure becomes an HTTP answer (never a dropped connection)."""
        try:
            handler()
        except ProxyError as e:
            self._fail(e)
        except Exception as e:  # a bug must still answer, and the server keeps serving
            self.close_connection = True
            self._fail(ProxyError(500, f"internal error: {type(e).__name__}: {e}", None, "internal_error"))

    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_POST(self) -> None:
        self._guarded(self._post)

    def _get(self) -> None:
        path = self.path.split("?")[0]
        admin = _ADMIN.match(path)
        if admin and admin.group("action") == "records":
            self._admin_records(admin.group("ep"))
            return
        m = _ROUTE.match(path)
        if not m or m.group("what") != "models":
            raise ProxyError(404, f"no route GET {self.path}", None, "not_found")
        ep = self._auth(m.group("ep"))
        self._send_json(
            200, {"object": "list", "data": [{"id": ep.model, "object": "model", "owned_by": "ale"}]}
        )

    def _body(self) -> Any:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise ProxyError(400, "bad Content-Length", None, "invalid_request") from None
        if length > self.server.max_body_bytes:
            self.close_connection = True
            raise ProxyError(413, f"request body over {self.server.max_body_bytes} bytes", None, "body_too_large")
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError as e:
            raise ProxyError(400, f"invalid JSON body: {e}", None, "invalid_json") from None
        if not isinstance(body, dict):
            raise ProxyError(400, "the body must be a JSON object", None, "invalid_json")
        return body

    def _post(self) -> None:
        path = self.path.split("?")[0]
        request = self._body()  # read first, so an error answer leaves the connection usable
        admin = _ADMIN.match(path)
        if admin:
            self._admin(admin.group("ep"), admin.group("action"), request)
            return
        m = _ROUTE.match(path)
        if not m or m.group("what") != "chat/completions":
            raise ProxyError(404, f"no route POST {self.path}", None, "not_found")
        ep = self._auth(m.group("ep"))
        if request.get("stream") is True:
            self.server.proxy.chat(ep, request, self._chunk)
            if not self._streaming:  # nothing was sent (cannot happen: finish always sends)
                self._start_stream()
            self._end_stream()
        else:
            self._send_json(200, self.server.proxy.chat(ep, request))

    # -- streaming (server-sent events over chunked encoding) -------------------------------------
    def _start_stream(self) -> None:
        self._streaming = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _event(self, data: str) -> None:
        if self._gone:
            return
        raw = f"data: {data}\n\n".encode()
        try:
            self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
            self.wfile.flush()
        except OSError:  # the agent went away; the call still completes and is recorded
            self._gone = True
            self.close_connection = True

    def _chunk(self, chunk: dict[str, Any]) -> None:
        if not self._streaming:
            self._start_stream()  # headers wait for the first chunk, so early errors keep their status
        self._event(json.dumps(chunk))

    def _end_stream(self) -> None:
        self._event("[DONE]")
        if not self._gone:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True

    # -- admin routes (episode keys without a gRPC client) -----------------------------------------
    def _admin_auth(self) -> Any:
        admin, token = self.server.admin, self.server.admin_token
        if admin is None or not token:
            raise ProxyError(403, "the admin routes are off (start the proxy with an admin token)", None,
                             "admin_disabled")
        auth = self.headers.get("Authorization", "")
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise ProxyError(401, "invalid admin token", None, "invalid_api_key")
        return admin

    def _admin(self, episode_id: str | None, action: str | None, body: dict[str, Any]) -> None:
        admin = self._admin_auth()
        if episode_id is None:
            args = {k: body.get(k, d) for k, d in _ADMIN_DEFAULTS.items()}
            for k, v in args.items():
                want = type(_ADMIN_DEFAULTS[k])
                if not isinstance(v, want) or isinstance(v, bool):
                    raise ProxyError(400, f"{k} must be a {want.__name__}", k, "invalid_type")
            ep, base_url = admin.open(args["episode_id"], args["sandbox_id"], args["upstream"],
                                      args["upstream_target"], args["model"], args["max_calls"])
            self._send_json(200, {"episode_id": ep.episode_id, "api_key": ep.api_key, "base_url": base_url,
                                  "model": ep.model})
        elif action == "close":
            ep = admin.close(episode_id)
            self._send_json(200, {"episode_id": ep.episode_id, "calls": len(ep.records)})
        else:
            raise ProxyError(404, f"no route POST {self.path}", None, "not_found")

    def _admin_records(self, episode_id: str) -> None:
        self._admin_auth()
        ep = self.server.proxy.book.get(episode_id)
        if ep is None:
            raise ProxyError(404, f"no episode {episode_id!r}", "episode_id", "not_found")
        records = [json.loads(r.to_json()) for r in list(ep.records)]
        self._send_json(200, {"episode_id": episode_id, "closed": ep.closed, "records": records})


_ADMIN_DEFAULTS: dict[str, Any] = {"episode_id": "", "sandbox_id": "", "upstream": "", "upstream_target": "",
                                   "model": "", "max_calls": 0}


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
        self.admin: EpisodeAdmin | None = None
        """Set by serve_model_proxy: opens/closes episodes for the admin routes."""
        self.admin_token = ""

    def start(self) -> threading.Thread:
        t = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True, name="proxy-http"
        )
        t.start()
        return t
