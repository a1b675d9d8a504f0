"""Trajectory types: chunk segmentation, flattening, masks, round trips."""

from __future__ import annotations

import pytest
import torch
from ale_roll.types import (
    StopReason,
    Trajectory,
    Turn,
    collate,
    flatten_trajectory,
    flatten_turns,
    is_prefix_consistent,
)

SYSTEM = [1, 2, 3]


def agent_trajectory() -> Trajectory:
    """A realistic 3-turn tool-using episode: call → observation → call → observation → answer."""
    t0 = Turn(SYSTEM, [10, 11], [-0.1, -0.2], policy_version=4, stop_reason=StopReason.TOOL_CALL,
              observation_text="ls output", observation_ids=[20, 21])
    t1 = Turn(SYSTEM + [10, 11, 20, 21], [12, 13, 14], [-0.3, -0.4, -0.5], policy_version=4,
              stop_reason=StopReason.TOOL_CALL, error=True, observation_ids=[22])
    t2 = Turn([], [15], [-0.6], policy_version=5, stop_reason=StopReason.STOP)
    return Trajectory([t0, t1, t2], reward=1.0, initial_state_id="task-7", seed=3, group_id="g1",
                      metadata={"source": "test"})


def test_turn_rejects_logprob_count_mismatch() -> None:
    with pytest.raises(ValueError, match="logprobs"):
        Turn([1], [2, 3], [-0.1])


def test_chunks_follow_tool_calls() -> None:
    traj = agent_trajectory()
    assert traj.chunk_of_turn() == [0, 1, 2]
    assert traj.num_chunks == 3
    assert traj.version == 4  # the version that started the episode, not the last turn's


def test_turn_without_interaction_merges_into_next_chunk() -> None:
    # Turn 0 hit the length limit and the engine continued without an environment step.
    t0 = Turn([1], [5, 6], [-1.0, -1.0], stop_reason=StopReason.LENGTH)
    t1 = Turn([], [7], [-1.0], stop_reason=StopReason.TOOL_CALL, observation_ids=[8])
    t2 = Turn([], [9], [-1.0], stop_reason=StopReason.TOOL_CALL, observation_ids=[8])
    t3 = Turn([], [4], [-1.0], stop_reason=StopReason.STOP)
    assert Trajectory([t0, t1, t2, t3]).chunk_of_turn() == [0, 0, 1, 2]


def test_flatten_lays_out_tokens_masks_and_chunks() -> None:
    flat = flatten_trajectory(agent_trajectory())
    assert flat.input_ids == [1, 2, 3, 10, 11, 20, 21, 12, 13, 14, 22, 15]
    assert flat.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1]
    # Turn 1 raised a tool error: masked for SFT, still trained by RL.
    assert flat.sft_mask == [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1]
    assert flat.chunk_ids == [-1, -1, -1, 0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert flat.turn_ids == [-1, -1, -1, 0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert flat.behaviour_logprobs == [0.0, 0.0, 0.0, -0.1, -0.2, 0.0, 0.0, -0.3, -0.4, -0.5, 0.0, -0.6]
    assert flat.num_chunks == 3 and flat.reward == 1.0


def test_irrelevant_turn_is_sft_masked() -> None:
    traj = agent_trajectory()
    traj.turns[0].relevant = False
    assert flatten_trajectory(traj).sft_mask == [0] * 11 + [1]


def test_rewritten_context_needs_per_turn_rows() -> None:
    traj = agent_trajectory()
    traj.turns[1].prompt_ids = SYSTEM + [99]  # history compressed into a summary token
    assert not is_prefix_consistent(traj)
    with pytest.raises(ValueError, match="flatten_turns"):
        flatten_trajectory(traj)
    rows = flatten_turns(traj)
    assert [r.input_ids for r in rows] == [SYSTEM + [10, 11], SYSTEM + [99, 12, 13, 14], SYSTEM + [99, 12, 13, 14, 22, 15]]
    assert [r.chunk_ids[-1] for r in rows] == [0, 1, 2]
    assert all(r.num_chunks == 3 for r in rows)
    assert rows[2].loss_mask == [0] * 8 + [1]
    assert [r.policy_version for r in rows] == [4, 4, 5]


def test_round_trip_through_dict() -> None:
    traj = agent_trajectory()
    back = Trajectory.from_dict(traj.to_dict())
    assert back == traj
    assert back.turns[1].stop_reason is StopReason.TOOL_CALL


def test_collate_pads_with_no_loss() -> None:
    long = flatten_trajectory(agent_trajectory())
    short = flatten_trajectory(Trajectory([Turn([1], [2], [-0.7])], reward=0.0))
    batch = collate([long, short], pad_id=0)
    assert batch.input_ids.shape == (2, 12)
    assert batch.input_ids[1].tolist() == [1, 2] + [0] * 10
    assert batch.loss_mask[1].tolist() == [0, 1] + [0] * 10
    assert batch.chunk_ids[1].tolist() == [-1, 0] + [-1] * 10
    assert batch.attention_mask.sum(dim=1).tolist() == [12, 2]
    assert batch.num_chunks.tolist() == [3, 1]
    assert torch.equal(batch.rewards, torch.tensor([1.0, 0.0]))
    assert batch.behaviour_logprobs[1, 1].item() == pytest.approx(-0.7)


def test_chunks_of_a_tokenized_chat_episode() -> None:
    """A chat-templated tool-use episode tokenized by a locally trained byte-level BPE."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    prompt = "<|im_start|>system\nYou fix bugs.<|im_end|>\n<|im_start|>user\nMake the tests pass.<|im_end|>\n<|im_start|>assistant\n"
    answers = [
        'Let me look.<tool_call>{"name": "bash", "arguments": {"cmd": "ls"}}</tool_call><|im_end|>',
        '<tool_call>{"name": "bash", "arguments": {"cmd": "pytest -q"}}</tool_call><|im_end|>',
        "Fixed the off-by-one in src/app.py.<|im_end|>",
    ]
    observations = [
        "\n<|im_start|>tool\nsrc tests README.md<|im_end|>\n<|im_start|>assistant\n",
        "\n<|im_start|>tool\n1 failed, 3 passed<|im_end|>\n<|im_start|>assistant\n",
    ]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([prompt, *answers, *observations] * 3, trainer)

    def ids(text: str) -> list[int]:
        return tok.encode(text).ids

    context = ids(prompt)
    turns = []
    for k, answer in enumerate(answers):
        completion = ids(answer)
        obs = ids(observations[k]) if k < len(observations) else []
        stop = StopReason.TOOL_CALL if obs else StopReason.STOP
        turns.append(Turn(list(context), completion, [-0.5] * len(completion), stop_reason=stop, observation_ids=obs))
        context += completion + obs  # token-exact: the next prompt is the old ids, never re-tokenized text
    flat = flatten_trajectory(Trajectory(turns, reward=1.0))

    def text(keep: list[bool]) -> str:
        return tok.decode([t for t, k in zip(flat.input_ids, keep) if k], skip_special_tokens=False)

    assert flat.num_chunks == 3
    for k in range(3):
        in_chunk = [c == k for c in flat.chunk_ids]
        assert text(in_chunk) == answers[k] + (observations[k] if k < 2 else "")
        assert text([c and m == 1 for c, m in zip(in_chunk, flat.loss_mask)]) == answers[k]
    assert text([c == -1 for c in flat.chunk_ids]) == prompt
