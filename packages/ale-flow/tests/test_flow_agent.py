"""End-to-end tests of the loop with the scripted model: completion, limits, modes, interrupts."""

from __future__ import annotations

import threading
import time

from ale_flow import Agent, AgentStopReason, Settings
from ale_flow.events import AssistantMessage, MalformedToolCall, Reminder, ToolFinished
from ale_flow.models.scripted import Reply, ScriptedModel, call
from ale_flow.trajectory import load_trajectory


def results(events):
    return [e.result for e in events if isinstance(e, ToolFinished)]


def test_completes_and_returns_final_message(run_agent, ws):
    events, stopped, agent = run_agent([Reply(calls=[call("write_file", path="hello.txt", content="hi")]), "created hello.txt"])
    assert stopped.reason == AgentStopReason.COMPLETED
    assert stopped.final_message == "created hello.txt"
    assert stopped.steps == 2
    assert ws.read_bytes("hello.txt") == b"hi"
    traj = load_trajectory(agent.trajectory_path)
    assert traj.stop_reason == "completed" and len(traj.turns) == 2
    assert traj.turns[0].tool_calls[0]["name"] == "write_file" and not traj.turns[0].error


def test_model_sees_task_tools_and_results(run_agent):
    model = ScriptedModel([Reply(calls=[call("shell", command="echo marker-123")]), "ok"])
    run_agent(model, task="print a marker")
    first, second = model.seen
    assert first[0]["role"] == "system" and first[1] == {"role": "user", "content": "print a marker"}
    assert "shell" in model.tools_seen[0] and "task" in model.tools_seen[0]
    tool_msg = [m for m in second if m["role"] == "tool"][0]
    assert "marker-123" in tool_msg["content"] and tool_msg["tool_call_id"] == second[2]["tool_calls"][0]["id"]


def test_max_steps_limit(run_agent):
    model = ScriptedModel([Reply(calls=[call("list_directory")])], repeat_last=True)
    _, stopped, _ = run_agent(model, limits={"max_steps": 3}, detection={"identical_calls": 100})
    assert stopped.reason == AgentStopReason.MAX_STEPS and stopped.steps == 3


def test_token_and_cost_limits(run_agent):
    model = ScriptedModel([Reply("x" * 400, calls=[call("glob", pattern="*")])], repeat_last=True)
    _, stopped, _ = run_agent(model, limits={"max_tokens": 300}, detection={"identical_calls": 100, "repeated_content": 100})
    assert stopped.reason == AgentStopReason.MAX_TOKENS
    model = ScriptedModel([Reply("y" * 400, calls=[call("glob", pattern="*")])], repeat_last=True)
    _, stopped, _ = run_agent(
        model,
        limits={"max_cost_usd": 0.01},
        model={"price_per_1k_prompt": 1.0, "price_per_1k_completion": 1.0},
        detection={"identical_calls": 100, "repeated_content": 100},
    )
    assert stopped.reason == AgentStopReason.MAX_COST


def test_time_limit(run_agent):
    model = ScriptedModel([Reply(calls=[call("shell", command="sleep 0.3")])], repeat_last=True)
    _, stopped, _ = run_agent(model, limits={"time_limit_s": 0.5}, detection={"identical_calls": 100})
    assert stopped.reason == AgentStopReason.TIME_LIMIT


def test_interrupt_kills_running_shell_and_stops(ws):
    model = ScriptedModel([Reply(calls=[call("shell", command="sleep 30; echo never")]), "unreachable"])
    agent = Agent(model, ws, Settings(mode="yolo"))
    threading.Timer(0.5, agent.interrupt).start()
    t0 = time.monotonic()
    events = list(agent.run("sleep"))
    assert time.monotonic() - t0 < 25  # far below the 30 s the command/hook would take
    assert events[-1].reason == AgentStopReason.INTERRUPTED
    res = results(events)[0]
    assert res.is_error and "interrupted" in res.content and "never" not in res.content


def test_plan_mode_blocks_writes_but_allows_reads(run_agent, ws):
    ws.write_bytes("a.txt", b"content")
    events, stopped, _ = run_agent(
        [Reply(calls=[call("read_file", path="a.txt"), call("write_file", path="b.txt", content="x"), call("shell", command="touch c")]), "plan: ..."],
        mode="plan",
    )
    r = results(events)
    assert "content" in r[0].content and not r[0].is_error
    assert r[1].blocked and "plan mode" in r[1].content
    assert r[2].blocked
    assert not (ws.root and __import__("os").path.exists(ws.root + "/b.txt"))
    assert stopped.reason == AgentStopReason.COMPLETED


def test_default_and_accept_edits_modes(run_agent, ws):
    script = [Reply(calls=[call("write_file", path="e.txt", content="x"), call("shell", command="touch s.txt")]), "done"]
    events, _, _ = run_agent(list(script), mode="default")
    assert all(r.blocked for r in results(events)) and "needs approval" in results(events)[0].content
    events, _, _ = run_agent(list(script), mode="accept-edits")
    r = results(events)
    assert not r[0].blocked and r[1].blocked
    asked = []
    events, _, _ = run_agent(list(script), mode="default", agent_kwargs={"confirm": lambda c: asked.append(c.name) or True})
    assert asked == ["write_file", "shell"] and not any(r.blocked for r in results(events))


def test_unknown_tool_and_invalid_arguments_are_reported(run_agent):
    events, stopped, _ = run_agent(
        [Reply(calls=[call("no_such_tool", x=1), call("read_file", path=5), call("read_file")]), "giving up"]
    )
    r = results(events)
    assert "unknown tool 'no_such_tool'" in r[0].content and "read_file" in r[0].content
    assert "expected string" in r[1].content
    assert "missing required property 'path'" in r[2].content
    assert stopped.reason == AgentStopReason.COMPLETED


