"""EnvService and EnvHubService hosted by a real Admin on its port, behind its API keys; task
environments get bubblewrap sandboxes from that same Admin."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from ale_proto import errors as wire_errors
from ale_proto.v1 import common_pb2, env_pb2, env_pb2_grpc, sandbox_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

KEY_A, KEY_B = "key-envs-a", "key-envs-b"


def meta(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


def failure(fn: Any) -> tuple[grpc.StatusCode, common_pb2.ErrorDetail]:
    with pytest.raises(grpc.RpcError) as ei:
        fn()
    return ei.value.code(), wire_errors.error_detail_of(ei.value)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ale_rock.local_cluster import LocalCluster

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (apt bubblewrap) is not installed")
    workdir: Path = tmp_path_factory.mktemp("rock-admin-envs")
    with LocalCluster(workers=1, workdir=workdir, namespaces={"a": KEY_A, "b": KEY_B}) as c:
        yield c


@pytest.fixture(scope="module")
def channel(cluster: Any) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(cluster.address) as ch:
        yield ch


def test_health_names_both_services(channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for name in ("ale.v1.EnvService", "ale.v1.EnvHubService"):
        resp = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
        assert resp.status == health_pb2.HealthCheckResponse.SERVING, name


def test_text_game_with_namespaced_handles(channel: grpc.Channel) -> None:
    stub = env_pb2_grpc.EnvServiceStub(channel)
    code, d = failure(lambda: stub.ListEnvs(env_pb2.ListEnvsRequest(), timeout=10))
    assert code == grpc.StatusCode.UNAUTHENTICATED and d.code == common_pb2.ERROR_CODE_UNAUTHENTICATED
    code, _ = failure(lambda: stub.ListEnvs(env_pb2.ListEnvsRequest(), timeout=10, metadata=meta("nope")))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    ids = [e.env_id for e in stub.ListEnvs(env_pb2.ListEnvsRequest(), timeout=10, metadata=meta(KEY_A)).envs]
    assert "game:GuessTheNumber-v0" in ids

    handle = stub.Make(env_pb2.MakeRequest(env_id="game:GuessTheNumber-v0"), timeout=10, metadata=meta(KEY_A)).env_handle
    obs = stub.Reset(env_pb2.ResetRequest(env_handle=handle, seed=3), timeout=10, metadata=meta(KEY_A)).observation
    assert obs
    # Another namespace cannot see, step or close the handle.
    step_b = env_pb2.StepRequest(env_handle=handle, action="\\boxed{5}")
    code, d = failure(lambda: stub.Step(step_b, timeout=10, metadata=meta(KEY_B)))
    assert code == grpc.StatusCode.NOT_FOUND and d.field == "env_handle"
    code, _ = failure(lambda: stub.Close(env_pb2.CloseRequest(env_handle=handle), timeout=10, metadata=meta(KEY_B)))
    assert code == grpc.StatusCode.NOT_FOUND
    # The owner plays on, by bisection on the hints, and wins within the default 5 guesses.
    lo, hi, rewards = 1, 20, []
    for _ in range(5):
        guess = (lo + hi) // 2
        r = stub.Step(env_pb2.StepRequest(env_handle=handle, action=f"\\boxed{{{guess}}}"), timeout=10,
                      metadata=meta(KEY_A))
        rewards.append(r.reward)
        if r.terminated or r.truncated:
            break
        lo, hi = (guess + 1, hi) if "higher" in r.observation else (lo, guess - 1)
    assert r.terminated and rewards[-1] == 1.0 and "Correct" in r.observation, rewards
    stub.Close(env_pb2.CloseRequest(env_handle=handle), timeout=10, metadata=meta(KEY_A))
    code, _ = failure(lambda: stub.Step(env_pb2.StepRequest(env_handle=handle, action="x"), timeout=10,
                                        metadata=meta(KEY_A)))
    assert code == grpc.StatusCode.NOT_FOUND
    code, _ = failure(lambda: stub.Make(env_pb2.MakeRequest(env_id="game:Nope-v0"), timeout=10, metadata=meta(KEY_A)))
    assert code == grpc.StatusCode.NOT_FOUND



def _shape(d: common_pb2.ErrorDetail, handle: str) -> tuple[Any, ...]:
    """An error detail with the handle it names replaced, to compare two handles' answers."""
    return (d.code, d.message.replace(handle, "H"), d.field,
            sorted((k, v.replace(handle, "H")) for k, v in d.metadata.items()))


