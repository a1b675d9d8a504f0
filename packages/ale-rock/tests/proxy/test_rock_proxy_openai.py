"""The ModelProxy with the official openai client against a tiny real model served through the
InferenceService contract: chat, tools, streaming, token-exact records, record -> replay."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from ale_proto.v1 import model_proxy_pb2, model_proxy_pb2_grpc
from ale_rock.proxy import CallRecord, load_records, save_records

openai = pytest.importorskip("openai")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
TOOL_TEXT = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def stub_of(srv: Any) -> Any:
    """A ModelProxyService stub on the proxy's gRPC address."""
    return model_proxy_pb2_grpc.ModelProxyServiceStub(grpc.insecure_channel(srv.grpc_address))


def open_episode(
    srv: Any, episode_id: str, target: str, *, sandbox: str = "sb-1", kind: int = 1, max_calls: int = 0,
    model: str = "tiny",
) -> Any:
    """OpenEpisode on ``srv`` (the proxy tests' one helper; ``kind`` 1 is the InferenceService)."""
    req = model_proxy_pb2.OpenEpisodeRequest(
        episode_id=episode_id,
        sandbox_id=sandbox,
        upstream=kind,
        upstream_target=target,
        model=model,
        max_calls=max_calls,
    )
    return stub_of(srv).OpenEpisode(req, timeout=10)


def close_and_collect(srv: Any, episode_id: str) -> list[CallRecord]:
    stub = stub_of(srv)
    stub.CloseEpisode(model_proxy_pb2.CloseEpisodeRequest(episode_id=episode_id), timeout=10)
    stream = stub.SubscribeCalls(model_proxy_pb2.SubscribeCallsRequest(episode_id=episode_id), timeout=10)
    return [CallRecord.from_pb(m.call) for m in stream]


def client(resp: Any) -> Any:
    return openai.OpenAI(base_url=resp.base_url, api_key=resp.api_key, max_retries=0, timeout=60)


def test_chat_records_are_token_exact(tiny_inference: Any, proxy_server: Any) -> None:
    addr, servicer = tiny_inference
    c = client(open_episode(proxy_server, "ep-chat", addr))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello, how are you?"},
    ]
    r = c.chat.completions.create(model="tiny", messages=messages, max_tokens=12, temperature=0.9, seed=3)
    (rec,) = close_and_collect(proxy_server, "ep-chat")
    tok = servicer.tok
    assert r.choices[0].message.content == tok.decode(rec.completion_token_ids, skip_special_tokens=True)
    templated = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert rec.prompt_token_ids == tok(templated, add_special_tokens=False)["input_ids"]
    assert len(rec.completion_logprobs) == len(rec.completion_token_ids) > 0
    assert all(lp <= 0 for lp in rec.completion_logprobs)
    assert rec.policy_version == 7 and rec.stop_reason in ("stop", "length")
    assert r.usage.prompt_tokens == len(rec.prompt_token_ids)
    assert rec.request["messages"] == messages and rec.latency_s > 0


def test_tool_calls_plain_and_streamed(tiny_inference: Any, proxy_server: Any) -> None:
    addr, servicer = tiny_inference
    c = client(open_episode(proxy_server, "ep-tools", addr))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]
    servicer.script.append(TOOL_TEXT)
    r = c.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, max_tokens=40)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    # The agent sends the call back with its result; the reply streams.
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    chunks = list(
        c.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, max_tokens=10, stream=True)
    )
    streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    # A streamed tool call arrives as tool_calls deltas.
    servicer.script.append(TOOL_TEXT)
    chunks = list(c.chat.completions.create(model="tiny", messages=messages[:1], tools=TOOLS, stream=True))
    deltas = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    assert [d.function.name for d in deltas] == ["get_weather"]
    recs = close_and_collect(proxy_server, "ep-tools")
    assert [r.index for r in recs] == [0, 1, 2]
    assert [r.stop_reason for r in recs][::2] == ["tool_call", "tool_call"]
    assert servicer.tok.decode(recs[0].completion_token_ids, skip_special_tokens=True) == TOOL_TEXT
    assert servicer.tok.decode(recs[1].completion_token_ids, skip_special_tokens=True) == streamed
    # The second prompt holds the first call as the template renders it, applied once.
    templated = servicer.tok.apply_chat_template(
        recs[1].request["messages"], tools=TOOLS, add_generation_prompt=True, tokenize=False
    )
    assert TOOL_TEXT in templated
    assert recs[1].prompt_token_ids == servicer.tok(templated, add_special_tokens=False)["input_ids"]


def _agent(c: Any) -> list[dict[str, Any]]:
    """A fixed little agent: three calls, each reply fed back."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Count with me."}]
    replies = []
    for i in range(3):
        r = c.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=1.0, seed=i)
        replies.append(r.choices[0].model_dump())
        messages += [
            {"role": "assistant", "content": r.choices[0].message.content},
            {"role": "user", "content": f"step {i}"},
        ]
    return replies


def test_record_then_replay_gives_identical_episode(
    tiny_inference: Any, proxy_server: Any, tmp_path: Any
) -> None:
    addr, servicer = tiny_inference
    live = _agent(client(open_episode(proxy_server, "ep-live", addr)))
    recs = close_and_collect(proxy_server, "ep-live")
    path = tmp_path / "rec.jsonl"
    save_records(path, recs)
    assert load_records(path) == recs
    before = servicer.calls
    replayed = _agent(client(open_episode(proxy_server, "ep-replay", str(path), kind=3)))
    assert replayed == live
    assert servicer.calls == before  # offline: the model was not called
    again = close_and_collect(proxy_server, "ep-replay")
    key = [
        (r.prompt_token_ids, r.completion_token_ids, r.completion_logprobs, r.policy_version) for r in recs
    ]
    assert [
        (r.prompt_token_ids, r.completion_token_ids, r.completion_logprobs, r.policy_version) for r in again
    ] == key
    # A request the recording does not hold is refused, not invented.
    c = client(open_episode(proxy_server, "ep-replay-2", str(path), kind=3))
    with pytest.raises(openai.UnprocessableEntityError):
        c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "something else"}])
