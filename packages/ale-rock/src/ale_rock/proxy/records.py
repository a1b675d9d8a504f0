"""Recorded model calls: what the trainer learns from, and what replay serves back."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ale_proto.v1 import common_pb2, model_proxy_pb2

_STOP = {
    "stop": common_pb2.STOP_REASON_STOP,
    "length": common_pb2.STOP_REASON_LENGTH,
    "tool_call": common_pb2.STOP_REASON_TOOL_CALL,
    "timeout": common_pb2.STOP_REASON_TIMEOUT,
    "error": common_pb2.STOP_REASON_ERROR,
    "aborted": common_pb2.STOP_REASON_ABORTED,
}
_STOP_NAMES = {v: k for k, v in _STOP.items()}


@dataclass
class CallRecord:
    """One model call through the proxy, with the exact token ids the model saw and produced."""

    index: int
    episode_id: str
    prompt_token_ids: list[int] = field(default_factory=list)
    """The prompt after the chat template was applied once, by the proxy's upstream."""
    completion_token_ids: list[int] = field(default_factory=list)
    completion_logprobs: list[float] = field(default_factory=list)
    policy_version: int = 0
    stop_reason: str = ""
    """One of stop, length, tool_call, timeout, error, aborted ("" if unknown)."""
    request: dict[str, Any] = field(default_factory=dict)
    """The OpenAI request body."""
    response: dict[str, Any] = field(default_factory=dict)
    """The OpenAI response body (non-streaming form, even when the agent streamed)."""
    latency_s: float = 0.0
    time: float = field(default_factory=time.time)
    error: str = ""
    """Set when the upstream failed; the agent got an HTTP error."""

    def to_pb(self) -> model_proxy_pb2.ModelCall:
        pb = model_proxy_pb2.ModelCall(
            index=self.index,
            episode_id=self.episode_id,
            prompt_token_ids=self.prompt_token_ids,
            completion_token_ids=self.completion_token_ids,
            completion_logprobs=self.completion_logprobs,
            policy_version=self.policy_version,
            stop_reason=_STOP.get(self.stop_reason, common_pb2.STOP_REASON_UNSPECIFIED),
            request_json=json.dumps(self.request),
            response_json=json.dumps(self.response),
            latency_s=self.latency_s,
        )
        pb.time.FromNanoseconds(int(self.time * 1e9))
        if self.error:
            pb.error.CopyFrom(
                common_pb2.ErrorDetail(code=common_pb2.ERROR_CODE_UNAVAILABLE, message=self.error)
            )
        return pb

    @classmethod
    def from_pb(cls, pb: model_proxy_pb2.ModelCall) -> CallRecord:
        return cls(
            index=pb.index,
            episode_id=pb.episode_id,
            prompt_token_ids=list(pb.prompt_token_ids),
            completion_token_ids=list(pb.completion_token_ids),
            completion_logprobs=list(pb.completion_logprobs),
            policy_version=pb.policy_version,
            stop_reason=_STOP_NAMES.get(pb.stop_reason, ""),
            request=json.loads(pb.request_json or "{}"),
            response=json.loads(pb.response_json or "{}"),
            latency_s=pb.latency_s,
            time=pb.time.ToNanoseconds() / 1e9,
            error=pb.error.message if pb.HasField("error") else "",
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, line: str) -> CallRecord:
        return cls(**json.loads(line))


def save_records(path: str | Path, records: list[CallRecord]) -> None:
    """Write records as JSON lines."""
    Path(path).write_text("".join(r.to_json() + "\n" for r in records))


def load_records(path: str | Path) -> list[CallRecord]:
    """Read records written by :func:`save_records` (or the proxy's ``record_dir``)."""
    return [CallRecord.from_json(line) for line in Path(path).read_text().splitlines() if line.strip()]
