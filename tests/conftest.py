"""Fixtures shared by the top-level tests: a scripted OpenAI-compatible chat server over real HTTP
(the test decides each reply) and a loader for the scripts in ``bench/`` (not a package)."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

Reply = Callable[[dict[str, Any], str], "str | list[tuple[str, dict[str, Any]]]"]
"""``reply(body, authorization)``: the assistant's text, or its tool calls as ``(name, arguments)`` pairs."""


def _message(said: str | list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    if isinstance(said, str):
        return {"role": "assistant", "content": said}
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
             for i, (name, args) in enumerate(said)]  # fmt: skip
    return {"role": "assistant", "content": "", "tool_calls": calls}


def _chat_handler(reply: Reply) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            msg = _message(reply(body, self.headers.get("Authorization", "")))
            finish = "tool_calls" if msg.get("tool_calls") else "stop"
            out = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                   "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5}}  # fmt: skip
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture(scope="session")
def scripted_chat() -> Iterator[Callable[[Reply], str]]:
    """``scripted_chat(reply) -> base URL`` (``http://127.0.0.1:PORT/v1``): a chat-completions server on
    a free port that answers every request as ``reply`` says (non-streaming); all stop at session end."""
    servers: list[ThreadingHTTPServer] = []

    def start(reply: Reply) -> str:
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _chat_handler(reply))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}/v1"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="session")
def bench_module() -> Callable[[str], ModuleType]:
    """``bench_module("rollout")`` loads ``bench/rollout.py`` as module ``bench_rollout`` (once)."""

    def load(name: str) -> ModuleType:
        key = f"bench_{name}"
        if key in sys.modules:
            return sys.modules[key]
        spec = importlib.util.spec_from_file_location(key, REPO / "bench" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod  # dataclasses look their module up
        spec.loader.exec_module(mod)
        return mod

    return load
