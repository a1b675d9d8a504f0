"""Every built-in tool, driven end-to-end through the agent by the scripted model."""

from __future__ import annotations

import json
import os
import time

import pytest
from ale_flow.events import ToolFinished
from ale_flow.models.scripted import Reply, call
from ale_flow.tools import ToolContext, ToolRegistry, builtin_tools
from ale_flow.workspace import OutsideWorkspaceError


def run_calls(run_agent, *calls, **settings):
    events, _, agent = run_agent([Reply(calls=list(calls)), "done"], **settings)
    return [e.result for e in events if isinstance(e, ToolFinished)], agent


def test_read_file_ranges(run_agent, ws):
    ws.write_bytes("r.txt", "\n".join(f"line{i}" for i in range(1, 11)).encode())
    (full, part), _ = run_calls(run_agent, call("read_file", path="r.txt"), call("read_file", path="r.txt", start_line=3, end_line=4))
    assert "line1" in full.content and "line10" in full.content
    assert part.content.splitlines() == ["     3\tline3", "     4\tline4"]
    (missing,), _ = run_calls(run_agent, call("read_file", path="nope.txt"))
    assert missing.is_error and "FileNotFoundError" in missing.content


def test_write_file_creates_parents(run_agent, ws):
    (r,), agent = run_calls(run_agent, call("write_file", path="a/b/c.txt", content="deep"))
    assert not r.is_error and ws.read_bytes("a/b/c.txt") == b"deep"
    assert "a/b/c.txt" in agent.env.files_written


def test_edit_unique_missing_ambiguous(run_agent, ws):
    ws.write_bytes("e.py", b"x = 1\ny = 1\nx = 1\n")
    ok, missing, ambiguous, all_ = run_calls(
        run_agent,
        call("edit", path="e.py", old_string="y = 1", new_string="y = 2"),
        call("edit", path="e.py", old_string="z = 9", new_string="z = 0"),
        call("edit", path="e.py", old_string="x = 1", new_string="x = 3"),
        call("edit", path="e.py", old_string="x = 1", new_string="x = 4", replace_all=True),
    )[0]
    assert not ok.is_error
    assert missing.is_error and "not found" in missing.content
    assert ambiguous.is_error and "occurs 2 times" in ambiguous.content
    assert not all_.is_error
    assert ws.read_bytes("e.py") == b"x = 4\ny = 2\nx = 4\n"


def test_multi_edit_is_all_or_nothing(run_agent, ws):
    ws.write_bytes("m.txt", b"alpha beta gamma")
    (bad,), _ = run_calls(run_agent, call("multi_edit", path="m.txt", edits=[{"old_string": "alpha", "new_string": "A"}, {"old_string": "zzz", "new_string": "Z"}]))
    assert bad.is_error and "edit 1 failed" in bad.content and ws.read_bytes("m.txt") == b"alpha beta gamma"
    (good,), _ = run_calls(run_agent, call("multi_edit", path="m.txt", edits=[{"old_string": "alpha", "new_string": "A"}, {"old_string": "gamma", "new_string": "G"}]))
    assert not good.is_error and ws.read_bytes("m.txt") == b"A beta G"


def test_glob_grep_list(run_agent, ws):
    ws.write_bytes("src/pkg/mod.py", b"def hello():\n    return 'Hi'\n")
    ws.write_bytes("src/other.txt", b"hello world\n")
    ws.write_bytes(".git/HEAD", b"hello")
    g, gr, gri, ls, bad = run_calls(
        run_agent,
        call("glob", pattern="**/*.py"),
        call("grep", pattern="hello", include="*.py"),
        call("grep", pattern="HI", case_sensitive=False),
        call("list_directory", path="src"),
        call("grep", pattern="("),
    )[0]
    assert g.content == "src/pkg/mod.py"
    assert gr.content == "src/pkg/mod.py:1:def hello():"
    assert "src/pkg/mod.py:2:" in gri.content and ".git" not in gri.content
    assert ls.content.splitlines() == ["other.txt  (12 bytes)", "pkg/"]
    assert bad.is_error and "invalid regular expression" in bad.content


