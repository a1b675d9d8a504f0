"""The same tools on an ale-rock sandbox workspace: Admin + Worker + bubblewrap, through the SDK."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from ale_flow import Agent, AgentStopReason, Settings
from ale_flow.events import ToolFinished
from ale_flow.models.scripted import Reply, ScriptedModel, call

pytest.importorskip("ale_rock.local_cluster", reason="the ale-rock SDK (ale-flow[sandbox]) is not installed")
pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (apt bubblewrap) is not installed"),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ale_rock.local_cluster import LocalCluster
    from ale_rock.sdk import Sandbox

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
    assert stopped.reason == AgentStopReason.COMPLETED
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
    assert stopped.reason == AgentStopReason.INTERRUPTED and "never" not in r.content and r.is_error


# -- issue 12 item 4: one round trip per shell call, the same text locally and in a sandbox ------

class _Counter(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """A client interceptor: the RPCs the SDK really sends, by method."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.calls.append(details.method.rsplit("/", 1)[-1])
        return continuation(details, request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        self.calls.append(details.method.rsplit("/", 1)[-1])
        return continuation(details, request)


@pytest.fixture(scope="module")
def counted(sandbox: Any) -> Iterator[tuple[Any, _Counter]]:
    from ale_flow.sandbox_workspace import SandboxWorkspace
    from ale_proto.v1 import sandbox_pb2_grpc
    from ale_rock.sdk import Client, Sandbox

    counter = _Counter()
    client = Client(sandbox.client.address, sandbox.client.settings.api_key)
    client.stub = sandbox_pb2_grpc.SandboxServiceStub(grpc.intercept_channel(client._channel, counter))
    yield SandboxWorkspace(Sandbox.connect(sandbox.id, client=client)), counter
    client.close()


def test_a_shell_call_in_a_sandbox_is_one_rpc(counted, sws):
    from ale_flow.tools import ToolContext
    from ale_flow.tools.shell import exec_shell, shell

    ws, counter = counted
    # Before: the file-based emulation needs Exec + ReadFile from here (each admin -> worker -> Rocklet).
    ctx = ToolContext(ws)
    counter.calls.clear()
    assert exec_shell({"command": "cd /tmp && export X=1"}, ctx).content == "[no output]"
    assert counter.calls == ["Exec", "ReadFile"]
    # Now: the first call opens the session, every later one is a single RunInSession.
    ctx = ToolContext(ws)
    counter.calls.clear()
    assert shell({"command": "mkdir -p d && cd d && export X=1"}, ctx).content == "[no output]"
    assert counter.calls == ["CreateSession", "RunInSession"]
    for cmd, want in [("echo $X", "1\n"), ("pwd", "/workspace/d\n"), ("cd .. && echo up", "up\n"), ("echo $X; pwd", "1\n/workspace\n")]:
        counter.calls.clear()
        r = shell({"command": cmd}, ctx)
        assert (r.content, r.is_error) == (want, False)
        assert counter.calls == ["RunInSession"], (cmd, counter.calls)
    assert ctx.env.cwd == "."


def test_workspace_exec_interleaves_stdout_and_stderr_like_local(sws, tmp_path):
    from ale_flow import LocalWorkspace

    cmd = "for i in 1 2 3; do echo out$i; echo err$i >&2; done"
    want = "out1\nerr1\nout2\nerr2\nout3\nerr3\n"
    assert LocalWorkspace(tmp_path).exec(cmd, timeout=10).output == want
    assert sws.exec(cmd, timeout=10).output == want  # was out1..3 then err1..3


EQUALITY_SCRIPT: list[tuple[str, float]] = [
    ("mkdir -p sub && cd sub && export GREETING='héllo 世界' && touch b a c", 10),
    ('echo "$GREETING"; basename "$PWD"; ls', 10),
    ("for i in 1 2 3; do echo out$i; echo err$i >&2; done", 10),
    ("printf 'no newline'", 10),
    ("false", 10),
    ("echo partial; ls /nonexistent-dir", 10),
    ("printf 'ünïcødé ✓ \\x41\\n'; echo \"it's\" '$HOME' $'tab\\tx'", 10),
    ("cat; echo stdin-is-empty", 10),
    ('echo "unbalanced', 10),
    ("cat <<'EOF'\nheredoc $GREETING\nEOF", 10),
    ("echo " + "z" * 6000 + " | wc -c", 10),  # a line longer than the terminal's 4095 bytes
    ("seq 1 60000", 10),  # over the tool's 30k characters: cut in the middle
    ("head -c 1100000 /dev/zero | tr '\\0' a", 20),  # over the 1 MiB session cap: the head, and a note
    ("echo before; sleep 5; echo never", 0.5),  # a timeout
    ('echo still here; echo "$GREETING"; basename "$PWD"', 10),
    ("echo bye >&2; exit 7", 10),  # ends the shell
    ('echo "$GREETING"; basename "$PWD"', 10),  # a new one, same cwd and variables
]


def _transcript(ws: Any) -> list[tuple[str, bool, str]]:
    from ale_flow.tools import ToolContext
    from ale_flow.tools.shell import shell

    ctx = ToolContext(ws)
    out = []
    for cmd, timeout in EQUALITY_SCRIPT:
        r = shell({"command": cmd, "timeout": timeout}, ctx)
        out.append((r.content, r.is_error, ctx.env.cwd))
    return out


def test_local_and_sandbox_shells_return_the_same_text(sws, tmp_path):
    from ale_flow import LocalWorkspace

    local = _transcript(LocalWorkspace(tmp_path / "ws"))
    remote = _transcript(sws)
    for (cmd, _), a, b in zip(EQUALITY_SCRIPT, local, remote, strict=True):
        assert a == b, f"{cmd[:60]!r}:\nlocal   {a!r:.600}\nsandbox {b!r:.600}"
    by_cmd = dict(zip([c for c, _ in EQUALITY_SCRIPT], local, strict=True))
    # And the text is what the model should see (not just equal on both sides).
    assert by_cmd[EQUALITY_SCRIPT[1][0]][0] == "héllo 世界\nsub\na  b  c\n"
    assert by_cmd[EQUALITY_SCRIPT[2][0]][0] == "out1\nerr1\nout2\nerr2\nout3\nerr3\n"
    assert by_cmd["false"][:2] == ("[exit code 1]", True)
    assert by_cmd["cat; echo stdin-is-empty"][0] == "stdin-is-empty\n"
    assert "unexpected EOF" in by_cmd['echo "unbalanced'][0] and "[exit code 2]" in by_cmd['echo "unbalanced'][0]
    assert by_cmd[EQUALITY_SCRIPT[10][0]][0] == "6001\n"
    assert "characters omitted" in by_cmd["seq 1 60000"][0] and by_cmd["seq 1 60000"][0].endswith("60000\n")
    timed = by_cmd["echo before; sleep 5; echo never"]
    assert timed[1] and timed[0].startswith("before\n") and "never" not in timed[0] and "timed out after 0.5s" in timed[0]
    assert by_cmd[EQUALITY_SCRIPT[14][0]][0] == "still here\nhéllo 世界\nsub\n"
    assert by_cmd["echo bye >&2; exit 7"][0].startswith("bye\n") and "[exit code 7]" in by_cmd["echo bye >&2; exit 7"][0]
    assert local[-1][:3] == ("héllo 世界\nsub\n", False, "sub")


def test_sandbox_errors_map_to_os_errors_by_type(sws):
    """The SDK's typed errors (and the errno the Rocklet names) become the OSErrors tools handle."""
    sws.write_bytes("d/f.txt", b"x")
    for attempt, expected in (
        (lambda: sws.read_bytes("missing.txt"), FileNotFoundError),
        (lambda: sws.list_dir("missing"), FileNotFoundError),
        (lambda: sws.read_bytes("d"), IsADirectoryError),
        (lambda: sws.list_dir("d/f.txt"), NotADirectoryError),
    ):
        with pytest.raises(expected) as e:
            attempt()
        assert type(e.value) is expected  # the builtin, not the SDK's class
