"""Loop and failure-streak detection: intervention first, then a stop."""

from __future__ import annotations

from ale_flow import AgentStopReason
from ale_flow.context.detection import DetectionConfig, Detector
from ale_flow.events import Intervention
from ale_flow.models.scripted import Reply, ScriptedModel, call
from ale_flow.types import ToolCall, ToolResult

OK = ToolResult("ok")


def test_identical_calls_intervene_then_stop(run_agent):
    model = ScriptedModel([Reply(calls=[call("list_directory", path=".")])], repeat_last=True)
    events, stopped, _ = run_agent(model, detection={"identical_calls": 3, "max_interventions": 1})
    assert [e for e in events if isinstance(e, Intervention)][0].text.startswith("You called list_directory with identical arguments 3 times")
    assert stopped.reason == AgentStopReason.LOOP_DETECTED and stopped.steps == 6
    assert any("identical arguments" in m["content"] for m in model.seen[3] if m["role"] == "user")


def test_ping_pong_is_detected():
    d = Detector(DetectionConfig(ping_pong_cycles=3))
    a, b = ToolCall("1", "read_file", {"path": "a"}), ToolCall("2", "read_file", {"path": "b"})
    verdicts = [d.observe("", [c], [OK]) for c in [a, b, a, b, a, b]]
    assert verdicts[:5] == [None] * 5 and verdicts[5] is not None and "alternating" in verdicts[5].message


def test_repeated_content_is_detected():
    d = Detector(DetectionConfig(repeated_content=3))
    out = [d.observe("I will now  check the file.", [ToolCall(str(i), "grep", {"pattern": str(i)})], [OK]) for i in range(3)]
    assert out[2] is not None and "same reply" in out[2].message


def test_failure_streak_intervenes_and_stops(run_agent):
    model = ScriptedModel([Reply(calls=[call("read_file", path=f"missing{i}.txt")]) for i in range(20)])
    events, stopped, _ = run_agent(model, detection={"failure_streak": 3, "max_interventions": 1})
    assert any("failed" in e.text for e in events if isinstance(e, Intervention))
    assert stopped.reason == AgentStopReason.FAILURE_STREAK


def test_progress_resets_failure_streak():
    d = Detector(DetectionConfig(failure_streak=3))
    err = ToolResult("Error", is_error=True)
    seq = [err, err, OK, err, err, OK]
    assert all(d.observe("", [ToolCall(str(i), "shell", {"command": str(i)})], [r]) is None for i, r in enumerate(seq))
