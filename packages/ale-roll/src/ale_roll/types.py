"""Plain-Python trajectory types shared by rollout, buffer and losses.

A trajectory is a list of assistant turns. Each turn keeps the exact token ids the inference
engine saw and produced (token ids are never re-derived from text), the behaviour logprobs μ of
its completion tokens, and the policy version that generated it.

An *interaction chunk* (IPA, paper §3.2.4) is one assistant turn that ends in an environment
interaction (a tool call, or any turn that gets an observation back) together with that
observation; the last chunk ends with task completion. Turns that neither end the trajectory
nor receive an observation (e.g. a length-truncated turn that the engine continued) merge into
the following chunk.

Flattening (`flatten_trajectory`) lays a prefix-consistent trajectory out as one token sequence

    prompt_1 | completion_1 observation_1 | completion_2 observation_2 | ... | completion_K

with per-token masks aligned to `input_ids`: completion tokens carry loss, prompt and
observation tokens never do. Where the context was rewritten between turns (compression,
summaries) the turns are not prefix-consistent; `flatten_turns` then gives one row per turn.

Torch is imported lazily (only `collate` needs it) so the buffer and the types stay light.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


class StopReason(str, Enum):
    """Why a turn's generation ended: an engine's ``Generation`` ends with STOP, LENGTH or ABORTED;
    a rollout adds TOOL_CALL, TIMEOUT and ERROR. The values are the contract's ``StopReason`` names
    (``STOP_REASON_ABORTED`` → ``"aborted"``), as ale-rock's call records carry them.

    Not ale-flow's ``AgentStopReason``, which says why a whole agent run ended.
    """

    STOP = "stop"
    LENGTH = "length"
    TOOL_CALL = "tool_call"
    TIMEOUT = "timeout"
    ERROR = "error"
    ABORTED = "aborted"


@dataclass
class Turn:
    """One assistant turn with exact token ids.

    `prompt_ids` is the full context the engine was given for this turn. In a
    prefix-consistent trajectory it may be left empty for turns after the first (the context
    is then implied by the previous turns and observations).
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    """Behaviour logprobs μ, one per completion token, from the inference engine."""
    policy_version: int = 0
    stop_reason: StopReason = StopReason.STOP
    error: bool = False
    """The turn triggered a tool/execution error (error mask m_err of masked SFT, Eq. 2)."""
    relevant: bool = True
    """The turn is relevant to the current subtask (task mask m_task of masked SFT, Eq. 2)."""
    observation_text: str = ""
    observation_ids: list[int] = field(default_factory=list)
    """Tokens the environment's answer added to the context after this turn (template included)."""

    def __post_init__(self) -> None:
        if len(self.logprobs) != len(self.completion_ids):
            raise ValueError(
                f"turn has {len(self.completion_ids)} completion tokens but {len(self.logprobs)} logprobs"
            )
        self.stop_reason = StopReason(self.stop_reason)

    @property
    def ends_interaction(self) -> bool:
        """Whether the turn hands control to the environment (closes an interaction chunk)."""
        return self.stop_reason == StopReason.TOOL_CALL or bool(self.observation_ids)

    @property
    def sft_weight(self) -> int:
        """m_k = m_err · m_task of Eq. 2: 1 when the turn is error-free and task-relevant."""
        return int((not self.error) and self.relevant)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict (see `from_dict`)."""
        return {
            "prompt_ids": list(self.prompt_ids),
            "completion_ids": list(self.completion_ids),
            "logprobs": list(self.logprobs),
            "policy_version": self.policy_version,
            "stop_reason": self.stop_reason.value,
            "error": self.error,
            "relevant": self.relevant,
            "observation_text": self.observation_text,
            "observation_ids": list(self.observation_ids),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        """Inverse of `to_dict`."""
        return cls(**{**data, "stop_reason": StopReason(data["stop_reason"])})


@dataclass
class Trajectory:
    """A multi-turn episode on one initial state, with its final reward."""

    turns: list[Turn]
    reward: float = 0.0
    initial_state_id: str = ""
    """Identifies the initial state (task instance / env seed) so it can be resampled."""
    seed: int | None = None
    group_id: str = ""
    """Trajectories on the same initial state in one group are normalized together (GRPO)."""
    policy_version: int | None = None
    """Policy version that *started* the episode; defaults to the first turn's version."""
    episode_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy_version is None:
            self.policy_version = self.turns[0].policy_version if self.turns else 0

    @property
    def version(self) -> int:
        """The starting policy version as an int (never None after construction)."""
        return int(self.policy_version or 0)

    def chunk_of_turn(self) -> list[int]:
        """0-based interaction-chunk index of every turn (see the module docstring)."""
        chunks: list[int] = []
        current = 0
        for i, turn in enumerate(self.turns):
            chunks.append(current)
            if turn.ends_interaction and i < len(self.turns) - 1:
                current += 1
        return chunks

    @property
    def num_chunks(self) -> int:
        """K, the number of interaction chunks."""
        return self.chunk_of_turn()[-1] + 1 if self.turns else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict (metadata must itself be JSON-compatible)."""
        return {
            "turns": [t.to_dict() for t in self.turns],
            "reward": self.reward,
            "initial_state_id": self.initial_state_id,
            "seed": self.seed,
            "group_id": self.group_id,
            "policy_version": self.policy_version,
            "episode_id": self.episode_id,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        """Inverse of `to_dict`."""
        return cls(**{**data, "turns": [Turn.from_dict(t) for t in data["turns"]]})


@dataclass
class FlatTrajectory:
    """A trajectory (or one turn of it) as aligned per-token lists.

    Every list has `len(input_ids)` entries; entry t describes token `input_ids[t]` (its logprob
    is log π(input_ids[t] | input_ids[:t]), so position 0 never carries loss).
    """

    input_ids: list[int]
    loss_mask: list[int]
    """1 on completion tokens (RL loss), 0 on prompt and observation tokens."""
    sft_mask: list[int]
    """loss_mask × m_k of the token's turn (masked SFT, Eq. 1–2)."""
    behaviour_logprobs: list[float]
    """μ per token; 0.0 where loss_mask is 0."""
    chunk_ids: list[int]
    """0-based interaction chunk of the token; -1 on the initial prompt."""
    turn_ids: list[int]
    """0-based turn index of the token; -1 on the initial prompt."""
    num_chunks: int
    reward: float
    policy_version: int
    group_id: str = ""


