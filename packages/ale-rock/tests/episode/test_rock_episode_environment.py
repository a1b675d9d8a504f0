"""The episode runner (``ale_rock.episode.run_episode``, what ``ale eval`` and training run) creates
each sandbox as the Harbor task's ``[environment]`` asks — work dir, env, CPUs, memory, egress
allow-list — checked from inside real bubblewrap sandboxes (Admin + Worker + egress gateway), with
the model proxy reached the way agents reach it; and only within the operator's policy."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_rock.envs.sandbox import SandboxPolicy, SdkProvider
from ale_rock.episode import AgentRun, CommandAgent, ErrorKind, Status, run_episode
from ale_rock.sdk import Sandbox
from ale_rock.sdk.model_proxy import ModelProxyClient
from ale_rock.tasks import load_task

from ..redteam import _egress_fixtures as egress_fx

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed")

# One model call through the proxy (stdlib urllib follows the sandbox's HTTP_PROXY to the egress
# gateway, which maps model-proxy to the proxy), then what the sandbox looks like from inside.
AGENT = b"""
import json, os, urllib.request
body = json.dumps({"model": os.environ["OPENAI_MODEL"], "messages": [{"role": "user", "content": "hi"}]}).encode()
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                             headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                      "Content-Type": "application/json"})
urllib.request.urlopen(req, timeout=30).read()
"""
PROBE = (
    "python3 agent.py && echo PWD=$(pwd) && echo VAR=$ALE_PROBE_VAR && "
    "echo ALLOWED=$(curl -s -m 5 http://{allowed}/) && echo OTHER=$(curl -s -m 5 http://{other}/) && "
    # 320 MiB in a sandbox of 256 MiB: the cgroup kills it (exit 137) where none is set.
    "python3 -c 'bytearray(320 * 2**20)'; echo HOG=$?; "
    "echo ok > done.txt"
)
TEST_SH = '[ -f /app/done.txt ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n'


def _task(root: Path, name: str, allowed: str, network: bool) -> Any:
    net = f'network_mode = "allowlist"\nallowed_hosts = ["{allowed}"]\n' if network else ""
    files = {
        "task.toml": ('schema_version = "1.4"\n[task]\nname = "t/' + name + '"\n[agent]\ntimeout_sec = 60\n'
                      '[verifier]\ntimeout_sec = 30\n[environment]\nworkdir = "/app"\ncpus = 0.5\nmemory_mb = 256\n'
                      f'{net}[environment.env]\nALE_PROBE_VAR = "from-task-toml"\n'),
        "instruction.md": "Probe the sandbox.\n", "tests/test.sh": TEST_SH,
    }  # fmt: skip
    for rel, text in files.items():
        (root / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / name / rel).write_text(text)
    return load_task(root / name)


class ProbeAgent:
    """The probe command in the sandbox, and what the Admin says the sandbox was given."""

    def __init__(self, command: str) -> None:
        self.inner = CommandAgent(command, {"agent.py": AGENT})
        self.info: Any = None
        self.policy: Any = None

    def run(self, ctx: Any, cancel: threading.Event) -> AgentRun:
        sb = Sandbox.connect(ctx.sandbox_id, client=ctx.provider.client)
        self.info, self.policy = sb.info, sorted(sb.network_policy())
        return self.inner.run(ctx, cancel)


@pytest.fixture(scope="module")
def far() -> Iterator[tuple[str, str]]:
    """Two HTTP servers on "other machines": the allow-listed one and another."""
    if egress_fx.problem():
        pytest.skip(egress_fx.problem())
    with egress_fx.remote_http_server() as (ip1, p1), egress_fx.remote_http_server() as (ip2, p2):
        yield f"{ip1}:{p1}", f"{ip2}:{p2}"


@pytest.fixture(scope="module")
def stack(byte_model: tuple[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real ModelProxy (agents reach it as http://model-proxy), a LocalCluster whose worker maps
    that host to it, and the proxy's upstream: the scripted InferenceService."""
    from ale_rock.local_cluster import LocalCluster, real_worker_argv
    from ale_rock.proxy import ModelProxyConfig, serve_model_proxy

    proxy = serve_model_proxy(ModelProxyConfig(public_base_url="http://model-proxy:80", require_sandbox_header=True,
                                               retries=0))  # fmt: skip
    argv = real_worker_argv({"model_proxy_address": proxy.http_url.removeprefix("http://")})
    try:
        with LocalCluster(workers=1, workdir=tmp_path_factory.mktemp("rock-episode-env"), worker_argv=argv) as c:
            client = ModelProxyClient(proxy.grpc_address)
            yield {"cluster": c, "proxy": client, "target": byte_model[0]}
            client.close()
    finally:
        proxy.stop(0)


