"""The task tool: sub-agents with a fresh, bounded context and an allowed-tool list."""

from __future__ import annotations

from ale_flow import AgentStopReason
from ale_flow.events import ToolFinished
from ale_flow.models.scripted import Reply, ScriptedModel, call


def test_subagent_runs_with_fresh_context_and_returns_summary(run_agent, ws):
    model = ScriptedModel([
        Reply(calls=[call("task", description="count", prompt="Write n.txt with 42 and report")]),
        Reply(calls=[call("write_file", path="n.txt", content="42")]),  # sub-agent step 1
        "wrote n.txt containing 42",  # sub-agent final answer
        "the sub-agent wrote n.txt",
    ])
    events, stopped, agent = run_agent(model, task="parent task")
    r = [e.result for e in events if isinstance(e, ToolFinished)][0]
    assert "finished: completed" in r.content and "wrote n.txt containing 42" in r.content
    child_first_prompt = model.seen[1]
    assert [m["content"] for m in child_first_prompt if m["role"] == "user"] == ["Write n.txt with 42 and report"]
    assert "task" not in model.tools_seen[1]  # no nested sub-agents
    assert ws.read_bytes("n.txt") == b"42" and "n.txt" in agent.env.files_written
    assert stopped.reason == AgentStopReason.COMPLETED


def test_agent_definition_restricts_tools_and_steps(run_agent, ws):
    ws.write_bytes(".ale/agents/reader.md", b"---\ndescription: reads code\ntools: [read_file, grep]\nmax_steps: 2\n---\nYou only read.")
    model = ScriptedModel([
        Reply(calls=[call("task", prompt="look around", agent="reader")]),
        Reply(calls=[call("shell", command="touch hacked")]),
        Reply(calls=[call("grep", pattern="x")]),
        "parent done",
    ])
    events, _, _ = run_agent(model)
    assert sorted(model.tools_seen[1]) == ["grep", "read_file"]
    assert model.seen[1][0]["content"].startswith("You only read.")
    r = [e.result for e in events if isinstance(e, ToolFinished)][0]
    assert "max_steps" in r.content and r.is_error
    assert not (ws.root and __import__("os").path.exists(ws.root + "/hacked"))


def test_unknown_agent_name_is_an_error(run_agent):
    events, _, _ = run_agent([Reply(calls=[call("task", prompt="x", agent="ghost")]), "ok"])
    r = [e.result for e in events if isinstance(e, ToolFinished)][0]
    assert r.is_error and "unknown agent 'ghost'" in r.content