def _append(flat: FlatTrajectory, ids: list[int], *, loss: int, sft: int, logprobs: list[float] | None,
            chunk: int, turn: int) -> None:
    flat.input_ids.extend(ids)
    flat.loss_mask.extend([loss] * len(ids))
    flat.sft_mask.extend([sft] * len(ids))
    flat.behaviour_logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
    flat.chunk_ids.extend([chunk] * len(ids))
    flat.turn_ids.extend([turn] * len(ids))


def _empty(traj: Trajectory) -> FlatTrajectory:
    return FlatTrajectory([], [], [], [], [], [], traj.num_chunks, traj.reward, traj.version, traj.group_id)


def is_prefix_consistent(traj: Trajectory) -> bool:
    """True when each turn's prompt equals everything before it (or is left empty)."""
    context: list[int] = []
    for i, turn in enumerate(traj.turns):
        if i == 0:
            context = list(turn.prompt_ids)
        elif turn.prompt_ids and turn.prompt_ids != context:
            return False
        context += turn.completion_ids + turn.observation_ids
    return True


def flatten_trajectory(traj: Trajectory) -> FlatTrajectory:
    """One token sequence for a prefix-consistent trajectory (see the module docstring).

    The final turn's observation (if any) is dropped: nothing conditions on it.
    Raises ValueError when a later turn's prompt is not the running context — use
    `flatten_turns` for trajectories whose context was rewritten.
    """
    if not traj.turns:
        raise ValueError("cannot flatten a trajectory without turns")
    if not is_prefix_consistent(traj):
        raise ValueError(
            f"trajectory {traj.episode_id} is not prefix-consistent (context rewritten between turns); "
            "use flatten_turns"
        )
    flat = _empty(traj)
    chunk_of = traj.chunk_of_turn()
    _append(flat, list(traj.turns[0].prompt_ids), loss=0, sft=0, logprobs=None, chunk=-1, turn=-1)
    last = len(traj.turns) - 1
    for i, turn in enumerate(traj.turns):
        _append(flat, list(turn.completion_ids), loss=1, sft=turn.sft_weight, logprobs=list(turn.logprobs),
                chunk=chunk_of[i], turn=i)
        if i < last:
            # Observation tokens belong to the chunk they answer but never get loss.
            _append(flat, list(turn.observation_ids), loss=0, sft=0, logprobs=None, chunk=chunk_of[i], turn=i)
    return flat


