"""Keepalive pings vs. the servers' ping policy: long silent calls must survive them.

The bug: the Admin's channel pinged every 30 s, gRPC's default server policy tolerates one ping
per 5 min on a connection sending no data, and after 2 strikes it sends GOAWAY "Too many pings",
cutting off any Exec longer than a few minutes. Here the same race runs at 1 s pings and a 7 s
call; the companion test proves the server options are what makes the difference.
"""

from __future__ import annotations

import ast
import asyncio
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from ale_rock import grpc_options
from ale_rock.grpc_options import channel_options, server_options

SRC = Path(grpc_options.__file__).parent
CALL_S = 7.0  # at 1 s pings a default-policy server gives up after ~4 s (3 strikes)
KEEPALIVE_MS = 1000


def _serve(options: list[tuple[str, int]]) -> Iterator[str]:
    release = threading.Event()

    def silent(_request: bytes, _context: grpc.ServicerContext) -> bytes:
        # Like a quiet Exec: no bytes flow either way until the call ends.
        release.wait(CALL_S)
        return b"done"

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=options)
    handlers = {"Silent": grpc.unary_unary_rpc_method_handler(silent)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Keepalive", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        release.set()
        server.stop(grace=None)


@pytest.fixture
def tuned_server() -> Iterator[str]:
    yield from _serve(server_options(min_ping_interval_ms=KEEPALIVE_MS // 2))


@pytest.fixture
def default_policy_server() -> Iterator[str]:
    yield from _serve([])


async def _silent_call(address: str) -> bytes:
    # grpc.aio, like the Admin's channel to its workers.
    opts = channel_options(keepalive_time_ms=KEEPALIVE_MS, keepalive_timeout_ms=5000)
    async with grpc.aio.insecure_channel(address, options=opts) as channel:
        reply: bytes = await channel.unary_unary("/test.Keepalive/Silent")(b"", timeout=CALL_S + 30)
        return reply


def test_a_long_silent_call_survives_keepalive_pings_with_the_shared_options(tuned_server: str) -> None:
    assert asyncio.run(_silent_call(tuned_server)) == b"done"


def test_the_same_call_is_cut_off_by_a_server_with_grpc_default_ping_policy(default_policy_server: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        asyncio.run(_silent_call(default_policy_server))
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "too many pings" in (err.value.details() or "").lower()


def test_servers_accept_what_channels_send() -> None:
    channel, server = dict(channel_options()), dict(server_options())
    assert server["grpc.http2.min_ping_interval_without_data_ms"] <= channel["grpc.keepalive_time_ms"]
    assert server["grpc.keepalive_permit_without_calls"] == channel["grpc.keepalive_permit_without_calls"]
    assert server["grpc.http2.max_ping_strikes"] >= 1
    assert "grpc.keepalive_time_ms" not in dict(channel_options(keepalive=False))


def _options_source(call: ast.Call, text: str) -> str:
    kw = next((k for k in call.keywords if k.arg == "options"), None)
    return ast.get_source_segment(text, kw.value) or "" if kw else ""


def _grpc_calls() -> Iterator[tuple[str, str, str]]:
    """(file, "server" or "channel", source of its options) of every server and channel in ale_rock."""
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "server" and ast.unparse(node.func.value) in ("grpc", "grpc.aio"):
                    yield str(path.relative_to(SRC)), "server", _options_source(node, text)
                elif node.func.attr in ("insecure_channel", "secure_channel"):
                    yield str(path.relative_to(SRC)), "channel", _options_source(node, text)


def _shared_names(builder: str) -> set[str]:
    """Module-level names bound to a call of ``builder`` anywhere in ale_rock (re-exported ones too)."""
    names = {builder}
    for path in SRC.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and builder in ast.unparse(node.value):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_every_server_and_channel_in_ale_rock_uses_the_shared_options() -> None:
    shared = {"server": _shared_names("server_options"), "channel": _shared_names("channel_options")}
    calls = list(_grpc_calls())
    assert sum(kind == "server" for _, kind, _ in calls) >= 7  # admin, worker, rocklet, envs, ...
    bad = [
        (path, kind, opts)
        for path, kind, opts in calls
        if not any(name in opts for name in shared[kind])
    ]
    assert bad == []
