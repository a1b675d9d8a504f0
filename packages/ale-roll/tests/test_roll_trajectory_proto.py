"""The contract's ``ale.v1.Trajectory`` (what an agent's GetTrajectory returns) read as training data:
exact tokens, masks and reward survive; a message without the tokens training needs is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ale_proto.v1 import common_pb2 as pb
from ale_roll.rollout.replay import load_trajectories
from ale_roll.types import StopReason, Trajectory, Turn, flatten_trajectory
from google.protobuf import json_format


def _message() -> pb.Trajectory:
    msg = pb.Trajectory(id="t1", task_id="tasks/demo", initial_state="s3", group_id="g",
                        start_policy_version=4, reward=pb.Reward(value=1.0, success=True))
    msg.metadata["agent"] = "ale-flow"
    msg.turns.append(pb.Turn(
        prompt_token_ids=[1, 2, 3], completion_token_ids=[10, 11], completion_logprobs=[-0.5, -0.25],
        policy_version=4, stop_reason=pb.STOP_REASON_TOOL_CALL, error=True,
        observations=[pb.Observation(tool_call_id="c1", content="no such file", is_error=True, token_ids=[20, 21])],
    ))
    msg.turns.append(pb.Turn(
        prompt_token_ids=[1, 2, 3, 10, 11, 20, 21], completion_token_ids=[12], completion_logprobs=[-0.125],
        policy_version=4, stop_reason=pb.STOP_REASON_STOP, irrelevant=False,
    ))
    return msg


def test_contract_trajectories_load_as_the_same_training_data(tmp_path: Path) -> None:
    expected = Trajectory(
        turns=[Turn([1, 2, 3], [10, 11], [-0.5, -0.25], policy_version=4, stop_reason=StopReason.TOOL_CALL,
                    error=True, observation_text="no such file", observation_ids=[20, 21]),
               Turn([1, 2, 3, 10, 11, 20, 21], [12], [-0.125], policy_version=4, stop_reason=StopReason.STOP)],
        reward=1.0, initial_state_id="s3", group_id="g", policy_version=4, episode_id="t1",
        metadata={"agent": "ale-flow", "success": True, "task_id": "tasks/demo"})
    path = tmp_path / "trajs.jsonl"
    lines = [json_format.MessageToJson(_message(), indent=None),  # camelCase, as a Node client writes it
             json.dumps(json_format.MessageToDict(_message(), preserving_proto_field_name=True)),
             json.dumps(expected.to_dict())]  # the trainer's own format, in the same file
    path.write_text("\n".join(lines) + "\n")
    loaded = load_trajectories(path)
    assert len(loaded) == 3
    for traj in loaded:
        assert traj.to_dict() == expected.to_dict()
        flat = flatten_trajectory(traj)
        assert flat.input_ids == [1, 2, 3, 10, 11, 20, 21, 12]
        assert flat.sft_mask == [0, 0, 0, 0, 0, 0, 0, 1]  # the error turn is masked out of SFT (m_err = 0)


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda m: m.turns[0].ClearField("prompt_token_ids"), "turn 1 has no prompt_token_ids"),
    (lambda m: m.turns[1].ClearField("completion_logprobs"), "turn 2 has 1 completion tokens and 0 logprobs"),
])
def test_a_trajectory_without_exact_tokens_is_refused_naming_the_line(tmp_path: Path, edit, needle: str) -> None:
    msg = _message()
    edit(msg)
    path = tmp_path / "trajs.jsonl"
    path.write_text("\n" + json_format.MessageToJson(msg, indent=None) + "\n")
    with pytest.raises(ValueError, match=f"trajs.jsonl:2: trajectory 't1': {needle}"):
        load_trajectories(path)