def flatten_turns(traj: Trajectory) -> list[FlatTrajectory]:
    """One row per turn (its own prompt + completion), for contexts rewritten between turns.

    Each row keeps the trajectory's chunk indices and K, so IPA's chunk returns stay correct;
    a chunk spanning several turns is then aggregated per row.
    """
    chunk_of = traj.chunk_of_turn()
    rows = []
    context: list[int] = []
    for i, turn in enumerate(traj.turns):
        prompt = list(turn.prompt_ids) if (i == 0 or turn.prompt_ids) else list(context)
        flat = _empty(traj)
        flat.policy_version = turn.policy_version
        _append(flat, prompt, loss=0, sft=0, logprobs=None, chunk=-1, turn=-1)
        _append(flat, list(turn.completion_ids), loss=1, sft=turn.sft_weight, logprobs=list(turn.logprobs),
                chunk=chunk_of[i], turn=i)
        rows.append(flat)
        context = prompt + list(turn.completion_ids) + list(turn.observation_ids)
    return rows


@dataclass
class TokenBatch:
    """Right-padded [B, T] tensors built by `collate`; padding has every mask 0 and chunk -1."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    sft_mask: torch.Tensor
    behaviour_logprobs: torch.Tensor
    chunk_ids: torch.Tensor
    num_chunks: torch.Tensor
    rewards: torch.Tensor
    policy_versions: torch.Tensor
    group_ids: torch.Tensor
    """[B] integer group per row (rows with an empty group_id are each their own group)."""


def collate(rows: list[FlatTrajectory], pad_id: int = 0) -> TokenBatch:
    """Pad flattened rows into a `TokenBatch`."""
    import torch

    if not rows:
        raise ValueError("cannot collate an empty batch")
    width = max(len(r.input_ids) for r in rows)

    groups: dict[str, int] = {}
    group_ids = [groups.setdefault(r.group_id or f"\0row{i}", len(groups)) for i, r in enumerate(rows)]

    def pad(values: list[Any], fill: Any, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([v + [fill] * (width - len(v)) for v in values], dtype=dtype)

    return TokenBatch(
        input_ids=pad([r.input_ids for r in rows], pad_id, torch.long),
        attention_mask=pad([[1] * len(r.input_ids) for r in rows], 0, torch.long),
        loss_mask=pad([r.loss_mask for r in rows], 0, torch.float32),
        sft_mask=pad([r.sft_mask for r in rows], 0, torch.float32),
        behaviour_logprobs=pad([r.behaviour_logprobs for r in rows], 0.0, torch.float32),
        chunk_ids=pad([r.chunk_ids for r in rows], -1, torch.long),
        num_chunks=torch.tensor([r.num_chunks for r in rows], dtype=torch.long),
        rewards=torch.tensor([r.reward for r in rows], dtype=torch.float32),
        policy_versions=torch.tensor([r.policy_version for r in rows], dtype=torch.long),
        group_ids=torch.tensor(group_ids, dtype=torch.long),
    )
