"""Plain Python <-> ale.v1 messages for the EnvService (used by the server and the client only)."""

from __future__ import annotations

import json
import time
from typing import Any

from ale_proto.v1 import common_pb2, env_pb2
from google.protobuf import json_format, struct_pb2

_KINDS = {
    "egress_blocked": common_pb2.SafetyEvent.KIND_EGRESS_BLOCKED,
    "file_denied": common_pb2.SafetyEvent.KIND_FILE_DENIED,
    "limit_hit": common_pb2.SafetyEvent.KIND_LIMIT_HIT,
    "action_blocked": common_pb2.SafetyEvent.KIND_ACTION_BLOCKED,
}
_KIND_NAMES = {v: k for k, v in _KINDS.items()}


_SCALARS = (str, int, float, bool, type(None))


def to_struct(d: dict[str, Any]) -> struct_pb2.Struct:
    """A Struct from a dict; values that are not JSON become strings."""
    s = struct_pb2.Struct()
    if not d:
        return s
    # Fast path for the usual flat info dict of scalars (no JSON round trip: a per-call cost).
    if all(type(k) is str and type(v) in _SCALARS for k, v in d.items()):
        s.update(d)
    else:
        s.update(json.loads(json.dumps(d, default=str)))
    return s


def _ints(v: Any) -> Any:
    # Struct numbers are doubles; give integral ones back as ints so info round-trips.
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    if isinstance(v, dict):
        return {k: _ints(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_ints(x) for x in v]
    return v


def from_struct(s: struct_pb2.Struct) -> dict[str, Any]:
    """A dict from a Struct."""
    out: dict[str, Any] = {}
    for k, v in s.fields.items():
        kind = v.WhichOneof("kind")
        if kind == "number_value":
            out[k] = _ints(v.number_value)
        elif kind == "string_value":
            out[k] = v.string_value
        elif kind == "bool_value":
            out[k] = v.bool_value
        elif kind == "null_value":
            out[k] = None
        else:  # nested struct or list
            return _ints(json_format.MessageToDict(s))  # type: ignore[no-any-return]
    return out


def safety_events_to_pb(events: list[dict[str, Any]]) -> list[common_pb2.SafetyEvent]:
    out = []
    for ev in events:
        pb = common_pb2.SafetyEvent(
            kind=_KINDS.get(str(ev.get("kind", "")), common_pb2.SafetyEvent.KIND_UNSPECIFIED),
            command=str(ev.get("command", "")),
            detail=str(ev.get("detail", "")),
        )
        pb.time.FromNanoseconds(int(float(ev.get("time", time.time())) * 1e9))
        out.append(pb)
    return out


def safety_events_from_pb(events: Any) -> list[dict[str, Any]]:
    return [
        {
            "kind": _KIND_NAMES.get(ev.kind, "unspecified"),
            "command": ev.command,
            "detail": ev.detail,
            "time": ev.time.ToNanoseconds() / 1e9,
        }
        for ev in events
    ]


def reward_to_pb(r: dict[str, Any]) -> common_pb2.Reward:
    return common_pb2.Reward(
        value=float(r.get("value", 0.0)),
        success=bool(r.get("success", False)),
        source=str(r.get("source", "")),
        tests=[
            common_pb2.TestResult(
                name=str(t["name"]), passed=bool(t["passed"]), output=str(t.get("output", ""))
            )
            for t in r.get("tests", ())
        ],
    )


def reward_from_pb(r: common_pb2.Reward) -> dict[str, Any]:
    return {
        "value": r.value,
        "success": r.success,
        "source": r.source,
        "tests": [{"name": t.name, "passed": t.passed, "output": t.output} for t in r.tests],
    }


def step_to_pb(
    obs: str, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
) -> env_pb2.StepResponse:
    info = dict(info)
    events = info.pop("safety_events", [])
    final = info.pop("final_reward", None)
    resp = env_pb2.StepResponse(
        observation=obs,
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        info=to_struct(info),
        safety_events=safety_events_to_pb(events),
    )
    if final is not None:
        resp.final_reward.CopyFrom(reward_to_pb(final))
    return resp


def step_from_pb(resp: env_pb2.StepResponse) -> tuple[str, float, bool, bool, dict[str, Any]]:
    info = from_struct(resp.info)
    if resp.safety_events:
        info["safety_events"] = safety_events_from_pb(resp.safety_events)
    if resp.HasField("final_reward"):
        info["final_reward"] = reward_from_pb(resp.final_reward)
    return resp.observation, resp.reward, resp.terminated, resp.truncated, info
