"""Masked SFT with interaction-level masks (paper Eq. 1–2).

    L_SFT = − 1 / (Σ_k m_k |c_k| + ε) · Σ_k m_k · log π(c_k | s_k)
    m_k   = m_err_k · m_task_k

m_err_k is 0 when turn k triggered a tool/execution error; m_task_k is 0 when the turn is not
relevant to the current subtask (redundant, near-duplicate, or pruned by compression). Both
flags live on `ale_roll.types.Turn` (`Turn.sft_weight` is m_k) and `flatten_trajectory` puts
m_k × (completion token) into `FlatTrajectory.sft_mask` — that is the `mask` this loss expects.
Over a batch the normalizer is the batch's total unmasked token count (for one trajectory this
is exactly Eq. 1). Rewards are ignored.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ale_roll.algorithms.base import LossInputs, LossOutput, masked_sum
from ale_roll.types import Trajectory


class SFTConfig(BaseModel):
    """Masked SFT (Eq. 1–2)."""

    model_config = ConfigDict(extra="forbid")

    eps: float = 1e-8
    """ε in the normalizer of Eq. 1."""


def turn_masks(traj: Trajectory) -> list[int]:
    """m_k for every turn of a trajectory (Eq. 2)."""
    return [turn.sft_weight for turn in traj.turns]


def sft_loss(inputs: LossInputs, config: SFTConfig) -> LossOutput:
    """Eq. 1: masked negative log-likelihood normalized by the unmasked token count."""
    mask = inputs.float_mask()
    count = mask.sum()
    loss = -masked_sum(inputs.logprobs, mask) / (count + config.eps)
    return LossOutput(loss, {"loss": float(loss.detach()), "tokens": float(count)})