def test_shell_session_persists_cwd_and_env(run_agent, ws):
    ws.write_bytes("sub/marker", b"")
    r1, r2, r3 = run_calls(
        run_agent,
        call("shell", command="cd sub && export GREETING=hey"),
        call("shell", command="echo $GREETING; ls; pwd"),
        call("shell", command="exit 3"),
    )[0]
    assert not r1.is_error
    assert r2.content.splitlines()[:2] == ["hey", "marker"] and r2.content.splitlines()[2].endswith("/ws/sub")
    assert r3.is_error and "[exit code 3]" in r3.content


def test_shell_timeout_kills_process_tree(run_agent, ws):
    (r,), _ = run_calls(run_agent, call("shell", command="(sleep 1.5; touch late) & sleep 20", timeout=0.3))
    assert r.is_error and "timed out" in r.content
    time.sleep(2.5)  # the background child would have created the file by now had it survived
    assert not os.path.exists(os.path.join(ws.root, "late"))


def test_todo_persists_and_validates(run_agent, ws):
    ok, bad, bad2 = run_calls(
        run_agent,
        call("todo", todos=[{"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]),
        call("todo", todos=[{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]),
        call("todo", todos=[{"content": "a", "status": "finished"}]),
    )[0]
    assert "[~] a" in ok.content
    assert bad.is_error and "at most one" in bad.content
    assert bad2.is_error and "is not one of" in bad2.content
    assert json.loads(ws.read_bytes(".ale/todo.json"))[1] == {"content": "b", "status": "pending"}


def test_save_memory_dedupes(run_agent, ws):
    run_calls(run_agent, call("save_memory", fact="db is postgres"), call("save_memory", fact="db  is postgres"))
    assert ws.read_bytes(".ale/memory.md") == b"- db is postgres\n"


def test_web_fetch_is_off_unless_allowed(run_agent):
    (r,), _ = run_calls(run_agent, call("web_fetch", url="http://127.0.0.1:9/"))
    assert r.is_error and "unknown tool 'web_fetch'" in r.content
    (r,), _ = run_calls(run_agent, call("web_fetch", url="http://127.0.0.1:9/"), tools={"allow_network": True})
    assert r.is_error and "fetch failed" in r.content


def test_web_fetch_reads_local_server(run_agent):
    import http.server
    import threading

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<html><script>x()</script><p>Hello page</p></html>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        (r,), _ = run_calls(run_agent, call("web_fetch", url=f"http://127.0.0.1:{srv.server_port}/"), tools={"allow_network": True})
    finally:
        srv.shutdown()
    assert "[HTTP 200]" in r.content and "Hello page" in r.content and "x()" not in r.content


def test_workspace_refuses_paths_outside(ws):
    reg = ToolRegistry(builtin_tools())
    r = reg.invoke("read_file", {"path": "../../etc/passwd"}, ToolContext(ws))
    assert r.is_error and "outside the workspace" in r.content
    with pytest.raises(OutsideWorkspaceError):
        ws.write_bytes("/etc/ale-flow-test", b"x")


def test_disabled_and_enabled_tool_sets(run_agent):
    _, _, agent = run_agent(["ok"], tools={"disabled": ["shell"]})
    assert "shell" not in agent.tools.names() and "read_file" in agent.tools.names()
    _, _, agent = run_agent(["ok"], tools={"enabled": ["read_file", "grep"]})
    assert agent.tools.names() == ["grep", "read_file"]


def test_a_dropped_shell_session_kills_its_shell_and_closes_its_pty(ws):
    import gc
    from pathlib import Path

    from ale_flow.shell_session import LocalShellSession

    s = LocalShellSession(ws.root)
    pid, fd = s.proc.pid, s.master
    assert s.run("sleep 0.05 & echo ok", 5, 1 << 16).output.endswith(b"ok\n")
    del s
    gc.collect()

    def alive() -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        except (FileNotFoundError, ProcessLookupError):  # gone; ESRCH when reaped mid-read
            return False

    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and alive():
        time.sleep(0.02)
    assert not alive()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and os.path.exists(f"/proc/self/fd/{fd}") and "ptmx" in os.readlink(f"/proc/self/fd/{fd}"):
        time.sleep(0.02)
    assert not (os.path.exists(f"/proc/self/fd/{fd}") and "ptmx" in os.readlink(f"/proc/self/fd/{fd}"))
