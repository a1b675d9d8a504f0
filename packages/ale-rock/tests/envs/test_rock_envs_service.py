"""The EnvService over real gRPC: gem conformance of the client, typed errors, budgets, timeouts,
a lost sandbox, terminal tasks with hidden tests."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from ale_proto.errors import error_detail_of
from ale_proto.v1 import common_pb2, env_pb2, env_pb2_grpc
from ale_rock.envs import (
    EnvDeadlineExceeded,
    EnvNotFound,
    EpisodeNotActive,
    InvalidAction,
    SandboxLost,
    make,
)
from ale_rock.envs.client import list_remote_envs
from ale_rock.envs.server import EnvServerConfig, serve_env_service


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    srv = serve_env_service(EnvServerConfig(max_action_bytes=4096, reap_interval_s=0.1))
    yield srv
    srv.stop(0)


def test_remote_env_matches_in_process_env(server: Any) -> None:
    actions = ["10", "5", "\\boxed{15}", "up", "nonsense", "12", "13"]
    for env_id in ("game:GuessTheNumber-v0", "game:FrozenLake-v0", "game:Sokoban-v0"):
        local, remote = make(env_id), make(env_id, address=server.address)
        for seed in (0, 1, 2):
            assert remote.reset(seed=seed) == local.reset(seed=seed)
            for a in actions:
                lr = local.step(a)
                rr = remote.step(a)
                assert rr == lr
                assert isinstance(rr[0], str) and isinstance(rr[1], float)
                assert isinstance(rr[2], bool) and isinstance(rr[3], bool) and isinstance(rr[4], dict)
                if lr[2] or lr[3]:
                    with pytest.raises(EpisodeNotActive):
                        remote.step(a)
                    break
        remote.close()
        remote.close()  # idempotent


def test_make_response_describes_actions_and_tools(server: Any) -> None:
    with make("tool:Billing-v0", address=server.address) as env:
        assert {t["function"]["name"] for t in env.tools} >= {"refund", "submit"}
        obs, info = env.reset(seed=3)
        obs, r, term, trunc, info = env.step("<tool_call>not json</tool_call>")
        assert info["error"] == "malformed_tool_call" and not term  # an observation, not a failure
        assert env.step(json.dumps({"name": "submit"}))[1:3] == (0.0, True)
    with make("game:GuessTheNumber-v0", address=server.address) as env:
        assert "integer" in env.action_description


def test_typed_errors_and_the_server_keeps_serving(server: Any) -> None:
    stub = env_pb2_grpc.EnvServiceStub(grpc.insecure_channel(server.address))
    with pytest.raises(grpc.RpcError) as e:
        stub.Make(env_pb2.MakeRequest(env_id="game:Missing-v9"), timeout=5)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and "game:Missing-v9" in e.value.details()
    detail = error_detail_of(e.value)
    assert detail.code == common_pb2.ERROR_CODE_NOT_FOUND and detail.metadata["env_id"] == "game:Missing-v9"
    with pytest.raises(EnvNotFound):
        make("gem:NoSuchGemEnv-v0", address=server.address)
    with pytest.raises(InvalidAction):
        make("game:GuessTheNumber-v0", address=server.address, colour="red")
    env = make("game:GuessTheNumber-v0", address=server.address)
    with pytest.raises(EpisodeNotActive):
        env.step("1")  # before reset
    env.reset(seed=0)
    with pytest.raises(InvalidAction) as big:
        env.step("9" * 5000)
    assert big.value.field == "action"
    with pytest.raises(grpc.RpcError) as e:
        stub.Step(env_pb2.StepRequest(env_handle=env.handle, action="x" * 5000), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    for _ in range(5):
        out = env.step("1")
    assert out[2] or out[3]
    with pytest.raises(grpc.RpcError) as e:
        stub.Step(env_pb2.StepRequest(env_handle=env.handle, action="1"), timeout=5)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as e:
        stub.Reset(env_pb2.ResetRequest(env_handle="no-such-handle"), timeout=5)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    env.close()
    assert (
        env.__class__(  # the server still serves after all that
            "game:GuessTheNumber-v0", server.address
        )
        .reset(seed=1)[0]
        .startswith("I picked")
    )


def test_episode_budget_reclaims_the_env(server: Any) -> None:
    env = make("game:GuessTheNumber-v0", address=server.address, episode_budget_s=1)
    env.reset(seed=0)
    env.step("3")
    deadline = time.monotonic() + 10
    while env.handle in server.host._slots and time.monotonic() < deadline:
        time.sleep(0.1)
    assert env.handle not in server.host._slots  # reclaimed by the reaper, without a Step
    with pytest.raises(EnvDeadlineExceeded):
        env.step("4")
    env.close()


def test_step_timeout_gives_deadline_exceeded(server: Any) -> None:
    env = make("test:Sleepy-v0", address=server.address, step_timeout_s=0.2, delay=2.0)
    env.reset()
    t = time.monotonic()
    with pytest.raises(EnvDeadlineExceeded):
        env.step("go")
    assert time.monotonic() - t < 1.5
    with pytest.raises(EnvDeadlineExceeded):
        env.step("go")  # the env was reclaimed
    env.close()


def test_terminal_task_episode_and_hidden_tests(server: Any) -> None:
    from ale_rock.envs.terminal import find_task

    task = find_task("csv-sales-rollup")
    env = make("task:csv-sales-rollup", address=server.address, max_turns=5)
    obs, info = env.reset()
    assert obs == task.spec.prompt and info["sandbox_id"]
    assert not any(
        p.startswith(".ale_tests")
        for p in (env.step(json.dumps({"name": "bash", "arguments": {"command": "ls -A"}}))[0]).split()
    )
    solve = task.solution["solve.sh"].decode()
    cmd = f"mkdir -p .ale_solution && cat > .ale_solution/solve.sh <<'ALE_EOF'\n{solve}\nALE_EOF\nbash .ale_solution/solve.sh"
    obs, r, term, trunc, info = env.step(json.dumps({"name": "bash", "arguments": {"command": cmd}}))
    assert "exit code 0" in obs, obs
    obs, r, term, trunc, info = env.step(json.dumps({"name": "submit", "arguments": {}}))
    assert term and r == 1.0 and info["final_reward"]["success"]
    assert len(info["final_reward"]["tests"]) >= 2 and all(t["passed"] for t in info["final_reward"]["tests"])
    env.close()


def test_terminal_task_failure_timeout_event_and_lost_sandbox(server: Any) -> None:
    env = make("task:csv-sales-rollup", address=server.address, max_turns=3, command_timeout_s=0.5)
    _, info = env.reset()
    obs, r, term, trunc, info = env.step(json.dumps({"name": "bash", "arguments": {"command": "sleep 5"}}))
    assert "timed out" in obs and info["safety_events"][0]["kind"] == "limit_hit"
    assert info["safety_events"][0]["command"] == "sleep 5" and server.host.metrics["safety_limit_hit"] >= 1
    obs, r, term, trunc, info = env.step("rm -rf /")  # not a tool call
    assert info["error"] == "malformed_tool_call"
    obs, r, term, trunc, info = env.step(json.dumps({"name": "bash", "arguments": {"command": "true"}}))
    assert trunc and r == 0.0 and not info["final_reward"]["success"]
    # A sandbox that dies under an episode surfaces as LOST / UNAVAILABLE, and the env is reclaimed.
    _, info = env.reset()
    server.host._get_provider().kill(info["sandbox_id"])
    with pytest.raises(SandboxLost):
        env.step(json.dumps({"name": "bash", "arguments": {"command": "ls"}}))
    stub = env_pb2_grpc.EnvServiceStub(grpc.insecure_channel(server.address))
    with pytest.raises(grpc.RpcError) as e:
        stub.Step(env_pb2.StepRequest(env_handle=env.handle, action="{}"), timeout=5)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    assert error_detail_of(e.value).code == common_pb2.ERROR_CODE_LOST
    env.close()
    assert server.host._get_provider()._runners == {}  # no sandbox leaked


def test_list_envs_paginates_and_health_is_serving(server: Any) -> None:
    ids = [e["env_id"] for e in list_remote_envs(server.address)]
    assert {"game:GuessTheNumber-v0", "tool:FileSystem-v0", "task:csv-sales-rollup"} <= set(ids)
    stub = env_pb2_grpc.EnvServiceStub(grpc.insecure_channel(server.address))
    req = env_pb2.ListEnvsRequest(prefix="game:")
    req.page.page_size = 2
    first = stub.ListEnvs(req, timeout=5)
    assert len(first.envs) == 2 and first.page.next_page_token and first.page.total_size >= 6
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(server.address))
    resp = health.Check(health_pb2.HealthCheckRequest(service="ale.v1.EnvService"), timeout=5)
    assert resp.status == health_pb2.HealthCheckResponse.SERVING
