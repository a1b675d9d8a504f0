"""Convert recorded trajectories to and from the contract's `ale.v1.Trajectory` (edge module:
the only place, with `service.py`, that touches protobuf; ale_proto is imported lazily)."""

from __future__ import annotations

import json
from typing import Any

from ale_flow.trajectory import ObservationRecord, TrajectoryRecord, TurnRecord

_FINISH = {"stop": "STOP_REASON_STOP", "length": "STOP_REASON_LENGTH", "tool_calls": "STOP_REASON_TOOL_CALL"}
_FINISH_BACK = {v: k for k, v in _FINISH.items()}
_RUN_STOP = {
    "completed": "STOP_REASON_STOP",
    "max_steps": "STOP_REASON_LENGTH",
    "max_tokens": "STOP_REASON_LENGTH",
    "max_cost": "STOP_REASON_LENGTH",
    "time_limit": "STOP_REASON_TIMEOUT",
    "interrupted": "STOP_REASON_ABORTED",
    "blocked": "STOP_REASON_ABORTED",
}
STOP_KEY = "ale_flow.stop_reason"
"""metadata key that keeps ale-flow's exact stop reason (the contract's enum is coarser)."""


def to_proto(rec: TrajectoryRecord, task_id: str = "") -> Any:
    """`TrajectoryRecord` → `ale.v1.Trajectory`."""
    from ale_proto.v1 import common_pb2 as pb

    traj = pb.Trajectory(id=rec.id, task_id=task_id or rec.metadata.get("task_id", ""))
    traj.metadata.update({**rec.metadata, "task": rec.task})
    if rec.stop_reason is not None:
        traj.metadata[STOP_KEY] = rec.stop_reason
        traj.stop_reason = pb.StopReason.Value(_RUN_STOP.get(rec.stop_reason, "STOP_REASON_ERROR"))
    if rec.start_time:
        traj.start_time.FromNanoseconds(int(rec.start_time * 1e9))
    if rec.end_time:
        traj.end_time.FromNanoseconds(int(rec.end_time * 1e9))
    for t in rec.turns:
        finish = "tool_calls" if t.tool_calls and t.finish_reason == "stop" else t.finish_reason
        traj.turns.append(
            pb.Turn(
                completion_token_ids=t.completion_token_ids,
                completion_logprobs=t.completion_logprobs,
                stop_reason=pb.StopReason.Value(_FINISH.get(finish, "STOP_REASON_UNSPECIFIED")),
                completion_text=t.content,
                tool_calls=[pb.ToolCall(id=c["id"], name=c["name"], arguments_json=json.dumps(c["arguments"])) for c in t.tool_calls],
                observations=[pb.Observation(tool_call_id=o.tool_call_id, content=o.content, is_error=o.is_error) for o in t.observations],
                error=t.error,
                irrelevant=not t.relevant,
                chunk_index=t.chunk_index,
                latency_s=t.latency_s,
            )
        )
    return traj


def from_proto(traj: Any) -> TrajectoryRecord:
    """`ale.v1.Trajectory` → `TrajectoryRecord` (token counts and turn indices are not in the contract)."""
    from ale_proto.v1 import common_pb2 as pb

    meta = dict(traj.metadata)
    task = meta.pop("task", "")
    stop = meta.pop(STOP_KEY, None)
    rec = TrajectoryRecord(id=traj.id, task=task, stop_reason=stop, metadata=meta)
    if traj.HasField("start_time"):
        rec.start_time = traj.start_time.ToNanoseconds() / 1e9
    if traj.HasField("end_time"):
        rec.end_time = traj.end_time.ToNanoseconds() / 1e9
    for i, t in enumerate(traj.turns, 1):
        finish = _FINISH_BACK.get(pb.StopReason.Name(t.stop_reason), "stop")
        rec.turns.append(
            TurnRecord(
                index=i,
                content=t.completion_text,
                tool_calls=[{"id": c.id, "name": c.name, "arguments": json.loads(c.arguments_json or "{}")} for c in t.tool_calls],
                observations=[ObservationRecord(o.tool_call_id, o.content, o.is_error) for o in t.observations],
                error=t.error,
                relevant=not t.irrelevant,
                finish_reason="stop" if finish == "tool_calls" else finish,
                latency_s=t.latency_s,
                completion_token_ids=list(t.completion_token_ids),
                completion_logprobs=list(t.completion_logprobs),
                chunk_index=t.chunk_index,
            )
        )
    return rec
