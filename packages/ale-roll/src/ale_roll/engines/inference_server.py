"""The contract's ``ale.v1.InferenceService`` over any InferenceEngine (vLLM or HF).

Protobuf types stay in this file and in ``inference_client.py``; the engine sees plain values.
Weight updates arrive as a stream of tensor chunks; the server recomputes the SHA-256 over the raw
bytes in stream order and refuses the update (INVALID_ARGUMENT) when it differs from the header's.

Serving: a ``grpc.aio`` server on its own event-loop thread (:func:`serve`,
:class:`~ale_roll.engines.loop_server.LoopServer`). The calls that only
wait for the batcher (``Generate``, ``GenerateBatch``) and the quick ones (model info, templating,
detokenizing, ``Abort``) are coroutines on that loop: a waiting call holds no thread, and one call
costs ~30% less CPU than on a thread-pool server (``bench/grpc_percall.py``). The calls that block
(``UpdateWeights``' load, ``Pause``' drain, ``Resume``) run in a worker thread.

Concurrency: every ``Generate`` stream and every ``GenerateBatch`` call goes through one
:class:`~ale_roll.engines.batcher.MicroBatcher`, which gathers concurrent requests into few
``engine.generate`` calls (continuous batching). The servicer owns one over the engine it is given,
or serves a batcher it is handed — the trainer's rollout batcher in agent-native mode
(``InferenceServicer(generator.batcher, tokenizer)``), so the agents' calls and the in-process
episodes share one queue. ``max_tokens`` is clamped to what the model's context leaves after the
prompt, so a client asking for more (the ModelProxy passes large values) never makes a small model
run past its positions.

``Pause``/``Resume`` hold the batcher around a weight sync (running calls finish first; held
requests fail with UNAVAILABLE after ``pause_timeout_s``); ``UpdateWeights`` also loads inside a
pause, so a sender that skips ``Pause`` still never races a generation.

``Generate`` with ``stream`` set sends the tokens as they are sampled where the engine can report
them (:class:`~ale_roll.engines.base.TokenStreamingEngine`: the HF and vLLM engines): each message
holds the tokens sampled since the previous one, with their logprobs, and the last message
(``finished``) holds whatever was not sent yet (usually none) and the stop reason. Where the engine
cannot (a remote one), or the request has stop strings, the reply is one final message. The concatenated ids and
logprobs are the same either way.

Stop strings are applied here, after generation (the engines stop on token ids only): the
completion ends with the first token whose text completes a stop string — that token is kept, as
vLLM does, so the ids stay exactly what the model sampled — and the returned ``text`` ends just
before the stop string. Generation itself runs on to ``max_tokens`` or a stop token.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import AsyncIterator
from concurrent import futures
from pathlib import Path
from typing import Any

import torch
from ale_proto.errors import abort, make_error
from ale_proto.v1 import common_pb2, inference_pb2, inference_pb2_grpc

from ale_roll.engines.base import Generation, InferenceEngine, SamplingParams, WeightSyncError
from ale_roll.engines.batcher import BatcherPaused, MicroBatcher
from ale_roll.engines.loop_server import LoopServer
from ale_roll.types import StopReason

SERVICE_NAME = "ale.v1.InferenceService"

_STOP = {StopReason.STOP: common_pb2.STOP_REASON_STOP, StopReason.LENGTH: common_pb2.STOP_REASON_LENGTH,
         StopReason.ABORTED: common_pb2.STOP_REASON_ABORTED}
_DTYPES = {inference_pb2.D_TYPE_FLOAT32: torch.float32, inference_pb2.D_TYPE_FLOAT16: torch.float16,
           inference_pb2.D_TYPE_BFLOAT16: torch.bfloat16}
DTYPE_CODES = {v: k for k, v in _DTYPES.items()}


class Rejected(Exception):
    """A call refused before or while it runs; the handler aborts it with ``detail``.

    Raised, not aborted in place: on the asyncio server aborting is a coroutine, so the checks
    shared by every method raise and each handler awaits the abort in one place.
    """

    def __init__(self, code: common_pb2.ErrorCode, message: str, field: str = "") -> None:
        super().__init__(message)
        self.detail = make_error(code, message, field)


def _rejecting(method: Any) -> Any:
    """A unary coroutine handler whose :class:`Rejected` becomes the call's error."""

    async def handler(self: Any, request: Any, context: Any) -> Any:
        try:
            return await method(self, request, context)
        except Rejected as e:
            await abort(context, e.detail)

    handler.__name__, handler.__doc__ = method.__name__, method.__doc__
    return handler


