"""Compression: lossless offload and dedupe, lossy summary, turn boundaries, task/todo/facts kept."""

from __future__ import annotations

from ale_flow.context.compress import SUMMARY_PREFIX, CompressionConfig, compress, estimate_tokens
from ale_flow.events import Compressed
from ale_flow.models.scripted import Reply, ScriptedModel, call
from ale_flow.trajectory import load_trajectory
from ale_flow.types import Message, ToolCall


def history(n_turns: int, out_chars: int, same_output: bool = False) -> list[Message]:
    h = [Message("user", "THE TASK: fix the parser", turn=0, pinned=True)]
    for t in range(1, n_turns + 1):
        c = ToolCall(f"c{t}", "shell", {"command": f"cmd {t}"})
        h.append(Message("assistant", f"step {t}", [c], turn=t))
        body = "same output " * (out_chars // 12) if same_output else f"out{t} " + "z" * out_chars
        h.append(Message("tool", body, tool_call_id=c.id, name="shell", turn=t))
    return h


def test_no_compression_below_threshold(ws):
    assert compress(history(3, 100), CompressionConfig(), 100_000, ws, ".ale") is None


def test_lossless_offloads_large_outputs_to_files(ws):
    h = history(10, 20_000)
    res = compress(h, CompressionConfig(threshold=0.5), 100_000, ws, ".ale")
    assert res is not None and not res.lossy
    assert res.after_tokens < 0.6 * res.before_tokens
    assert len(res.offloaded_files) == 5  # the recent 30% of the window (5 turns here) stays verbatim
    old = res.history[2]
    assert old.role == "tool" and "saved to .ale/outputs/c1.txt" in old.content
    assert ws.read_bytes(".ale/outputs/c1.txt").decode() == h[2].content
    assert res.history[-1].content == h[-1].content  # recent turns verbatim
    assert res.history[0].content == "THE TASK: fix the parser"


def test_duplicates_collapse_to_the_latest(ws):
    h = history(8, 3000, same_output=True)
    res = compress(h, CompressionConfig(threshold=0.1, keep_recent_turns=2, keep_recent_fraction=0.01), 20_000, ws, ".ale", summarize=lambda old: "S")
    assert res is not None
    assert 1 in res.pruned_turns


def test_lossy_summary_cuts_at_turn_boundaries(ws):
    h = history(12, 2000)
    cfg = CompressionConfig(threshold=0.5, keep_recent_turns=3, keep_recent_fraction=0.05, offload_chars=10**9)
    res = compress(h, cfg, 8000, ws, ".ale", summarize=lambda old: f"summarized {len(old)} messages")
    assert res is not None and res.lossy
    assert res.history[0].pinned and res.history[0].content.startswith("THE TASK")
    assert res.history[1].content.startswith(SUMMARY_PREFIX) and "summarized 18 messages" in res.history[1].content
    kept = res.history[2:]
    # every kept tool result still has its assistant call (no cut inside a turn)
    call_ids = {c.id for m in kept for c in m.tool_calls}
    assert all(m.tool_call_id in call_ids for m in kept if m.role == "tool")
    assert [m.turn for m in kept if m.role == "assistant"] == [10, 11, 12]
    assert res.pruned_turns == set(range(1, 10))
    assert res.after_tokens < estimate_tokens(h)


def test_agent_compression_keeps_task_todo_and_facts(run_agent, ws):
    big = "echo " + "A" * 3000
    script = [
        Reply(calls=[call("todo", todos=[{"content": "keep me in context", "status": "in_progress"}]), call("save_memory", fact="the magic number is 7")]),
    ] + [Reply(f"working {i}", calls=[call("shell", command=f"{big} {i}")]) for i in range(8)] + ["done"]
    model = ScriptedModel(script, context_window=4000)
    events, stopped, agent = run_agent(model, task="THE ORIGINAL TASK", compression={"threshold": 0.6, "keep_recent_turns": 2, "keep_recent_fraction": 0.2})
    comp = [e for e in events if isinstance(e, Compressed)]
    assert comp and any(c.lossy for c in comp)
    last_prompt = model.seen[-1]
    users = [m["content"] for m in last_prompt if m["role"] == "user"]
    assert users[0] == "THE ORIGINAL TASK"
    assert "keep me in context" in last_prompt[0]["content"] and "the magic number is 7" in last_prompt[0]["content"]
    assert any(u.startswith(SUMMARY_PREFIX) for u in users)
    assert sum(len(str(m.get("content") or "")) for m in last_prompt) // 4 < 4000
    traj = load_trajectory(agent.trajectory_path)
    flags = {t.index: t.relevant for t in traj.turns}
    assert flags[1] is False and flags[max(flags)] is True
