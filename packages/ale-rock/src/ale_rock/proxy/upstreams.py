"""Where the proxy sends a chat call: ale-roll's InferenceService (token-exact), an
OpenAI-compatible HTTP API (with retries), or a recording (offline replay)."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc
from ale_proto.errors import error_detail_of
from ale_proto.v1 import common_pb2, inference_pb2, inference_pb2_grpc

from ale_rock.grpc_options import channel_options
from ale_rock.proxy.errors import UpstreamError
from ale_rock.proxy.prompt import TemplateCaps, prepare, template_caps
from ale_rock.proxy.records import load_records
from ale_rock.proxy.toolcalls import parse_tool_calls

__all__ = ["Completion", "InferenceUpstream", "OpenAIUpstream", "ReplayUpstream", "Upstream", "UpstreamError"]

OnText = Callable[[str], None]
"""Called with each new piece of generated text, as the upstream produces it (streaming)."""


@dataclass
class Completion:
    """One assistant reply plus everything the record needs."""

    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    """OpenAI finish reason: stop, length or tool_calls."""
    prompt_token_ids: list[int] = field(default_factory=list)
    completion_token_ids: list[int] = field(default_factory=list)
    completion_logprobs: list[float] = field(default_factory=list)
    policy_version: int = 0
    stop_reason: str = "stop"
    model: str = ""


class Upstream(Protocol):
    """Answers one OpenAI chat request. ``call_id`` prefixes tool-call ids; ``on_text``, if given,
    gets the generated text piece by piece as it arrives (an upstream that only has whole replies
    calls it once)."""

    def complete(self, request: dict[str, Any], call_id: str, on_text: OnText | None = None) -> Completion: ...


_STOP_NAMES = {
    common_pb2.STOP_REASON_STOP: "stop",
    common_pb2.STOP_REASON_LENGTH: "length",
    common_pb2.STOP_REASON_TOOL_CALL: "tool_call",
    common_pb2.STOP_REASON_TIMEOUT: "timeout",
    common_pb2.STOP_REASON_ERROR: "error",
    common_pb2.STOP_REASON_ABORTED: "aborted",
}


def _finish(tool_calls: list[Any], stop_reason: str) -> tuple[str, str]:
    if tool_calls:
        return "tool_calls", "tool_call"
    return ("length", "length") if stop_reason == "length" else ("stop", stop_reason or "stop")


_RETRYABLE = (common_pb2.ERROR_CODE_UNAVAILABLE, common_pb2.ERROR_CODE_DEADLINE_EXCEEDED)
_PARAMS = {"prompt_token_ids": "messages", "sampling.max_tokens": "max_tokens"}


def _param_of(detail: common_pb2.ErrorDetail) -> str:
    name = detail.field.rsplit("]", 1)[-1].lstrip(".")
    return _PARAMS.get(name, name.removeprefix("sampling.")) or "messages"


class InferenceUpstream:
    """ale-roll's InferenceService: ApplyChatTemplate once -> Generate on token ids -> Detokenize.

    The prompt ids the model sees are exactly the ids recorded; the text is never re-tokenized.
    Messages are normalised, and tools rendered as text when the model's chat template (from
    GetModelInfo, asked once) has no tool support: see :mod:`ale_rock.proxy.prompt`.
    """

    def __init__(
        self, target: str, model: str = "", timeout_s: float = 300.0, default_max_tokens: int = 512
    ) -> None:
        # ale-roll's server, not ours: its ping policy is not set here, so no keepalive pings.
        self.channel = grpc.insecure_channel(target, options=channel_options(keepalive=False))
        self.stub = inference_pb2_grpc.InferenceServiceStub(self.channel)
        self.model = model
        self.timeout_s = timeout_s
        self.default_max_tokens = default_max_tokens
        self._caps: TemplateCaps | None = None

    def _rpc(self, method: Any, request: Any, what: str = "inference service") -> Any:
        try:
            return method(request, timeout=self.timeout_s)
        except grpc.RpcError as e:
            raise self._error(e, what) from None

    @staticmethod
    def _error(e: grpc.RpcError, what: str) -> UpstreamError:
        d = error_detail_of(e)
        if d.code == common_pb2.ERROR_CODE_INVALID_ARGUMENT:
            code = "context_length_exceeded" if d.field.endswith("prompt_token_ids") else "invalid_value"
            return UpstreamError(400, f"{what}: {d.message}", _param_of(d), code)
        return UpstreamError(503, f"{what}: {d.message}", None, "upstream_unavailable")

    def caps(self) -> TemplateCaps:
        """What the served model's chat template renders natively (asked once)."""
        if self._caps is None:
            try:
                info = self.stub.GetModelInfo(inference_pb2.GetModelInfoRequest(), timeout=self.timeout_s)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise self._error(e, "inference service") from None
                self._caps = TemplateCaps(True, True)  # a server that cannot say: its template decides
                return self._caps
            self._caps = template_caps(info.chat_template)
        return self._caps

    def _sampling(self, req: dict[str, Any]) -> inference_pb2.SamplingParams:
        stop = req.get("stop") or []
        temperature = req.get("temperature")
        sp = inference_pb2.SamplingParams(
            max_tokens=int(
                req.get("max_completion_tokens") or req.get("max_tokens") or self.default_max_tokens
            ),
            temperature=float(1.0 if temperature is None else temperature),
            top_p=float(req.get("top_p") or 0.0),
            stop=[stop] if isinstance(stop, str) else list(stop),
        )
        if req.get("seed") is not None:
            sp.seed = int(req["seed"])
        return sp

    def _template(self, request: dict[str, Any]) -> list[int]:
        tools = request.get("tools") or []
        if request.get("tool_choice") == "none":
            tools = []
        messages, native_tools = prepare(request.get("messages", []), tools, self.caps())
        try:
            templ = self.stub.ApplyChatTemplate(
                inference_pb2.ApplyChatTemplateRequest(
                    messages_json=json.dumps(messages),
                    tools_json=json.dumps(native_tools) if native_tools else "",
                    add_generation_prompt=True,
                ),
                timeout=self.timeout_s,
            )
        except grpc.RpcError as e:
            d = error_detail_of(e)
            if d.code in _RETRYABLE:
                raise self._error(e, "inference service") from None
            # The template itself refused these messages (e.g. roles that must alternate).
            raise UpstreamError(
                400, f"the model's chat template cannot render these messages: {d.message}", "messages",
                "template_error",
            ) from None
        return list(templ.token_ids)

    def _detokenize(self, ids: list[int]) -> str:
        req = inference_pb2.DetokenizeRequest(token_ids=ids, skip_special_tokens=True)
        return str(self._rpc(self.stub.Detokenize, req).text)

    def complete(self, request: dict[str, Any], call_id: str, on_text: OnText | None = None) -> Completion:
        tools = request.get("tools") or []
        try:
            sampling = self._sampling(request)
        except (TypeError, ValueError, OverflowError) as e:  # validated before; this is the last guard
            raise UpstreamError(400, f"bad sampling parameters: {e}", None, "invalid_value") from None
        prompt_ids = self._template(request)
        ids: list[int] = []
        logprobs: list[float] = []
        version, stop, text, decoded = 0, "stop", "", -1
        # A streamed reply asks the service to stream too: it sends tokens as they are sampled.
        gen = inference_pb2.GenerateRequest(prompt_token_ids=prompt_ids, sampling=sampling, stream=on_text is not None)
        try:
            for msg in self.stub.Generate(gen, timeout=self.timeout_s):
                ids += msg.token_ids
                logprobs += msg.logprobs
                version = msg.policy_version or version
                if msg.finished:
                    stop = _STOP_NAMES.get(msg.stop_reason, "stop")
                if on_text is not None and msg.token_ids:
                    now = self._detokenize(ids)
                    if not now.endswith("\ufffd"):  # hold back half a multi-byte character
                        if now.startswith(text) and len(now) > len(text):
                            on_text(now[len(text) :])
                        text, decoded = now, len(ids)
        except grpc.RpcError as e:
            raise self._error(e, "inference service") from None
        full = text if decoded == len(ids) else self._detokenize(ids)
        if on_text is not None and full.startswith(text) and len(full) > len(text):
            on_text(full[len(text) :])
        content, calls = parse_tool_calls(full, call_id) if tools else (full, [])
        finish, stop_reason = _finish(calls, stop)
        return Completion(content, calls, finish, prompt_ids, ids, logprobs, version, stop_reason, self.model)