def test_malformed_calls_are_reported_counted_and_bounded(run_agent):
    model = ScriptedModel(['<tool_call>{"name": "shell", "arguments": {"command": "ls"</tool_call>'], repeat_last=True)
    events, stopped, agent = run_agent(model, limits={"max_malformed": 3})
    assert stopped.reason == AgentStopReason.MALFORMED_LIMIT
    assert sum(isinstance(e, MalformedToolCall) for e in events) == 3
    assert "could not be used" in model.seen[1][-1]["content"]
    assert all(t.error for t in load_trajectory(agent.trajectory_path).turns)


def test_truncated_call_then_recovery(run_agent, ws):
    model = ScriptedModel(['<tool_call>{"name": "write_file", "argu', '<tool_call>{"name": "write_file", "arguments": {"path": "r.txt", "content": "ok"}}</tool_call>', "fixed"])
    events, stopped, _ = run_agent(model)
    mal = [e for e in events if isinstance(e, MalformedToolCall)]
    assert len(mal) == 1 and "cut off" in mal[0].problems[0]
    assert stopped.reason == AgentStopReason.COMPLETED and ws.read_bytes("r.txt") == b"ok"


def test_parallel_read_only_calls(run_agent, ws):
    for i in range(4):
        ws.write_bytes(f"f{i}.txt", f"n{i}".encode())
    events, _, _ = run_agent([Reply(calls=[call("read_file", path=f"f{i}.txt") for i in range(4)]), "read all"])
    assert [r.content.split("\t")[1] for r in results(events)] == ["n0", "n1", "n2", "n3"]


def test_reminders_for_outside_changes_and_todo(run_agent, ws):
    ws.write_bytes("watched.txt", b"v1")

    def change_file(_msgs):
        ws.write_bytes("watched.txt", b"v2 changed by someone else")
        return Reply(calls=[call("todo", todos=[{"content": "step one", "status": "done"}, {"content": "step two", "status": "pending"}])])

    model = ScriptedModel([
        Reply(calls=[call("read_file", path="watched.txt"), call("todo", todos=[{"content": "step one", "status": "in_progress"}, {"content": "step two", "status": "pending"}])]),
        change_file,
        "done",
    ])
    events, _, _ = run_agent(model)
    notes = [e.text for e in events if isinstance(e, Reminder)]
    assert any("watched.txt was modified outside" in n for n in notes)
    assert any("Todo done: step one" in n and "step two" in n for n in notes)
    assert any("watched.txt was modified" in m["content"] for m in model.seen[2] if m["role"] == "user")


def test_todo_and_memory_in_system_prompt(run_agent, ws):
    ws.write_bytes("ALE.md", b"Always use tabs.")
    model = ScriptedModel([
        Reply(calls=[call("todo", todos=[{"content": "write tests", "status": "in_progress"}]), call("save_memory", fact="The API port is 8123.")]),
        "ok",
    ])
    run_agent(model)
    system = model.seen[1][0]["content"]
    assert "Always use tabs." in system and "write tests" in system and "The API port is 8123." in system


def test_workflow_expansion(run_agent, ws):
    ws.write_bytes(".ale/commands/release.md", b"---\ndescription: release\n---\nBump the version to $ARGUMENTS and tag it.")
    model = ScriptedModel(["ok"])
    run_agent(model, task="/release 1.2.3")
    assert model.seen[0][1]["content"] == "Bump the version to 1.2.3 and tag it."


def test_assistant_events_carry_usage(run_agent):
    events, stopped, _ = run_agent(["hello there"])
    msg = [e for e in events if isinstance(e, AssistantMessage)][0]
    assert msg.usage.prompt_tokens > 0 and stopped.usage.total_tokens >= msg.usage.total_tokens


def test_reminder_when_tool_set_changes(ws):
    from ale_flow.tools import FunctionTool, obj

    extra = FunctionTool("ping", "Answer pong.", obj({}), lambda a, c: "pong", read_only=True)
    agent_box: list[Agent] = []

    def add_tool(_msgs):
        agent_box[0].tools.add(extra)
        return Reply(calls=[call("list_directory")])

    model = ScriptedModel([add_tool, Reply(calls=[call("ping")]), "ok"])
    agent = Agent(model, ws, Settings(mode="yolo"))
    agent_box.append(agent)
    events = list(agent.run("use new tools"))
    notes = [e.text for e in events if isinstance(e, Reminder)]
    assert any("available tools changed" in n and "'ping'" in n for n in notes)
    assert [e.result.content for e in events if isinstance(e, ToolFinished)][-1] == "pong"


def test_generator_closed_early_still_ends_trajectory(ws):
    model = ScriptedModel([Reply(calls=[call("list_directory")])], repeat_last=True)
    agent = Agent(model, ws, Settings(mode="yolo"))
    gen = agent.run("stop early")
    for ev in gen:
        if isinstance(ev, AssistantMessage) and ev.step == 2:  # step 1 is complete and recorded
            break
    gen.close()
    rec = load_trajectory(agent.trajectory_path)
    assert rec.stop_reason == "aborted" and len(rec.turns) == 1


def test_environment_block_reports_cwd_and_files_changed(run_agent, ws):
    model = ScriptedModel([Reply(calls=[call("write_file", path="pkg/new.py", content="x"), call("shell", command="mkdir -p pkg && cd pkg")]), "ok"])
    run_agent(model)
    system = model.seen[1][0]["content"]
    assert "Shell working directory: pkg" in system and "Files you changed: pkg/new.py" in system
