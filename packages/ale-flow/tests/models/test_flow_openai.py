"""The OpenAI-compatible client against a real local HTTP server with scripted responses:
retries with backoff, native and text tool calls, malformed and truncated calls, usage."""

from __future__ import annotations

from typing import Any

import pytest
from ale_flow import Agent, AgentStopReason, Settings
from ale_flow.events import MalformedToolCall
from ale_flow.models.base import ModelError
from ale_flow.models.openai import OpenAIConfig, OpenAIModel


def model(server: Any, **kw: Any) -> OpenAIModel:
    return OpenAIModel(OpenAIConfig(base_url=server.url, model="m", backoff_s=0.01, **kw))


def test_native_tool_call_and_usage(server):
    server.queue.append((200, server.completion(None, [server.native_call("read_file", '{"path": "a.txt"}')], "tool_calls", (30, 7))))
    m = model(server, api_key="sk-test")
    r = m.complete([{"role": "user", "content": "hi"}], [{"type": "function", "function": {"name": "read_file", "description": "", "parameters": {}}}])
    assert [(c.name, c.arguments, c.id) for c in r.tool_calls] == [("read_file", {"path": "a.txt"}, "call_a")]
    assert r.usage.prompt_tokens == 30 and m.usage.completion_tokens == 7
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-test" and req["body"]["tools"][0]["function"]["name"] == "read_file"


def test_retries_transient_errors_then_succeeds(server):
    server.queue += [(503, "busy"), (429, "slow down"), (200, server.completion("ok"))]
    m = model(server, max_retries=3)
    assert m.complete([{"role": "user", "content": "x"}], []).content == "ok"
    assert len(server.requests) == 3


def test_gives_up_after_retries_and_on_client_errors(server):
    server.queue += [(500, "boom")] * 3
    with pytest.raises(ModelError, match="after 3 attempts.*HTTP 500"):
        model(server, max_retries=2).complete([], [])
    server.queue.append((400, "bad request"))
    with pytest.raises(ModelError, match="HTTP 400"):
        model(server, max_retries=5).complete([], [])
    assert len(server.requests) == 4  # no retry on 400


def test_connection_refused_is_a_model_error():
    m = OpenAIModel(OpenAIConfig(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1, backoff_s=0.01))
    with pytest.raises(ModelError, match="ConnectError"):
        m.complete([], [])


def test_malformed_and_truncated_native_calls_are_reported(server):
    server.queue.append((200, server.completion("", [server.native_call("shell", '{"command": "ls'), server.native_call("read_file", "[1]", "call_b")], "length")))
    r = model(server).complete([], [])
    assert r.tool_calls == []
    assert "not valid JSON" in r.malformed[0] and "must be a JSON object" in r.malformed[1] and "max_tokens" in r.malformed[2]


def test_text_fallback_format(server):
    text = 'Let me look.\n<tool_call>{"name": "list_directory", "arguments": {"path": "."}}</tool_call>'
    server.queue.append((200, server.completion(text)))
    m = model(server, native_tools=False)
    r = m.complete([{"role": "system", "content": "base"}, {"role": "user", "content": "go"}], [{"type": "function", "function": {"name": "list_directory", "description": "List.", "parameters": {}}}])
    assert r.content == "Let me look." and r.tool_calls[0].arguments == {"path": "."}
    body = server.requests[0]["body"]
    assert "tools" not in body and "<tool_call>" in body["messages"][0]["content"] and body["messages"][0]["content"].startswith("base")


def test_agent_reports_malformed_calls_back_and_stops_after_limit(server, ws):
    bad = server.completion("", [server.native_call("write_file", '{"path": "x.txt", "content": "unterminated')], "length")
    server.queue += [(200, bad)] * 5
    agent = Agent(model(server), ws, Settings(mode="yolo", limits={"max_malformed": 2}))
    events = list(agent.run("write x"))
    assert events[-1].reason == AgentStopReason.MALFORMED_LIMIT
    assert sum(isinstance(e, MalformedToolCall) for e in events) == 2
    second = server.requests[1]["body"]["messages"]
    assert "could not be used" in second[-1]["content"]


def test_agent_stops_cleanly_when_endpoint_is_down(ws):
    m = OpenAIModel(OpenAIConfig(base_url="http://127.0.0.1:9/v1", model="m", max_retries=0))
    stopped = Agent(m, ws).run_to_end("anything")
    assert stopped.reason == AgentStopReason.MODEL_ERROR and "ConnectError" in stopped.detail