def test_another_namespaces_live_handle_looks_like_no_handle(channel: grpc.Channel) -> None:
    """Existence leak: a live handle of namespace a, used by b, must answer exactly as a handle
    that never existed — same code, message, field and metadata — in single calls and in Batch."""
    stub = env_pb2_grpc.EnvServiceStub(channel)
    live = stub.Make(env_pb2.MakeRequest(env_id="game:GuessTheNumber-v0"), timeout=10, metadata=meta(KEY_A)).env_handle
    missing = live[:-6] + ("000000" if not live.endswith("000000") else "111111")
    try:
        answers = []
        for h in (live, missing):
            code, d = failure(lambda h=h: stub.Step(env_pb2.StepRequest(env_handle=h, action="x"), timeout=10,
                                                    metadata=meta(KEY_B)))
            batch = stub.Batch(env_pb2.EnvServiceBatchRequest(calls=[env_pb2.EnvCall(
                step=env_pb2.StepRequest(env_handle=h, action="x"))]), timeout=10, metadata=meta(KEY_B))
            answers.append((code, _shape(d, h), _shape(batch.results[0].error, h)))
        assert answers[0] == answers[1]
        assert answers[0][0] == grpc.StatusCode.NOT_FOUND
    finally:
        stub.Close(env_pb2.CloseRequest(env_handle=live), timeout=10, metadata=meta(KEY_A))

def test_task_env_runs_in_a_sandbox_of_this_admin(cluster: Any) -> None:
    from ale_rock.envs import make
    from ale_rock.sdk import Sandbox

    env = make("task:csv-sales-rollup", address=cluster.address, api_key=KEY_A, max_turns=3)
    try:
        obs, info = env.reset()
        sid = info["sandbox_id"]
        obs, *_ = env.step(json.dumps({"name": "bash", "arguments": {"command": "ls && pwd"}}))
        assert "sales.csv" in obs and "/workspace" in obs
        # The sandbox belongs to the Admin's envs namespace, not to the caller's.
        assert all(s.id != sid for s in Sandbox.list(client=cluster.client("a")))
    finally:
        env.close()


def test_envhub_on_the_admin_port(channel: grpc.Channel) -> None:
    hub = env_pb2_grpc.EnvHubServiceStub(channel)
    code, _ = failure(lambda: hub.ListEnvSpecs(env_pb2.ListEnvSpecsRequest(), timeout=10))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    spec = env_pb2.EnvSpec(name="admin-hosted", version="2", base=env_pb2.EnvBase(docker_image="img:1"))
    hub.RegisterEnvSpec(env_pb2.RegisterEnvSpecRequest(spec=spec), timeout=10, metadata=meta(KEY_A))
    got = hub.GetEnvSpec(env_pb2.GetEnvSpecRequest(name="admin-hosted"), timeout=10, metadata=meta(KEY_B))
    assert got.spec.version == "2"
    # A sandbox naming the spec before it is built: INVALID_ARGUMENT on spec.image, nothing started.
    from ale_proto.v1 import sandbox_pb2_grpc

    sandboxes = sandbox_pb2_grpc.SandboxServiceStub(channel)
    req = sandbox_pb2.CreateSandboxRequest(
        spec=sandbox_pb2.SandboxSpec(image="admin-hosted:2", backend=sandbox_pb2.SANDBOX_BACKEND_DOCKER),
        request_id="envhub-unbuilt",
    )
    code, d = failure(lambda: sandboxes.CreateSandbox(req, timeout=10, metadata=meta(KEY_A)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and d.field == "spec.image"
    assert "not built" in d.message


def test_an_image_naming_a_built_spec_resolves_to_its_build(tmp_path: Path) -> None:
    """Unit: the servicer's resolution step against a hub with an in-memory builder."""
    from ale_rock.admin.service import SandboxServicer
    from ale_rock.envhub.hub import EnvHub
    from ale_rock.envhub.registry import Registry
    from ale_rock.envhub.spec import parse_spec

    class Mem:
        backend = "docker"

        def __init__(self) -> None:
            self.images: set[str] = set()

        def artifact(self, spec: Any, spec_hash: str) -> str:
            return f"mem/{spec.name}:{spec_hash[:8]}"

        def exists(self, artifact: str) -> bool:
            return artifact in self.images

        def build(self, spec: Any, spec_hash: str, log: Any) -> str:
            self.images.add(self.artifact(spec, spec_hash))
            return self.artifact(spec, spec_hash)

        def remove(self, artifact: str) -> None:
            self.images.discard(artifact)

    builder = Mem()
    hub = EnvHub(Registry(tmp_path / "h.db"), {"docker": lambda: builder})
    hub.register(parse_spec("name: tools\nversion: 1\nbase: {docker_image: img}\n"))
    list(hub.build("tools"))
    servicer = SandboxServicer(manager=None, auth=None, hub=hub)  # type: ignore[arg-type]
    spec = sandbox_pb2.SandboxSpec(image="tools:1")
    assert servicer._resolve_image(spec) and spec.image.startswith("mem/tools:")
    plain = sandbox_pb2.SandboxSpec(image="python:3.11")
    assert not servicer._resolve_image(plain) and plain.image == "python:3.11"
    local = sandbox_pb2.SandboxSpec(image="tools:1", backend=sandbox_pb2.SANDBOX_BACKEND_LOCAL)
    assert not servicer._resolve_image(local) and local.image == "tools:1"
    hub.registry.close()
