"""The trainer's side of ale-rock's ModelProxyService (protobuf stays in this file).

An agent-native episode opens a proxy episode (a per-episode OpenAI base URL + key bound to one
sandbox, forwarding to our InferenceService), lets the agent run, closes the episode (the key
dies, so nothing can call the model afterwards), then reads every recorded call with its exact
token ids through ``SubscribeCalls``. Every RPC has a timeout; failures raise :class:`ProxyError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc


class ProxyError(RuntimeError):
    """A ModelProxyService call failed or timed out."""


@dataclass(frozen=True)
class ProxyEpisode:
    """Credentials of one open proxy episode, as the agent gets them."""

    episode_id: str
    base_url: str
    api_key: str


class ModelProxyClient:
    """Open / close proxy episodes and fetch their call records (``ale_rock.proxy.CallRecord``)."""

    def __init__(self, address: str, timeout_s: float = 30.0) -> None:
        from ale_proto.v1 import model_proxy_pb2_grpc

        self.address, self.timeout_s = address, timeout_s
        self._channel = grpc.insecure_channel(address)
        self._stub = model_proxy_pb2_grpc.ModelProxyServiceStub(self._channel)

    def _call(self, what: str, fn: Any, request: Any, timeout_s: float | None = None) -> Any:
        try:
            return fn(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as e:
            raise ProxyError(f"ModelProxy {what} failed: {e.code().name}: {e.details()}") from None

    def open_episode(self, episode_id: str, *, sandbox_id: str, inference_target: str, model: str = "",
                     max_calls: int = 0) -> ProxyEpisode:
        """Open an episode whose calls go to the InferenceService at ``inference_target``."""
        from ale_proto.v1 import model_proxy_pb2

        resp = self._call("OpenEpisode", self._stub.OpenEpisode, model_proxy_pb2.OpenEpisodeRequest(
            episode_id=episode_id, sandbox_id=sandbox_id, upstream=model_proxy_pb2.UPSTREAM_KIND_INFERENCE_SERVICE,
            upstream_target=inference_target, model=model, max_calls=max_calls))
        return ProxyEpisode(episode_id, resp.base_url, resp.api_key)

    def close_episode(self, episode_id: str) -> int:
        """Revoke the episode's key; returns how many calls it recorded."""
        from ale_proto.v1 import model_proxy_pb2

        resp = self._call("CloseEpisode", self._stub.CloseEpisode,
                          model_proxy_pb2.CloseEpisodeRequest(episode_id=episode_id))
        return int(resp.calls)

    def records(self, episode_id: str, timeout_s: float | None = None) -> list[Any]:
        """Every recorded call of a *closed* episode, in call order (the stream ends once drained)."""
        from ale_proto.v1 import model_proxy_pb2
        from ale_rock.proxy.records import CallRecord

        request = model_proxy_pb2.SubscribeCallsRequest(episode_id=episode_id)
        try:
            stream = self._stub.SubscribeCalls(request, timeout=timeout_s or self.timeout_s)
            return sorted((CallRecord.from_pb(m.call) for m in stream), key=lambda r: r.index)
        except grpc.RpcError as e:
            raise ProxyError(f"ModelProxy SubscribeCalls failed: {e.code().name}: {e.details()}") from None

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()
