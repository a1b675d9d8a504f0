"""The ModelProxy's request path, independent of HTTP: authenticate, call the upstream, build
the OpenAI response, record the call."""

from __future__ import annotations

import time
from typing import Any

from ale_rock.proxy.episodes import Episode, EpisodeBook
from ale_rock.proxy.records import CallRecord
from ale_rock.proxy.upstreams import Completion, UpstreamError


class ModelProxy:
    """Answers chat calls for the episodes of an :class:`EpisodeBook` and records each one."""

    def __init__(self, book: EpisodeBook, record_dir: str = "") -> None:
        self.book = book
        self.record_dir = record_dir

    def chat(self, ep: Episode, request: dict[str, Any]) -> dict[str, Any]:
        """One chat call; returns the OpenAI response body or raises UpstreamError."""
        if not isinstance(request.get("messages"), list) or not request["messages"]:
            raise UpstreamError(400, "'messages' must be a non-empty list")
        if (request.get("n") or 1) != 1:
            raise UpstreamError(400, "only n=1 is supported")
        index = self.book.admit(ep)
        if index < 0:
            raise UpstreamError(429, f"the episode's limit of {ep.max_calls} calls is reached")
        call_id = f"call_{index}"
        start = time.monotonic()
        record = CallRecord(index=index, episode_id=ep.episode_id, request=request)
        try:
            comp = ep.upstream.complete(request, call_id)
        except UpstreamError as e:
            record.error, record.stop_reason = e.message, "error"
            record.latency_s = time.monotonic() - start
            self._record(ep, record)
            raise
        response = self.response(ep, index, comp, request)
        record.prompt_token_ids = comp.prompt_token_ids
        record.completion_token_ids = comp.completion_token_ids
        record.completion_logprobs = comp.completion_logprobs
        record.policy_version = comp.policy_version
        record.stop_reason = comp.stop_reason
        record.response = response
        record.latency_s = time.monotonic() - start
        self._record(ep, record)
        return response

    def _record(self, ep: Episode, record: CallRecord) -> None:
        self.book.add(ep, record)
        if self.record_dir:
            from pathlib import Path

            path = Path(self.record_dir) / f"{ep.episode_id}.jsonl"
            with path.open("a") as f:
                f.write(record.to_json() + "\n")

    @staticmethod
    def response(ep: Episode, index: int, comp: Completion, request: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": comp.content}
        if comp.tool_calls:
            message["tool_calls"] = comp.tool_calls
        n_prompt, n_completion = len(comp.prompt_token_ids), len(comp.completion_token_ids)
        return {
            "id": f"chatcmpl-{ep.episode_id}-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": comp.model or ep.model or str(request.get("model", "")),
            "choices": [
                {"index": 0, "message": message, "finish_reason": comp.finish_reason, "logprobs": None}
            ],
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": n_completion,
                "total_tokens": n_prompt + n_completion,
            },
        }


def stream_chunks(response: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A complete response as the chunks of an SSE stream (role, content, tool calls, finish)."""
    base = {k: response[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = response["choices"][0]
    msg = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if msg.get("content"):
        out.append(chunk({"content": msg["content"]}))
    for i, call in enumerate(msg.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": i, **call}]}))
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append(base | {"choices": [], "usage": response["usage"]})
    return out
