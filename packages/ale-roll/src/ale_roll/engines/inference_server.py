"""The contract's ``ale.v1.InferenceService`` over any InferenceEngine (vLLM or HF).

Protobuf types stay in this file and in ``inference_client.py``; the engine sees plain values.
Weight updates arrive as a stream of tensor chunks; the server recomputes the SHA-256 over the raw
bytes in stream order and refuses the update (INVALID_ARGUMENT) when it differs from the header's.

``Generate`` answers with one final message even when ``stream`` is set: the engines complete a
request before returning it (token ids are authoritative either way).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import torch
from ale_proto.errors import abort, make_error
from ale_proto.v1 import common_pb2, inference_pb2, inference_pb2_grpc

from ale_roll.engines.base import InferenceEngine, SamplingParams, WeightSyncError

SERVICE_NAME = "ale.v1.InferenceService"

_STOP = {"stop": common_pb2.STOP_REASON_STOP, "length": common_pb2.STOP_REASON_LENGTH,
         "abort": common_pb2.STOP_REASON_ABORTED}
_DTYPES = {inference_pb2.D_TYPE_FLOAT32: torch.float32, inference_pb2.D_TYPE_FLOAT16: torch.float16,
           inference_pb2.D_TYPE_BFLOAT16: torch.bfloat16}
DTYPE_CODES = {v: k for k, v in _DTYPES.items()}


def sampling_from_proto(p: Any, default_max_tokens: int) -> SamplingParams:
    """Contract sampling parameters to the engine's (0 means "off"/"default" in the contract)."""
    if p.stop:
        raise ValueError("stop strings are not supported: pass stop_token_ids")
    return SamplingParams(
        max_tokens=p.max_tokens or default_max_tokens,
        temperature=p.temperature,
        top_p=p.top_p if 0 < p.top_p < 1 else 1.0,
        top_k=max(p.top_k, 0),
        stop_token_ids=tuple(p.stop_token_ids),
        ignore_eos=p.ignore_eos,
        seed=p.seed if p.HasField("seed") else None,
    )


