"""The client of a ModelProxy's control service (``ale.v1.ModelProxyService``, gRPC).

One per process is enough (thread-safe); ``ale eval``, the agent-episode runner and ale-roll's
agent-native rollout all use this one. An episode is opened for one sandbox (a per-episode OpenAI
base URL + key forwarding to an upstream), the agent runs, the episode is closed (the key dies, so
nothing can call the model afterwards), then every recorded call is read back with its exact token
ids. Every RPC has a timeout; a failure raises :class:`ModelProxyClientError` naming the RPC and the status.
Protobuf stays in this file: callers see :class:`ProxyEpisode` and ``CallRecord`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import grpc

if TYPE_CHECKING:
    from ale_rock.proxy.records import CallRecord

Upstream = Literal["inference", "openai", "replay"]
"""Where the proxy forwards an episode's calls: ale-roll's InferenceService (token-exact), an
OpenAI-compatible HTTP API, or a recording."""


class ModelProxyClientError(RuntimeError):
    """A ModelProxyService call failed or timed out; ``code`` is the gRPC status name.

    The client's error; the proxy's own HTTP answers (OpenAI-shaped) are ``ale_rock.proxy.errors.ProxyError``."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ProxyEpisode:
    """Credentials of one open proxy episode, as the agent gets them."""

    episode_id: str
    base_url: str
    """OpenAI base URL (ends in ``/v1``), as the agent reaches the proxy."""
    api_key: str


class ModelProxyClient:
    """Open / close proxy episodes and read their call records."""

    def __init__(self, address: str, timeout_s: float = 30.0) -> None:
        from ale_proto.v1 import model_proxy_pb2_grpc

        from ale_rock.grpc_options import channel_options

        self.address, self.timeout_s = address, timeout_s
        self._channel = grpc.insecure_channel(address, options=channel_options())
        self._stub = model_proxy_pb2_grpc.ModelProxyServiceStub(self._channel)

    def __enter__(self) -> ModelProxyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, what: str, fn: Any, request: Any, timeout_s: float | None) -> Any:
        try:
            return fn(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as e:
            raise _error(what, e) from None

    def open_episode(
        self, episode_id: str, *, sandbox_id: str, upstream: Upstream, target: str, model: str = "",
        max_calls: int = 0, timeout_s: float | None = None,
    ) -> ProxyEpisode:
        """Open an episode bound to ``sandbox_id`` whose calls go to ``target`` (an InferenceService
        address, a base URL or a recording path, by ``upstream``); ``max_calls`` 0 is unlimited."""
        from ale_proto.v1 import model_proxy_pb2

        kinds = {
            "inference": model_proxy_pb2.UPSTREAM_KIND_INFERENCE_SERVICE,
            "openai": model_proxy_pb2.UPSTREAM_KIND_OPENAI,
            "replay": model_proxy_pb2.UPSTREAM_KIND_REPLAY,
        }
        request = model_proxy_pb2.OpenEpisodeRequest(
            episode_id=episode_id, sandbox_id=sandbox_id, upstream=kinds[upstream], upstream_target=target,
            model=model, max_calls=max_calls,
        )  # fmt: skip
        resp = self._call("OpenEpisode", self._stub.OpenEpisode, request, timeout_s)
        return ProxyEpisode(episode_id, resp.base_url, resp.api_key)

    def close_episode(self, episode_id: str, timeout_s: float | None = None) -> int:
        """Revoke the episode's key; returns how many calls it recorded."""
        from ale_proto.v1 import model_proxy_pb2

        request = model_proxy_pb2.CloseEpisodeRequest(episode_id=episode_id)
        return int(self._call("CloseEpisode", self._stub.CloseEpisode, request, timeout_s).calls)

    def records(self, episode_id: str, timeout_s: float | None = None) -> list[CallRecord]:
        """Every recorded call of a *closed* episode, in call order (the stream ends once drained)."""
        from ale_proto.v1 import model_proxy_pb2

        from ale_rock.proxy.records import CallRecord

        request = model_proxy_pb2.SubscribeCallsRequest(episode_id=episode_id)
        try:
            stream = self._stub.SubscribeCalls(request, timeout=timeout_s or self.timeout_s)
            return sorted((CallRecord.from_pb(m.call) for m in stream), key=lambda r: r.index)
        except grpc.RpcError as e:
            raise _error("SubscribeCalls", e) from None

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()


def _error(what: str, e: grpc.RpcError) -> ModelProxyClientError:
    code = e.code().name if hasattr(e, "code") and e.code() is not None else "UNKNOWN"
    details = e.details() if hasattr(e, "details") else str(e)
    return ModelProxyClientError(f"ModelProxy {what} failed: {code}: {details}", code)