class OpenAIUpstream:
    """Any OpenAI-compatible HTTP API; retries 429 / 5xx / connection errors with exponential
    backoff and jitter. Token ids are not available from such APIs; logprobs are kept if returned."""

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        model: str = "",
        retries: int = 4,
        backoff_s: float = 0.25,
        timeout_s: float = 300.0,
    ) -> None:
        import httpx

        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.retries, self.backoff_s = model, retries, backoff_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(headers=headers, timeout=timeout_s)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random()))
            try:
                r = self.client.post(self.url, json=body)
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}: {e}"
                continue
            if r.status_code == 429 or r.status_code >= 500:
                last = f"HTTP {r.status_code}: {r.text[:200]}"
                continue
            if r.status_code >= 400:  # the upstream's own verdict on the request, passed on
                try:
                    err = r.json().get("error") or {}
                except (ValueError, AttributeError):
                    err = {}
                err = err if isinstance(err, dict) else {}
                param, code = err.get("param"), err.get("code")
                raise UpstreamError(
                    r.status_code, str(err.get("message") or r.text[:1000]),
                    param if isinstance(param, str) else None, code if isinstance(code, str) else None,
                )
            return r.json()  # type: ignore[no-any-return]
        raise UpstreamError(502, f"upstream failed after {self.retries + 1} attempts: {last}")

    def close(self) -> None:
        """Release the HTTP client."""
        self.client.close()

    def complete(self, request: dict[str, Any], call_id: str, on_text: OnText | None = None) -> Completion:
        # Whole replies only: the caller streams the reply once it is complete.
        body = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
        if self.model:
            body["model"] = self.model
        data = self._post(body)
        choice = (data.get("choices") or [{}])[0]
        msg = choice.get("message") or {}
        lps = ((choice.get("logprobs") or {}).get("content")) or []
        calls = msg.get("tool_calls") or []
        finish = choice.get("finish_reason") or "stop"
        stop = {"tool_calls": "tool_call", "length": "length"}.get(finish, "stop")
        return Completion(
            msg.get("content"),
            calls,
            finish,
            completion_logprobs=[float(x.get("logprob", 0.0)) for x in lps],
            stop_reason=stop,
            model=str(data.get("model", self.model)),
        )