class InferenceServicer(inference_pb2_grpc.InferenceServiceServicer):
    """Serves one engine (and its tokenizer, for templating and detokenizing)."""

    def __init__(self, engine: InferenceEngine, tokenizer: Any, *, model_name: str = "ale-policy",
                 backend: str = "", max_model_len: int = 0, token: str | None = None,
                 default_max_tokens: int = 256) -> None:
        self.engine, self.tokenizer, self.model_name = engine, tokenizer, model_name
        self.backend = backend or type(engine).__name__.removesuffix("InferenceEngine").lower()
        self.max_model_len, self.token, self.default_max_tokens = max_model_len, token, default_max_tokens
        self._lock = threading.Lock()
        self._running: set[str] = set()

    def _auth(self, context: Any) -> None:
        if self.token is None:
            return
        md = dict(context.invocation_metadata())
        if md.get("authorization") != f"Bearer {self.token}":
            abort(context, make_error(common_pb2.ERROR_CODE_UNAUTHENTICATED,
                                      "missing or wrong 'authorization: Bearer TOKEN' metadata"))

    def Generate(self, request: Any, context: Any) -> Iterator[Any]:
        self._auth(context)
        if request.min_policy_version and self.engine.policy_version < request.min_policy_version:
            abort(context, make_error(common_pb2.ERROR_CODE_FAILED_PRECONDITION,
                                      f"policy version {self.engine.policy_version} < {request.min_policy_version}",
                                      "min_policy_version"))
        try:
            params = sampling_from_proto(request.sampling, self.default_max_tokens)
        except ValueError as e:
            abort(context, make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, str(e), "sampling.stop"))
        rid = request.request_id or uuid.uuid4().hex
        with self._lock:
            self._running.add(rid)
        # A client that goes away aborts its request.
        context.add_callback(lambda: self.engine.abort(rid))
        try:
            gen = self.engine.generate([list(request.prompt_token_ids)], params, [rid])[0]
        finally:
            with self._lock:
                self._running.discard(rid)
        yield inference_pb2.GenerateResponse(
            request_id=rid, token_ids=gen.token_ids, logprobs=gen.logprobs, finished=True,
            stop_reason=_STOP[gen.stop_reason], policy_version=gen.policy_version,
            text=self.tokenizer.decode(gen.token_ids) if self.tokenizer is not None else "",
        )

    def Abort(self, request: Any, context: Any) -> Any:
        self._auth(context)
        with self._lock:
            ids = list(request.request_ids) or list(self._running)
        return inference_pb2.AbortResponse(aborted=sum(bool(self.engine.abort(r)) for r in ids))

    def UpdateWeights(self, request_iterator: Iterator[Any], context: Any) -> Any:
        self._auth(context)
        t0 = time.perf_counter()
        header: Any = None
        tensors: dict[str, torch.Tensor] = {}
        sha = hashlib.sha256()
        current: Any = None
        chunks: list[bytes] = []

        def finish_tensor() -> None:
            if current is None:
                return
            data = bytearray(b"".join(chunks))
            t = torch.frombuffer(data, dtype=_DTYPES[current.dtype]) if data else torch.empty(0, dtype=_DTYPES[current.dtype])
            tensors[current.name] = t.reshape(tuple(current.shape))

        for msg in request_iterator:
            part = msg.WhichOneof("part")
            if part == "header":
                header = msg.header
            elif part == "tensor":
                finish_tensor()
                current, chunks = msg.tensor, []
            elif part == "chunk":
                sha.update(msg.chunk)
                chunks.append(msg.chunk)
        finish_tensor()
        if header is None:
            abort(context, make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, "the first message must be a header", "header"))
        if header.checkpoint_path:
            source: Any = _safetensors_in(Path(header.checkpoint_path))
        else:
            if header.sha256 and sha.hexdigest() != header.sha256:
                abort(context, make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT,
                                          f"sha256 of the received bytes {sha.hexdigest()} != header {header.sha256}",
                                          "header.sha256"))
            source = tensors
        if header.abort_running:
            self.Abort(inference_pb2.AbortRequest(), context)
        try:
            update = self.engine.update_weights(source, int(header.policy_version))
        except (WeightSyncError, KeyError, RuntimeError) as e:
            abort(context, make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, f"weights not loaded: {e}"))
        return inference_pb2.UpdateWeightsResponse(
            policy_version=update.version, sha256=sha.hexdigest() if not header.checkpoint_path else update.fingerprint,
            tensors=update.num_tensors, load_s=time.perf_counter() - t0,
        )

    def GetModelInfo(self, request: Any, context: Any) -> Any:
        self._auth(context)
        tok = self.tokenizer
        eos = getattr(tok, "eos_token_id", None)
        return inference_pb2.GetModelInfoResponse(
            model=self.model_name, policy_version=self.engine.policy_version, max_model_len=self.max_model_len,
            eos_token_ids=[eos] if eos is not None else [], chat_template=getattr(tok, "chat_template", "") or "",
            backend=self.backend,
        )

    def ApplyChatTemplate(self, request: Any, context: Any) -> Any:
        self._auth(context)
        try:
            messages = json.loads(request.messages_json)
            tools = json.loads(request.tools_json) if request.tools_json else None
        except json.JSONDecodeError as e:
            abort(context, make_error(common_pb2.ERROR_CODE_INVALID_ARGUMENT, f"bad JSON: {e}", "messages_json"))
        text = self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                                  add_generation_prompt=request.add_generation_prompt)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return inference_pb2.ApplyChatTemplateResponse(token_ids=ids, text=text)

    def Detokenize(self, request: Any, context: Any) -> Any:
        self._auth(context)
        return inference_pb2.DetokenizeResponse(
            text=self.tokenizer.decode(list(request.token_ids), skip_special_tokens=request.skip_special_tokens))


def _safetensors_in(path: Path) -> str:
    if path.is_file():
        return str(path)
    files = sorted(path.glob("*.safetensors"))
    if len(files) != 1:
        raise FileNotFoundError(f"expected one .safetensors file in {path}, found {len(files)}")
    return str(files[0])


def serve(servicer: InferenceServicer, address: str = "127.0.0.1:0", max_workers: int = 16) -> tuple[grpc.Server, int]:
    """Start a gRPC server (with health checking and reflection); returns it and its port."""
    from ale_proto.serving import add_standard_services

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers),
                         options=[("grpc.max_receive_message_length", 64 << 20)])
    inference_pb2_grpc.add_InferenceServiceServicer_to_server(servicer, server)
    add_standard_services(server, [SERVICE_NAME])
    port = server.add_insecure_port(address)
    server.start()
    return server, port