def sampling_from_proto(p: Any, default_max_tokens: int) -> SamplingParams:
    """Contract sampling parameters to the engine's (0 means "off"/"default" in the contract).

    Stop strings are not part of the engine's parameters: the servicer applies them afterwards.
    """
    return SamplingParams(
        max_tokens=p.max_tokens or default_max_tokens,
        temperature=p.temperature,
        top_p=p.top_p if 0 < p.top_p < 1 else 1.0,
        top_k=max(p.top_k, 0),
        stop_token_ids=tuple(p.stop_token_ids),
        ignore_eos=p.ignore_eos,
        seed=p.seed if p.HasField("seed") else None,
    )


def stop_at_strings(token_ids: list[int], stops: list[str], decode: Any) -> tuple[int, str] | None:
    """``(n, text)``: the shortest prefix of ``token_ids`` whose text holds a stop string, and that
    text cut just before the stop string; None when no stop string occurs."""
    if not stops or not any(s in decode(token_ids) for s in stops):
        return None
    lo, hi = 1, len(token_ids)  # the decoded text of a prefix is a prefix of the text: bisect
    while lo < hi:
        mid = (lo + hi) // 2
        if any(s in decode(token_ids[:mid]) for s in stops):
            hi = mid
        else:
            lo = mid + 1
    text = decode(token_ids[:lo])
    return lo, text[:min(text.find(s) for s in stops if s in text)]