def request_key(request: dict[str, Any]) -> str:
    """What identifies a call for replay: its messages and tools."""
    return json.dumps([request.get("messages", []), request.get("tools") or []], sort_keys=True)


class ReplayUpstream:
    """Serves the recorded replies of a recording (a JSON-lines file of CallRecords), matched by the
    request's messages and tools; identical requests are served in recorded order."""

    def __init__(self, path: str | Path) -> None:
        self._queues: dict[str, deque[Any]] = defaultdict(deque)
        for rec in load_records(path):
            if not rec.error:
                self._queues[request_key(rec.request)].append(rec)
        self._lock = threading.Lock()

    def complete(self, request: dict[str, Any], call_id: str, on_text: OnText | None = None) -> Completion:
        with self._lock:
            queue = self._queues.get(request_key(request))
            if not queue:
                raise UpstreamError(422, "the recording has no (more) calls with these messages and tools")
            rec = queue.popleft()
        msg = rec.response["choices"][0]["message"]
        return Completion(
            msg.get("content"),
            msg.get("tool_calls") or [],
            rec.response["choices"][0].get("finish_reason", "stop"),
            rec.prompt_token_ids,
            rec.completion_token_ids,
            rec.completion_logprobs,
            rec.policy_version,
            rec.stop_reason,
            str(rec.response.get("model", "")),
        )
