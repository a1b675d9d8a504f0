"""The same tools on an ale-rock sandbox workspace: Admin + Worker + bubblewrap, through the SDK."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from ale_flow import Agent, Settings, StopReason
from ale_flow.events import ToolFinished
from ale_flow.models.scripted import Reply, ScriptedModel, call

pytest.importorskip("ale_rock.sdk.cluster", reason="the ale-rock SDK (ale-flow[sandbox]) is not installed")
pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed"),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ale_rock.sdk import Sandbox
    from ale_rock.sdk.cluster import LocalCluster

    with LocalCluster(workers=1, workdir=tmp_path_factory.mktemp("flow-cluster")) as cluster, Sandbox.create(client=cluster.client()) as sb:
        yield sb


@pytest.fixture
def sws(sandbox: Any) -> Any:
    from ale_flow.sandbox_workspace import SandboxWorkspace

    ws = SandboxWorkspace(sandbox)
    ws.exec("rm -rf /workspace/* /workspace/.ale", timeout=30)
    return ws


def results(agent: Agent, script: list[Any]) -> tuple[list[Any], Any]:
    events = list(agent.run("work in the sandbox"))
    return [e.result for e in events if isinstance(e, ToolFinished)], events[-1]


def test_every_file_tool_and_shell_session_on_a_sandbox(sws):
    script = [
        Reply(calls=[call("write_file", path="src/app.py", content="x = 1\ny = 2\n")]),
        Reply(calls=[call("edit", path="src/app.py", old_string="y = 2", new_string="y = 3"), call("read_file", path="src/app.py", start_line=2, end_line=2)]),
        Reply(calls=[call("glob", pattern="**/*.py"), call("grep", pattern="y = 3"), call("list_directory", path="src")]),
        Reply(calls=[call("shell", command="cd src && export K=v")]),
        Reply(calls=[call("shell", command="echo $K; pwd; cat app.py")]),
        Reply(calls=[call("todo", todos=[{"content": "ship", "status": "done"}]), call("read_file", path="missing.txt"), call("write_file", path="/etc/x", content="no")]),
        "done in the sandbox",
    ]
    agent = Agent(ScriptedModel(script), sws, Settings(mode="yolo"))
    r, stopped = results(agent, script)
    assert stopped.reason == StopReason.COMPLETED
    write, edit, read, glob, grep, ls, sh1, sh2, todo, missing, outside = r
    assert not write.is_error and not edit.is_error and read.content == "     2\ty = 3"
    assert glob.content == "src/app.py" and grep.content == "src/app.py:2:y = 3" and ls.content == "app.py  (12 bytes)"
    assert not sh1.is_error and sh2.content.splitlines() == ["v", "/workspace/src", "x = 1", "y = 3"]
    assert agent.env.cwd == "src"
    assert not todo.is_error and sws.read_bytes(".ale/todo.json").startswith(b"[")
    assert missing.is_error and "FileNotFoundError" in missing.content
    assert outside.blocked and "outside the workspace" in outside.content
    assert agent.trajectory_path is not None and agent.trajectory_path.exists()  # kept on this machine


def test_timeout_and_interrupt_on_a_sandbox(sws):
    (r,), _ = results(Agent(ScriptedModel([Reply(calls=[call("shell", command="sleep 30", timeout=0.5)]), "ok"]), sws, Settings(mode="yolo")), [])
    assert r.is_error and "timed out" in r.content
    agent = Agent(ScriptedModel([Reply(calls=[call("shell", command="sleep 30; echo never")]), "never"]), sws, Settings(mode="yolo"))
    threading.Timer(1.0, agent.interrupt).start()
    (r,), stopped = results(agent, [])
    assert stopped.reason == StopReason.INTERRUPTED and "never" not in r.content and r.is_error
