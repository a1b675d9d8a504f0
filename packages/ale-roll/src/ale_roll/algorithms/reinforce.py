"""REINFORCE without a value baseline (paper Eq. 3).

    ∇J = E_τ~π [ R(τ) ∇log π(τ) ],   log π(τ) = Σ_t log π(τ_t | τ_<t)

As a loss to minimize (A_i = shaped reward of row i, m = token mask, optionally × the Eq. 6
mismatch mask):

    L = − Σ_i Σ_t A_i m_it log π_θ(τ_it) / Σ m            (aggregation "token_mean")
"""

from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict, Field

from ale_roll.algorithms.advantage import AdvantageConfig, shape_rewards
from ale_roll.algorithms.base import Aggregation, LossInputs, LossOutput, aggregate
from ale_roll.algorithms.mismatch import TokenMismatchConfig, mismatch_metrics, token_mismatch_mask


class ReinforceConfig(BaseModel):
    """Plain REINFORCE (Eq. 3)."""

    model_config = ConfigDict(extra="forbid")

    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """Failure reward and group normalization applied to R before the update."""
    aggregation: Aggregation = "token_mean"
    """token_mean: every loss token weighs the same; seq_mean: every row weighs the same."""
    mismatch: TokenMismatchConfig = Field(default_factory=lambda: TokenMismatchConfig(enabled=False))
    """Eq. 6 token mask; off by default so this is exactly Eq. 3."""


def apply_token_mismatch(inputs: LossInputs, config: TokenMismatchConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss mask after the optional Eq. 6 mask, and the mismatch metrics."""
    mask = inputs.float_mask()
    kept = token_mismatch_mask(inputs.old(), inputs.behaviour(), config.low, config.high) if config.enabled else None
    metrics = mismatch_metrics(inputs.old(), inputs.behaviour(), mask, kept)
    return (mask * kept if kept is not None else mask), metrics


def weighted_policy_gradient(inputs: LossInputs, row_weight: torch.Tensor, mask: torch.Tensor,
                             how: Aggregation) -> torch.Tensor:
    """− aggregate(w_i · log π_θ(τ_it)) with a detached per-row weight w_i (= A_i or c_i·A_i)."""
    per_token = -row_weight.detach().unsqueeze(-1) * inputs.logprobs
    return aggregate(per_token, mask, how)


def reinforce_loss(inputs: LossInputs, config: ReinforceConfig) -> LossOutput:
    """Eq. 3 as a scalar loss."""
    adv = shape_rewards(inputs.rewards, inputs.group_ids, config.advantage)
    mask, metrics = apply_token_mismatch(inputs, config.mismatch)
    loss = weighted_policy_gradient(inputs, adv, mask, config.aggregation)
    metrics.update(_common_metrics(loss, adv, mask))
    return LossOutput(loss, metrics)


def _common_metrics(loss: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    return {
        "loss": float(loss.detach()),
        "advantage/mean": float(adv.mean()),
        "advantage/positive_fraction": float((adv > 0).float().mean()),
        "tokens": float(mask.sum()),
    }
