"""The contract's ``ale.v1.Trajectory`` → a trainer :class:`~ale_roll.types.Trajectory` (edge module:
protobuf is touched only here and in the engines' gRPC files; ale_proto is imported lazily).

This is how trajectories recorded by any agent that speaks the contract (ale-flow's
``AgentService.GetTrajectory``, a client in another language) become SFT or RL data: a file of such
messages in protobuf JSON, one per line, is read by :func:`ale_roll.rollout.replay.load_trajectories`.
Training needs exact tokens, so the first turn must carry ``prompt_token_ids`` and every turn its
``completion_token_ids`` with one ``completion_logprobs`` entry each; a message without them is refused
rather than re-tokenized.
"""

from __future__ import annotations

import uuid
from typing import Any

from ale_roll.types import StopReason, Trajectory, Turn


def _stop_reason(value: int) -> StopReason:
    from ale_proto.v1 import common_pb2 as pb

    name = pb.StopReason.Name(value).removeprefix("STOP_REASON_").lower()
    return StopReason.STOP if name == "unspecified" else StopReason(name)  # same names as the contract


def from_proto(msg: Any) -> Trajectory:
    """``ale.v1.Trajectory`` → :class:`Trajectory`; ``ValueError`` naming the turn when tokens are missing."""
    if not msg.turns:
        raise ValueError(f"trajectory {msg.id!r} has no turns")
    if not msg.turns[0].prompt_token_ids:
        raise ValueError(f"trajectory {msg.id!r}: turn 1 has no prompt_token_ids (training needs the exact "
                         "tokens; record the run through the InferenceService)")
    turns = []
    for k, t in enumerate(msg.turns, 1):
        if not t.completion_token_ids or len(t.completion_logprobs) != len(t.completion_token_ids):
            raise ValueError(f"trajectory {msg.id!r}: turn {k} has {len(t.completion_token_ids)} completion "
                             f"tokens and {len(t.completion_logprobs)} logprobs (one per token needed)")
        turns.append(Turn(
            prompt_ids=list(t.prompt_token_ids), completion_ids=list(t.completion_token_ids),
            logprobs=list(t.completion_logprobs), policy_version=int(t.policy_version),
            stop_reason=_stop_reason(t.stop_reason), error=t.error, relevant=not t.irrelevant,
            observation_text="\n".join(o.content for o in t.observations),
            observation_ids=[i for o in t.observations for i in o.token_ids],
        ))
    metadata: dict[str, Any] = {**dict(msg.metadata), "success": msg.reward.success, "task_id": msg.task_id}
    return Trajectory(turns=turns, reward=msg.reward.value, initial_state_id=msg.initial_state,
                      group_id=msg.group_id, policy_version=int(msg.start_policy_version) or None,
                      episode_id=msg.id or uuid.uuid4().hex, metadata=metadata)


def from_json(data: dict[str, Any]) -> Trajectory:
    """A protobuf-JSON ``ale.v1.Trajectory`` (camelCase or proto field names) → :class:`Trajectory`."""
    from ale_proto.v1 import common_pb2 as pb
    from google.protobuf import json_format

    try:
        msg = json_format.ParseDict(data, pb.Trajectory())
    except json_format.ParseError as e:
        raise ValueError(f"not an ale.v1.Trajectory: {e}") from None
    return from_proto(msg)
