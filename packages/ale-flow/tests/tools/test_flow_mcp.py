"""MCP tools over stdio, against a tiny MCP server started by the test (official `mcp` SDK)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from ale_flow.events import ToolFinished
from ale_flow.models.scripted import Reply, ScriptedModel, call
from ale_proto.serving import free_port

mcp = pytest.importorskip("mcp", reason="the mcp SDK (ale-flow[mcp] extra) is not installed")

SERVER = textwrap.dedent(
    """
    try:
        from mcp.server.mcpserver import MCPServer as Server   # mcp 2.x
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        from mcp.server.fastmcp import FastMCP as Server       # mcp 1.x
        from mcp.server.fastmcp.exceptions import ToolError

    server = Server("calc")

    @server.tool()
    def add(a: int, b: int) -> str:
        \"\"\"Add two integers.\"\"\"
        return str(a + b)

    @server.tool()
    def fail(reason: str) -> str:
        \"\"\"Always fails.\"\"\"
        raise ToolError(reason)

    import sys
    if len(sys.argv) > 1:  # streamable HTTP on the given port
        port = int(sys.argv[1])
        try:
            server.run("streamable-http", host="127.0.0.1", port=port)
        except TypeError:  # mcp 1.x takes host/port as settings
            server.settings.host, server.settings.port = "127.0.0.1", port
            server.run("streamable-http")
    else:
        server.run("stdio")
    """
)


@pytest.fixture
def server_script(tmp_path: Path) -> str:
    p = tmp_path / "calc_server.py"
    p.write_text(SERVER)
    return str(p)


def test_mcp_stdio_tools_through_the_agent(run_agent, server_script):
    settings = {"mcp_servers": {"calc": {"command": [sys.executable, server_script], "timeout_s": 30}}}
    model_script = [
        Reply(calls=[call("calc__add", a=2, b=40), call("calc__fail", reason="nope"), call("calc__add", a="x")]),
        Reply(calls=[call("task", prompt="add 5 and 6")]),
        Reply(calls=[call("calc__add", a=5, b=6)]),  # the sub-agent shares the live MCP session
        "the sum is 11",  # sub-agent's answer
        "42",
    ]
    model = ScriptedModel(model_script)
    events, stopped, agent = run_agent(model, **settings)
    try:
        assert {"calc__add", "calc__fail"} <= set(agent.tools.names())
        add, fail, bad, sub = [e.result for e in events if isinstance(e, ToolFinished)]
        assert "finished: completed" in sub.content and "the sum is 11" in sub.content
        child_after_call = model.seen[3]
        assert "calc__add" in model.tools_seen[2] and child_after_call[-1] == {"role": "tool", "content": "11", "tool_call_id": child_after_call[-2]["tool_calls"][0]["id"], "name": "calc__add"}
        assert add.content == "42" and not add.is_error
        assert fail.is_error and "nope" in fail.content
        assert bad.is_error and "expected integer" in bad.content  # schema from the server, checked locally
        assert stopped.final_message == "42"
    finally:
        agent.close()


def test_mcp_server_that_cannot_start_is_a_warning(run_agent, tmp_path):
    settings = {"mcp_servers": {"broken": {"command": [sys.executable, "-c", "import sys; sys.exit(3)"]}}}
    _, stopped, agent = run_agent(["fine without it"], **settings)
    assert stopped.final_message == "fine without it"
    assert agent.warnings and "broken" in agent.warnings[0]
    assert not [n for n in agent.tools.names() if n.startswith("broken__")]


def test_mcp_streamable_http_server(run_agent, server_script, tmp_path):
    import socket
    import subprocess
    import time

    port = free_port()
    proc = subprocess.Popen([sys.executable, server_script, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "MCP HTTP server exited"
                assert time.monotonic() < deadline, "MCP HTTP server did not start"
                time.sleep(0.2)
        settings = {"mcp_servers": {"web": {"transport": "http", "url": f"http://127.0.0.1:{port}/mcp"}}}
        events, stopped, agent = run_agent([Reply(calls=[call("web__add", a=1, b=2)]), "3"], **settings)
        agent.close()
        assert agent.warnings == []
        assert [e.result.content for e in events if isinstance(e, ToolFinished)] == ["3"]
    finally:
        proc.kill()
        proc.wait(timeout=10)
