"""Episode credentials are bound to their sandbox by the egress gateway: two real bubblewrap
sandboxes, a real ModelProxy that requires the gateway's ``X-Ale-Sandbox-Id`` stamp, and agents
that try each other's keys, each other's URLs and forged headers."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from ale_proto.v1 import model_proxy_pb2, model_proxy_pb2_grpc

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed"
)


# Runs each call in calls.json: urllib through the sandbox's HTTP proxy (one request per
# connection), then all of them again on ONE keep-alive connection tunnelled with CONNECT.
AGENT = b"""
import http.client, json, os, urllib.error, urllib.parse, urllib.request
calls = json.load(open("calls.json"))
def body(text):
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
def headers(c):
    h = {"Authorization": "Bearer " + c["key"], "Content-Type": "application/json"}
    if c.get("forge"):
        h["X-Ale-Sandbox-Id"] = c["forge"]
    return h
def result(status, data):
    return json.loads(data)["choices"][0]["message"]["content"] if status == 200 else "HTTP %d" % status
out = {"single": [], "keepalive": []}
for c in calls:
    req = urllib.request.Request(c["base"] + "/chat/completions", data=body(c["text"]), headers=headers(c))
    try:
        r = urllib.request.urlopen(req, timeout=30)
        out["single"].append(result(200, r.read()))
    except urllib.error.HTTPError as e:
        out["single"].append("HTTP %d" % e.code)
proxy = urllib.parse.urlsplit(os.environ.get("HTTP_PROXY") or os.environ["http_proxy"])
conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)
conn.set_tunnel("model-proxy", 80)
for c in calls:
    conn.request("POST", urllib.parse.urlsplit(c["base"]).path + "/chat/completions", body=body(c["text"]),
                 headers=headers(c))
    r = conn.getresponse()
    out["keepalive"].append(result(r.status, r.read()))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, openai_upstream_server: Any, proxy_cluster: Any) -> Iterator[Any]:
    # require_sandbox_header: a call that did not come through a gateway's stamp is refused.
    with proxy_cluster(tmp_path_factory.mktemp("rock-proxy-gateway"), require_sandbox_header=True) as (proxy, cluster):
        yield proxy, cluster, openai_upstream_server.url


def run_agent(sb: Any, calls: list[dict[str, str]]) -> dict[str, list[str]]:
    sb.write("/workspace/agent.py", AGENT)
    sb.write("/workspace/calls.json", json.dumps(calls).encode())
    r = sb.exec(["python3", "agent.py"], cwd="/workspace", timeout=90)
    assert r.exit_code == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_keys_are_bound_to_their_sandbox_through_the_gateway(stack: Any) -> None:
    from ale_rock.sdk import Sandbox

    proxy, cluster, upstream = stack
    stub = model_proxy_pb2_grpc.ModelProxyServiceStub(grpc.insecure_channel(proxy.grpc_address))
    client = cluster.client()
    with Sandbox.create(client=client, workdir="/workspace", allow=["model-proxy"]) as a, \
            Sandbox.create(client=client, workdir="/workspace", allow=["model-proxy"]) as b:
        eps = {}
        for name, sb in (("a", a), ("b", b)):
            eps[name] = stub.OpenEpisode(model_proxy_pb2.OpenEpisodeRequest(
                episode_id=f"ep-{name}", sandbox_id=sb.id, upstream=model_proxy_pb2.UPSTREAM_KIND_OPENAI,
                upstream_target=upstream, model="m"), timeout=10)  # fmt: skip
        ka, kb = eps["a"].api_key, eps["b"].api_key
        # A, with its own key, claiming to be B: the stamp overrides the claim, the call works.
        out_a = run_agent(a, [{"base": eps["a"].base_url, "key": ka, "text": "a1", "forge": b.id}])
        assert out_a == {"single": ["echo: a1"], "keepalive": ["echo: a1"]}
        # B: its own key works; A's key fails under B's URL, under A's URL, and with a forged header.
        out_b = run_agent(b, [
            {"base": eps["b"].base_url, "key": kb, "text": "b1"},
            {"base": eps["b"].base_url, "key": ka, "text": "x1"},
            {"base": eps["a"].base_url, "key": ka, "text": "x2"},
            {"base": eps["a"].base_url, "key": ka, "text": "x3", "forge": a.id},
            {"base": eps["b"].base_url, "key": kb, "text": "b2", "forge": a.id},
        ])  # fmt: skip
        expected = ["echo: b1", "HTTP 403", "HTTP 403", "HTTP 403", "echo: b2"]
        assert out_b == {"single": expected, "keepalive": expected}
    records = {n: [r.request["messages"][-1]["content"] for r in proxy.proxy.book.get(f"ep-{n}").records]
               for n in ("a", "b")}
    assert records == {"a": ["a1", "a1"], "b": ["b1", "b2", "b1", "b2"]}  # nothing charged to A from B


def test_a_call_that_bypasses_the_gateway_is_refused(stack: Any) -> None:
    """Outside any sandbox there is no stamp: with require_sandbox_header the proxy says 403."""
    import urllib.error
    import urllib.request

    proxy, _cluster, upstream = stack
    stub = model_proxy_pb2_grpc.ModelProxyServiceStub(grpc.insecure_channel(proxy.grpc_address))
    ep = stub.OpenEpisode(model_proxy_pb2.OpenEpisodeRequest(
        episode_id="ep-direct", sandbox_id="sb-x", upstream=model_proxy_pb2.UPSTREAM_KIND_OPENAI,
        upstream_target=upstream, model="m"), timeout=10)  # fmt: skip
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(f"{proxy.http_url}/e/ep-direct/v1/chat/completions", data=body,
                                 headers={"Authorization": f"Bearer {ep.api_key}"})
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req, timeout=10)
    assert ei.value.code == 403
