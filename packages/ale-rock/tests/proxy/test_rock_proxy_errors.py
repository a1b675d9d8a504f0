"""Client mistakes get a 4xx with OpenAI's JSON error naming the ``param`` (never a dropped
connection, never a 503); an unknown model is a 404; refused requests cost no budget; every
admitted call has a record, the failed ones included. Real proxy on a real port, real tiny model."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from .test_rock_proxy_openai import TOOLS, client, close_and_collect, open_episode

openai = pytest.importorskip("openai")

USER = [{"role": "user", "content": "hi"}]
# (request fields, the param the 400 must name)
BAD: list[tuple[dict[str, Any], str]] = [
    ({"max_tokens": -5}, "max_tokens"),
    ({"max_tokens": 10**10}, "max_tokens"),
    ({"max_tokens": "many"}, "max_tokens"),
    ({"max_completion_tokens": 0}, "max_completion_tokens"),
    ({"temperature": "hot"}, "temperature"),
    ({"temperature": 9}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"n": 2}, "n"),
    ({"seed": 2**70}, "seed"),
    ({"stop": 7}, "stop"),
    ({"stream": "yes"}, "stream"),
    ({"messages": "hi"}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user"}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content[0].type"),
    ({"messages": [*USER, {"role": "assistant", "tool_calls": [{"type": "function", "function": {}}]}]},
     "messages[1].tool_calls[0].function.name"),
    ({"tools": [{"type": "function", "function": {"parameters": {}}}]}, "tools[0].function.name"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"model": 3}, "model"),
]  # fmt: skip


def test_bad_requests_are_4xx_json_naming_the_param_and_cost_nothing(
    tiny_inference: tuple[str, Any], proxy_server: Any
) -> None:
    addr, servicer = tiny_inference
    ep = open_episode(proxy_server, "ep-bad-params", addr, max_calls=3)
    url, auth = ep.base_url + "/chat/completions", {"Authorization": f"Bearer {ep.api_key}"}
    before = servicer.calls
    with httpx.Client(timeout=30) as h:  # one connection: an error must leave it usable
        for fields, param in BAD:
            r = h.post(url, json={"model": "tiny", "messages": USER, **fields}, headers=auth)
            assert r.status_code == 400, (fields, r.status_code, r.text)
            err = r.json()["error"]
            assert err["param"] == param and err["type"] == "invalid_request_error", (fields, err)
            assert set(err) == {"message", "type", "param", "code"} and param in err["message"]
        r = h.post(url, json={"model": "gpt-4o", "messages": USER}, headers=auth)
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
        assert r.json()["error"]["param"] == "model"
        r = h.post(url, content=b"{nope", headers=auth)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    assert servicer.calls == before  # none of them reached the model
    # None of them used the budget: 3 calls still go through, the 4th is refused (JSON, 429).
    c = client(ep)
    for _ in range(3):
        c.chat.completions.create(model="tiny", messages=USER, max_tokens=2)
    with pytest.raises(openai.RateLimitError) as e:
        c.chat.completions.create(model="tiny", messages=USER, max_tokens=2)
    assert e.value.body["code"] == "call_limit_reached"
    assert [r.index for r in close_and_collect(proxy_server, "ep-bad-params")] == [0, 1, 2]


def test_the_sdk_gets_typed_errors_not_retries(tiny_inference: tuple[str, Any], proxy_server: Any) -> None:
    """With the SDK's default retries on, a client mistake fails at once (a 503 would be retried)."""
    addr, servicer = tiny_inference
    ep = open_episode(proxy_server, "ep-sdk-errors", addr)
    c = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=2, timeout=30)
    before = servicer.calls
    for kw, param in [({"max_tokens": -5}, "max_tokens"), ({"temperature": "hot"}, "temperature")]:
        with pytest.raises(openai.BadRequestError) as err:
            c.chat.completions.create(model="tiny", messages=USER, **kw)
        assert err.value.body["param"] == param
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="not-served", messages=USER)
    assert servicer.calls == before
    assert close_and_collect(proxy_server, "ep-sdk-errors") == []


def test_every_admitted_call_has_a_record_failures_included(
    tiny_inference: tuple[str, Any], proxy_server: Any
) -> None:
    addr, servicer = tiny_inference
    ep = open_episode(proxy_server, "ep-failing", addr, max_calls=3)
    c = client(ep)
    servicer.fail_next = 1  # the engine goes away for one call
    with pytest.raises(openai.InternalServerError) as err:
        c.chat.completions.create(model="tiny", messages=USER, max_tokens=2)
    assert err.value.status_code == 503 and err.value.body["type"] == "server_error"
    servicer.fail_next = 1  # ... and once more, mid-stream of an SDK streaming call
    with pytest.raises(openai.APIStatusError):
        list(c.chat.completions.create(model="tiny", messages=USER, max_tokens=2, stream=True, tools=TOOLS))
    ok = c.chat.completions.create(model="tiny", messages=USER, max_tokens=2)
    recs = close_and_collect(proxy_server, "ep-failing")
    assert [(r.index, bool(r.error), r.stop_reason) for r in recs] == [
        (0, True, "error"), (1, True, "error"), (2, False, recs[2].stop_reason)]
    assert "engine restarting" in recs[0].error and recs[0].request["messages"] == USER
    assert recs[2].response["choices"][0]["message"]["content"] == ok.choices[0].message.content
