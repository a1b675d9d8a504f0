"""OpenAI-compatible chat-completions client over httpx (ModelProxy, vLLM, hosted APIs)."""

from __future__ import annotations

import random
import ssl
import time
import uuid
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from ale_flow.models.base import ModelError
from ale_flow.models.textcalls import parse_arguments, parse_text_calls, tools_prompt
from ale_flow.types import ModelResponse, ToolCall, Usage

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAIConfig(BaseModel):
    """Settings of the OpenAI-compatible client."""

    model_config = ConfigDict(extra="forbid")

    base_url: str
    """Endpoint root, e.g. http://localhost:8000/v1."""
    model: str
    """Model name sent in each request."""
    api_key: str | None = None
    """Bearer token; None sends no Authorization header."""
    native_tools: bool = True
    """Use the API's `tools` field; False teaches the `<tool_call>` text format instead."""
    temperature: float = 0.0
    """Sampling temperature."""
    max_tokens: int | None = 4096
    """Completion token cap per call."""
    context_window: int = 128_000
    """Tokens the model attends to (drives compression)."""
    timeout_s: float = 300.0
    """Per-request timeout."""
    max_retries: int = 4
    """Retries on connection errors, timeouts and 408/429/5xx."""
    backoff_s: float = 1.0
    """First retry delay; doubles each retry (with jitter)."""
    logprobs: bool = False
    """Ask for per-token logprobs (recorded in the trajectory when returned)."""


class OpenAIModel:
    """`Model` implementation for any OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(self, config: OpenAIConfig, client: httpx.Client | None = None) -> None:
        self.config = config
        self.context_window = config.context_window
        self.name = config.model
        """The model name sent in every request (what trajectories record)."""
        self.provider = "openai"
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        # Plain http (the ModelProxy seen from a sandbox): no CA store to load (~50 ms of every CLI
        # start); a context without CAs fails any https redirect closed, never unchecked.
        verify: Any = True if config.base_url.lower().startswith("https:") else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._client = client or httpx.Client(base_url=config.base_url.rstrip("/"), headers=headers, timeout=config.timeout_s,
                                              verify=verify)
        self.usage = Usage()
        self.calls = 0

    def _payload(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.config.model, "messages": messages, "temperature": self.config.temperature}
        if self.config.max_tokens:
            body["max_tokens"] = self.config.max_tokens
        if self.config.logprobs:
            body["logprobs"] = True
        if tools and self.config.native_tools:
            body["tools"] = tools
        elif tools:
            prompt = tools_prompt(tools)
            msgs = list(messages)
            if msgs and msgs[0]["role"] == "system":
                msgs[0] = {**msgs[0], "content": msgs[0]["content"] + "\n\n" + prompt}
            else:
                msgs.insert(0, {"role": "system", "content": prompt})
            body["messages"] = msgs
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        delay = self.config.backoff_s
        last = ""
        for attempt in range(self.config.max_retries + 1):
            try:
                r = self._client.post("/chat/completions", json=body)
                if r.status_code < 400:
                    data: dict[str, Any] = r.json()
                    return data
                last = f"HTTP {r.status_code}: {r.text[:300]}"
                if r.status_code not in RETRY_STATUS:
                    raise ModelError(last)
            except (httpx.TransportError, ValueError) as e:
                last = f"{type(e).__name__}: {e}"
            if attempt < self.config.max_retries:
                time.sleep(delay * (1 + random.random() * 0.25))
                delay *= 2
        raise ModelError(f"model call failed after {self.config.max_retries + 1} attempts: {last}")

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelResponse:
        t0 = time.monotonic()
        data = self._post(self._payload(messages, tools))
        self.calls += 1
        try:
            choice = data["choices"][0]
            msg = choice.get("message") or {}
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"response has no choices: {str(data)[:300]}") from None
        finish = choice.get("finish_reason") or "stop"
        content = msg.get("content") or ""
        calls: list[ToolCall] = []
        problems: list[str] = []
        for raw in msg.get("tool_calls") or []:
            fn = raw.get("function") or {}
            name = fn.get("name")
            args, problem = parse_arguments(fn.get("arguments"))
            if not name:
                problems.append("tool call without a function name")
            elif problem or args is None:
                problems.append(f"tool call {name}: {problem}")
            else:
                calls.append(ToolCall(raw.get("id") or f"call_{uuid.uuid4().hex[:12]}", name, args))
        if not self.config.native_tools or (not calls and "<tool_call>" in content):
            content, text_calls, text_problems = parse_text_calls(content)
            calls += text_calls
            problems += text_problems
        if finish == "length" and problems:
            problems.append("the reply hit the max_tokens limit; keep tool calls shorter")
        u = data.get("usage") or {}
        usage = Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0))
        self.usage.add(usage)
        lp = ((choice.get("logprobs") or {}).get("content")) or []
        return ModelResponse(
            content=content,
            tool_calls=calls,
            malformed=problems,
            finish_reason=finish,
            usage=usage,
            latency_s=time.monotonic() - t0,
            completion_logprobs=[float(x.get("logprob", 0.0)) for x in lp if isinstance(x, dict)],
        )

    def close(self) -> None:
        self._client.close()
