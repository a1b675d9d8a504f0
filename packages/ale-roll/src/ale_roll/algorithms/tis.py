"""Geometric-mean truncated importance sampling (paper Eq. 4).

    ∇J_RL = E_τ~μ_old [ clip(ρ(τ), 0, 1) · R(τ) · ∇log π_θ(τ) ]
    ρ(τ)  = ( Π_t π_θ(τ_t|τ_<t) / π_θold(τ_t|τ_<t) )^(1/|τ|)

The geometric mean keeps ρ on the scale of one token for any length. ρ is a coefficient
(stop-gradient), so the loss is

    L = − Σ_i Σ_t clip(ρ_i, 0, c) A_i m_it log π_θ(τ_it) / Σ m        (c = clip_max = 1)

with m the token mask × the Eq. 6 mismatch mask (on by default). `is_reference = "behaviour"`
uses μ_old instead of π_θold in ρ (the usual TIS correction when the trainer does not
recompute old logprobs).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from ale_roll.algorithms.advantage import AdvantageConfig, shape_rewards
from ale_roll.algorithms.base import Aggregation, LossInputs, LossOutput, sequence_geometric_ratio
from ale_roll.algorithms.mismatch import TokenMismatchConfig
from ale_roll.algorithms.reinforce import _common_metrics, apply_token_mismatch, weighted_policy_gradient


class TISConfig(BaseModel):
    """Truncated IS with a geometric-mean sequence ratio (Eq. 4)."""

    model_config = ConfigDict(extra="forbid")

    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """Failure reward and group normalization applied to R before the update."""
    aggregation: Aggregation = "token_mean"
    """token_mean: every loss token weighs the same; seq_mean: every row weighs the same."""
    mismatch: TokenMismatchConfig = Field(default_factory=TokenMismatchConfig)
    """Eq. 6 token mask (two-sided [0.8, 1.2] by default)."""
    clip_max: float = 1.0
    """Upper truncation of ρ (Eq. 4 uses 1)."""
    is_reference: Literal["old", "behaviour"] = "old"
    """Denominator of ρ: the trainer's π_θold (Eq. 4) or the engine's μ_old."""


def importance_ratio(inputs: LossInputs, mask: torch.Tensor, reference: str) -> torch.Tensor:
    """[B] ρ(τ) over the masked tokens (detached)."""
    den = inputs.old() if reference == "old" else inputs.behaviour()
    return sequence_geometric_ratio(inputs.logprobs.detach(), den, mask)


def ratio_metrics(rho: torch.Tensor, truncated: torch.Tensor) -> dict[str, float]:
    """Stats of the IS ratio and of how often truncation bit (`truncated`: [B] bool)."""
    return {
        "is/ratio_mean": float(rho.mean()),
        "is/ratio_max": float(rho.max()),
        "is/truncated_fraction": float(truncated.float().mean()),
    }


def tis_loss(inputs: LossInputs, config: TISConfig) -> LossOutput:
    """Eq. 4 as a scalar loss."""
    adv = shape_rewards(inputs.rewards, inputs.group_ids, config.advantage)
    mask, metrics = apply_token_mismatch(inputs, config.mismatch)
    rho = importance_ratio(inputs, mask, config.is_reference)
    weight = rho.clamp(0.0, config.clip_max)
    loss = weighted_policy_gradient(inputs, weight * adv, mask, config.aggregation)
    metrics.update(_common_metrics(loss, adv, mask))
    metrics.update(ratio_metrics(rho, rho > config.clip_max))
    return LossOutput(loss, metrics)
