"""Round trip of a recorded run through the contract's `ale.v1.Trajectory`."""

from __future__ import annotations

import pytest
from ale_flow.models.scripted import Reply, call
from ale_flow.trajectory import load_trajectory

pb = pytest.importorskip("ale_proto.v1.common_pb2", reason="ale-proto stubs are not generated")


def test_recorded_run_round_trips_through_the_contract(run_agent, ws):
    from ale_flow.trajectory_proto import from_proto, to_proto

    script = [
        Reply("reading", calls=[call("read_file", path="missing.txt")]),
        Reply(calls=[call("write_file", path="ok.txt", content="1")]),
        "all done",
    ]
    _, _, agent = run_agent(script, task="round trip")
    rec = load_trajectory(agent.trajectory_path)
    rec.turns[0].completion_logprobs = [-0.5, -0.25]
    rec.turns[0].completion_token_ids = [11, 12]
    rec.turns[1].relevant = False
    msg = to_proto(rec, task_id="tasks/demo")
    wire = pb.Trajectory.FromString(msg.SerializeToString())
    assert wire.task_id == "tasks/demo" and wire.stop_reason == pb.STOP_REASON_STOP
    t0, t1, t2 = wire.turns
    assert t0.error and t0.observations[0].is_error and t0.tool_calls[0].name == "read_file"
    assert t0.stop_reason == pb.STOP_REASON_TOOL_CALL and list(t0.completion_token_ids) == [11, 12]
    assert t1.irrelevant and not t1.error and t2.completion_text == "all done" and t2.stop_reason == pb.STOP_REASON_STOP
    back = from_proto(wire)
    assert back.task == "round trip" and back.stop_reason == "completed" and back.id == rec.id
    for a, b in zip(rec.turns, back.turns):
        assert (a.content, a.tool_calls, a.observations, a.error, a.relevant, a.chunk_index) == (b.content, b.tool_calls, b.observations, b.error, b.relevant, b.chunk_index)
    assert back.turns[0].completion_logprobs == [-0.5, -0.25]
