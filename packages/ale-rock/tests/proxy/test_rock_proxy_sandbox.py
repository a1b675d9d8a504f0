"""An agent in a real bubblewrap sandbox reaches the ModelProxy only through its worker's egress
gateway (the reserved host ``model-proxy``), with its own episode's credential."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from ale_rock.envs.sandbox import SdkProvider
from ale_rock.envs.terminal import find_task
from ale_rock.episode import CommandAgent, run_episode
from ale_rock.sdk.model_proxy import ModelProxyClient

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed"
)


# The agent: one call with its own credential, then one with another episode's key (given to it in
# a file) under its own episode's URL.
AGENT = b"""
import json, os, sys, urllib.error, urllib.request
def chat(base, key, text):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
    req = urllib.request.Request(base + "/chat/completions", data=body,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        return json.load(urllib.request.urlopen(req, timeout=30))["choices"][0]["message"]["content"]
    except urllib.error.HTTPError as e:
        return "HTTP %d" % e.code
own = chat(os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"], "hello")
other = json.load(open("other.json"))
mixed = chat(os.environ["OPENAI_BASE_URL"], other["api_key"], "mix")
print(json.dumps({"own": own, "mixed": mixed}))
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, openai_upstream_server: Any, proxy_cluster: Any) -> Iterator[Any]:
    with proxy_cluster(tmp_path_factory.mktemp("rock-proxy-sandbox")) as (proxy, cluster):
        yield proxy, cluster, openai_upstream_server.url


def test_agent_in_sandbox_uses_only_its_own_episode(stack: Any) -> None:
    import grpc
    from ale_proto.v1 import model_proxy_pb2, model_proxy_pb2_grpc

    proxy, cluster, upstream = stack
    stub = model_proxy_pb2_grpc.ModelProxyServiceStub(grpc.insecure_channel(proxy.grpc_address))
    other = stub.OpenEpisode(
        model_proxy_pb2.OpenEpisodeRequest(
            episode_id="other", sandbox_id="sb-other", upstream=model_proxy_pb2.UPSTREAM_KIND_OPENAI,
            upstream_target=upstream, model="m",
        ),
        timeout=10,
    )  # fmt: skip
    provider = SdkProvider(cluster.address, cluster.api_key(), allow=("model-proxy",))
    files = {
        "agent.py": AGENT,
        "other.json": json.dumps({"base_url": other.base_url, "api_key": other.api_key}).encode(),
    }
    with ModelProxyClient(proxy.grpc_address) as client:
        result = run_episode(
            find_task("csv-sales-rollup"),
            CommandAgent("python3 agent.py", files),
            proxy=client,
            provider=provider,
            upstream="openai",
            target=upstream,
            model="m",
            budget_s=60,
        )
    assert result.agent is not None and result.agent.exit_code == 0, result
    out = json.loads(result.agent.output.strip().splitlines()[-1])
    assert out["own"] == "echo: hello"  # reached through the gateway, as model-proxy
    assert out["mixed"] == "HTTP 403"  # another episode's key under this episode's URL
    assert [r.request["messages"][-1]["content"] for r in result.records] == ["hello"]
    assert proxy.proxy.book.get("other").records == []  # nothing was charged to the other episode