def _episode(stack: dict[str, Any], task: Any, agent: Any, provider: Any) -> Any:
    return run_episode(task, agent, provider=provider, proxy=stack["proxy"], upstream="inference",
                       target=stack["target"], model="m", budget_s=60)  # fmt: skip


def _lines(out: Any) -> dict[str, str]:
    text = out.agent.output if out.agent else ""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and line.split("=", 1)[0].isupper())


def _provider(stack: dict[str, Any], policy: SandboxPolicy | None = None) -> SdkProvider:
    c = stack["cluster"]
    return SdkProvider(c.address, c.api_key(), allow=("model-proxy",), policy=policy)


def test_the_sandbox_is_the_tasks_environment(stack: dict[str, Any], far: tuple[str, str], tmp_path: Path) -> None:
    allowed, other = far
    task = _task(tmp_path, "allow", allowed, network=True)
    agent = ProbeAgent(PROBE.format(allowed=allowed, other=other))
    provider = _provider(stack)
    out = _episode(stack, task, agent, provider)
    seen = _lines(out)
    assert out.status == Status.SUCCESS and out.reward == 1.0, (out.error, out.agent)
    assert seen["PWD"] == "/app" and seen["VAR"] == "from-task-toml"
    assert agent.info.cpu_millis == 500 and agent.info.memory_bytes == 256 * 2**20
    assert seen["HOG"] == "137"  # the memory limit is enforced, not only recorded
    assert seen["ALLOWED"] == "hello from afar"
    assert seen["OTHER"].startswith("egress denied")  # not on the task's list
    ip, port = allowed.split(":")
    assert agent.policy == sorted([("model-proxy", 0), (ip, int(port))])
    assert any(e["kind"] == "egress_blocked" and other in e["detail"] for e in out.safety_events)
    assert not provider._sandboxes


def test_a_no_network_task_stays_no_network(stack: dict[str, Any], far: tuple[str, str], tmp_path: Path) -> None:
    allowed, other = far
    task = _task(tmp_path, "closed", allowed, network=False)
    agent = ProbeAgent(PROBE.format(allowed=allowed, other=other))
    out = _episode(stack, task, agent, _provider(stack))
    seen = _lines(out)
    assert out.status == Status.SUCCESS, (out.error, out.agent)
    assert agent.policy == [("model-proxy", 0)]  # the operator's host only
    assert seen["ALLOWED"].startswith("egress denied") and seen["OTHER"].startswith("egress denied")
    assert sum(e["kind"] == "egress_blocked" for e in out.safety_events) == 2


@pytest.mark.parametrize(("policy", "field"), [
    (SandboxPolicy(max_cpu=0.25), "[environment].cpus"),
    (SandboxPolicy(max_memory_bytes=128 * 2**20), "[environment].memory_mb"),
    (SandboxPolicy(task_egress=False), "[environment].allowed_hosts"),
])  # fmt: skip
def test_a_task_cannot_ask_beyond_the_policy(stack: dict[str, Any], tmp_path: Path, policy: SandboxPolicy,
                                             field: str) -> None:  # fmt: skip
    task = _task(tmp_path, "greedy", "192.0.2.1:80", network=True)
    provider = _provider(stack, policy)
    agent = ProbeAgent("true")
    out = _episode(stack, task, agent, provider)
    assert out.status == Status.ERROR and out.error_kind == ErrorKind.SETUP_FAILED and out.phase == "setup"
    assert field in out.error and agent.info is None  # refused before any sandbox or agent
    assert not provider._sandboxes
    live = Sandbox.list(client=provider.client, states=("pending", "running"))
    assert not [s for s in live if s.labels.get("ale.episode") == out.episode_id]
