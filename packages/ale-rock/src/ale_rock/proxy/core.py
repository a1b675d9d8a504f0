"""The ModelProxy's request path, independent of HTTP: validate, authenticate, admit, call the
upstream (streaming its text as it comes), build the OpenAI response, record the call.

A request that fails validation is refused before it is admitted: it costs no call of the budget
and leaves no record. Every admitted call leaves a record, whatever happens to it afterwards."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ale_rock.proxy.episode_book import Episode, EpisodeBook
from ale_rock.proxy.errors import ProxyError, UpstreamError
from ale_rock.proxy.records import CallRecord
from ale_rock.proxy.request import validate_request
from ale_rock.proxy.toolcalls import ContentStream
from ale_rock.proxy.upstreams import Completion

SendChunk = Callable[[dict[str, Any]], None]
"""Receives each ``chat.completion.chunk`` of a streamed reply, as soon as it exists."""


def check_model(ep: Episode, request: dict[str, Any]) -> None:
    """An episode opened for a named model serves that model only (404 model_not_found otherwise)."""
    asked = request.get("model")
    if ep.model and asked and asked != ep.model:
        raise ProxyError(
            404, f"The model {asked!r} does not exist; this endpoint serves {ep.model!r}", "model",
            "model_not_found",
        )


class ModelProxy:
    """Answers chat calls for the episodes of an :class:`EpisodeBook` and records each one."""

    def __init__(self, book: EpisodeBook, record_dir: str = "") -> None:
        self.book = book
        self.record_dir = record_dir

    def chat(self, ep: Episode, request: dict[str, Any], send: SendChunk | None = None) -> dict[str, Any]:
        """One chat call; returns the OpenAI response body or raises :class:`ProxyError`. With
        ``send``, the reply is also streamed through it as chunks while it is generated."""
        validate_request(request)
        check_model(ep, request)
        index = self.book.admit(ep)
        if index < 0:
            raise ProxyError(
                429, f"the episode's limit of {ep.max_calls} calls is reached", None, "call_limit_reached"
            )
        call_id = f"call_{index}"
        start = time.monotonic()
        record = CallRecord(index=index, episode_id=ep.episode_id, request=request)
        stream = _Stream(ep, index, request, send) if send is not None else None
        try:
            comp = ep.upstream.complete(request, call_id, stream.on_text if stream else None)
            response = self.response(ep, index, comp, request)
        except Exception as e:  # every admitted call is recorded, whatever went wrong
            err = e if isinstance(e, ProxyError) else UpstreamError(
                502, f"upstream failed: {type(e).__name__}: {e}", None, "upstream_error"
            )
            record.error, record.stop_reason = err.message, "error"
            record.latency_s = time.monotonic() - start
            self._record(ep, record)
            raise err from None
        record.prompt_token_ids = comp.prompt_token_ids
        record.completion_token_ids = comp.completion_token_ids
        record.completion_logprobs = comp.completion_logprobs
        record.policy_version = comp.policy_version
        record.stop_reason = comp.stop_reason
        record.response = response
        record.latency_s = time.monotonic() - start
        self._record(ep, record)
        if stream is not None:
            stream.finish(response)
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


class _Stream:
    """The chunks of one streamed reply: content as the upstream produces it (text that may be a
    tool call is held back), then tool calls, the finish reason and usage once it is complete."""

    def __init__(self, ep: Episode, index: int, request: dict[str, Any], send: SendChunk) -> None:
        self.send = send
        self.base = {
            "id": f"chatcmpl-{ep.episode_id}-{index}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": ep.model or str(request.get("model", "")),
        }
        self.filter = ContentStream() if request.get("tools") else None
        self.sent_text = ""
        self.started = False
        self.include_usage = bool((request.get("stream_options") or {}).get("include_usage"))

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> None:
        if not self.started:
            self.started = True
            self.send(self.base | {"choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None, "logprobs": None}
            ]})
        if delta or finish:
            self.send(self.base | {"choices": [
                {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            ]})

    def on_text(self, piece: str) -> None:
        out = self.filter.feed(piece) if self.filter else piece
        if out:
            self.sent_text += out
            self.chunk({"content": out})

    def finish(self, response: dict[str, Any]) -> None:
        self.base["model"] = response["model"]
        choice = response["choices"][0]
        msg = choice["message"]
        if self.filter is not None:
            rest = self.filter.rest(msg.get("content"))
        else:
            content = msg.get("content") or ""
            rest = content[len(self.sent_text) :] if content.startswith(self.sent_text) else ""
        if rest:
            self.chunk({"content": rest})
        for i, call in enumerate(msg.get("tool_calls") or []):
            self.chunk({"tool_calls": [{"index": i, **call}]})
        self.chunk({}, choice["finish_reason"])
        if self.include_usage:
            self.send(self.base | {"choices": [], "usage": response["usage"]})

