"""Credentials are per episode and per sandbox; bad input gets HTTP errors, never a crash; the
OpenAI-compatible upstream is retried on 429/5xx."""

from __future__ import annotations

from typing import Any

import grpc
import httpx
import pytest
from ale_proto.errors import error_detail_of
from ale_proto.v1 import common_pb2, model_proxy_pb2
from ale_rock.proxy.http import SANDBOX_HEADER

from .test_rock_proxy_openai import open_episode, stub_of

openai = pytest.importorskip("openai")


@pytest.fixture()
def proxy() -> Any:
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy

    srv = serve_model_proxy(ModelProxyConfig(backoff_s=0.01))
    yield srv
    srv.stop(0)


def _open(srv: Any, episode_id: str, target: str, sandbox: str, **kw: Any) -> Any:
    """An episode on the fake OpenAI upstream, model "m", and a stub for more calls."""
    ep = open_episode(srv, episode_id, target, sandbox=sandbox, kind=model_proxy_pb2.UPSTREAM_KIND_OPENAI, model="m",
                      **kw)
    return ep, stub_of(srv)


def test_a_credential_works_only_for_its_own_episode_and_sandbox(proxy: Any, openai_upstream: Any) -> None:
    a, stub = _open(proxy, "ep-a", openai_upstream.url, "sb-a")
    b, _ = _open(proxy, "ep-b", openai_upstream.url, "sb-b")
    msgs = [{"role": "user", "content": "hi"}]
    ok = openai.OpenAI(base_url=a.base_url, api_key=a.api_key, max_retries=0)
    assert ok.chat.completions.create(model="m", messages=msgs).choices[0].message.content == "echo: hi"
    # A's key under B's URL, A's key claimed by B's sandbox (the Rocklet stamps the header), unknown key.
    with pytest.raises(openai.PermissionDeniedError):
        openai.OpenAI(base_url=b.base_url, api_key=a.api_key, max_retries=0).chat.completions.create(
            model="m", messages=msgs
        )
    forged = openai.OpenAI(
        base_url=a.base_url, api_key=a.api_key, max_retries=0, default_headers={SANDBOX_HEADER: "sb-b"}
    )
    with pytest.raises(openai.PermissionDeniedError):
        forged.chat.completions.create(model="m", messages=msgs)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=b.base_url, api_key="ale-ep-guess", max_retries=0).chat.completions.create(
            model="m", messages=msgs
        )
    rocklet = openai.OpenAI(
        base_url=a.base_url, api_key=a.api_key, max_retries=0, default_headers={SANDBOX_HEADER: "sb-a"}
    )
    assert rocklet.chat.completions.create(model="m", messages=msgs).choices[0].message.content == "echo: hi"
    # After the episode closes its key is dead.
    assert stub.CloseEpisode(model_proxy_pb2.CloseEpisodeRequest(episode_id="ep-a"), timeout=5).calls == 2
    with pytest.raises(openai.AuthenticationError):
        ok.chat.completions.create(model="m", messages=msgs)
    # Episode ids are unique; unknown ones are NOT_FOUND.
    with pytest.raises(grpc.RpcError) as e:
        _open(proxy, "ep-b", openai_upstream.url, "sb-c")
    assert error_detail_of(e.value).code == common_pb2.ERROR_CODE_ALREADY_EXISTS
    with pytest.raises(grpc.RpcError) as e:
        stub.CloseEpisode(model_proxy_pb2.CloseEpisodeRequest(episode_id="nope"), timeout=5)
    assert error_detail_of(e.value).code == common_pb2.ERROR_CODE_NOT_FOUND


def test_openai_upstream_retries_429_and_5xx_but_not_4xx(proxy: Any, openai_upstream: Any) -> None:
    ep, stub = _open(proxy, "ep-retry", openai_upstream.url, "sb")
    c = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)
    # A model the episode does not serve is a 404 (model_not_found), and never reaches the upstream.
    with pytest.raises(openai.NotFoundError) as nf:
        c.chat.completions.create(model="ignored", messages=[{"role": "user", "content": "x"}])
    assert nf.value.body["code"] == "model_not_found" and nf.value.body["param"] == "model"
    assert openai_upstream.seen == []
    openai_upstream.fail = 3
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert r.choices[0].message.content == "echo: x"
    assert len(openai_upstream.seen) == 4 and openai_upstream.seen[-1].body["model"] == "m"
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "bad"}])
    assert len(openai_upstream.seen) == 5
    openai_upstream.fail = 99
    with pytest.raises(openai.APIStatusError) as err:
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "y"}])
    assert err.value.status_code == 502
    stub.CloseEpisode(model_proxy_pb2.CloseEpisodeRequest(episode_id="ep-retry"), timeout=5)
    recs = list(stub.SubscribeCalls(model_proxy_pb2.SubscribeCallsRequest(episode_id="ep-retry"), timeout=5))
    assert [bool(m.call.error.message) for m in recs] == [False, True, True]


def test_bad_requests_get_http_errors_and_the_server_survives(proxy: Any, openai_upstream: Any) -> None:
    ep, _ = _open(proxy, "ep-bad", openai_upstream.url, "sb", max_calls=1)
    url = ep.base_url + "/chat/completions"
    auth = {"Authorization": f"Bearer {ep.api_key}"}
    with httpx.Client(timeout=10) as h:
        assert h.post(url, content=b"{not json", headers=auth).status_code == 400
        assert h.post(url, json={"model": "m"}, headers=auth).status_code == 400
        assert h.post(url, json={"model": "m", "messages": []}, headers=auth).status_code == 400
        assert h.post(proxy.http_url + "/v2/nothing", json={}, headers=auth).status_code == 404
        big = {"model": "m", "messages": [{"role": "user", "content": "x" * (9 << 20)}]}
        assert h.post(url, json=big, headers=auth).status_code == 413
    with httpx.Client(timeout=10) as h:
        ok = h.post(url, json={"model": "m", "messages": [{"role": "user", "content": "z"}]}, headers=auth)
        assert ok.status_code == 200
        assert (
            h.post(
                url, json={"model": "m", "messages": [{"role": "user", "content": "z"}]}, headers=auth
            ).status_code
            == 429
        )
        assert h.get(ep.base_url + "/models", headers=auth).json()["data"][0]["id"] == "m"


def test_closed_episodes_are_forgotten_beyond_the_retention() -> None:
    from ale_rock.proxy.episode_book import EpisodeBook

    book = EpisodeBook(keep_closed=2)
    for i in range(4):
        book.open(f"e{i}", "sb", upstream=None, model="m", max_calls=0)
        book.close(f"e{i}")
    assert [book.get(f"e{i}") is not None for i in range(4)] == [False, False, True, True]
