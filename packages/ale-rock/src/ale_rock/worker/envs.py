"""The EnvService hosted by a Worker (``serve_envs``): the same servicer as ``ale_rock.envs.server``
on the worker's port, optionally behind an API key.

Text games run in the worker process, so an RL rollout's episodes die with the worker the way
they would with a real environment worker: clients see a typed error, not a hang.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

import grpc
from ale_proto.errors import abort, make_error
from ale_proto.v1 import common_pb2

from ale_rock.admin.auth import bearer_token
from ale_rock.envs.server import SERVICE_NAME

_PREFIX = f"/{SERVICE_NAME}/"


class EnvKeyInterceptor(grpc.ServerInterceptor):
    """Refuses EnvService calls without ``authorization: Bearer <key>`` (UNAUTHENTICATED, with the
    usual ErrorDetail); every other service of the worker passes untouched.

    An interceptor rather than a servicer subclass, so the EnvService stays exactly the one of
    ``ale_rock.envs.server`` (Batch included).
    """

    def __init__(self, key: str) -> None:
        self._key = key.encode()

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        if not details.method.startswith(_PREFIX):
            return continuation(details)
        token = bearer_token(details.invocation_metadata).encode()
        if token and hmac.compare_digest(token, self._key):
            return continuation(details)
        message = "unknown API key" if token else "missing API key (metadata 'authorization: Bearer KEY')"

        def refuse(request: bytes, context: grpc.ServicerContext) -> bytes:
            abort(context, make_error(common_pb2.ERROR_CODE_UNAUTHENTICATED, message))
            raise AssertionError("abort returned")  # pragma: no cover - context.abort raises

        # Every EnvService method is unary-unary; the request stays raw bytes (never parsed).
        return grpc.unary_unary_rpc_method_handler(refuse)


def env_interceptors(serve_envs: bool, api_key: str) -> list[grpc.ServerInterceptor]:
    """The interceptors a worker's server needs for its EnvService (none without a key)."""
    return [EnvKeyInterceptor(api_key)] if serve_envs and api_key else []

