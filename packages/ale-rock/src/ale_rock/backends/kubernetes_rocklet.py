"""``python -m ale_rock.backends.kubernetes_rocklet``: the Rocklet as a sandbox pod's main process.

It serves RockletService over TCP at the pod IP (``ALE_ROCKLET_HOST``/``ALE_ROCKLET_PORT``), where
other pods could dial it, so every call must carry this sandbox's token in the ``ale-rocklet-token``
metadata (``ALE_ROCKLET_TOKEN``, removed from the environment at start-up; the process is made
undumpable, so the sandbox's commands cannot read it from ``/proc``). Only gRPC health answers
without it: the kubelet's readiness probe sends no metadata, and health tells nothing.
"""

from __future__ import annotations

import hmac
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc

TOKEN_METADATA = "ale-rocklet-token"
_OPEN_PREFIX = "/grpc.health.v1.Health/"


class TokenInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Refuses (UNAUTHENTICATED) every call but health that lacks the sandbox's token."""

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("the Rocklet's token is empty")
        self._token = token.encode()

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None or details.method.startswith(_OPEN_PREFIX):
            return handler
        sent = next((v for k, v in details.invocation_metadata or () if k == TOKEN_METADATA), "")
        if hmac.compare_digest(str(sent).encode(), self._token):
            return handler
        return _deny(handler)


def _deny(handler: Any) -> Any:
    def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "this Rocklet takes calls from its worker only")

    kinds = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }
    make = kinds[(bool(handler.request_streaming), bool(handler.response_streaming))]
    return make(refuse, handler.request_deserializer, handler.response_serializer)


def serve(host: str, port: int, token: str, settings_json: str) -> tuple[Any, grpc.Server]:
    """Start a Rocklet whose only door is ``host:port`` behind the token; returns (rocklet, server)."""
    from ale_proto.serving import add_standard_services, strict_requests
    from ale_proto.v1 import rocklet_pb2_grpc

    from ale_rock.rocklet.server import GRPC_OPTIONS, SERVICE_NAME, Rocklet, RockletSettings

    settings = RockletSettings.from_json(settings_json or "{}")
    os.makedirs(settings.workdir, exist_ok=True)
    # Rocklet binds a Unix socket in its constructor; that server is replaced before it starts, so
    # the socket (in a private temp dir) is never served.
    rocklet = Rocklet(os.path.join(tempfile.mkdtemp(prefix="ale-"), "unused.sock"), settings)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="rocklet"),
        options=GRPC_OPTIONS,
        interceptors=[TokenInterceptor(token), *strict_requests()],
    )
    rocklet_pb2_grpc.add_RockletServiceServicer_to_server(rocklet.servicer, server)
    add_standard_services(server, [SERVICE_NAME])
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if server.add_insecure_port(target) == 0:
        raise OSError(f"cannot listen on {target}")
    rocklet.server = server
    rocklet.start()
    return rocklet, server


def main() -> int:
    """Run until SIGTERM (the kubelet's stop)."""
    from ale_rock.rocklet.server import make_undumpable

    token = os.environ.pop("ALE_ROCKLET_TOKEN", "")
    settings_json = os.environ.pop("ALE_ROCKLET_SETTINGS", "{}")
    make_undumpable()
    rocklet, _ = serve(
        os.environ.get("ALE_ROCKLET_HOST", "0.0.0.0"),
        int(os.environ.get("ALE_ROCKLET_PORT", "7070")),
        token,
        settings_json,
    )
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    rocklet.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
