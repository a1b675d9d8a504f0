"""A remote InferenceEngine: ``ale.v1.InferenceService`` behind the same Protocol as local engines.

``generate`` sends a whole batch as one ``GenerateBatch`` call (one round trip, with the client's
timeout); the server batches it together with whatever else is in flight.

Because it implements :class:`~ale_roll.engines.base.InferenceEngine`, a :class:`WeightSync` can push
to a remote engine exactly as to a local one. ``update_weights`` wraps the transfer in the service's
``Pause``/``Resume`` (as vLLM's RL weight update does): generations other clients have running finish
on the old weights, and theirs and everyone's new requests wait for the new ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import grpc
import torch
from ale_proto.v1 import common_pb2, inference_pb2, inference_pb2_grpc

from ale_roll.engines.base import (
    Generation,
    SamplingParams,
    WeightSource,
    WeightSyncError,
    WeightUpdate,
    request_ids_for,
)
from ale_roll.engines.inference_server import DTYPE_CODES
from ale_roll.engines.weight_sync import dedupe_tied, fingerprint
from ale_roll.types import StopReason

_REASONS: dict[int, StopReason] = {common_pb2.STOP_REASON_STOP: StopReason.STOP,
                                   common_pb2.STOP_REASON_LENGTH: StopReason.LENGTH,
                                   common_pb2.STOP_REASON_ABORTED: StopReason.ABORTED}
CHUNK_BYTES = 4 << 20


def _raw(t: torch.Tensor) -> memoryview:
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().data


def sampling_to_proto(params: SamplingParams) -> Any:
    """The engine's sampling parameters as the contract's."""
    sp = inference_pb2.SamplingParams(
        max_tokens=params.max_tokens, temperature=params.temperature, top_p=params.top_p, top_k=params.top_k,
        stop_token_ids=list(params.stop_token_ids), ignore_eos=params.ignore_eos,
    )
    if params.seed is not None:
        sp.seed = params.seed
    return sp


class InferenceClient:
    """Client of one InferenceService; every call has a timeout."""

    def __init__(self, address: str, *, token: str | None = None, timeout_s: float = 300.0) -> None:
        self.channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 << 20),
                                                               ("grpc.max_send_message_length", 64 << 20)])
        self.stub = inference_pb2_grpc.InferenceServiceStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout_s = timeout_s

    def close(self) -> None:
        self.channel.close()

    @property
    def max_model_len(self) -> int:
        """0: the InferenceService checks lengths on its side (its GetModelInfo reports them)."""
        return 0

    @property
    def policy_version(self) -> int:
        return int(self.model_info().policy_version)

    def model_info(self) -> Any:
        return self.stub.GetModelInfo(inference_pb2.GetModelInfoRequest(), timeout=self.timeout_s, metadata=self.metadata)

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 request_ids: Sequence[str] | None = None) -> list[Generation]:
        ids = request_ids_for(prompts, request_ids)
        if not prompts:
            return []
        sp = sampling_to_proto(params)
        req = inference_pb2.GenerateBatchRequest(requests=[
            inference_pb2.GenerateRequest(request_id=rid, prompt_token_ids=list(p), sampling=sp)
            for rid, p in zip(ids, prompts)])
        resp = self.stub.GenerateBatch(req, timeout=self.timeout_s, metadata=self.metadata)
        if len(resp.results) != len(ids):
            raise RuntimeError(f"GenerateBatch returned {len(resp.results)} results for {len(ids)} requests")
        return [Generation(r.request_id, list(r.token_ids), list(r.logprobs), _REASONS.get(r.stop_reason, StopReason.STOP),
                           int(r.policy_version), list(p)) for r, p in zip(resp.results, prompts)]

    def abort(self, request_id: str) -> bool:
        resp = self.stub.Abort(inference_pb2.AbortRequest(request_ids=[request_id]), timeout=self.timeout_s,
                               metadata=self.metadata)
        return resp.aborted > 0

    def pause(self, drain_timeout_s: float = 0.0) -> int:
        """Hold the service's generation (running requests finish first); returns how many it waited for."""
        resp = self.stub.Pause(inference_pb2.PauseRequest(drain_timeout_s=drain_timeout_s), timeout=self.timeout_s,
                               metadata=self.metadata)
        return int(resp.drained)

    def resume(self) -> bool:
        """Release what :meth:`pause` held; False when the service was not paused."""
        resp = self.stub.Resume(inference_pb2.ResumeRequest(), timeout=self.timeout_s, metadata=self.metadata)
        return bool(resp.resumed)

    def update_weights(self, weights: WeightSource, version: int) -> WeightUpdate:
        try:
            self.pause()
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            # A service from before Pause/Resume: its UpdateWeights alone is what it offers.
            return self._update_weights(weights, version)
        try:
            return self._update_weights(weights, version)
        finally:
            self.resume()

    def _update_weights(self, weights: WeightSource, version: int) -> WeightUpdate:
        if not isinstance(weights, Mapping):
            header = inference_pb2.WeightUpdateHeader(policy_version=version, checkpoint_path=str(weights))
            resp = self.stub.UpdateWeights(iter([inference_pb2.UpdateWeightsRequest(header=header)]),
                                           timeout=self.timeout_s, metadata=self.metadata)
            return WeightUpdate(int(resp.policy_version), resp.sha256, int(resp.tensors))
        tensors = dedupe_tied(weights)
        names = sorted(tensors)
        sha = hashlib.sha256()
        for n in names:
            sha.update(_raw(tensors[n]))
        digest = sha.hexdigest()

        def stream() -> Iterator[Any]:
            yield inference_pb2.UpdateWeightsRequest(
                header=inference_pb2.WeightUpdateHeader(policy_version=version, sha256=digest))
            for n in names:
                t = tensors[n]
                yield inference_pb2.UpdateWeightsRequest(tensor=inference_pb2.TensorHeader(
                    name=n, shape=list(t.shape), dtype=DTYPE_CODES[t.dtype]))
                raw = _raw(t)
                for i in range(0, len(raw), CHUNK_BYTES):
                    yield inference_pb2.UpdateWeightsRequest(chunk=bytes(raw[i:i + CHUNK_BYTES]))

        resp = self.stub.UpdateWeights(stream(), timeout=self.timeout_s, metadata=self.metadata)
        if resp.sha256 != digest or resp.policy_version != version:
            raise WeightSyncError(f"server loaded sha256 {resp.sha256} v{resp.policy_version}, sent {digest} v{version}")
        # The server proved it received these exact bytes; report them in the sync's own fingerprint.
        return WeightUpdate(version, fingerprint(tensors), int(resp.tensors))