class InferenceServicer(inference_pb2_grpc.InferenceServiceServicer):
    """Serves one engine (and its tokenizer, for templating, detokenizing and stop strings).

    ``engine`` is an InferenceEngine (the servicer batches in front of it) or a
    :class:`~ale_roll.engines.batcher.MicroBatcher` to share (its owner closes it; its own
    ``max_model_len`` is used). ``max_model_len`` 0 takes the engine's own context length when it
    exposes one. ``batch_window_s`` / ``max_batch`` / ``pause_timeout_s`` tune an owned batcher
    (see :mod:`ale_roll.engines.batcher`). A ``Pause`` nobody resumes lapses after ``max_pause_s``
    (a sender that died mid-sync must not wedge every other client).
    """

    def __init__(self, engine: InferenceEngine | MicroBatcher, tokenizer: Any, *, model_name: str = "ale-policy",
                 backend: str = "", max_model_len: int = 0, token: str | None = None,
                 default_max_tokens: int = 256, batch_window_s: float = 0.0, max_batch: int = 256,
                 pause_timeout_s: float = 60.0, max_pause_s: float = 600.0) -> None:
        self.own_batcher = not isinstance(engine, MicroBatcher)
        if isinstance(engine, MicroBatcher):
            self.batcher, self.engine = engine, engine.engine
            self.max_model_len = max_model_len or engine.max_model_len
        else:
            self.engine = engine
            self.max_model_len = max_model_len or engine.max_model_len
            self.batcher = MicroBatcher(engine, max_model_len=self.max_model_len, window_s=batch_window_s,
                                        max_batch=max_batch, pause_timeout_s=pause_timeout_s)
        self.tokenizer, self.model_name = tokenizer, model_name
        self.backend = backend or type(self.engine).__name__.removesuffix("InferenceEngine").lower()
        self.token, self.default_max_tokens = token, default_max_tokens
        self._params_cache: dict[bytes, SamplingParams] = {}
        self._pause_lock = threading.Lock()
        self._rpc_paused = False  # one Pause RPC holds the batcher until Resume (Pause is idempotent)
        self.max_pause_s = max_pause_s
        self._lapse: threading.Timer | None = None

    def close(self) -> None:
        """Abort whatever is queued or running and stop the batching thread (an owned batcher only;
        a shared one loses this servicer's hold, if any)."""
        self._release()
        if self.own_batcher:
            self.batcher.close()

    def _auth(self, context: Any) -> None:
        if self.token is None:
            return
        md = dict(context.invocation_metadata() or ())
        if md.get("authorization") != f"Bearer {self.token}":
            raise Rejected(common_pb2.ERROR_CODE_UNAUTHENTICATED,
                           "missing or wrong 'authorization: Bearer TOKEN' metadata")

    def _admit(self, request: Any, field: str = "") -> tuple[str, list[int], SamplingParams]:
        """Check one request's preconditions; returns its id, prompt and engine sampling params."""
        if request.min_policy_version and self.engine.policy_version < request.min_policy_version:
            raise Rejected(common_pb2.ERROR_CODE_FAILED_PRECONDITION,
                           f"policy version {self.engine.policy_version} < {request.min_policy_version}",
                           f"{field}min_policy_version")
        if request.sampling.stop and self.tokenizer is None:
            raise Rejected(common_pb2.ERROR_CODE_INVALID_ARGUMENT,
                           "stop strings need a tokenizer on the server: pass stop_token_ids", f"{field}sampling.stop")
        prompt = list(request.prompt_token_ids)
        params = self._params(request.sampling)
        try:
            max_tokens = self._clamp(len(prompt), params.max_tokens)
        except ValueError as e:
            raise Rejected(common_pb2.ERROR_CODE_INVALID_ARGUMENT, str(e), f"{field}prompt_token_ids") from None
        if max_tokens != params.max_tokens:  # (a shared batcher may not clamp: its context may be unset)
            params = dataclasses.replace(params, max_tokens=max_tokens)
        return request.request_id or self.batcher.new_id(), prompt, params

    def _clamp(self, prompt_len: int, max_tokens: int) -> int:
        if not self.max_model_len:
            return max_tokens
        room = self.max_model_len - prompt_len
        if room <= 0:
            raise ValueError(f"the prompt has {prompt_len} tokens; the model's context is {self.max_model_len}")
        return min(max_tokens, room)

    def _params(self, sampling: Any) -> SamplingParams:
        # A batch's requests usually share one sampling message: convert each distinct one once.
        raw = sampling.SerializeToString(deterministic=True)
        params = self._params_cache.get(raw)
        if params is None:
            params = sampling_from_proto(sampling, self.default_max_tokens)
            if len(self._params_cache) > 1024:
                self._params_cache.clear()
            self._params_cache[raw] = params
        return params

    def _response(self, gen: Generation, stops: list[str]) -> Any:
        toks, lps, reason = gen.token_ids, gen.logprobs, gen.stop_reason
        text = None
        hit = stop_at_strings(toks, stops, self.tokenizer.decode) if stops else None
        if hit is not None:
            n, text = hit
            toks, lps, reason = toks[:n], lps[:n], StopReason.STOP
        if text is None:
            text = self.tokenizer.decode(toks) if self.tokenizer is not None else ""
        return inference_pb2.GenerateResponse(
            request_id=gen.request_id, token_ids=toks, logprobs=lps, finished=True,
            stop_reason=_STOP[reason], policy_version=gen.policy_version, text=text)

    async def _results(self, futs: list[futures.Future[Generation]], ids: list[str]) -> list[Generation]:
        """Await the batcher's futures on this loop (no thread waits); a caller that goes away
        (cancelled, deadline) aborts what it still waits for."""
        try:
            await _all_done(futs)
        except asyncio.CancelledError:
            for rid in ids:  # (the batcher ignores the ones that already finished)
                self.batcher.abort(rid)
            raise
        try:
            return [f.result() for f in futs]
        except BatcherPaused as e:  # held past the pause timeout: the client may retry later
            raise Rejected(common_pb2.ERROR_CODE_UNAVAILABLE, str(e)) from None
        except Exception as e:  # the engine failed: tell the client why instead of UNKNOWN
            raise Rejected(common_pb2.ERROR_CODE_INTERNAL, f"generation failed: {e!r}") from None

    async def Generate(self, request: Any, context: Any) -> AsyncIterator[Any]:
        stops = list(request.sampling.stop)
        tokens: asyncio.Queue[tuple[int, float] | None] | None = None
        try:
            self._auth(context)
            rid, prompt, params = self._admit(request)
            # Token by token where asked and possible: a stop string is found only in the finished
            # text (see the module doc), so such a request is answered whole.
            if request.stream and not stops and self.batcher.streams_tokens:
                queue: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()
                tokens = queue
                loop = asyncio.get_running_loop()

                def put(item: tuple[int, float] | None) -> None:  # (on the batcher's thread)
                    with contextlib.suppress(RuntimeError):  # the server's loop is gone
                        loop.call_soon_threadsafe(queue.put_nowait, item)

            try:
                fut = self.batcher.submit(prompt, params, rid,
                                          on_token=(lambda t, lp: put((t, lp))) if tokens is not None else None)
            except ValueError as e:
                raise Rejected(common_pb2.ERROR_CODE_ALREADY_EXISTS, str(e), "request_id") from None
        except Rejected as e:
            await abort(context, e.detail)
        sent = 0
        if tokens is not None:
            fut.add_done_callback(lambda _: put(None))  # after the last token (same thread, in order)
            async for ids, lps in self._stream(tokens, rid):
                sent += len(ids)
                yield inference_pb2.GenerateResponse(request_id=rid, token_ids=ids, logprobs=lps,
                                                     policy_version=self.engine.policy_version,
                                                     text=self.tokenizer.decode(ids) if self.tokenizer else "")
        try:
            (gen,) = await self._results([fut], [rid])
        except Rejected as e:
            await abort(context, e.detail)
        final = self._response(gen, stops)
        if sent:  # the last message holds what was not streamed (usually nothing)
            del final.token_ids[:sent], final.logprobs[:sent]
            final.text = self.tokenizer.decode(list(final.token_ids)) if self.tokenizer else ""
        yield final

    async def _stream(self, tokens: asyncio.Queue[tuple[int, float] | None], rid: str
                      ) -> AsyncIterator[tuple[list[int], list[float]]]:
        """The reported tokens, as they come (whatever has queued up goes in one message), until
        the request ends; a caller that leaves aborts the request."""
        while True:
            try:
                item = await tokens.get()
            except asyncio.CancelledError:
                self.batcher.abort(rid)
                raise
            ids: list[int] = []
            lps: list[float] = []
            while item is not None:
                ids.append(item[0])
                lps.append(item[1])
                if tokens.empty():
                    break
                item = tokens.get_nowait()
            if ids:
                yield ids, lps
            if item is None:
                return

    @_rejecting
    async def GenerateBatch(self, request: Any, context: Any) -> Any:
        self._auth(context)
        admitted = [self._admit(r, f"requests[{i}].") for i, r in enumerate(request.requests)]
        ids = [a[0] for a in admitted]
        try:
            futs = self.batcher.submit_many([a[1] for a in admitted], [a[2] for a in admitted], ids)
        except ValueError as e:
            raise Rejected(common_pb2.ERROR_CODE_ALREADY_EXISTS, str(e), "requests.request_id") from None
        gens = await self._results(futs, ids)
        return inference_pb2.GenerateBatchResponse(results=[
            self._response(g, list(r.sampling.stop)) for g, r in zip(gens, request.requests)])

    def _abort_requests(self, ids: list[str]) -> int:
        return sum(self.batcher.abort(r) for r in ids or self.batcher.running())

    @_rejecting
    async def Abort(self, request: Any, context: Any) -> Any:
        self._auth(context)
        return inference_pb2.AbortResponse(aborted=self._abort_requests(list(request.request_ids)))

    @_rejecting
    async def UpdateWeights(self, request_iterator: AsyncIterator[Any], context: Any) -> Any:
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

        async for msg in request_iterator:
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
            raise Rejected(common_pb2.ERROR_CODE_INVALID_ARGUMENT, "the first message must be a header", "header")
        if header.checkpoint_path:
            source: Any = _safetensors_in(Path(header.checkpoint_path))
        else:
            if header.sha256 and sha.hexdigest() != header.sha256:
                raise Rejected(common_pb2.ERROR_CODE_INVALID_ARGUMENT,
                               f"sha256 of the received bytes {sha.hexdigest()} != header {header.sha256}",
                               "header.sha256")
            source = tensors
        if header.abort_running:
            self._abort_requests([])
        update = await asyncio.to_thread(self._load, source, int(header.policy_version))
        return inference_pb2.UpdateWeightsResponse(
            policy_version=update.version, sha256=sha.hexdigest() if not header.checkpoint_path else update.fingerprint,
            tensors=update.num_tensors, load_s=time.perf_counter() - t0,
        )

    def _load(self, source: Any, version: int) -> Any:
        try:
            with self.batcher.paused():  # running calls finish on the old weights; new ones wait
                return self.engine.update_weights(source, version)
        except (WeightSyncError, KeyError, RuntimeError) as e:
            raise Rejected(common_pb2.ERROR_CODE_INVALID_ARGUMENT, f"weights not loaded: {e}") from None

    @_rejecting
    async def Pause(self, request: Any, context: Any) -> Any:
        self._auth(context)
        return await asyncio.to_thread(self._pause, request.drain_timeout_s or None)

    def _pause(self, drain_timeout_s: float | None) -> Any:
        with self._pause_lock:
            if self._rpc_paused:
                return inference_pb2.PauseResponse(drained=0, newly_paused=False)
            try:
                drained = self.batcher.pause(drain_timeout_s)
            except TimeoutError as e:
                raise Rejected(common_pb2.ERROR_CODE_DEADLINE_EXCEEDED, f"not paused: {e}", "drain_timeout_s") from None
            self._rpc_paused = True
            self._lapse = threading.Timer(self.max_pause_s, self._release)
            self._lapse.daemon = True
            self._lapse.start()
        return inference_pb2.PauseResponse(drained=drained, newly_paused=True)

    @_rejecting
    async def Resume(self, request: Any, context: Any) -> Any:
        self._auth(context)
        return inference_pb2.ResumeResponse(resumed=await asyncio.to_thread(self._release))

    def _release(self) -> bool:
        """Undo the RPC pause (Resume, its lapse, or close); False when there was none."""
        with self._pause_lock:
            was, self._rpc_paused = self._rpc_paused, False
            if self._lapse is not None:
                self._lapse.cancel()
                self._lapse = None
            if was:
                self.batcher.resume()
        return was

    @_rejecting
    async def GetModelInfo(self, request: Any, context: Any) -> Any:
        self._auth(context)
        tok = self.tokenizer
        eos = getattr(tok, "eos_token_id", None)
        return inference_pb2.GetModelInfoResponse(
            model=self.model_name, policy_version=self.engine.policy_version, max_model_len=self.max_model_len,
            eos_token_ids=[eos] if eos is not None else [], chat_template=getattr(tok, "chat_template", "") or "",
            backend=self.backend,
        )

    @_rejecting
    async def ApplyChatTemplate(self, request: Any, context: Any) -> Any:
        self._auth(context)
        try:
            messages = json.loads(request.messages_json)
            tools = json.loads(request.tools_json) if request.tools_json else None
        except json.JSONDecodeError as e:
            raise Rejected(common_pb2.ERROR_CODE_INVALID_ARGUMENT, f"bad JSON: {e}", "messages_json") from None
        text = self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                                  add_generation_prompt=request.add_generation_prompt)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return inference_pb2.ApplyChatTemplateResponse(token_ids=ids, text=text)

    @_rejecting
    async def Detokenize(self, request: Any, context: Any) -> Any:
        self._auth(context)
        return inference_pb2.DetokenizeResponse(
            text=self.tokenizer.decode(list(request.token_ids), skip_special_tokens=request.skip_special_tokens))


