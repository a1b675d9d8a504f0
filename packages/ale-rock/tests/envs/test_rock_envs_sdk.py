"""A terminal task through the EnvService with real sandboxes: Admin + Worker + bubblewrap, via
the SDK-backed SandboxProvider."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ale_rock.envs import SandboxLost, make
from ale_rock.envs.server import EnvServerConfig, serve_env_service

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed"
)


@pytest.fixture(scope="module")
def env_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ale_rock.local_cluster import LocalCluster

    workdir: Path = tmp_path_factory.mktemp("rock-envs-sdk")
    with LocalCluster(workers=1, workdir=workdir) as cluster:
        srv = serve_env_service(
            EnvServerConfig(sandbox="sdk", sdk_address=cluster.address, sdk_api_key=cluster.api_key())
        )
        yield srv, cluster
        srv.stop(0)


def bash(command: str) -> str:
    return json.dumps({"name": "bash", "arguments": {"command": command}})


def test_terminal_task_in_a_real_sandbox(env_server: Any) -> None:
    from ale_rock.envs.terminal import find_task
    from ale_rock.sdk import Sandbox

    srv, cluster = env_server
    task = find_task("csv-sales-rollup")
    env = make("task:csv-sales-rollup", address=srv.address, max_turns=5)
    obs, info = env.reset()
    sid = info["sandbox_id"]
    assert Sandbox.connect(sid, client=cluster.client()).state == "running"
    obs, *_ = env.step(bash("ls && pwd"))
    assert "sales.csv" in obs and "/workspace" in obs
    solve = task.solution["solve.sh"].decode()
    obs, *_ = env.step(
        bash(
            f"mkdir -p .ale_solution && cat > .ale_solution/solve.sh <<'ALE_EOF'\n{solve}\nALE_EOF\nbash .ale_solution/solve.sh"
        )
    )
    assert "exit code 0" in obs, obs
    obs, reward, term, trunc, info = env.step(json.dumps({"name": "submit"}))
    assert term and reward == 1.0 and info["final_reward"]["success"]
    env.close()
    # Closing the env deleted its sandbox.
    assert all(s.id != sid for s in Sandbox.list(client=cluster.client()) if s.state == "running")


def test_a_deleted_sandbox_surfaces_as_lost(env_server: Any) -> None:
    from ale_rock.sdk import Sandbox

    srv, cluster = env_server
    env = make("task:csv-sales-rollup", address=srv.address)
    _, info = env.reset()
    Sandbox.connect(info["sandbox_id"], client=cluster.client()).delete()
    with pytest.raises(SandboxLost):
        env.step(bash("ls"))
    env.close()


def test_blocked_egress_is_a_safety_event_of_the_step(env_server: Any) -> None:
    srv, _cluster = env_server
    env = make("task:csv-sales-rollup", address=srv.address, command_timeout_s=20)
    env.reset()
    obs, r, term, trunc, info = env.step(bash("curl -s -m 5 http://192.0.2.1/ ; echo rc=$?"))
    events = info.get("safety_events", [])
    assert [e["kind"] for e in events] == ["egress_blocked"], obs
    assert "192.0.2.1" in events[0]["detail"] and "curl" in events[0]["command"]
    assert srv.host.metrics["safety_egress_blocked"] >= 1
    obs, r, term, trunc, info = env.step(bash("echo quiet"))
    assert "safety_events" not in info  # only new events are attached to a step
    env.close()
