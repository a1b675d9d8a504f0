"""Fixtures shared by ale-rock's test directories (the proxy, the CLI, the red team): a fake
OpenAI-compatible upstream over real HTTP, one per session, its record and failure script reset for
every test; and a running ModelProxy with a one-worker local cluster behind it."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import pytest


class UpstreamCall(NamedTuple):
    """One request the fake upstream received."""

    path: str
    authorization: str
    body: dict[str, Any]


@dataclass
class FakeOpenAI:
    """``POST …/chat/completions`` answers "echo: <last user message>"; the content "bad" gets a
    400; while ``fail`` > 0 a request gets 429 or 503 (alternating) and decrements it."""

    url: str
    """Base URL, ``http://127.0.0.1:PORT/v1``."""
    seen: list[UpstreamCall] = field(default_factory=list)
    fail: int = 0

    def reset(self) -> None:
        self.seen.clear()
        self.fail = 0

    def answer(self, path: str, authorization: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.seen.append(UpstreamCall(path, authorization, body))
        if self.fail > 0:
            self.fail -= 1
            return (429 if self.fail % 2 else 503), {"error": {"message": "busy"}}
        content = body["messages"][-1]["content"]
        if content == "bad":
            return 400, {"error": {"message": "bad request"}}
        msg = {"role": "assistant", "content": "echo: " + content}
        return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
                     "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}]}  # fmt: skip


@pytest.fixture(scope="session")
def openai_upstream_server() -> Iterator[FakeOpenAI]:
    """The session's fake upstream (module-scoped stacks use this one; reset it if you count calls)."""
    fake: FakeOpenAI | None = None

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def do_POST(self) -> None:
            assert fake is not None
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, out = fake.answer(self.path, self.headers.get("Authorization", ""), body)
            data = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake = FakeOpenAI(f"http://127.0.0.1:{srv.server_address[1]}/v1")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield fake
    srv.shutdown()
    srv.server_close()


@pytest.fixture()
def openai_upstream(openai_upstream_server: FakeOpenAI) -> FakeOpenAI:
    """The fake upstream with no calls recorded and no failures scripted."""
    openai_upstream_server.reset()
    return openai_upstream_server


@contextlib.contextmanager
def _proxy_cluster(workdir: Path, **proxy_config: Any) -> Iterator[tuple[Any, Any]]:
    from ale_rock.local_cluster import LocalCluster, real_worker_argv
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy

    # Agents see the proxy as http://model-proxy/...; each worker's egress gateway maps that host to it.
    proxy = serve_model_proxy(ModelProxyConfig(public_base_url="http://model-proxy:80", **proxy_config))
    try:
        argv = real_worker_argv({"model_proxy_address": proxy.http_url.removeprefix("http://")})
        with LocalCluster(workers=1, workdir=workdir, worker_argv=argv) as cluster:
            yield proxy, cluster
    finally:
        proxy.stop(0)


@pytest.fixture(scope="session")
def proxy_cluster() -> Callable[..., contextlib.AbstractContextManager[tuple[Any, Any]]]:
    """``with proxy_cluster(workdir, **ModelProxyConfig fields) as (proxy, cluster)``: a running
    ModelProxy and a one-worker LocalCluster (bubblewrap sandboxes) whose gateway reaches it."""
    return _proxy_cluster