async def _all_done(futs: list[futures.Future[Generation]]) -> None:
    """Wait until every future is done, woken once: the batcher resolves a batch's futures one
    after another on its thread, and one loop wake-up per future (``asyncio.wrap_future`` each)
    cost a ``GenerateBatch`` of 256 about 10% of its throughput. The futures are never cancelled
    from here (a caller that leaves aborts its requests instead)."""
    if not futs:
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    left = [len(futs)]
    lock = threading.Lock()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    def one_done(_: Any) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
                loop.call_soon_threadsafe(wake)

    for f in futs:
        f.add_done_callback(one_done)
    await done


def _safetensors_in(path: Path) -> str:
    if path.is_file():
        return str(path)
    files = sorted(path.glob("*.safetensors"))
    if len(files) != 1:
        raise FileNotFoundError(f"expected one .safetensors file in {path}, found {len(files)}")
    return str(files[0])


def serve(servicer: InferenceServicer, address: str = "127.0.0.1:0") -> tuple[LoopServer, int]:
    """Start the InferenceService (with health checking and reflection) on ``address``, on its own
    event-loop thread; returns the running server and its port."""
    from ale_proto.serving import add_standard_services

    def register(server: Any) -> None:
        inference_pb2_grpc.add_InferenceServiceServicer_to_server(servicer, server)
        add_standard_services(server, [SERVICE_NAME])

    server = LoopServer(register, address, name="inference-grpc")
    return server, server.port
