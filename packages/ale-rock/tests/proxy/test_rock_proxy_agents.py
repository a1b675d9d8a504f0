"""Third-party agents through the ModelProxy (real HTTP on a real port) with the official ``openai``
SDK, as agents send their requests: assistant turns with ``content: null`` / no ``content`` plus
``tool_calls``, ``tool`` results, list-of-parts content, over several tool-calling turns, streaming
and not; a chat template without tool support still shows the model the tools (text format), and
what the model writes in that format comes back as tool calls and round-trips into the next prompt.
"""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any

import pytest

from .test_rock_proxy_openai import TOOLS, client, close_and_collect, open_episode

openai = pytest.importorskip("openai")

# What a model trained on the documented format writes (Hermes / Qwen2.5 style).
CALL_TEXT = '<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "{city}"}}}}\n</tool_call>'
CITIES = ["Paris", "Oslo", "Lima"]


def _history_shapes() -> list[dict[str, Any]]:
    """A conversation holding every standard shape an agent sends after tool calls."""
    return [
        {"role": "system", "content": [{"type": "text", "text": "You are a weather agent."}]},
        {"role": "user", "content": [{"type": "text", "text": "Weather in"}, {"type": "text", "text": "Paris?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c0", "content": "sunny"},
        {"role": "assistant", "tool_calls": [  # no content key at all
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "snow"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Paris is sunny."}]},
        {"role": "user", "content": "And Lima?"},
    ]  # fmt: skip


def test_sdk_through_ale_rolls_inference_service_every_message_shape(
    roll_inference: tuple[str, Any], proxy_server: Any
) -> None:
    """The real request path: ale-roll's InferenceService over a real (tiny) model whose template
    has no tool support. These requests got 503 "'dict object' has no attribute 'content'"."""
    addr, tok = roll_inference
    c = client(open_episode(proxy_server, "ep-roll", addr))
    messages = _history_shapes()
    r = c.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, max_tokens=6, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length")
    chunks = list(c.chat.completions.create(
        model="tiny", messages=messages, tools=TOOLS, max_tokens=6, temperature=0, stream=True,
        stream_options={"include_usage": True}))  # fmt: skip
    streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    # Too long for the model's context (1024): the upstream refuses it; a 400 naming messages, recorded.
    long = [{"role": "user", "content": "the quick brown fox " * 400}]
    with pytest.raises(openai.BadRequestError) as err:
        c.chat.completions.create(model="tiny", messages=long, max_tokens=4)
    assert err.value.body["param"] == "messages" and err.value.body["code"] == "context_length_exceeded"
    recs = close_and_collect(proxy_server, "ep-roll")
    assert [rec.index for rec in recs] == [0, 1, 2] and [bool(rec.error) for rec in recs] == [False, False, True]
    from ale_rock.proxy.prompt import TemplateCaps, prepare

    # Token-exact: the prompt is the template applied once to the normalised messages, and the
    # model saw the tools' schema, the earlier calls and their results as text.
    rendered, native = prepare(messages, TOOLS, TemplateCaps())
    assert native == []
    text = tok.apply_chat_template(rendered, add_generation_prompt=True, tokenize=False)
    for rec in recs[:2]:
        assert rec.prompt_token_ids == tok.encode(text, add_special_tokens=False)
        assert rec.request["messages"] == messages  # the record keeps what the agent sent
    prompt = tok.decode(recs[0].prompt_token_ids)
    assert '"name": "get_weather"' in prompt and '"required": ["city"]' in prompt and "<tools>" in prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>' in prompt
    assert "<tool_response>\nsnow\n</tool_response>" in prompt and "Weather in\nParis?" in prompt
    assert r.choices[0].message.content == tok.decode(recs[0].completion_token_ids, skip_special_tokens=True)
    assert streamed == tok.decode(recs[1].completion_token_ids, skip_special_tokens=True)


def _calls(tool_calls: Any) -> list[dict[str, Any]]:
    return [{"id": tc.id, "type": "function", "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
            for tc in tool_calls or []]  # fmt: skip


def _tool_loop(create: Any, servicer: Any, stream: bool) -> list[dict[str, Any]]:
    """An agent loop: 3 tool calls, each result fed back (assistant content null / absent), then an
    answer. ``create`` is the SDK's chat-completion call. Returns the conversation."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris, Oslo and Lima?"}]
    servicer.script += [CALL_TEXT.format(city=city) for city in CITIES] + ["All three are mild."]
    for turn in range(4):
        kw: dict[str, Any] = {"messages": messages, "tools": TOOLS, "max_tokens": 64}
        if stream:
            chunks = [ch for ch in create(**kw, stream=True) if ch.choices]
            content = "".join(ch.choices[0].delta.content or "" for ch in chunks) or None
            calls = [c for ch in chunks for c in _calls(ch.choices[0].delta.tool_calls)]
            finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices[0].finish_reason][-1]
        else:
            msg = create(**kw).choices[0]
            finish, content, calls = msg.finish_reason, msg.message.content, _calls(msg.message.tool_calls)
        if turn == 3:
            assert finish == "stop" and content == "All three are mild." and not calls
            return messages
        assert finish == "tool_calls" and not content
        (call,) = calls
        assert call["function"]["name"] == "get_weather"
        city = json.loads(call["function"]["arguments"])["city"]
        assert city == CITIES[turn]
        # The standard shape: content null (turn 0, 2) or absent (turn 1), then the tool result.
        assistant: dict[str, Any] = {"role": "assistant", "tool_calls": calls}
        if turn != 1:
            assistant["content"] = None
        messages += [assistant, {"role": "tool", "tool_call_id": call["id"], "content": f"{city}: mild"}]
    raise AssertionError("unreachable")


def _check_loop_records(recs: list[Any], tok: Any) -> None:
    assert [r.index for r in recs] == [0, 1, 2, 3] and not any(r.error for r in recs)
    assert [r.stop_reason for r in recs] == ["tool_call"] * 3 + ["stop"]
    for i, rec in enumerate(recs):
        prompt = tok.decode(rec.prompt_token_ids)
        assert prompt.count('"name": "get_weather"') == 1 + i  # the schema, then each earlier call
        if i:
            # Round trip: exactly what the model wrote comes back in the next prompt.
            said = tok.decode(recs[i - 1].completion_token_ids, skip_special_tokens=True)
            assert said == CALL_TEXT.format(city=CITIES[i - 1])
            assert f"<|im_start|>assistant\n{said}<|im_end|>" in prompt
            assert f"<tool_response>\n{CITIES[i - 1]}: mild\n</tool_response>" in prompt


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_sdk_three_tool_calling_turns_on_a_template_without_tools(
    tiny_inference_no_tools: tuple[str, Any], proxy_server: Any, stream: bool
) -> None:
    addr, servicer = tiny_inference_no_tools
    episode = f"ep-loop-{stream}"
    c = client(open_episode(proxy_server, episode, addr))
    _tool_loop(functools.partial(c.chat.completions.create, model="tiny"), servicer, stream)
    _check_loop_records(close_and_collect(proxy_server, episode), servicer.tok)


def test_litellm_three_tool_calling_turns(tiny_inference_no_tools: tuple[str, Any], proxy_server: Any) -> None:
    """The same loop through litellm (its OpenAI provider), plain then streamed."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of the cost map
    litellm = pytest.importorskip("litellm")
    litellm.telemetry = False
    addr, servicer = tiny_inference_no_tools
    for stream in (False, True):
        episode = f"ep-litellm-{stream}"
        ep = open_episode(proxy_server, episode, addr)
        create = functools.partial(litellm.completion, model="openai/tiny", api_base=ep.base_url,
                                   api_key=ep.api_key, num_retries=0, timeout=60)
        _tool_loop(create, servicer, stream)
        _check_loop_records(close_and_collect(proxy_server, episode), servicer.tok)


def test_streaming_sends_tokens_while_they_are_generated(
    tiny_inference_no_tools: tuple[str, Any], proxy_server: Any
) -> None:
    addr, servicer = tiny_inference_no_tools
    c = client(open_episode(proxy_server, "ep-live-stream", addr))
    text = "The weather is sunny and mild today."
    servicer.script.append(text)
    servicer.delay_s = 0.03
    try:
        arrivals: list[tuple[float, str]] = []
        stream = c.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], stream=True, tools=TOOLS)
        for ch in stream:
            if ch.choices and ch.choices[0].delta.content:
                arrivals.append((time.monotonic(), ch.choices[0].delta.content))
    finally:
        servicer.delay_s = 0.0
    n_tokens = len(servicer.tok(text, add_special_tokens=False)["input_ids"])
    assert "".join(p for _, p in arrivals) == text
    assert len(arrivals) >= n_tokens // 2 > 2  # piece by piece, not one message at the end
    assert arrivals[-1][0] - arrivals[0][0] >= 0.03 * (n_tokens - 2) * 0.8


def test_a_stream_through_ale_rolls_inference_service_arrives_token_by_token(
    roll_inference: tuple[str, Any], proxy_server: Any
) -> None:
    """ale-roll's real InferenceService (HF engine) streams the tokens as it samples them, and the
    proxy passes them on: a streamed reply arrives in many pieces that add up to the plain reply
    (it used to arrive as one piece at the end)."""
    addr, _ = roll_inference
    c = client(open_episode(proxy_server, "ep-roll-stream", addr))
    # 200 tokens: long enough that a busy machine cannot fold the whole stream into a few messages.
    ask: dict[str, Any] = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 200,
                           "temperature": 0, "seed": 3}
    plain = c.chat.completions.create(**ask).choices[0].message.content or ""
    pieces = [ch.choices[0].delta.content for ch in c.chat.completions.create(**ask, stream=True)
              if ch.choices and ch.choices[0].delta.content]
    assert "".join(pieces) == plain and len(plain) > 0
    assert len(pieces) > 3  # piece by piece, not the whole reply in one event
    recs = close_and_collect(proxy_server, "ep-roll-stream")
    assert recs[0].completion_token_ids == recs[1].completion_token_ids
    assert recs[1].completion_logprobs == pytest.approx(recs[0].completion_logprobs, abs=1e-6)
